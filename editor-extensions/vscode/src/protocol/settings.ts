// The settings that decide what the extension runs and where dsh sends
// data — `dsh.path` (the binary) and `dsh.env` (its environment, e.g.
// DEEPSEEK_BASE_URL, which receives the API key and every prompt) — are
// taken from the user's own settings (or the remote machine's) only. A
// repository's `.vscode/settings.json` or a `.code-workspace` file must not
// choose them: package.json declares them `"scope": "machine"`, and this
// reads them through `inspect()`, keeping only the user (global) value or
// the default, so a workspace value is ignored even if the manifest were
// wrong. No `vscode` import: the VS Code layer passes its configuration.

/** The part of `vscode.WorkspaceConfiguration` read here. */
export interface Inspectable {
  inspect<T>(section: string):
    | {
        defaultValue?: T;
        globalValue?: T;
        workspaceValue?: T;
        workspaceFolderValue?: T;
      }
    | undefined;
}

/** The `dsh.*` settings read only from user (machine) settings. */
export const MACHINE_SETTINGS = ["path", "env"] as const;

/** `section`'s user value, else its default; never a workspace's or a
 * workspace folder's value. */
export function userSetting<T>(config: Inspectable, section: string): T | undefined {
  const info = config.inspect<T>(section);
  return info?.globalValue ?? info?.defaultValue;
}

/** How to start dsh: the binary (`dsh.path`, else `dsh` from PATH) and the
 * extra environment (`dsh.env`, string values only), from user settings. */
export function launchSettings(config: Inspectable): { command: string; env: Record<string, string> } {
  const path = userSetting<unknown>(config, "path");
  const extra = userSetting<unknown>(config, "env");
  const env: Record<string, string> = {};
  if (extra && typeof extra === "object" && !Array.isArray(extra)) {
    for (const [name, value] of Object.entries(extra)) {
      if (typeof value === "string") env[name] = value;
    }
  }
  return { command: typeof path === "string" && path !== "" ? path : "dsh", env };
}
