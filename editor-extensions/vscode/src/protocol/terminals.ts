// Client terminals (`terminal/*`): commands dsh asks the editor to run when
// it does not run them itself (`[sandbox] prefer_local = false`, full
// access, or no kernel sandbox). Each runs in its own process group, its
// output kept up to dsh's byte limit (the oldest dropped first) and
// streamed to whoever shows it (a VS Code Pseudoterminal). No `vscode`
// import.

import { spawn, type ChildProcess } from "node:child_process";

export interface ExitStatus {
  exitCode: number | null;
  signal: string | null;
}

export interface TerminalSpec {
  command: string;
  args?: string[];
  cwd?: string | null;
  env?: { name: string; value: string }[];
  outputByteLimit?: number | null;
}

/** One running (or finished) command. */
export class Terminal {
  private chunks: Buffer[] = [];
  private size = 0;
  truncated = false;
  status?: ExitStatus;
  private exited: Promise<ExitStatus>;
  private listeners = new Set<(text: string) => void>();

  constructor(
    readonly id: string,
    readonly spec: TerminalSpec,
    private child: ChildProcess,
  ) {
    const take = (data: Buffer) => this.take(data);
    child.stdout?.on("data", take);
    child.stderr?.on("data", take);
    this.exited = new Promise((resolve) => {
      child.once("close", (code, signal) => {
        this.status = { exitCode: code, signal };
        resolve(this.status);
      });
      child.once("error", (error) => {
        this.take(Buffer.from(`${error.message}\n`));
        this.status = { exitCode: 127, signal: null };
        resolve(this.status);
      });
    });
  }

  private take(data: Buffer) {
    for (const listener of this.listeners) listener(data.toString());
    this.chunks.push(data);
    this.size += data.length;
    const limit = this.spec.outputByteLimit;
    if (limit !== undefined && limit !== null) {
      while (this.size > limit && this.chunks.length) {
        const first = this.chunks[0];
        const over = this.size - limit;
        if (first.length <= over) {
          this.chunks.shift();
          this.size -= first.length;
        } else {
          this.chunks[0] = first.subarray(over);
          this.size -= over;
        }
        this.truncated = true;
      }
    }
  }

  /** The output kept so far (a character cut at the front is dropped). */
  output(): string {
    return Buffer.concat(this.chunks).toString("utf8").replace(/^\uFFFD+/, "");
  }

  /** Streams output as it comes (for a terminal view). */
  onOutput(listener: (text: string) => void): () => boolean {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  waitForExit(): Promise<ExitStatus> {
    return this.exited;
  }

  /** Kills the command and everything it started. */
  kill() {
    if (this.status || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, "SIGKILL");
    } catch {
      this.child.kill("SIGKILL");
    }
  }
}

/** A connection's terminals. */
export class Terminals {
  private terminals = new Map<string, Terminal>();
  private next = 0;

  /** Called with each new terminal (the VS Code layer shows it). */
  onCreate?: (terminal: Terminal) => void;

  create(spec: TerminalSpec): Terminal {
    const env: Record<string, string> = { ...process.env } as Record<string, string>;
    for (const { name, value } of spec.env ?? []) env[name] = value;
    const child = spawn(spec.command, spec.args ?? [], {
      cwd: spec.cwd ?? undefined,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const terminal = new Terminal(`vscode-term-${++this.next}`, spec, child);
    this.terminals.set(terminal.id, terminal);
    this.onCreate?.(terminal);
    return terminal;
  }

  get(id: string): Terminal {
    const terminal = this.terminals.get(id);
    if (!terminal) throw new Error(`no terminal ${id}`);
    return terminal;
  }

  /** Kills it if it still runs, and forgets it. */
  release(id: string) {
    this.terminals.get(id)?.kill();
    this.terminals.delete(id);
  }

  /** Kills every command (the connection is going away). */
  releaseAll() {
    for (const id of [...this.terminals.keys()]) this.release(id);
  }

  get size(): number {
    return this.terminals.size;
  }
}
