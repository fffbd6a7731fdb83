/**
 * The extension's entry point (dist/extension.js): a small shim, so that activate() resolves
 * without compiling or running the rest of the extension (cell schemas, zod, yaml, the engine).
 * It registers the notebook serializer and a stand-in for each command the manifest declares, then
 * loads the rest (extension.ts, bundled as dist/extension-host.js) on the next turn of the event
 * loop, or at once when a notebook is read or written, a command runs, or the API is used:
 * diagnostics as you type start as soon as that file has loaded.
 */
import * as vscode from 'vscode';
import type * as Host from './extension';
import { NOTEBOOK_TYPE } from './ids';

/** The rest of the extension, beside this bundle (scripts/build.mjs keeps the require as it is). */
const HOST_FILE = './extension-host.js';

let host: { api: Host.InflabApi; serializer: vscode.NotebookSerializer; module: typeof Host } | undefined;

export function activate(context: vscode.ExtensionContext): Host.InflabApi {
  const commandIds: string[] = (context.extension?.packageJSON?.contributes?.commands ?? []).map(
    (c: { command: string }) => c.command,
  );
  // Until the rest is loaded, a command loads it (which registers the real command) and runs again.
  const standIns = commandIds.map((id) =>
    vscode.commands.registerCommand(id, (...args: unknown[]) => {
      load();
      return vscode.commands.executeCommand(id, ...args);
    }),
  );
  const load = () => {
    if (!host) {
      for (const d of standIns) d.dispose();
      // A plain require, synchronous: the API's getters and the serializer need the module at once.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const module = require(HOST_FILE) as typeof Host;
      host = { module, api: module.activate(context), serializer: new module.InflabSerializer() };
    }
    return host;
  };
  const timer = setTimeout(load, 0);
  context.subscriptions.push(
    vscode.workspace.registerNotebookSerializer(
      NOTEBOOK_TYPE,
      {
        deserializeNotebook: (content, token) => load().serializer.deserializeNotebook(content, token),
        serializeNotebook: (data, token) => load().serializer.serializeNotebook(data, token),
      },
      { transientOutputs: false, transientCellMetadata: {}, transientDocumentMetadata: {} },
    ),
    { dispose: () => clearTimeout(timer) },
    ...standIns,
  );
  return {
    get controller() {
      return load().api.controller;
    },
    get diagnostics() {
      return load().api.diagnostics;
    },
    get stale() {
      return load().api.stale;
    },
  };
}

export function deactivate(): Promise<void> | undefined {
  return host?.module.deactivate();
}
