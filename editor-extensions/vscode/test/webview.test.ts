// The chat panel's webview in a real browser: Debian's Chromium, driven by
// puppeteer-core, loads the panel's own HTML shell, script and style with a
// stub of the VS Code webview API, is fed a recorded stream of view-model
// states (text, thoughts, tool calls with a diff and locations, a plan, a
// permission ask; then dsh's questions as a form, prompts waiting behind
// the turn, the answers), and is checked through its DOM and what it
// posts; screenshots are saved.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { readFileSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import type { AddressInfo } from "node:net";
import puppeteer from "puppeteer-core";
import type * as acp from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import { parseForm } from "../src/protocol/questions";
import { emptyChat, reduce, userSays, type ChatState } from "../src/protocol/viewModel";
import { chatHtml } from "../src/protocol/webviewHtml";

const root = resolve(__dirname, "..", "..");
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";
const shots = resolve(root, "dist", "screenshots");

const THEME = `:root {
  --vscode-foreground: #cccccc; --vscode-sideBar-background: #181818; --vscode-font-family: sans-serif;
  --vscode-font-size: 13px; --vscode-editor-font-family: monospace; --vscode-panel-border: #2b2b2b;
  --vscode-input-background: #313131; --vscode-input-foreground: #cccccc; --vscode-input-border: #3c3c3c;
  --vscode-button-background: #0078d4; --vscode-button-foreground: #ffffff;
  --vscode-button-secondaryBackground: #313131; --vscode-button-secondaryForeground: #cccccc;
  --vscode-dropdown-background: #313131; --vscode-dropdown-foreground: #cccccc; --vscode-dropdown-border: #3c3c3c;
  --vscode-textLink-foreground: #4daafc; --vscode-focusBorder: #0078d4; --vscode-textCodeBlock-background: #2b2b2b;
  --vscode-testing-iconPassed: #2ea043; --vscode-testing-iconFailed: #f85149; --vscode-progressBar-background: #0078d4;
}`;

/** What dsh sent in a short session, as `session/update` notifications. */
function recorded(): acp.SessionNotification[] {
  const sessionId = "s1";
  const u = (update: acp.SessionUpdate): acp.SessionNotification => ({ sessionId, update });
  return [
    u({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "The user wants a greeting; " } }),
    u({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "edit main.rs." } }),
    u({ sessionUpdate: "plan", entries: [
      { content: "Read `main.rs`", status: "completed", priority: "medium" },
      { content: "Change the greeting", status: "in_progress", priority: "high" },
    ] }),
    u({
      sessionUpdate: "tool_call",
      toolCallId: "r1",
      title: "Read src/main.rs",
      kind: "read",
      status: "pending",
      locations: [{ path: "/w/src/main.rs", line: 1 }],
    }),
    u({ sessionUpdate: "tool_call_update", toolCallId: "r1", status: "completed" }),
    u({
      sessionUpdate: "tool_call",
      toolCallId: "e1",
      title: "Edit src/main.rs",
      kind: "edit",
      status: "pending",
      locations: [{ path: "/w/src/main.rs", line: 2 }],
    }),
    u({
      sessionUpdate: "tool_call_update",
      toolCallId: "e1",
      status: "completed",
      content: [{ type: "diff", path: "/w/src/main.rs", oldText: "fn main() {}\n", newText: "fn main() {\n    println!(\"hi\");\n}\n" }],
    }),
    u({ sessionUpdate: "tool_call", toolCallId: "b1", title: "Run cargo test", kind: "execute", status: "pending" }),
    u({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "I changed **the greeting** in `main.rs`:\n\n" } }),
    u({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "```rust\nprintln!(\"hi\");\n```\nNow `cargo test`, to check that nothing else changed." } }),
    u({ sessionUpdate: "usage_update", used: 52_000, size: 1_000_000, cost: { amount: 0.0123, currency: "USD" } }),
  ];
}

function states(): ChatState[] {
  const state = userSays(emptyChat(), "Make it say hi");
  state.options = [
    { id: "mode", name: "Mode", current: "ask", values: [
      { value: "ask", name: "Ask" },
      { value: "accept-edits", name: "Accept edits" },
    ] },
    { id: "model", name: "Model", current: "deepseek-v4-pro", values: [{ value: "deepseek-v4-pro", name: "DeepSeek V4 Pro" }] },
  ];
  state.busy = true;
  const out: ChatState[] = [];
  for (const note of recorded()) out.push(structuredClone(reduce(state, note)));
  // dsh asks before running the command.
  state.asking = {
    toolCallId: "b1",
    title: "Run cargo test",
    options: [
      { id: "allow_once", name: "Allow once", kind: "allow_once" },
      { id: "allow_once_network", name: "Allow once, with network", kind: "allow_once" },
      { id: "allow_always", name: "Always allow (cargo test)", kind: "allow_always" },
      { id: "reject_once", name: "Reject", kind: "reject_once" },
    ],
  };
  out.push(structuredClone(state));
  return out;
}

test("the chat panel renders a recorded session and posts what the user does", { timeout: 60_000 }, async () => {
  const media = resolve(root, "media");
  const server = createServer((request, response) => {
    const url = request.url ?? "/";
    if (url === "/") {
      response.setHeader("Content-Type", "text/html");
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      response.end(chatHtml({ cspSource: origin, nonce: "testnonce", scriptUri: `${origin}/chat.js`, styleUri: `${origin}/chat.css` }));
    } else if (url === "/theme.css") {
      // What VS Code's Dark Modern theme gives a webview, for the screenshot.
      response.setHeader("Content-Type", "text/css");
      response.end(THEME);
    } else if (url === "/chat.js" || url === "/chat.css") {
      response.setHeader("Content-Type", url.endsWith(".js") ? "text/javascript" : "text/css");
      response.end(readFileSync(join(media, url.slice(1))));
    } else {
      response.statusCode = 404;
      response.end();
    }
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as AddressInfo).port;
  const browser = await puppeteer.launch({
    executablePath: chromium,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 460, height: 900 });
    // The VS Code webview API, as a stub that records what the panel posts.
    await page.evaluateOnNewDocument(() => {
      const posted: unknown[] = [];
      (window as unknown as Record<string, unknown>).__posted = posted;
      (window as unknown as Record<string, unknown>).acquireVsCodeApi = () => ({
        postMessage: (message: unknown) => posted.push(message),
        getState: () => undefined,
        setState: () => undefined,
      });
    });
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.evaluate((href) => {
      const link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = href;
      document.head.append(link);
    }, `http://127.0.0.1:${port}/theme.css`);
    const posted = () => page.evaluate(() => (window as unknown as { __posted: { type: string }[] }).__posted);
    assert.deepEqual(await posted(), [{ type: "ready" }]);
    for (const state of states()) {
      await page.evaluate((s) => window.postMessage({ type: "state", state: s }, "*"), state as unknown as Record<string, unknown>);
    }
    await page.waitForSelector(".ask button");

    const text = (selector: string) => page.$$eval(selector, (nodes) => nodes.map((n) => (n as HTMLElement).innerText.trim()));
    assert.deepEqual(await text(".user"), ["Make it say hi"]);
    const agent = (await text(".agent"))[0];
    assert.match(agent, /I changed the greeting in main\.rs/);
    assert.equal(await page.$$eval(".agent strong", (n) => n.length), 1);
    assert.equal(await page.$$eval(".agent pre code", (n) => n.length), 1);
    // Thoughts are collapsed.
    assert.equal(await page.$eval("details.thought", (d) => (d as HTMLDetailsElement).open), false);
    // Tool calls: kind icon, title, status; the edit's diff and locations.
    assert.deepEqual(await text(".tool .tool-title"), ["Read src/main.rs", "Edit src/main.rs", "Run cargo test"]);
    assert.deepEqual(await text(".tool .badge"), ["completed", "completed", "pending"]);
    assert.match((await text(".tool .diff"))[0], /\/w\/src\/main\.rs\s+1 → 3 lines/);
    assert.deepEqual(await text(".location"), ["/w/src/main.rs:1", "/w/src/main.rs:2"]);
    // The plan as a checklist.
    assert.deepEqual(await text(".plan li"), ["☑ Read main.rs", "◐ Change the greeting"]);
    // The mode and model pickers, usage, and the running turn's Cancel.
    assert.deepEqual(await page.$$eval("#header select", (n) => n.map((s) => (s as HTMLSelectElement).value)), ["ask", "deepseek-v4-pro"]);
    assert.match((await text(".usage"))[0], /5% of 1000k/);
    assert.deepEqual(await text(".cost"), ["$0.0123"]);
    assert.equal(await page.$eval("#cancel", (b) => (b as HTMLButtonElement).hidden), false);
    // The ask's answers, in dsh's order.
    assert.deepEqual(await text(".ask button"), ["Allow once", "Allow once, with network", "Always allow (cargo test)", "Reject"]);

    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: join(shots, "chat-panel.png"), fullPage: true });

    // Model text is text: a tag the model writes is shown, never run (after
    // the screenshot, which shows an ordinary session).
    const injected = reduce(structuredClone(states().at(-1)!), {
      sessionId: "s1",
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "\n<img src=x onerror=\"window.__pwned=1\">" } },
    });
    await page.evaluate((s) => window.postMessage({ type: "state", state: s }, "*"), injected as unknown as Record<string, unknown>);
    await page.waitForFunction(() => document.querySelector(".agent")?.textContent?.includes("<img src=x"));
    assert.equal(await page.$$eval(".agent img", (n) => n.length), 0);
    assert.match((await text(".agent"))[0], /<img src=x/);
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);

    // What the user does reaches the extension.
    await page.click(".ask button[data-option='allow_once']");
    await page.click(".location[data-line='2']");
    await page.click("button[data-diff='0']");
    await page.select("select[data-picker='mode']", "accept-edits");
    await page.type("#input", "now run the tests");
    await page.keyboard.press("Enter");
    await page.click("#cancel");
    assert.deepEqual((await posted()).slice(1), [
      { type: "answer", optionId: "allow_once" },
      { type: "open", path: "/w/src/main.rs", line: 2 },
      { type: "diff", toolCallId: "e1", index: 0 },
      { type: "pick", id: "mode", value: "accept-edits" },
      { type: "prompt", text: "now run the tests" },
      { type: "cancel" },
    ]);

    // dsh's questions while prompts wait: the form above the composer, the
    // waiting prompts under it, Send now queues and Steer steers.
    const form = parseForm({
      sessionId: "s1",
      toolCallId: "q1",
      mode: "form",
      message: "Which database?\nWhat should the service be called?\nWhich extras?",
      requestedSchema: {
        type: "object",
        properties: {
          db: { type: "string", title: "Database", description: "Which database?", oneOf: [
            { const: "Postgres (Recommended)", title: "Postgres (Recommended)", description: "Scales." },
            { const: "SQLite", title: "SQLite" },
          ] },
          db_other: { type: "string" },
          extras: { type: "array", title: "Which extras?", items: { type: "string", enum: ["metrics", "tracing", "<b>auth</b>"] } },
          extras_other: { type: "string" },
          name: { type: "string", title: "What should the service be called?" },
        },
        required: ["db", "name"],
      },
    });
    assert.ok(!("unsupported" in form));
    const asking = structuredClone(states().at(-1)!);
    asking.asking = undefined;
    asking.question = { key: 1, toolCallId: "q1", message: form.message, questions: form.questions };
    asking.pending = [
      { id: 2, text: "then run the tests", delivery: "queue" },
      { id: 3, text: "use <b>tabs</b>", delivery: "steer" },
    ];
    const post = (state: ChatState) =>
      page.evaluate((s) => window.postMessage({ type: "state", state: s }, "*"), state as unknown as Record<string, unknown>);
    await post(asking);
    await page.waitForSelector("#question fieldset");
    assert.deepEqual(await text("#question legend"), ["Database", "What should the service be called?", "Which extras?"]);
    assert.deepEqual(await text("#question fieldset[data-q='db'] label"), ["Postgres (Recommended) — Scales.", "SQLite", "Other:"]);
    assert.deepEqual(await text(".pending-item"), ["Queued then run the tests", "Steering use <b>tabs</b>"], "escaped");
    assert.equal(await page.$$eval("#question b, #pending b", (n) => n.length), 0);
    assert.equal(await page.$eval("#send", (b) => (b as HTMLButtonElement).textContent), "Queue");
    assert.equal(await page.$eval("#steer", (b) => (b as HTMLButtonElement).hidden), false);

    await page.click("#question input[value='SQLite']");
    await page.type("#question fieldset[data-q='name'] input.typed", "billing");
    await page.click("#question fieldset[data-q='extras'] input[value='metrics']");
    await page.type("#question fieldset[data-q='extras'] .other-text", "gRPC");
    // Updates while the form is open keep what is typed.
    asking.usage = { used: 60_000, size: 1_000_000 };
    await post(asking);
    assert.equal(await page.$eval("#question fieldset[data-q='name'] input.typed", (i) => (i as HTMLInputElement).value), "billing");
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: join(shots, "chat-panel-question.png"), fullPage: true });
    await page.click("#question button[type='submit']");
    await page.click("#question button[data-decline]");
    await page.type("#input", "look at b.rs too");
    await page.keyboard.down("Control");
    await page.keyboard.press("Enter");
    await page.keyboard.up("Control");
    await page.type("#input", "and c.rs");
    await page.click("#steer");
    await page.type("#input", "afterwards, lint");
    await page.keyboard.press("Enter");
    assert.deepEqual((await posted()).slice(7), [
      {
        type: "questions",
        action: "accept",
        answers: { db: { value: "SQLite" }, name: { text: "billing" }, extras: { values: ["metrics"], other: "gRPC" } },
      },
      { type: "questions", action: "decline" },
      { type: "prompt", text: "look at b.rs too", delivery: "steer" },
      { type: "prompt", text: "and c.rs", delivery: "steer" },
      { type: "prompt", text: "afterwards, lint" },
    ]);

    // Answered: the form goes, the answers stay in the chat.
    const answered = structuredClone(asking);
    answered.question = undefined;
    answered.pending = [];
    answered.busy = false;
    answered.items.push({ type: "answers", toolCallId: "q1", action: "accept", lines: ["Database: SQLite", "What should the service be called?: billing"] });
    answered.items.push({ type: "answers", toolCallId: "q2", action: "decline", lines: [] });
    await post(answered);
    await page.waitForSelector("#question:empty");
    assert.deepEqual(await text(".answers .answers-head"), ["You answered", "You declined to answer"]);
    assert.deepEqual(await text(".answers li"), ["Database: SQLite", "What should the service be called?: billing"]);
    assert.equal(await page.$eval("#send", (b) => (b as HTMLButtonElement).textContent), "Send");
    assert.equal(await page.$eval("#steer", (b) => (b as HTMLButtonElement).hidden), true);
    assert.deepEqual(await text(".pending-item"), []);
  } finally {
    await browser.close();
    server.close();
  }
});
