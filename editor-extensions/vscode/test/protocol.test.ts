// src/protocol against the real dsh binary and a scripted model (the
// replay provider): initialize, a streamed reply, an edit asked about and
// allowed (written through the host, as VS Code's WorkspaceEdit would), an
// edit rejected, cancel, session/list and session/load replayed into the
// view model, and dsh exiting when the extension lets go.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type * as acp from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import { Chat, type ChatUi } from "../src/protocol/chat";
import { DshConnection, type Host } from "../src/protocol/connection";
import { Terminals, type Terminal } from "../src/protocol/terminals";
import { emptyChat, reduce, userSays, type ChatState } from "../src/protocol/viewModel";

const here = resolve(__dirname, "..", "..");
const dsh = process.env.DSH_BIN ?? resolve(here, "..", "..", "target", "debug", "dsh");
const script = resolve(here, "test", "scripted-model.jsonl");

class TestHost implements Host {
  terminals?: Terminals;
  asked: acp.RequestPermissionRequest[] = [];
  answers: (string | null)[] = [];
  writes: [string, string][] = [];
  reads: string[] = [];

  async requestPermission(request: acp.RequestPermissionRequest) {
    this.asked.push(request);
    return this.answers.shift() ?? null;
  }

  async readTextFile(path: string) {
    this.reads.push(path);
    return readFileSync(path, "utf8");
  }

  async writeTextFile(path: string, content: string) {
    this.writes.push([path, content]);
    writeFileSync(path, content);
  }
}

function environment() {
  const home = mkdtempSync(join(tmpdir(), "dsh-vscode-home-"));
  const workspace = mkdtempSync(join(tmpdir(), "dsh-vscode-ws-"));
  writeFileSync(join(workspace, "hello.txt"), "hello\n");
  // A priced model (the replay provider has no default prices).
  writeFileSync(
    join(home, "config.toml"),
    '[[models]]\nid = "deepseek-v4-flash"\npricing = { input = 0.3, input_cache_hit = 0.006, output = 1.2, currency = "USD" }\n',
  );
  const env = {
    DSH_HOME: home,
    HOME: home,
    DSH_PROVIDER: "replay",
    DSH_REPLAY_FILE: script,
    DSH_LOG: "info",
  };
  return { home, workspace, env };
}

function texts(state: ChatState, type: string): string[] {
  return state.items.flatMap((item) => (item.type === type && "text" in item ? [item.text] : []));
}

test("a session end to end, then replayed into the view model", { timeout: 60_000 }, async () => {
  assert.ok(existsSync(dsh), `no dsh binary at ${dsh} (set DSH_BIN)`);
  const { workspace, env } = environment();
  const host = new TestHost();
  const logs: string[] = [];
  const conn = await DshConnection.start({ command: dsh, env, cwd: workspace, host, log: (l) => logs.push(l) });
  assert.equal(conn.agentInfo.agentInfo?.name, "dsh");
  const { sessionId } = await conn.newSession(workspace);
  const live = emptyChat();
  conn.onUpdate((note) => {
    if (note.sessionId === sessionId) reduce(live, note);
  });
  // As the panel does: the prompt is shown when sent.
  const say = (text: string) => {
    userSays(live, text);
    return conn.prompt(sessionId, text);
  };

  // A streamed reply, with its reasoning.
  assert.equal(await say("hello"), "end_turn");
  assert.deepEqual(texts(live, "agent"), ["Hello from dsh."]);
  assert.deepEqual(texts(live, "thought"), ["A greeting."]);
  assert.ok(live.usage && live.usage.used > 0);
  // The model has a price: dsh sends the session's cost (300 in, 8 out).
  assert.equal(live.usage.cost?.currency, "USD");
  assert.ok(Math.abs((live.usage.cost?.amount ?? 0) - (300 * 0.3 + 8 * 1.2) / 1e6) < 1e-12);

  // An edit: asked about (kind edit, dsh's options), allowed, written
  // through the host; the tool call ends completed with its diff.
  host.answers.push("allow_once");
  assert.equal(await say("edit it"), "end_turn");
  assert.equal(host.asked.length, 1);
  const ask = host.asked[0];
  assert.equal(ask.toolCall.kind, "edit");
  assert.deepEqual(
    ask.options.map((o) => o.optionId),
    ["allow_once", "allow_always", "reject_once", "reject_always"],
  );
  const hello = join(workspace, "hello.txt");
  assert.deepEqual(host.writes, [[hello, "hello from vscode\n"]]);
  assert.equal(readFileSync(hello, "utf8"), "hello from vscode\n");
  const edit = live.tools["call_w1"];
  assert.equal(edit.status, "completed");
  assert.equal(edit.diffs[0].oldText, "hello\n");
  assert.equal(edit.diffs[0].newText, "hello from vscode\n");
  assert.equal(edit.locations[0].path, hello);

  // Rejected: nothing written, the call failed.
  host.answers.push("reject_once");
  assert.equal(await say("edit it again"), "end_turn");
  assert.equal(host.writes.length, 1);
  assert.equal(readFileSync(hello, "utf8"), "hello from vscode\n");
  assert.equal(live.tools["call_w2"].status, "failed");

  // Cancel while the model streams.
  const slow = say("take your time");
  for (let i = 0; !texts(live, "agent").some((t) => t.includes("still thinking")); i++) {
    assert.ok(i < 500, `the slow reply never streamed: ${JSON.stringify(live.items)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await conn.cancel(sessionId);
  assert.equal(await slow, "cancelled");

  // session/list finds it; a second connection loads it: the replay
  // rebuilds the same chat.
  const listed = await conn.listSessions(workspace);
  assert.ok(listed.sessions.some((s) => s.sessionId === sessionId));
  assert.equal(await conn.dispose(), 0, "dsh exits cleanly on EOF");

  const again = await DshConnection.start({ command: dsh, env, cwd: workspace, host: new TestHost() });
  const replayed = emptyChat();
  again.onUpdate((note) => {
    if (note.sessionId === sessionId) reduce(replayed, note);
  });
  await again.loadSession(sessionId, workspace);
  assert.deepEqual(texts(replayed, "user").slice(0, 3), ["hello", "edit it", "edit it again"]);
  assert.deepEqual(texts(replayed, "agent").slice(0, 3), ["Hello from dsh.", "Wrote hello.txt.", "Left it alone."]);
  assert.deepEqual(texts(replayed, "agent"), texts(live, "agent"), "replay equals live");
  assert.deepEqual(Object.keys(replayed.tools).sort(), ["call_w1", "call_w2"]);
  assert.equal(replayed.tools["call_w1"].status, "completed");
  assert.deepEqual(replayed.tools["call_w1"].diffs, live.tools["call_w1"].diffs);
  assert.equal(replayed.tools["call_w2"].status, "failed");
  assert.equal(await again.dispose(), 0);
  assert.ok(!logs.some((l) => l.includes("ERROR")), logs.join("\n"));
});

test("the panel's chat: coalesced renders, an ask answered from the panel, settings", { timeout: 60_000 }, async () => {
  const { workspace, env } = environment();
  const renders: ChatState[] = [];
  const errors: string[] = [];
  let chat: Chat | undefined = undefined;
  const ui: ChatUi = {
    // The QuickPick stays open until the panel's answer aborts it.
    askPermission: (_request, signal) =>
      new Promise((resolve) => signal.addEventListener("abort", () => resolve(null))),
    readTextFile: async (path) => readFileSync(path, "utf8"),
    writeTextFile: async (path, content) => writeFileSync(path, content),
    render: (state) => {
      renders.push(structuredClone(state));
      if (state.asking) setImmediate(() => chat?.answer("allow_once"));
    },
    error: (message) => errors.push(message),
  };
  chat = new Chat({ start: { command: dsh, env, cwd: workspace }, cwd: workspace, ui, frameMs: 5 });
  assert.equal(await chat.prompt("hello"), "end_turn");
  const last = renders[renders.length - 1];
  assert.equal(last.busy, false);
  assert.deepEqual(texts(last, "user"), ["hello"]);
  assert.deepEqual(texts(last, "agent"), ["Hello from dsh."]);
  assert.ok(renders.some((state) => state.busy), "the panel saw the turn running");
  assert.ok(chat.state.options.some((o) => o.id === "mode" && o.current === "ask"));

  assert.equal(await chat.prompt("edit it"), "end_turn");
  const asked = renders.find((state) => state.asking);
  assert.ok(asked?.asking);
  assert.equal(asked.asking.toolCallId, "call_w1");
  assert.ok(asked.asking.options.some((o) => o.id === "allow_once" && o.kind === "allow_once"));
  assert.equal(renders[renders.length - 1].asking, undefined);
  assert.equal(readFileSync(join(workspace, "hello.txt"), "utf8"), "hello from vscode\n");
  assert.equal(chat.state.tools["call_w1"].status, "completed");

  await chat.pick("mode", "accept-edits");
  assert.equal(chat.state.options.find((o) => o.id === "mode")?.current, "accept-edits");
  const sessions = await chat.sessions();
  assert.ok(sessions.some((s) => s.sessionId === chat?.sessionId));
  assert.deepEqual(errors, []);
  assert.equal(await chat.dispose(), 0, "dsh exits when the extension deactivates");
});

test("client terminals: dsh runs a command in the editor's terminal when configured to", { timeout: 60_000 }, async () => {
  const { home, workspace, env } = environment();
  // The sandbox cannot reach an editor terminal: dsh uses one only when told.
  writeFileSync(join(home, "config.toml"), "[sandbox]\nprefer_local = false\n");
  const host = new TestHost();
  host.terminals = new Terminals();
  const created: Terminal[] = [];
  const streamed: string[] = [];
  host.terminals.onCreate = (terminal) => {
    created.push(terminal);
    terminal.onOutput((text) => streamed.push(text));
  };
  host.answers.push("allow_once");
  const conn = await DshConnection.start({
    command: dsh,
    env: { ...env, DSH_REPLAY_FILE: resolve(here, "test", "scripted-terminal.jsonl") },
    cwd: workspace,
    host,
  });
  assert.equal(conn.agentInfo.agentCapabilities?.loadSession, true);
  const { sessionId } = await conn.newSession(workspace);
  const live = emptyChat();
  conn.onUpdate((note) => reduce(live, note));
  assert.equal(await conn.prompt(sessionId, "run it"), "end_turn");
  assert.equal(created.length, 1);
  assert.equal(created[0].spec.command, "bash");
  assert.equal(created[0].spec.cwd, workspace);
  assert.deepEqual(created[0].status, { exitCode: 3, signal: null });
  assert.match(streamed.join(""), /from-the-editor/);
  assert.equal(host.terminals.size, 0, "dsh released its terminal");
  assert.equal(live.tools["call_b1"].status, "completed");
  assert.equal(await conn.dispose(), 0);
  // The log kept the output: a reload shows it as text.
  const again = await DshConnection.start({ command: dsh, env, cwd: workspace, host: new TestHost() });
  const replayed = emptyChat();
  again.onUpdate((note) => reduce(replayed, note));
  await again.loadSession(sessionId, workspace);
  const shown = replayed.tools["call_b1"].text.join("\n");
  assert.match(shown, /from-the-editor/);
  assert.match(shown, /to-stderr/);
  assert.match(shown, /\[exit code: 3\]/);
  assert.equal(await again.dispose(), 0);
});
