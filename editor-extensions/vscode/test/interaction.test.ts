// The user in the loop, through the real dsh and the scripted model:
// ask_user_question reaches the extension as one `elicitation/create`
// (the extension advertises forms), answered in the pickers, declined,
// dismissed (the turn is cancelled), answered in the panel; prompts sent
// while a turn runs are steered into it or queued after it, and cancelled
// with it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { Chat, type ChatUi } from "../src/protocol/chat";
import type { Form, FormOutcome } from "../src/protocol/questions";
import type { ChatState } from "../src/protocol/viewModel";

const here = resolve(__dirname, "..", "..");
const dsh = process.env.DSH_BIN ?? resolve(here, "..", "..", "target", "debug", "dsh");

function environment(script: string) {
  const home = mkdtempSync(join(tmpdir(), "dsh-vscode-home-"));
  const workspace = mkdtempSync(join(tmpdir(), "dsh-vscode-ws-"));
  writeFileSync(join(workspace, "hello.txt"), "hello\n");
  const env = {
    DSH_HOME: home,
    HOME: home,
    DSH_PROVIDER: "replay",
    DSH_REPLAY_FILE: resolve(here, "test", script),
    DSH_LOG: "info",
  };
  return { workspace, env };
}

function texts(state: ChatState, type: string): string[] {
  return state.items.flatMap((item) => (item.type === type && "text" in item ? [item.text] : []));
}

async function until(what: string, cond: () => boolean, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test("dsh's questions: answered in the pickers, declined, dismissed, answered in the panel", { timeout: 60_000 }, async (t) => {
  assert.ok(existsSync(dsh), `no dsh binary at ${dsh} (set DSH_BIN)`);
  const { workspace, env } = environment("scripted-questions.jsonl");
  const asked: Form[] = [];
  const renders: ChatState[] = [];
  const errors: string[] = [];
  let respond: (form: Form, signal: AbortSignal) => Promise<FormOutcome> = async () => ({ action: "cancel" });
  const ui: ChatUi = {
    askPermission: async (request) => {
      throw new Error(`a question came as a permission prompt: ${request.toolCall.title}`);
    },
    askQuestions: (form, signal) => {
      asked.push(form);
      return respond(form, signal);
    },
    readTextFile: async (path) => readFileSync(path, "utf8"),
    writeTextFile: async (path, content) => writeFileSync(path, content),
    render: (state) => renders.push(structuredClone(state)),
    error: (message) => errors.push(message),
  };
  const chat = new Chat({ start: { command: dsh, env, cwd: workspace }, cwd: workspace, ui, frameMs: 5 });
  t.after(() => chat.dispose());

  // 1. Answered in the pickers.
  respond = async () => ({
    action: "accept",
    answers: { db: { value: "SQLite" }, name: { text: "billing" }, extras: { values: ["metrics", "tracing"], other: "gRPC" } },
  });
  assert.equal(await chat.prompt("set up the service"), "end_turn");
  assert.equal(asked.length, 1, "one form for the call");
  const form = asked[0];
  assert.equal(form.toolCallId, "q1");
  assert.deepEqual(
    Object.fromEntries(form.questions.map((q) => [q.id, [q.kind, q.other ?? null]])),
    { db: ["single", "db_other"], name: ["text", null], extras: ["multi", "extras_other"] },
  );
  assert.ok(renders.some((state) => state.question?.toolCallId === "q1"), "the panel showed the questions");
  const q1 = chat.state.tools["q1"];
  assert.equal(q1.status, "completed");
  for (const said of ["SQLite", "billing", "metrics", "tracing", "gRPC"]) assert.match(q1.text.join("\n"), new RegExp(said));
  const shown = chat.state.items.filter((item) => item.type === "answers");
  assert.deepEqual(shown[0], {
    type: "answers",
    toolCallId: "q1",
    action: "accept",
    lines: form.questions.map((q) =>
      q.id === "db" ? `${q.title}: SQLite` : q.id === "name" ? `${q.title}: billing` : `${q.title}: metrics, tracing, Other: gRPC`,
    ),
  });
  assert.deepEqual(texts(chat.state, "agent"), ["Using SQLite for billing."]);

  // 2. Declined: the model is told, and goes on.
  respond = async () => ({ action: "decline" });
  assert.equal(await chat.prompt("deploy it"), "end_turn");
  assert.match(chat.state.tools["q2"].text.join("\n"), /declined/);
  assert.ok(texts(chat.state, "agent").includes("Not deploying."));

  // 3. Dismissed: the turn is cancelled.
  respond = async () => ({ action: "cancel" });
  assert.equal(await chat.prompt("deploy it now"), "cancelled");

  // 4. The panel's form answers first (a wrong answer first, refused); the
  // pickers are told to close.
  let closed = false;
  respond = (_form, signal) =>
    new Promise((resolve) =>
      signal.addEventListener("abort", () => {
        closed = true;
        resolve({ action: "cancel" });
      }),
    );
  const answered = chat.prompt("deploy it, really");
  await until("the questions in the panel", () => chat.state.question?.toolCallId === "q4");
  assert.equal(chat.answerQuestions({ action: "accept", answers: { go: { value: "maybe" } } }), "Deploy now?: not one of the choices");
  assert.equal(chat.answerQuestions({ action: "accept", answers: { go: { value: "yes" } } }), undefined);
  assert.equal(await answered, "end_turn");
  assert.ok(closed, "the pickers closed");
  assert.equal(chat.state.question, undefined);
  assert.match(chat.state.tools["q4"].text.join("\n"), /yes/);
  assert.ok(texts(chat.state, "agent").includes("Deploying."));
  assert.deepEqual(errors, []);
  assert.equal(await chat.dispose(), 0);
});

test("prompts while a turn runs: steered into it, queued after it, cancelled with it", { timeout: 60_000 }, async (t) => {
  const { workspace, env } = environment("scripted-steer.jsonl");
  const errors: string[] = [];
  const ui: ChatUi = {
    askPermission: async () => null,
    askQuestions: async () => ({ action: "cancel" }),
    readTextFile: async (path) => readFileSync(path, "utf8"),
    render: () => {},
    error: (message) => errors.push(message),
  };
  const chat = new Chat({ start: { command: dsh, env, cwd: workspace }, cwd: workspace, ui, frameMs: 5 });
  t.after(() => chat.dispose());
  const agent = () => texts(chat.state, "agent").join("");

  const first = chat.prompt("read hello.txt");
  await until("the first step", () => agent().includes("Looking"));
  const steered = chat.prompt("also check b.txt", "steer");
  const queued = chat.prompt("and then summarize");
  await until("both sent", () => chat.state.pending.length === 2);
  assert.deepEqual(
    chat.state.pending.map((p) => [p.delivery, p.text]),
    [
      ["steer", "also check b.txt"],
      ["queue", "and then summarize"],
    ],
  );
  assert.deepEqual(await Promise.all([first, steered, queued]), ["end_turn", "end_turn", "end_turn"]);
  assert.deepEqual(chat.state.pending, []);
  assert.equal(chat.state.busy, false);
  // Where each landed: the steer after the tool call, before the reply it
  // changed; the queued prompt's turn after.
  const shown = chat.state.items.map((item) => (item.type === "tool" ? `tool:${item.id}` : "text" in item ? `${item.type}:${item.text}` : item.type));
  assert.deepEqual(shown, [
    "user:read hello.txt",
    "agent:Looking at hello.txt.",
    "tool:r1",
    "user:also check b.txt",
    "agent:Checked both.",
    "user:and then summarize",
    "agent:Summary done.",
  ]);

  // Cancel with prompts waiting: each is answered cancelled, none shown as sent.
  const slow = chat.prompt("think for a long time");
  await until("the slow reply", () => agent().includes("still thinking"));
  const a = chat.prompt("queued a");
  const b = chat.prompt("steered b", "steer");
  await until("two waiting", () => chat.state.pending.length === 2);
  await chat.cancel();
  assert.deepEqual(chat.state.pending, [], "dropped at once");
  assert.deepEqual(await Promise.all([slow, a, b]), ["cancelled", "cancelled", "cancelled"]);
  assert.ok(!texts(chat.state, "user").includes("queued a"));
  assert.equal(chat.state.busy, false);
  assert.deepEqual(errors, []);
  assert.equal(await chat.dispose(), 0);
});
