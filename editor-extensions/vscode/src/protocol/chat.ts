// One chat with dsh as the panel drives it: the connection (started on
// first use), the current session, its view model, the prompts (the
// running turn's, and those sent while it runs), the permission ask and
// the questions open. No `vscode` import: the VS Code layer supplies a
// `ChatUi` (QuickPick, InputBox, diff editor, file system) and renders the
// state it is handed.

import type * as acp from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import { DshConnection, type StartOptions } from "./connection";
import { PromptLine, type Delivery, type Prompt } from "./prompts";
import { formProblem, parseForm, summary, toResponse, type Form, type FormOutcome } from "./questions";
import { Terminals, type Terminal } from "./terminals";
import { searchSessions, type SessionHit } from "./sessionSearch";
import { emptyChat, pickers, reduce, userSays, type ChatState } from "./viewModel";

/** What the chat needs from the editor. */
export interface ChatUi {
  /** Asks the user (a QuickPick, with the proposed edit in a diff editor);
   * resolves with an option id, or null when dismissed. `signal` aborts
   * when the ask was answered elsewhere (the panel's buttons). */
  askPermission(request: acp.RequestPermissionRequest, signal: AbortSignal): Promise<string | null>;
  /** Asks dsh's questions one after the other (QuickPick, InputBox);
   * resolves with what the user did — dismissing a picker is a cancel.
   * `signal` aborts when they were answered elsewhere (the panel's form)
   * or withdrawn. When absent, forms are not advertised and dsh asks each
   * question as a permission prompt instead. */
  askQuestions?(form: Form, signal: AbortSignal): Promise<FormOutcome>;
  readTextFile?(path: string, line?: number | null, limit?: number | null): Promise<string>;
  writeTextFile?(path: string, content: string): Promise<void>;
  /** Shows a command dsh runs in the editor (a VS Code terminal). When
   * absent, client terminals are not offered. */
  showTerminal?(terminal: Terminal): void;
  /** The state changed (called at most every `frameMs`). */
  render(state: ChatState): void;
  /** A tool call reported locations (for "follow agent"). */
  followed?(locations: acp.ToolCallLocation[]): void;
  /** Something went wrong that the user should see. */
  error(message: string): void;
}

export interface ChatOptions {
  start: Omit<StartOptions, "host">;
  cwd: string;
  ui: ChatUi;
  frameMs?: number;
}

export class Chat {
  state: ChatState = emptyChat();
  sessionId?: string;
  private connection?: Promise<DshConnection>;
  private pendingAsk?: { resolve: (id: string | null) => void; abort: AbortController };
  private pendingQuestion?: { resolve: (outcome: FormOutcome) => void; form: Form };
  private questionKey = 0;
  private line = new PromptLine();
  private frame?: ReturnType<typeof setTimeout>;

  constructor(private options: ChatOptions) {}

  /** The connection, started once. */
  private connect(): Promise<DshConnection> {
    if (!this.connection) {
      const ui = this.options.ui;
      let terminals: Terminals | undefined;
      if (ui.showTerminal) {
        terminals = new Terminals();
        terminals.onCreate = (terminal) => ui.showTerminal?.(terminal);
      }
      this.connection = DshConnection.start({
        ...this.options.start,
        host: {
          requestPermission: (request) => this.ask(request),
          elicit: ui.askQuestions ? (request, signal) => this.elicit(request, signal) : undefined,
          readTextFile: ui.readTextFile?.bind(ui),
          writeTextFile: ui.writeTextFile?.bind(ui),
          terminals,
        },
      }).then((connection) => {
        connection.onUpdate((note) => this.onUpdate(note));
        return connection;
      });
      this.connection.catch(() => {
        this.connection = undefined;
      });
    }
    return this.connection;
  }

  private onUpdate(note: acp.SessionNotification) {
    if (note.sessionId !== this.sessionId) return;
    reduce(this.state, note);
    const update = note.update;
    // A steered prompt lands: shown where it lands (the fold above), no
    // longer pending.
    if (update.sessionUpdate === "user_message_chunk" && update.content.type === "text" && this.line.landed(update.content.text)) {
      this.sync();
    }
    if (
      (update.sessionUpdate === "tool_call" || update.sessionUpdate === "tool_call_update") &&
      update.locations?.length
    ) {
      this.options.ui.followed?.(update.locations);
    }
    this.changed();
  }

  /** Renders soon (coalescing a burst of streamed chunks into one frame). */
  private changed(now = false) {
    if (now) {
      if (this.frame) clearTimeout(this.frame);
      this.frame = undefined;
      this.options.ui.render(this.state);
      return;
    }
    if (this.frame) return;
    this.frame = setTimeout(() => {
      this.frame = undefined;
      this.options.ui.render(this.state);
    }, this.options.frameMs ?? 33);
  }

  private async ask(request: acp.RequestPermissionRequest): Promise<string | null> {
    this.pendingAsk?.resolve(null);
    const abort = new AbortController();
    const answered = new Promise<string | null>((resolve) => {
      this.pendingAsk = { resolve, abort };
    });
    this.state.asking = {
      toolCallId: request.toolCall.toolCallId,
      title: request.toolCall.title ?? "this tool call",
      options: request.options.map((o) => ({ id: o.optionId, name: o.name, kind: o.kind })),
    };
    this.changed(true);
    const fromUi = this.options.ui.askPermission(request, abort.signal);
    const chosen = await Promise.race([answered, fromUi]);
    abort.abort();
    this.pendingAsk = undefined;
    this.state.asking = undefined;
    this.changed(true);
    return chosen;
  }

  /** The panel's buttons answer the open ask. */
  answer(optionId: string | null) {
    this.pendingAsk?.resolve(optionId);
  }

  /** dsh's questions: asked in the editor's pickers and shown in the panel
   * (which can answer them too: whichever answers first wins); what the
   * user answered stays in the chat. Never answered for the user: a form
   * that cannot be shown is declined, a dismissed one cancelled. */
  private async elicit(request: acp.CreateElicitationRequest, signal: AbortSignal): Promise<acp.CreateElicitationResponse> {
    const form = parseForm(request);
    if ("unsupported" in form) {
      this.options.ui.error(`dsh asked something the panel cannot show (${form.unsupported}); declined`);
      return { action: "decline" };
    }
    this.pendingQuestion?.resolve({ action: "cancel" });
    const abort = new AbortController();
    const answered = new Promise<FormOutcome>((resolve) => {
      this.pendingQuestion = { resolve, form };
    });
    const withdrawn = new Promise<FormOutcome>((resolve) => {
      if (signal.aborted) resolve({ action: "cancel" });
      else signal.addEventListener("abort", () => resolve({ action: "cancel" }), { once: true });
    });
    this.state.question = { key: ++this.questionKey, toolCallId: form.toolCallId, message: form.message, questions: form.questions };
    this.changed(true);
    let outcome: FormOutcome;
    try {
      outcome = await Promise.race([answered, withdrawn, this.options.ui.askQuestions!(form, abort.signal)]);
    } catch (error) {
      // A picker that failed answers nothing: cancelled, never made up.
      this.options.ui.error(error instanceof Error ? error.message : String(error));
      outcome = { action: "cancel" };
    }
    abort.abort();
    this.pendingQuestion = undefined;
    this.state.question = undefined;
    this.state.items.push({
      type: "answers",
      toolCallId: form.toolCallId,
      action: outcome.action,
      lines: outcome.action === "accept" ? summary(form, outcome.answers) : [],
    });
    this.changed(true);
    return toResponse(form, outcome);
  }

  /** The panel's form answers the open questions. Answers with a problem
   * (returned) leave them open. */
  answerQuestions(outcome: FormOutcome): string | undefined {
    const open = this.pendingQuestion;
    if (!open) return undefined;
    if (outcome.action === "accept") {
      const problem = formProblem(open.form, outcome.answers);
      if (problem) return problem;
    }
    open.resolve(outcome);
    return undefined;
  }

  /** The view model after the line of prompts changed. */
  private sync() {
    this.state.busy = this.line.busy;
    this.state.pending = this.line.waiting.map(({ id, text, delivery }) => ({ id, text, delivery }));
    this.changed(true);
  }

  /** A new session in the workspace folder. */
  async newSession(): Promise<void> {
    const connection = await this.connect();
    const response = await connection.newSession(this.options.cwd);
    this.sessionId = response.sessionId;
    this.line = new PromptLine();
    this.state = emptyChat();
    this.state.options = pickers(response.configOptions);
    this.changed(true);
  }

  /** The stored sessions of this workspace, newest first. */
  async sessions(): Promise<acp.SessionInfo[]> {
    const connection = await this.connect();
    return (await connection.listSessions(this.options.cwd)).sessions;
  }

  /** The stored sessions of this workspace holding every word of `query`
   * (`dsh sessions search --json`: ACP has no search), best first;
   * `signal` aborts it (see `searchSessions`). */
  search(query: string, signal?: AbortSignal): Promise<SessionHit[]> {
    return searchSessions(this.options.start, this.options.cwd, query, 20, signal);
  }

  /** Opens a stored session: its history is replayed into a fresh chat. */
  async load(sessionId: string): Promise<void> {
    const connection = await this.connect();
    this.sessionId = sessionId;
    this.line = new PromptLine();
    this.state = emptyChat();
    const response = await connection.loadSession(sessionId, this.options.cwd);
    this.state.options = pickers(response.configOptions);
    this.changed(true);
  }

  /** Sends a prompt (starting a session first if there is none); resolves
   * with its stop reason when dsh answers it. While a turn runs it waits,
   * shown as pending: queued (the default) for its own turn, which starts
   * when the turns ahead of it end; steered, until dsh puts it into the
   * running turn. */
  async prompt(text: string, delivery: Delivery = "queue"): Promise<acp.StopReason | undefined> {
    let prompt: Prompt | undefined;
    try {
      if (!this.sessionId) await this.newSession();
      const connection = await this.connect();
      const sent = this.line.send(text, delivery);
      prompt = sent.prompt;
      if (sent.starts) userSays(this.state, text);
      this.sync();
      return await connection.prompt(this.sessionId!, text, prompt.delivery);
    } catch (error) {
      this.options.ui.error(error instanceof Error ? error.message : String(error));
      return undefined;
    } finally {
      const next = prompt && this.line.answered(prompt);
      if (next) userSays(this.state, next.text);
      this.sync();
    }
  }

  /** Cancels the running turn and every prompt waiting behind it. */
  async cancel(): Promise<void> {
    if (!this.sessionId || !this.connection) return;
    this.answer(null);
    this.pendingQuestion?.resolve({ action: "cancel" });
    this.line.cancel();
    this.sync();
    await (await this.connection).cancel(this.sessionId);
  }

  /** Sets a select setting (mode, model, reasoning effort). */
  async pick(id: string, value: string): Promise<void> {
    if (!this.sessionId) await this.newSession();
    const connection = await this.connect();
    const response = await connection.setOption(this.sessionId!, id, value);
    this.state.options = pickers(response.configOptions);
    this.changed(true);
  }

  /** Stops dsh (EOF; killed if it lingers). The next use starts it again. */
  async dispose(): Promise<number | null> {
    this.answer(null);
    this.pendingQuestion?.resolve({ action: "cancel" });
    const connection = this.connection;
    this.connection = undefined;
    if (!connection) return null;
    try {
      return await (await connection).dispose();
    } catch {
      return null;
    }
  }
}
