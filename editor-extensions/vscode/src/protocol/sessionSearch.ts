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

/** Text from a session log made safe to show: control characters (an
 * escape sequence, a carriage return) written out as `\xNN`. */
export function shown(text: string | null | undefined): string {
  // eslint-disable-next-line no-control-regex
  return (text ?? "").replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/** `ms` as `YYYY-MM-DD HH:MM` (UTC, as `dsh sessions` prints times). */
export function when(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ");
}

/** The stored sessions of `cwd` holding every word of `query`, best first.
 * Rejects with dsh's message when the search fails. */
export function searchSessions(
  start: { command: string; env?: Record<string, string> },
  cwd: string,
  query: string,
  limit = 20,
): Promise<SessionHit[]> {
  const args = ["sessions", "search", "--json", "--limit", String(limit), "--", query];
  return new Promise((resolve, reject) => {
    execFile(
      start.command,
      args,
      { cwd, env: { ...process.env, ...start.env }, maxBuffer: 16 * 1024 * 1024, timeout: 60_000 },
      (error, stdout, stderr) => {
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
  });
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
