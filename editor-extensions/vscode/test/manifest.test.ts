// The packaged manifest and the code agree: the built extension, loaded
// with a stub of the `vscode` module (VS Code itself cannot be downloaded
// here), registers on activation exactly the commands, the view and the
// diff scheme package.json contributes; `deactivate` with no dsh started
// resolves.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import { root, withExtension } from "./stubbedVscode";

test("activation registers what package.json contributes", async () => {
  const manifest = JSON.parse(readFileSync(resolve(root, "package.json"), "utf8"));
  const registered = { commands: [] as string[], views: [] as string[], schemes: [] as string[] };
  const disposable = { dispose() {} };
  const stub = {
    StatusBarAlignment: { Left: 1, Right: 2 },
    window: {
      createStatusBarItem: () => ({ ...disposable, show() {}, text: "", command: "" }),
      createOutputChannel: () => ({ ...disposable, appendLine() {} }),
      registerWebviewViewProvider: (id: string) => {
        registered.views.push(id);
        return disposable;
      },
    },
    workspace: {
      registerTextDocumentContentProvider: (scheme: string) => {
        registered.schemes.push(scheme);
        return disposable;
      },
      getConfiguration: () => ({ get: () => undefined, inspect: () => undefined }),
      workspaceFolders: undefined,
    },
    commands: {
      registerCommand: (id: string) => {
        registered.commands.push(id);
        return disposable;
      },
    },
  };
  await withExtension(stub, async (extension) => {
    const context = { subscriptions: [] as unknown[], extensionUri: {}, secrets: { get: async () => undefined } };
    extension.activate(context);
    assert.deepEqual(
      registered.commands.sort(),
      manifest.contributes.commands.map((c: { command: string }) => c.command).sort(),
    );
    assert.deepEqual(registered.views, manifest.contributes.views.dsh.map((v: { id: string }) => v.id));
    assert.deepEqual(registered.schemes, ["dsh-diff"]);
    assert.ok(context.subscriptions.length >= registered.commands.length + 3);
    await extension.deactivate();
  });
});
