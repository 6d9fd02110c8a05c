// The ACP client side of the extension: spawns `dsh acp`, speaks ACP with
// the official SDK (`client().onRequest(...).connect(ndJsonStream(...))`),
// hands editor requests to a `Host` and session updates to listeners.
// No `vscode` import: the VS Code layer implements `Host`; the tests use
// a plain one against the real dsh binary.

import { spawn, type ChildProcess } from "node:child_process";
import { Readable, Writable } from "node:stream";
import type * as acp from "@agentclientprotocol/sdk" with { "resolution-mode": "import" };

import type { Delivery } from "./prompts";
import type { Terminals } from "./terminals";

/** What dsh may ask of the editor. Only what is implemented is advertised. */
export interface Host {
  /** A permission prompt; the answer is an option id, or null (cancelled). */
  requestPermission(request: acp.RequestPermissionRequest): Promise<string | null>;
  /** A form of questions (`elicitation/create`, form mode; advertised as
   * `elicitation.form`). `signal` aborts when dsh withdraws it. */
  elicit?(request: acp.CreateElicitationRequest, signal: AbortSignal): Promise<acp.CreateElicitationResponse>;
  /** The text of a file, unsaved edits included. */
  readTextFile?(path: string, line?: number | null, limit?: number | null): Promise<string>;
  /** Writes a file (undoable in the editor). */
  writeTextFile?(path: string, content: string): Promise<void>;
  /** Runs dsh's commands when it asks the editor to (`terminal/*`). */
  terminals?: Terminals;
}

export interface StartOptions {
  /** The dsh binary. */
  command: string;
  /** Extra environment (the API key, DEEPSEEK_BASE_URL, …). */
  env?: Record<string, string>;
  /** dsh's working directory. */
  cwd: string;
  host: Host;
  /** dsh's stderr (its logs), line by line. */
  log?: (line: string) => void;
}

type Sdk = typeof import("@agentclientprotocol/sdk", { with: { "resolution-mode": "import" } });

/** The SDK is an ES module; the extension is CommonJS (as VS Code loads it). */
async function sdk(): Promise<Sdk> {
  return await import("@agentclientprotocol/sdk");
}

export class DshConnection {
  private exited: Promise<number | null>;

  private constructor(
    private listeners: Set<(note: acp.SessionNotification) => void>,
    private child: ChildProcess,
    private connection: acp.ClientConnection,
    readonly agentInfo: acp.InitializeResponse,
    private terminals?: Terminals,
  ) {
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null) resolve(child.exitCode);
      else child.once("exit", (code) => resolve(code));
    });
  }

  static async start(options: StartOptions): Promise<DshConnection> {
    const { client, ndJsonStream, methods, PROTOCOL_VERSION } = await sdk();
    const child = spawn(options.command, ["acp"], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", reject);
    });
    let stderr = "";
    child.stderr!.on("data", (data: Buffer) => {
      stderr += data.toString();
      let at: number;
      while ((at = stderr.indexOf("\n")) >= 0) {
        options.log?.(stderr.slice(0, at));
        stderr = stderr.slice(at + 1);
      }
    });
    const host = options.host;
    // Updates can come before `start` returns (a replayed session).
    const listeners = new Set<(note: acp.SessionNotification) => void>();
    const app = client({ name: "dsh-vscode" })
      .onNotification(methods.client.session.update, ({ params }) => {
        for (const listener of listeners) listener(params);
      })
      .onRequest(methods.client.session.requestPermission, async ({ params }) => {
        const chosen = await host.requestPermission(params);
        return chosen === null
          ? { outcome: { outcome: "cancelled" } }
          : { outcome: { outcome: "selected", optionId: chosen } };
      });
    if (host.elicit) {
      const elicit = host.elicit.bind(host);
      app.onRequest(methods.client.elicitation.create, ({ params, signal }) => elicit(params, signal));
    }
    if (host.readTextFile) {
      const read = host.readTextFile.bind(host);
      app.onRequest(methods.client.fs.readTextFile, async ({ params }) => ({
        content: await read(params.path, params.line, params.limit),
      }));
    }
    if (host.writeTextFile) {
      const write = host.writeTextFile.bind(host);
      app.onRequest(methods.client.fs.writeTextFile, async ({ params }) => {
        await write(params.path, params.content);
        return {};
      });
    }
    const terminals = host.terminals;
    if (terminals) {
      app
        .onRequest(methods.client.terminal.create, ({ params }) => ({
          terminalId: terminals.create(params).id,
        }))
        .onRequest(methods.client.terminal.output, ({ params }) => {
          const terminal = terminals.get(params.terminalId);
          return {
            output: terminal.output(),
            truncated: terminal.truncated,
            exitStatus: terminal.status ?? null,
          };
        })
        .onRequest(methods.client.terminal.waitForExit, async ({ params }) => {
          return await terminals.get(params.terminalId).waitForExit();
        })
        .onRequest(methods.client.terminal.kill, ({ params }) => {
          terminals.get(params.terminalId).kill();
          return {};
        })
        .onRequest(methods.client.terminal.release, ({ params }) => {
          terminals.release(params.terminalId);
          return {};
        });
    }
    const stream = ndJsonStream(
      Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
      Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
    );
    const connection = app.connect(stream);
    const info = await connection.agent.request(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {
        fs: { readTextFile: !!host.readTextFile, writeTextFile: !!host.writeTextFile },
        terminal: !!terminals,
        ...(host.elicit ? { elicitation: { form: {} } } : {}),
      },
      clientInfo: { name: "dsh-vscode", version: "0.1.0" },
    });
    return new DshConnection(listeners, child, connection, info, terminals);
  }

  /** Calls `listener` with every `session/update`. */
  onUpdate(listener: (note: acp.SessionNotification) => void): () => boolean {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  newSession(cwd: string): Promise<acp.NewSessionResponse> {
    return this.connection.agent.request("session/new", { cwd, mcpServers: [] });
  }

  loadSession(sessionId: string, cwd: string): Promise<acp.LoadSessionResponse> {
    return this.connection.agent.request("session/load", { sessionId, cwd, mcpServers: [] });
  }

  listSessions(cwd?: string): Promise<acp.ListSessionsResponse> {
    return this.connection.agent.request("session/list", cwd ? { cwd } : {});
  }

  /** A prompt; answered when its turn ends. While a turn runs dsh queues
   * it for its own turn, or with `steer` puts it into the running one. */
  async prompt(sessionId: string, text: string, delivery: Delivery = "queue"): Promise<acp.StopReason> {
    const response = await this.connection.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text }],
      ...(delivery === "steer" ? { _meta: { dsh: { delivery: "steer" } } } : {}),
    });
    return response.stopReason;
  }

  /** Cancels the running turn and every prompt waiting behind it. */
  cancel(sessionId: string): Promise<void> {
    return this.connection.agent.notify("session/cancel", { sessionId });
  }

  setOption(sessionId: string, configId: string, value: string): Promise<acp.SetSessionConfigOptionResponse> {
    return this.connection.agent.request("session/set_config_option", { sessionId, configId, value });
  }

  /** Closes stdin (dsh exits on EOF, reaping its children); kills it if it
   * has not exited within `graceMs`. Resolves with its exit code. */
  async dispose(graceMs = 3000): Promise<number | null> {
    this.terminals?.releaseAll();
    this.connection.close();
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}
