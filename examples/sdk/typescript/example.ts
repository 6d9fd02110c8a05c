// Drive `dsh sdk` over WebSocket from TypeScript (node + the `ws` package).
//
// It starts `dsh sdk --listen 127.0.0.1:0`, reads the address dsh prints on
// stderr, connects, opens a session whose permission asks it answers
// itself, runs a prompt that writes a file (printing the streamed text and
// allowing the write), then starts a slow prompt and interrupts it.
//
//     npm ci && npm run build && node dist/example.js [--dsh PATH]
//
// Without DEEPSEEK_API_KEY it runs against the scripted model beside this
// directory (DSH_PROVIDER=replay): no key, no network.

import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";

/** What `session.event` notifications carry (docs/sdk.md). */
type Item =
  | { kind: "event"; event: { seq: number; type: string; data: any } }
  | { kind: "delta"; channel: "text" | "thought"; text: string }
  | { kind: "status"; status: "running" | "idle" | "closed"; messageId?: string; stopReason?: string; error?: unknown }
  | { kind: "permission"; requestId: string; toolCall: { callId: string; title: string }; options: { optionId: string; label: string }[] };

interface RpcError {
  code: number;
  message: string;
  data?: { code?: string };
}

/** A JSON-RPC 2.0 client on one WebSocket. */
class Sdk {
  private nextId = 1;
  private pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  private queues = new Map<string | number, Item[]>();
  private waiters = new Map<string | number, () => void>();

  private constructor(private socket: WebSocket) {
    socket.on("message", (data) => this.dispatch(JSON.parse(data.toString())));
    socket.on("close", () => {
      for (const { reject } of this.pending.values()) reject(new Error("connection closed"));
    });
  }

  static connect(url: string, token: string): Promise<Sdk> {
    return new Promise((resolve, reject) => {
      // Every connection authenticates with the token dsh wrote for this start.
      const socket = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` } });
      socket.once("open", () => resolve(new Sdk(socket)));
      socket.once("error", reject);
    });
  }

  private dispatch(message: any) {
    if (message.method === "session.event") {
      const { subscription, result } = message.params;
      const queue = this.queues.get(subscription) ?? [];
      queue.push(result as Item);
      this.queues.set(subscription, queue);
      this.waiters.get(subscription)?.();
    } else if (typeof message.id === "number" && this.pending.has(message.id)) {
      const { resolve, reject } = this.pending.get(message.id)!;
      this.pending.delete(message.id);
      if (message.error) {
        const error = message.error as RpcError;
        reject(new Error(`${error.data?.code ?? error.code}: ${error.message}`));
      } else {
        resolve(message.result);
      }
    }
  }

  call<T = any>(method: string, params: object = {}): Promise<T> {
    const id = this.nextId++;
    this.socket.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  /** The next item of a subscription. */
  async next(subscription: string | number): Promise<Item> {
    for (;;) {
      const queue = this.queues.get(subscription);
      if (queue && queue.length > 0) return queue.shift()!;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no notification within 30 s")), 30_000);
        this.waiters.set(subscription, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close() {
    this.socket.close();
  }
}

/** Sends a prompt and handles its notices until the session is idle again. */
async function runPrompt(
  sdk: Sdk,
  sessionId: string,
  subscription: string | number,
  text: string,
  onDelta?: () => Promise<void>,
): Promise<Item & { kind: "status" }> {
  const { messageId } = await sdk.call<{ messageId: string }>("session/prompt", { sessionId, text });
  for (;;) {
    const item = await sdk.next(subscription);
    switch (item.kind) {
      case "delta":
        if (item.channel === "text") {
          process.stdout.write(item.text);
          await onDelta?.();
        }
        break;
      case "event":
        if (item.event.type === "tool/call") console.log(`\n[tool] ${item.event.data.view.title}`);
        break;
      case "permission":
        console.log(`[permission] ${item.toolCall.title} -> allow_once`);
        await sdk.call("session/respond", { sessionId, requestId: item.requestId, optionId: "allow_once" });
        break;
      case "status":
        if (item.status === "idle" && item.messageId === messageId) {
          console.log(`\n[done] ${item.stopReason ?? JSON.stringify(item.error)}`);
          return item;
        }
    }
  }
}

function startDsh(dsh: string, env: NodeJS.ProcessEnv) {
  const child = spawn(dsh, ["sdk", "--listen", "127.0.0.1:0"], { env, stdio: ["ignore", "inherit", "pipe"] });
  const url = new Promise<{ url: string; token: string }>((resolve, reject) => {
    let seen = "";
    let found = false;
    child.stderr.on("data", (chunk: Buffer) => {
      process.stderr.write(chunk); // dsh's log (DSH_LOG) stays visible
      // Read the token once: dsh removes its file when it stops, and its
      // log keeps coming after.
      if (found) return;
      seen += chunk.toString();
      // Only whole lines: stderr comes in chunks, and a chunk can end
      // inside the address ("ws://127" is a different host). dsh names its
      // token file (0600, never the token itself) before the address.
      const match = /dsh sdk: listening on (ws:\/\/\S+)\r?\n/.exec(seen);
      const file = /dsh sdk: token in (.+?)\r?\n/.exec(seen);
      if (match && file) {
        found = true;
        resolve({ url: match[1], token: readFileSync(file[1], "utf8").trim() });
      }
    });
    child.once("exit", (code) => reject(new Error(`dsh sdk exited with ${code} before listening: ${seen}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  /** Stops dsh if it still runs (the example failed part-way). */
  const stop = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill();
  };
  return { url, exited, stop };
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const dsh = args[0] === "--dsh" ? args[1] : process.env.DSH_BIN ?? "dsh";
  const here = dirname(fileURLToPath(import.meta.url));
  const scratch = mkdtempSync(join(tmpdir(), "dsh-sdk-ts-"));
  const cwd = join(scratch, "workspace");
  mkdirSync(cwd);
  const env: NodeJS.ProcessEnv = { ...process.env, DSH_HOME: process.env.DSH_HOME ?? join(scratch, "home") };
  if (!env.DEEPSEEK_API_KEY) {
    env.DSH_PROVIDER = "replay";
    env.DSH_REPLAY_FILE = resolve(here, "..", "..", "scripted-model.jsonl");
  }
  let server: ReturnType<typeof startDsh> | undefined;
  try {
    server = startDsh(dsh, env);
    const { url, token } = await server.url;
    const sdk = await Sdk.connect(url, token);
    const info = await sdk.call("initialize", { clientInfo: { name: "typescript-example" } });
    console.log(`server: ${info.serverInfo.name} ${info.serverInfo.version}`);
    const { sessionId } = await sdk.call<{ sessionId: string }>("session/new", { cwd, approvals: "client" });
    const subscription = await sdk.call<string | number>("session/subscribe", { sessionId });

    // 1. A prompt with a tool call: stream the text, allow the write.
    let done = await runPrompt(sdk, sessionId, subscription, "Write a notes file.");
    if (done.stopReason !== "end_turn") throw new Error(`first prompt: ${JSON.stringify(done)}`);
    console.log(`notes.txt: ${readFileSync(join(cwd, "notes.txt"), "utf8").trim()}`);

    // 2. A slow prompt, interrupted after a few deltas.
    let seen = 0;
    done = await runPrompt(sdk, sessionId, subscription, "Think for a long time.", async () => {
      if (++seen === 5) await sdk.call("session/interrupt", { sessionId });
    });
    if (done.stopReason !== "cancelled") throw new Error(`second prompt: ${JSON.stringify(done)}`);

    await sdk.call("shutdown");
    sdk.close();
    const code = await server.exited;
    console.log(`dsh sdk exited with ${code}`);
    return code ?? 1;
  } finally {
    server?.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
