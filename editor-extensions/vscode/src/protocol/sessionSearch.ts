// The session list's search: the stored sessions of the workspace whose
// events contain every word typed in the picker's filter box. ACP has no
// search, so this runs `dsh sessions search --json` (the same binary and
// environment the chat starts, in the workspace folder) and maps its hits
// to picker items. No `vscode` import.

import { execFile } from "node:child_process";

/** One hit of `dsh sessions search --json` (times in epoch ms). */
export interface SessionHit {
  id: string;
  cwd: string;
  title: string | null;
  created_at: number;
  seq: number;
  event_type: string;
  time: number;
  surface: string;
  snippet: string;
}

/** A picker item for a session: a stored one, or a hit. */
export interface SessionItem {
  label: string;
  description: string;
  detail?: string;
  /** Keep the item while the filter box holds words the label lacks
   * (the search matched the session's text). */
  alwaysShow?: boolean;
  id: string;
}

/** The bidirectional controls: U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069. */
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** Text from a session log made safe to show: control characters (an
 * escape sequence, a carriage return) written out as `\xNN`, and the
 * bidirectional controls (embeddings, overrides, isolates, marks), which
 * could make a hostile title read as another, as `\u{XXXX}`. */
export function shown(text: string | null | undefined): string {
  return (
    (text ?? "")
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`)
      .replace(BIDI, (c) => `\\u{${c.charCodeAt(0).toString(16).padStart(4, "0")}}`)
  );
}

/** `ms` as `YYYY-MM-DD HH:MM` (UTC, as `dsh sessions` prints times). */
export function when(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ");
}

/** The stored sessions of `cwd` holding every word of `query`, best first.
 * Rejects with dsh's message when the search fails; when `signal` aborts,
 * the process is killed and this rejects with an `AbortError` once it has
 * ended. */
export function searchSessions(
  start: { command: string; env?: Record<string, string> },
  cwd: string,
  query: string,
  limit = 20,
  signal?: AbortSignal,
): Promise<SessionHit[]> {
  const args = ["sessions", "search", "--json", "--limit", String(limit), "--", query];
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    // Not execFile's own `signal`: on abort it calls back at once, while
    // the process may still run; killed by hand, the callback comes once
    // the process has ended (and its output closed).
    const kill = () => child.kill();
    const child = execFile(
      start.command,
      args,
      { cwd, env: { ...process.env, ...start.env }, maxBuffer: 16 * 1024 * 1024, timeout: 60_000 },
      (error, stdout, stderr) => {
        signal?.removeEventListener("abort", kill);
        if (signal?.aborted) {
          reject(aborted());
          return;
        }
        if (error) {
          const said = shown(`${stdout}${stderr}`.trim()) || error.message;
          reject(new Error(`dsh sessions search: ${said}`));
          return;
        }
        try {
          resolve(JSON.parse(stdout) as SessionHit[]);
        } catch {
          reject(new Error("dsh sessions search printed no JSON"));
        }
      },
    );
    signal?.addEventListener("abort", kill, { once: true });
  });
}

function aborted(): Error {
  const error = new Error("dsh sessions search: cancelled");
  error.name = "AbortError";
  return error;
}

/** Searches one at a time, the latest wins: a new search aborts the one
 * under way (its process killed) and starts only once that process has
 * ended, so two `dsh sessions search` never race for the index. A search
 * aborted or superseded resolves `undefined` instead of failing: only the
 * latest search's own failure is an error. */
export class LatestSearch<T> {
  private controller: AbortController | undefined;
  private running: Promise<unknown> = Promise.resolve();

  constructor(private readonly search: (query: string, signal: AbortSignal) => Promise<T>) {}

  /** Aborts the search under way, if any. */
  cancel(): void {
    this.controller?.abort();
    this.controller = undefined;
  }

  /** Runs `query` after the search under way (aborted) has ended; its
   * result, or `undefined` when it was aborted or superseded. */
  run(query: string): Promise<T | undefined> {
    this.cancel();
    const controller = new AbortController();
    this.controller = controller;
    const previous = this.running;
    const mine = (async () => {
      await previous;
      if (controller.signal.aborted) return undefined;
      try {
        const result = await this.search(query, controller.signal);
        return controller.signal.aborted ? undefined : result;
      } catch (error) {
        if (controller.signal.aborted) return undefined;
        throw error;
      } finally {
        if (this.controller === controller) this.controller = undefined;
      }
    })();
    this.running = mine.catch(() => undefined);
    return mine;
  }
}

/** The picker's items for search hits: title, time and the matching line. */
export function hitItems(hits: SessionHit[]): SessionItem[] {
  return hits.map((hit) => ({
    label: shown(hit.title ?? hit.id),
    description: when(hit.time),
    detail: shown(hit.snippet),
    alwaysShow: true,
    id: hit.id,
  }));
}

/** The picker's one item when the search failed: dsh's message (already
 * made safe by `searchSessions`); no session (an empty id). */
export function failedItem(message: string): SessionItem {
  return { label: "$(error) The search failed", description: "", detail: message, alwaysShow: true, id: "" };
}
