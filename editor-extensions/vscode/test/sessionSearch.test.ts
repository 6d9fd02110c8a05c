// The session list's search against the real dsh: sessions made by
// `dsh run` with the scripted model (the replay provider), found by a word
// of their text through `dsh sessions search --json`; only the workspace's;
// hits mapped to picker items, a log's escape sequences shown escaped.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import Module from "node:module";

import { hitItems, searchSessions, shown, when } from "../src/protocol/sessionSearch";

const here = resolve(__dirname, "..", "..");
const dsh = process.env.DSH_BIN ?? resolve(here, "..", "..", "target", "debug", "dsh");
const manifest = JSON.parse(readFileSync(resolve(here, "package.json"), "utf8"));

/** `dsh run TASK` in `cwd`, the model replying `reply`; the session id. */
function run(env: Record<string, string>, cwd: string, task: string, reply: string): string {
  const replay = join(env.DSH_HOME, `replay-${Math.random().toString(16).slice(2)}.jsonl`);
  writeFileSync(replay, JSON.stringify({ chunks: [{ text: reply }], finish: "stop" }) + "\n");
  const out = execFileSync(dsh, ["run", task], {
    cwd,
    env: { ...process.env, ...env, DSH_REPLAY_FILE: replay },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  assert.ok(out.includes(reply.split(" ")[0]), out);
  const listEnv = { ...process.env, DSH_HOME: env.DSH_HOME, HOME: env.HOME, DSH_LOG: "warn" };
  const sessions = execFileSync(dsh, ["sessions", "list"], { cwd, env: listEnv, encoding: "utf8" });
  const row = sessions.split("\n").find((line) => line.includes(task.split(" ").pop()!));
  assert.ok(row, `the session of ${task} is listed:\n${sessions}`);
  return row.split(/\s+/)[0];
}

test("the session list's filter searches the workspace's sessions through dsh", { timeout: 60_000 }, async () => {
  assert.ok(existsSync(dsh), `no dsh binary at ${dsh} (set DSH_BIN)`);
  const home = mkdtempSync(join(tmpdir(), "dsh-vscode-home-"));
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), "dsh-vscode-ws-")));
  const elsewhere = realpathSync(mkdtempSync(join(tmpdir(), "dsh-vscode-other-")));
  const env = { DSH_HOME: home, HOME: home, DSH_PROVIDER: "replay", DSH_LOG: "warn" };
  // Searching reads the logs only: no model, no key.
  const start = { command: dsh, env: { DSH_HOME: home, HOME: home, DSH_LOG: "warn" } };

  const found = run(env, workspace, "Why does the pangolin test flake", "The pangolin fixture \u001b[2J races.");
  run(env, workspace, "Tidy the imports", "Tidied.");
  run(env, elsewhere, "Count the pangolin here", "Two.");

  assert.deepEqual(await searchSessions(start, workspace, "wombat"), []);
  const hits = await searchSessions(start, workspace, "pangolin");
  assert.equal(hits.length, 1, JSON.stringify(hits));
  const [hit] = hits;
  assert.equal(hit.id, found);
  assert.equal(hit.cwd, workspace);
  assert.equal(hit.title, "Why does the pangolin test flake");
  assert.match(hit.snippet, /pangolin/);

  const items = hitItems(hits);
  assert.equal(items.length, 1);
  assert.equal(items[0].id, found);
  assert.equal(items[0].label, "Why does the pangolin test flake");
  assert.equal(items[0].description, when(hit.time));
  assert.equal(items[0].alwaysShow, true);
  assert.ok(items[0].detail?.includes("pangolin"), items[0].detail);
  for (const item of items) {
    assert.ok(!`${item.label}${item.detail}`.includes("\u001b"), "no escape sequence reaches the picker");
  }

  // The other directory's session, searched from there.
  const there = await searchSessions(start, elsewhere, "pangolin");
  assert.equal(there.length, 1);
  assert.notEqual(there[0].id, found);

  // A failing dsh (a config.toml that does not parse) is an error.
  const broken = mkdtempSync(join(tmpdir(), "dsh-vscode-broken-"));
  writeFileSync(join(broken, "config.toml"), "bogus = [\n");
  await assert.rejects(searchSessions({ command: dsh, env: { ...start.env, DSH_HOME: broken } }, workspace, "pangolin"), /dsh sessions search: /);
});

test("a log's control characters are shown escaped, times in UTC", () => {
  assert.equal(shown("a\u001b]0;pwned\u0007b\r"), "a\\x1b]0;pwned\\x07b\\x0d");
  assert.equal(shown("plain text"), "plain text");
  assert.equal(when(Date.UTC(2026, 11, 1, 3, 17, 9)), "2026-12-01 03:17");
  const [item] = hitItems([
    { id: "s1", cwd: "/w", title: null, created_at: 0, seq: 1, event_type: "user/message", time: 0, surface: "current", snippet: "x\u009by" },
  ]);
  assert.equal(item.label, "s1");
  assert.equal(item.detail, "x\\x9by");
});

/** A QuickPick as the extension drives it, typed into by the test. */
class FakePick {
  items: { label: string; detail?: string; id: string }[] = [];
  selectedItems: { id: string }[] = [];
  title = "";
  placeholder = "";
  busy = false;
  matchOnDescription = false;
  matchOnDetail = false;
  shown = false;
  private changed: ((value: string) => void)[] = [];
  private accepted: (() => void)[] = [];
  private hidden: (() => void)[] = [];
  onDidChangeValue(fn: (value: string) => void) {
    this.changed.push(fn);
  }
  onDidAccept(fn: () => void) {
    this.accepted.push(fn);
  }
  onDidHide(fn: () => void) {
    this.hidden.push(fn);
  }
  show() {
    this.shown = true;
  }
  hide() {
    this.hidden.forEach((fn) => fn());
  }
  dispose() {}
  type(value: string) {
    this.changed.forEach((fn) => fn(value));
  }
  accept(id: string) {
    this.selectedItems = [{ id }];
    this.accepted.forEach((fn) => fn());
  }
}

async function until(what: string, cond: () => boolean) {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("the open-session picker lists the sessions, searches as words are typed, opens a hit", { timeout: 60_000 }, async () => {
  assert.ok(existsSync(dsh), `no dsh binary at ${dsh} (set DSH_BIN)`);
  const home = mkdtempSync(join(tmpdir(), "dsh-vscode-home-"));
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), "dsh-vscode-ws-")));
  const env = { DSH_HOME: home, HOME: home, DSH_PROVIDER: "replay", DSH_LOG: "warn" };
  const found = run(env, workspace, "Feed the capybara", "The capybara ate.");
  run(env, workspace, "Water the ferns", "Watered.");

  const settings: Record<string, { defaultValue?: unknown; globalValue?: unknown }> = {
    path: { defaultValue: "", globalValue: dsh },
    env: { defaultValue: {}, globalValue: { ...env, DSH_REPLAY_FILE: resolve(here, "test", "scripted-model.jsonl") } },
    followAgent: { defaultValue: false },
  };
  const commands = new Map<string, (...args: unknown[]) => unknown>();
  const errors: string[] = [];
  const picks: FakePick[] = [];
  const disposable = { dispose() {} };
  const stub = {
    StatusBarAlignment: { Left: 1, Right: 2 },
    window: {
      createStatusBarItem: () => ({ ...disposable, show() {}, text: "", command: "" }),
      createOutputChannel: () => ({ ...disposable, appendLine() {} }),
      registerWebviewViewProvider: () => disposable,
      showErrorMessage: async (message: string) => {
        errors.push(message);
        return undefined;
      },
      createQuickPick: () => {
        const pick = new FakePick();
        picks.push(pick);
        return pick;
      },
    },
    workspace: {
      registerTextDocumentContentProvider: () => disposable,
      getConfiguration: () => ({
        inspect: (section: string) => settings[section],
        get: (section: string) => settings[section]?.globalValue ?? settings[section]?.defaultValue,
      }),
      workspaceFolders: [{ uri: { fsPath: workspace } }],
      textDocuments: [],
    },
    commands: {
      registerCommand: (id: string, fn: (...args: unknown[]) => unknown) => {
        commands.set(id, fn);
        return disposable;
      },
    },
  };
  type Loader = { _load: (request: string, ...rest: unknown[]) => unknown };
  const loader = Module as unknown as Loader;
  const original = loader._load;
  loader._load = (request: string, ...rest: unknown[]) =>
    request === "vscode" ? stub : original.call(Module, request, ...rest);
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded as VS Code loads it, under the stub
    const extension = require(resolve(here, manifest.main));
    extension.activate({ subscriptions: [] as unknown[], extensionUri: {}, secrets: { get: async () => undefined } });
    try {
      const opened = commands.get("dsh.openSession")!() as Promise<void>;
      await until("the picker", () => picks.length === 1 && picks[0].shown);
      const pick = picks[0];
      assert.deepEqual(pick.items.map((i) => i.label).sort(), ["Feed the capybara", "Water the ferns"]);
      pick.type("capybara ate");
      await until("the search's hits", () => pick.items.length === 1 && pick.items[0].detail !== undefined);
      assert.equal(pick.items[0].id, found);
      assert.match(pick.items[0].detail!, /capybara/);
      // Cleared: the list again.
      pick.type("");
      assert.equal(pick.items.length, 2);
      pick.type("capybara");
      await until("the search's hits again", () => pick.items.length === 1 && pick.items[0].detail !== undefined);
      pick.accept(found);
      await opened;
      assert.deepEqual(errors, []);
    } finally {
      await extension.deactivate();
    }
  } finally {
    loader._load = original;
  }
});
