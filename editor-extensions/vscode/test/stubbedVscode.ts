// The extension tests' one way in: the built extension loaded as VS Code
// loads it, with a stub of the `vscode` module in its place (VS Code itself
// cannot be downloaded here).

import Module from "node:module";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

/** The extension's package directory. */
export const root = resolve(__dirname, "..", "..");

/** What the extension's main module exports. */
export type Extension = {
  activate(context: unknown): void;
  deactivate(): Promise<void>;
};

/**
 * Loads the extension with `require("vscode")` answered by `stub`, runs
 * `body` with it, and puts the real loader back however `body` ends.
 */
export async function withExtension<T>(stub: unknown, body: (extension: Extension) => Promise<T>): Promise<T> {
  const manifest = JSON.parse(readFileSync(resolve(root, "package.json"), "utf8"));
  type Loader = { _load: (request: string, ...rest: unknown[]) => unknown };
  const loader = Module as unknown as Loader;
  const original = loader._load;
  loader._load = (request: string, ...rest: unknown[]) =>
    request === "vscode" ? stub : original.call(Module, request, ...rest);
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded as VS Code loads it, under the stub
    const extension = require(resolve(root, manifest.main)) as Extension;
    return await body(extension);
  } finally {
    loader._load = original;
  }
}
