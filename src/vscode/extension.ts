/**
 * InfLab's extension host side, loaded by the activation shim (activate.ts → dist/extension.js)
 * right after activation or on first use, from its own file (dist/extension-host.js): the
 * controller, the diagnostics, hovers, quick fixes and commands. Everything that computes lives in
 * src/core. The shim registers the serializer (InflabSerializer, exported below) and a stand-in
 * for each command the manifest declares, so activate() resolves without loading this file; the
 * bench client, the audit, the simulator and its server load when a cell of theirs runs, and undici
 * and vega from their own files beside this bundle (scripts/build.mjs).
 */
import * as vscode from 'vscode';
import type { Services, Setup } from '../core/engine/types';
import { settingsFromEnv } from '../core/host/settings';
import { SimEndpoints } from '../core/sim/endpoints';
import { exportNotebook, newNotebook } from './commands';
import { InflabCompletionProvider } from './completion';
import { InflabController } from './controller';
import { InflabDiagnostics } from './diagnostics';
import { InflabHoverProvider } from './hover';
import { inkCellCommand } from './ink';
import { inflabLog } from './log';
import { StaleMarks } from './stale';
import { CELL_LANGUAGE } from './serializer';

export { InflabSerializer } from './serializer';
import { clearApiKeyCommand, EndpointKeys, setApiKeyCommand, trustServices } from './secrets';

/** What the extension exports; the VS Code test suite reads it. */
export interface InflabApi {
  controller: InflabController;
  diagnostics: InflabDiagnostics;
  stale?: StaleMarks;
}

// What has no configuration key comes from the editor's environment (the test suites set it).
const settings = settingsFromEnv(process.env);
const sims = new SimEndpoints(settings.simSpeed);

export function activate(context: vscode.ExtensionContext): InflabApi {
  const keys = new EndpointKeys(context);
  void keys.migrateLegacy();
  const services = hostServices(context, keys);
  const controller = new InflabController(services);
  const diagnostics = new InflabDiagnostics(services);
  controller.onDidRunCell((cell, result) => diagnostics.setRunFindings(cell, result.findings));

  const stale = new StaleMarks(controller);
  context.subscriptions.push(
    controller,
    diagnostics,
    stale,
    vscode.languages.registerHoverProvider({ language: CELL_LANGUAGE }, new InflabHoverProvider(services)),
    vscode.languages.registerCompletionItemProvider(
      { language: CELL_LANGUAGE },
      new InflabCompletionProvider(),
      ...InflabCompletionProvider.triggers,
    ),
    vscode.commands.registerCommand('inflab.newNotebook', async (template?: string, dir?: string) => {
      try {
        return await newNotebook(context, typeof template === 'string' ? template : undefined, dir);
      } catch (e) {
        inflabLog().error(`New Lab Notebook: ${(e as Error).message}`);
        void vscode.window.showErrorMessage(`InfLab: ${(e as Error).message}`);
        return undefined;
      }
    }),
    vscode.commands.registerCommand('inflab.exportHtml', (uri?: vscode.Uri, out?: string) =>
      exportNotebook('html', uri instanceof vscode.Uri ? uri : undefined, out),
    ),
    vscode.commands.registerCommand('inflab.exportMarkdown', (uri?: vscode.Uri, out?: string) =>
      exportNotebook('md', uri instanceof vscode.Uri ? uri : undefined, out),
    ),
    vscode.commands.registerCommand('inflab.showOutput', () => inflabLog().show(true)),
    vscode.commands.registerCommand('inflab.inkCell', (cell?: unknown) => inkCellCommand(cell)),
    vscode.commands.registerCommand('inflab.setApiKey', () => setApiKeyCommand(keys)),
    vscode.commands.registerCommand('inflab.clearApiKey', () => clearApiKeyCommand(keys)),
    vscode.commands.registerCommand('inflab.startSim', async () => {
      if (!vscode.workspace.isTrusted) {
        void vscode.window.showWarningMessage(
          'InfLab starts no simulated endpoint in Restricted Mode. Trust the workspace first.',
        );
        return;
      }
      try {
        const url = await services.simEndpoint!(undefined);
        void vscode.window.showInformationMessage(
          `InfLab: simulated endpoint running at ${url} (write "endpoint: sim" in a setup cell to use it).`,
        );
      } catch (e) {
        inflabLog().error(`the simulated endpoint did not start: ${(e as Error).stack ?? e}`);
        void vscode.window.showErrorMessage(`InfLab: the simulated endpoint did not start: ${(e as Error).message}`);
      }
    }),
    { dispose: () => void sims.close() },
  );
  return { controller, diagnostics, stale };
}

export function deactivate(): Promise<void> {
  return sims.close();
}

function hostServices(context: vscode.ExtensionContext, keys: EndpointKeys): Services {
  return {
    ...trustServices(context, keys),
    simEndpoint: (setup?: Setup) => sims.url(setup),
    settings,
  };
}
