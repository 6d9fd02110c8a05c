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

import { failedItem, hitItems, LatestSearch, searchSessions, shown, when } from "../src/protocol/sessionSearch";
import { withExtension } from "./stubbedVscode";

const here = resolve(__dirname, "..", "..");
const dsh = process.env.DSH_BIN ?? resolve(here, "..", "..", "target", "debug", "dsh");

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

test("bidirectional controls are shown escaped: a title cannot pass for another", () => {
  // "Fix gpj.exe" with a right-to-left override would read "Fix exe.jpg".
  assert.equal(shown("Fix \u202egpj.exe\u202c"), "Fix \\u{202e}gpj.exe\\u{202c}");
  const all = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069";
  assert.equal(
    shown(all),
    "\\u{061c}\\u{200e}\\u{200f}\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{202e}\\u{2066}\\u{2067}\\u{2068}\\u{2069}",
  );
  // Letters of right-to-left scripts are text, not controls.
  assert.equal(shown("שלום مرحبا"), "שלום مرحبا");
  const [item] = hitItems([
    { id: "s1", cwd: "/w", title: "a\u2066b", created_at: 0, seq: 1, event_type: "user/message", time: 0, surface: "current", snippet: "\u001b[31m\u202ered" },
  ]);
  assert.equal(item.label, "a\\u{2066}b");
  assert.equal(item.detail, "\\x1b[31m\\u{202e}red");
});

/** A stand-in for `dsh` (a shell script; unix only): `sessions search`
 * logs "start PID QUERY" to `log`; a query starting with "slow" sleeps
 * until killed, "fail" fails as a locked index does; any other query
 * goes to `real` (or prints no hits without one). */
function fakeDsh(dir: string, log: string, real?: string): string {
  const path = join(dir, "dsh");
  const rest = real ? `exec "${real}" "$@"` : `echo "[]"`;
  writeFileSync(
    path,
    `#!/bin/sh
if [ "$1" = sessions ] && [ "$2" = search ]; then
  for last; do :; done
  echo "start $$ $last" >> "${log}"
  case "$last" in
    slow*) exec sleep 60 ;;
    fail) echo "Error: database is locked" >&2; exit 1 ;;
  esac
fi
${rest}
`,
    { mode: 0o755 },
  );
  return path;
}

/** The queries `fakeDsh` was run with, in order, and their pids. */
function started(log: string): { pid: number; query: string }[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8")
    .trim()
    .split("\n")
    .map((line) => {
      const [, pid, ...query] = line.split(" ");
      return { pid: Number(pid), query: query.join(" ") };
    });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("one search at a time: the next one kills the one under way and starts once it has ended", { timeout: 30_000 }, async (t) => {
  if (process.platform === "win32") return t.skip("the stand-in dsh is a shell script");
  const dir = mkdtempSync(join(tmpdir(), "dsh-vscode-slow-"));
  const log = join(dir, "log");
  const start = { command: fakeDsh(dir, log) };
  const events: string[] = [];
  const searches = new LatestSearch(async (query, signal) => {
    events.push(`start ${query}`);
    try {
      return await searchSessions(start, dir, query, 20, signal);
    } finally {
      events.push(`end ${query}`);
    }
  });

  const first = searches.run("slow one");
  await until("the first search's process", () => started(log).length === 1);
  const [{ pid }] = started(log);
  const second = searches.run("slow two");
  const third = searches.run("quick");
  // Superseded: no result, no error; the sleeping process was killed
  // (it would sleep a minute), the second never ran.
  assert.equal(await first, undefined);
  assert.equal(await second, undefined);
  assert.deepEqual(await third, []);
  assert.equal(alive(pid), false, "the superseded search's process is gone");
  assert.deepEqual(events, ["start slow one", "end slow one", "start quick", "end quick"]);
  assert.deepEqual(started(log).map((s) => s.query), ["slow one", "quick"]);

  // The latest search's failure is an error (a superseded one's, killed
  // or not, is dropped: above).
  await assert.rejects(searches.run("fail"), { message: "dsh sessions search: Error: database is locked" });

  // Cancelled with nothing after it (the picker closed): killed, says nothing.
  const closed = searches.run("slow three");
  await until("the last search's process", () => started(log).length === 4);
  searches.cancel();
  assert.equal(await closed, undefined);
  assert.equal(alive(started(log)[3].pid), false);
  // An aborted searchSessions rejects as aborted, not as dsh's failure.
  const controller = new AbortController();
  const aborted = searchSessions(start, dir, "slow four", 20, controller.signal);
  await until("the aborted search's process", () => started(log).length === 5);
  controller.abort();
  await assert.rejects(aborted, { name: "AbortError" });
  assert.deepEqual(failedItem("dsh sessions search: x"), {
    label: "$(error) The search failed",
    description: "",
    detail: "dsh sessions search: x",
    alwaysShow: true,
    id: "",
  });
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

test("the open-session picker lists the sessions, searches as words are typed, opens a hit", { timeout: 60_000 }, async (t) => {
  if (process.platform === "win32") return t.skip("the stand-in dsh is a shell script");
  assert.ok(existsSync(dsh), `no dsh binary at ${dsh} (set DSH_BIN)`);
  const home = mkdtempSync(join(tmpdir(), "dsh-vscode-home-"));
  const workspace = realpathSync(mkdtempSync(join(tmpdir(), "dsh-vscode-ws-")));
  const env = { DSH_HOME: home, HOME: home, DSH_PROVIDER: "replay", DSH_LOG: "warn" };
  const found = run(env, workspace, "Feed the capybara", "The capybara ate.");
  run(env, workspace, "Water the ferns", "Watered.");
  // dsh behind a stand-in that can make a search hang or fail.
  const log = join(home, "searches.log");
  const wrapped = fakeDsh(mkdtempSync(join(tmpdir(), "dsh-vscode-bin-")), log, dsh);

  const settings: Record<string, { defaultValue?: unknown; globalValue?: unknown }> = {
    path: { defaultValue: "", globalValue: wrapped },
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
  await withExtension(stub, async (extension) => {
    extension.activate({ subscriptions: [] as unknown[], extensionUri: {}, secrets: { get: async () => undefined } });
    try {
      const opened = commands.get("dsh.openSession")!() as Promise<void>;
      let settled = false;
      void opened.finally(() => (settled = true));
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

      // A search still running when words are typed is killed before the
      // next one starts, and says nothing.
      const before = started(log).length;
      pick.type("slow words");
      await until("the slow search's process", () => started(log).length === before + 1);
      const slow = started(log)[before];
      assert.equal(slow.query, "slow words");
      assert.equal(pick.busy, true);
      pick.type("capybara ate");
      await until("the hits after it", () => pick.items.length === 1 && pick.items[0].id === found && !pick.busy);
      assert.equal(alive(slow.pid), false, "the superseded search's process is gone");
      assert.deepEqual(started(log).slice(before).map((s) => s.query), ["slow words", "capybara ate"]);
      assert.deepEqual(errors, [], "no popup for a superseded search");

      // A failing search shows in the list, once, not as a popup; its line
      // opens nothing.
      pick.type("fail");
      await until("the failure", () => pick.items.length === 1 && pick.items[0].id === "" && !pick.busy);
      assert.equal(pick.items[0].detail, "dsh sessions search: Error: database is locked");
      assert.deepEqual(errors, [], "no popup for a failed search");
      pick.accept("");
      pick.type("capybara");
      await until("the hits after the failure", () => pick.items.length === 1 && pick.items[0].id === found);
      assert.equal(settled, false, "accepting the failure's line opened nothing");
      pick.accept(found);
      await opened;
      assert.deepEqual(errors, []);
    } finally {
      await extension.deactivate();
    }
  });
});
