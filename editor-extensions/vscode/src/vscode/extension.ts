// The VS Code side, kept thin: the chat view (a webview), commands, the
// status bar, and the editor services dsh asks for — permission prompts
// (QuickPick, with a proposed edit shown in VS Code's diff editor first),
// questions (a QuickPick or an InputBox per question), files read from
// open documents and written through WorkspaceEdits. All protocol work,
// and what each picker's answer means, is in ../protocol.

import * as vscode from "vscode";
import { readFile } from "node:fs/promises";
import type * as acp from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import { Chat, type ChatUi } from "../protocol/chat";
import type { Delivery } from "../protocol/prompts";
import {
  answerFromPicks,
  pickItems,
  pickerTitle,
  typedAnswer,
  type Answer,
  type Answers,
  type Form,
  type FormOutcome,
  type PickItem,
  type Question,
} from "../protocol/questions";
import { launchSettings } from "../protocol/settings";
import { failedItem, hitItems, LatestSearch, shown, type SessionItem } from "../protocol/sessionSearch";
import type { Terminal } from "../protocol/terminals";
import type { ChatState, DiffView } from "../protocol/viewModel";
import { chatHtml, nonce } from "../protocol/webviewHtml";

const DIFF_SCHEME = "dsh-diff";
const SECRET = "dsh.apiKey";

/** Before/after texts of proposed and made edits, as virtual documents. */
class DiffDocuments implements vscode.TextDocumentContentProvider {
  private texts = new Map<string, string>();
  private next = 0;

  /** Opens VS Code's diff editor on `diff`. */
  async show(diff: DiffView, title: string) {
    const id = ++this.next;
    const name = diff.path.split("/").pop() ?? diff.path;
    const before = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${id}/before/${name}` });
    const after = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${id}/after/${name}` });
    this.texts.set(before.toString(), diff.oldText ?? "");
    this.texts.set(after.toString(), diff.newText);
    await vscode.commands.executeCommand("vscode.diff", before, after, title, { preview: true });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }
}

/** The chat webview in the dsh view container. */
class ChatView implements vscode.WebviewViewProvider {
  private view?: vscode.WebviewView;
  private last?: ChatState;

  constructor(
    private extensionUri: vscode.Uri,
    private onMessage: (message: Record<string, unknown>) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView) {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = chatHtml({
      cspSource: view.webview.cspSource,
      nonce: nonce(),
      scriptUri: view.webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.js")).toString(),
      styleUri: view.webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.css")).toString(),
    });
    view.webview.onDidReceiveMessage((message) => {
      if (message?.type === "ready" && this.last) this.post(this.last);
      else this.onMessage(message);
    });
  }

  post(state: ChatState) {
    this.last = state;
    void this.view?.webview.postMessage({ type: "state", state });
  }
}

function workspaceFolder(): string {
  return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
}

async function readText(path: string, line?: number | null, limit?: number | null): Promise<string> {
  const open = vscode.workspace.textDocuments.find((doc) => doc.uri.fsPath === path);
  const text = open ? open.getText() : await readFile(path, "utf8");
  if (!line && !limit) return text;
  const lines = text.split("\n");
  const from = Math.max(0, (line ?? 1) - 1);
  return lines.slice(from, limit ? from + limit : undefined).join("\n");
}

/** Writes through a WorkspaceEdit (undoable in VS Code), then saves. */
async function writeText(path: string, content: string): Promise<void> {
  const uri = vscode.Uri.file(path);
  const edit = new vscode.WorkspaceEdit();
  let exists = true;
  try {
    await vscode.workspace.fs.stat(uri);
  } catch {
    exists = false;
  }
  if (exists) {
    const doc = await vscode.workspace.openTextDocument(uri);
    edit.replace(uri, new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length)), content);
  } else {
    edit.createFile(uri, { ignoreIfExists: true });
    edit.insert(uri, new vscode.Position(0, 0), content);
  }
  if (!(await vscode.workspace.applyEdit(edit))) throw new Error(`VS Code refused the edit of ${path}`);
  const doc = await vscode.workspace.openTextDocument(uri);
  await doc.save();
}

async function reveal(path: string, line?: number | null) {
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(path));
  const at = new vscode.Position(Math.max(0, (line ?? 1) - 1), 0);
  await vscode.window.showTextDocument(doc, { selection: new vscode.Range(at, at), preview: true, preserveFocus: true });
}

/** The proposed edit in the diff editor, then dsh's options in a QuickPick. */
async function askPermission(
  request: acp.RequestPermissionRequest,
  signal: AbortSignal,
  diffs: DiffDocuments,
): Promise<string | null> {
  for (const block of request.toolCall.content ?? []) {
    if (block.type === "diff") {
      await diffs.show(
        { path: block.path, oldText: block.oldText ?? null, newText: block.newText },
        `dsh proposes: ${block.path.split("/").pop()}`,
      );
    }
  }
  const pick = vscode.window.createQuickPick<vscode.QuickPickItem & { id: string }>();
  pick.title = `dsh: allow ${request.toolCall.title ?? "this tool call"}?`;
  pick.ignoreFocusOut = true;
  pick.items = request.options.map((option) => ({ label: option.name, id: option.optionId }));
  return await new Promise<string | null>((resolve) => {
    const done = (id: string | null) => {
      resolve(id);
      pick.dispose();
    };
    signal.addEventListener("abort", () => done(null));
    pick.onDidAccept(() => done(pick.selectedItems[0]?.id ?? null));
    pick.onDidHide(() => done(null));
    pick.show();
  });
}

type Step = { answer?: Answer } | "decline" | "cancel";

/** The title bar's button that declines the whole form. */
const decline = (): vscode.QuickInputButton => ({ iconPath: new vscode.ThemeIcon("circle-slash"), tooltip: "Decline to answer" });

/** The free text of "Other…" (undefined: dismissed). */
function otherText(q: Question, title: string, signal: AbortSignal): Promise<string | undefined> {
  const box = vscode.window.createInputBox();
  box.title = `${title} — other`;
  box.prompt = q.description;
  box.ignoreFocusOut = true;
  return new Promise((resolve) => {
    const done = (text: string | undefined) => {
      resolve(text);
      box.dispose();
    };
    signal.addEventListener("abort", () => done(undefined), { once: true });
    box.onDidAccept(() => {
      if (box.value.trim()) done(box.value.trim());
      else box.validationMessage = "Type your answer, or press Escape to go back";
    });
    box.onDidHide(() => done(undefined));
    box.show();
  });
}

/** One question with options in a QuickPick (`canPickMany` for several);
 * "Other…" asks for its text. The title bar's button declines; hiding the
 * picker cancels. */
async function pickAnswer(q: Question, title: string, signal: AbortSignal): Promise<Step> {
  while (!signal.aborted) {
    const pick = vscode.window.createQuickPick<vscode.QuickPickItem & { item?: PickItem }>();
    pick.title = title;
    pick.placeholder = q.description ?? (q.kind === "multi" ? "Choose any, then press Enter" : undefined);
    pick.ignoreFocusOut = true;
    pick.canSelectMany = q.kind === "multi";
    pick.buttons = [decline()];
    const items = pickItems(q);
    pick.items = items.flatMap((item, i) => {
      const entry = { label: item.label, description: item.description, item };
      const first = item.special && !items[i - 1]?.special;
      return first ? [{ label: "", kind: vscode.QuickPickItemKind.Separator }, entry] : [entry];
    });
    if (q.kind === "multi" && Array.isArray(q.default)) {
      const chosen = new Set(q.default);
      pick.selectedItems = pick.items.filter((entry) => typeof entry.item?.value === "string" && chosen.has(entry.item.value));
    }
    const picked = await new Promise<PickItem[] | "decline" | "cancel">((resolve) => {
      const done = (result: PickItem[] | "decline" | "cancel") => {
        resolve(result);
        pick.dispose();
      };
      signal.addEventListener("abort", () => done("cancel"), { once: true });
      pick.onDidTriggerButton(() => done("decline"));
      pick.onDidAccept(() => {
        const chosen = pick.selectedItems.flatMap((entry) => (entry.item ? [entry.item] : []));
        const checked = answerFromPicks(q, chosen, "…");
        if (checked.problem) void vscode.window.showWarningMessage(`dsh: ${checked.problem}`);
        else done(chosen);
      });
      pick.onDidHide(() => done("cancel"));
      pick.show();
    });
    if (picked === "decline" || picked === "cancel") return picked;
    let result = answerFromPicks(q, picked);
    if (result.needsOther) {
      const text = await otherText(q, title, signal);
      if (signal.aborted) return "cancel";
      if (text === undefined) continue; // back to the choices
      result = answerFromPicks(q, picked, text);
    }
    if (result.problem) {
      void vscode.window.showWarningMessage(`dsh: ${result.problem}`);
      continue;
    }
    return { answer: result.answer };
  }
  return "cancel";
}

/** A free-text or number question in an InputBox, checked as typed. */
function typeAnswer(q: Question, title: string, signal: AbortSignal): Promise<Step> {
  const box = vscode.window.createInputBox();
  box.title = title;
  box.prompt = q.description;
  box.placeholder = q.required ? undefined : "Leave empty to skip";
  box.value = q.default !== undefined ? String(q.default) : "";
  box.ignoreFocusOut = true;
  box.buttons = [decline()];
  return new Promise((resolve) => {
    const done = (step: Step) => {
      resolve(step);
      box.dispose();
    };
    signal.addEventListener("abort", () => done("cancel"), { once: true });
    box.onDidTriggerButton(() => done("decline"));
    box.onDidChangeValue((value) => {
      box.validationMessage = value.trim() ? typedAnswer(q, value).problem : undefined;
    });
    box.onDidAccept(() => {
      const typed = typedAnswer(q, box.value);
      if (typed.problem) box.validationMessage = typed.problem;
      else done({ answer: typed.answer });
    });
    box.onDidHide(() => done("cancel"));
    box.show();
  });
}

/** dsh's questions, one picker each, in order. */
async function askQuestions(form: Form, signal: AbortSignal): Promise<FormOutcome> {
  const answers: Answers = {};
  for (const [i, q] of form.questions.entries()) {
    const title = pickerTitle(q, i, form.questions.length);
    const step = q.options.length || q.kind === "boolean" ? await pickAnswer(q, title, signal) : await typeAnswer(q, title, signal);
    if (signal.aborted) return { action: "cancel" };
    if (step === "decline" || step === "cancel") return { action: step };
    answers[q.id] = step.answer;
  }
  return { action: "accept", answers };
}

/** A command dsh runs in the editor, shown in a VS Code terminal as it
 * runs; closing the terminal kills the command. */
function showTerminal(terminal: Terminal) {
  const write = new vscode.EventEmitter<string>();
  const crlf = (text: string) => text.replace(/\r?\n/g, "\r\n");
  const line = terminal.spec.command === "bash" && terminal.spec.args?.[0] === "-c"
    ? terminal.spec.args[1]
    : [terminal.spec.command, ...(terminal.spec.args ?? [])].join(" ");
  let off: (() => boolean) | undefined;
  const pty: vscode.Pseudoterminal = {
    onDidWrite: write.event,
    open: () => {
      write.fire(crlf(`$ ${line}\n${terminal.output()}`));
      off = terminal.onOutput((text) => write.fire(crlf(text)));
      void terminal.waitForExit().then((status) =>
        write.fire(crlf(`\n[${status.exitCode !== null ? `exit code: ${status.exitCode}` : `signal ${status.signal}`}]\n`)),
      );
    },
    close: () => {
      off?.();
      terminal.kill();
    },
  };
  vscode.window.createTerminal({ name: `dsh: ${line.split("\n")[0].slice(0, 50)}`, pty }).show(true);
}

let chat: Chat | undefined;

export function activate(context: vscode.ExtensionContext) {
  const diffs = new DiffDocuments();
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = "dsh.pickMode";
  const output = vscode.window.createOutputChannel("dsh");

  const ui: ChatUi = {
    askPermission: (request, signal) => askPermission(request, signal, diffs),
    askQuestions,
    readTextFile: readText,
    writeTextFile: writeText,
    showTerminal,
    render: (state) => {
      view.post(state);
      const mode = state.options.find((o) => o.id === "mode");
      const model = state.options.find((o) => o.id === "model");
      status.text = `$(comment-discussion) dsh: ${mode?.current ?? "—"} · ${model?.current ?? "—"}`;
      status.show();
    },
    followed: (locations) => {
      if (vscode.workspace.getConfiguration("dsh").get<boolean>("followAgent") && locations[0]) {
        void reveal(locations[0].path, locations[0].line);
      }
    },
    error: (message) => void vscode.window.showErrorMessage(`dsh: ${message}`),
  };

  const getChat = async (): Promise<Chat> => {
    if (chat) return chat;
    // User settings only: a repository's settings cannot pick the binary
    // or its environment (../protocol/settings.ts).
    const { command, env } = launchSettings(vscode.workspace.getConfiguration("dsh"));
    const key = await context.secrets.get(SECRET);
    if (key) env.DEEPSEEK_API_KEY = key;
    chat = new Chat({
      start: {
        command,
        env,
        cwd: workspaceFolder(),
        log: (line) => output.appendLine(line),
      },
      cwd: workspaceFolder(),
      ui,
    });
    return chat;
  };

  const view = new ChatView(context.extensionUri, (message) => {
    void (async () => {
      const current = await getChat();
      switch (message.type) {
        case "prompt":
          await current.prompt(String(message.text), message.delivery === "steer" ? "steer" : "queue");
          break;
        case "questions": {
          const action = message.action;
          const outcome: FormOutcome | undefined =
            action === "accept" && message.answers && typeof message.answers === "object"
              ? { action, answers: message.answers as Answers }
              : action === "decline" || action === "cancel"
                ? { action }
                : undefined;
          const problem = outcome ? current.answerQuestions(outcome) : "not an answer";
          if (problem) ui.error(problem);
          break;
        }
        case "cancel":
          await current.cancel();
          break;
        case "answer":
          current.answer(String(message.optionId));
          break;
        case "pick":
          await current.pick(String(message.id), String(message.value));
          break;
        case "open":
          await reveal(String(message.path), Number(message.line));
          break;
        case "diff": {
          const tool = current.state.tools[String(message.toolCallId)];
          const diff = tool?.diffs[Number(message.index)];
          if (diff) await diffs.show(diff, tool.title);
          break;
        }
      }
    })().catch((error) => ui.error(error instanceof Error ? error.message : String(error)));
  });

  /** The session list: this workspace's sessions, newest first; words in
   * its filter box search the sessions' text (dsh's session index) and
   * list the sessions holding them, each with its matching line. */
  const pickSession = async (current: Chat): Promise<string | undefined> => {
    const listed: SessionItem[] = (await current.sessions()).map((s) => ({
      label: shown(s.title ?? s.sessionId),
      description: s.updatedAt ?? "",
      id: s.sessionId,
    }));
    const picker = vscode.window.createQuickPick<SessionItem>();
    picker.title = "dsh: open a session";
    picker.placeholder = "Type words to search the sessions' text";
    picker.matchOnDescription = true;
    picker.matchOnDetail = true;
    picker.items = listed;
    // One `dsh sessions search` at a time: typing aborts the one under way
    // (its process killed); a search aborted or superseded says nothing,
    // and the latest one's failure shows in the list, not as a popup.
    const searches = new LatestSearch((query, signal) => current.search(query, signal));
    let timer: ReturnType<typeof setTimeout> | undefined;
    picker.onDidChangeValue((value) => {
      const query = value.trim();
      clearTimeout(timer);
      searches.cancel();
      if (!query) {
        picker.busy = false;
        picker.items = listed;
        return;
      }
      timer = setTimeout(() => {
        picker.busy = true;
        searches.run(query).then(
          (hits) => {
            if (hits === undefined) return;
            picker.items = hitItems(hits);
            picker.busy = false;
          },
          (error) => {
            picker.items = [failedItem(error instanceof Error ? error.message : String(error))];
            picker.busy = false;
          },
        );
      }, 250);
    });
    return new Promise((resolve) => {
      picker.onDidAccept(() => {
        const chosen = picker.selectedItems[0];
        // The failure's line opens nothing: the picker stays.
        if (chosen && !chosen.id) return;
        resolve(chosen?.id);
        picker.hide();
      });
      picker.onDidHide(() => {
        clearTimeout(timer);
        searches.cancel();
        resolve(undefined);
        picker.dispose();
      });
      picker.show();
    });
  };

  const pickSetting = async (id: string) => {
    const current = await getChat();
    if (!current.sessionId) await current.newSession();
    const picker = current.state.options.find((o) => o.id === id);
    if (!picker) return;
    const chosen = await vscode.window.showQuickPick(
      picker.values.map((v) => ({ label: v.name, description: v.value === picker.current ? "current" : "", detail: v.description, value: v.value })),
      { title: `dsh: ${picker.name}` },
    );
    if (chosen) await current.pick(id, chosen.value);
  };

  context.subscriptions.push(
    output,
    status,
    vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, diffs),
    vscode.window.registerWebviewViewProvider("dsh.chat", view, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.commands.registerCommand("dsh.newSession", async () => (await getChat()).newSession()),
    vscode.commands.registerCommand("dsh.openSession", async () => {
      const current = await getChat();
      const chosen = await pickSession(current);
      if (chosen) await current.load(chosen);
    }),
    vscode.commands.registerCommand("dsh.cancel", async () => (await getChat()).cancel()),
    vscode.commands.registerCommand("dsh.steer", async () => {
      const text = await vscode.window.showInputBox({
        title: "dsh: steer the running turn",
        prompt: "dsh reads it at its next step (with no turn running, it is an ordinary prompt)",
        ignoreFocusOut: true,
      });
      if (text?.trim()) await (await getChat()).prompt(text.trim(), "steer" satisfies Delivery);
    }),
    vscode.commands.registerCommand("dsh.pickMode", () => pickSetting("mode")),
    vscode.commands.registerCommand("dsh.pickModel", () => pickSetting("model")),
    vscode.commands.registerCommand("dsh.showLocations", async () => {
      const current = await getChat();
      const items = Object.values(current.state.tools).flatMap((tool) =>
        tool.locations.map((l) => ({ label: `${l.path}:${l.line ?? 1}`, description: tool.title, path: l.path, line: l.line })),
      );
      const chosen = await vscode.window.showQuickPick(items, { title: "dsh: the agent's locations" });
      if (chosen) await reveal(chosen.path, chosen.line);
    }),
    vscode.commands.registerCommand("dsh.setApiKey", async () => {
      const key = await vscode.window.showInputBox({ title: "dsh: DeepSeek API key", password: true, ignoreFocusOut: true });
      if (key === undefined) return;
      await context.secrets.store(SECRET, key.trim());
      // The next use starts dsh with the new key.
      await chat?.dispose();
      chat = undefined;
    }),
    { dispose: () => void chat?.dispose() },
  );
}

export async function deactivate(): Promise<void> {
  await chat?.dispose();
  chat = undefined;
}
