/**
 * InfLab's extension host side, loaded by the activation shim (activate.ts → dist/extension.js)
 * right after activation or on first use, from its own file (dist/extension-host.js): the
 * controller, the diagnostics, hovers, quick fixes and commands. Everything that computes lives in
 * src/core. The shim registers the serializer (InflabSerializer, exported below) and a stand-in
 * for each command the manifest declares, so activate() resolves without loading this file; the
 * bench client, the audit, the simulator and its server load when a cell of theirs runs, and undici
 * and vega from their own files beside this bundle (scripts/build.mjs).
 */
import * as fs from 'node:fs/promises';
import * as vscode from 'vscode';
import type { Services, Setup } from '../core/engine/types';
import { SimEndpoints } from '../core/sim/endpoints';
import { InflabCompletionProvider } from './completion';
import { InflabController } from './controller';
import { InflabDiagnostics } from './diagnostics';
import { InflabHoverProvider } from './hover';
import { CELL_LANGUAGE } from './serializer';

export { InflabSerializer } from './serializer';

const KEY_SECRET = 'inflab.apiKey';

/** What the extension exports; the VS Code test suite reads it. */
export interface InflabApi {
  controller: InflabController;
  diagnostics: InflabDiagnostics;
}

const sims = new SimEndpoints();

export function activate(context: vscode.ExtensionContext): InflabApi {
  const services = hostServices(context);
  const controller = new InflabController(services);
  const diagnostics = new InflabDiagnostics();
  controller.onDidRunCell((cell, result) => diagnostics.setRunFindings(cell, result.findings));

  context.subscriptions.push(
    controller,
    diagnostics,
    vscode.languages.registerHoverProvider({ language: CELL_LANGUAGE }, new InflabHoverProvider()),
    vscode.languages.registerCompletionItemProvider(
      { language: CELL_LANGUAGE },
      new InflabCompletionProvider(),
      ...InflabCompletionProvider.triggers,
    ),
    vscode.commands.registerCommand('inflab.setApiKey', () => setApiKey(context)),
    vscode.commands.registerCommand('inflab.clearApiKey', async () => {
      await context.secrets.delete(KEY_SECRET);
      void vscode.window.showInformationMessage('InfLab: the API key was removed from secret storage.');
    }),
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
        void vscode.window.showErrorMessage(`InfLab: the simulated endpoint did not start: ${(e as Error).message}`);
      }
    }),
    { dispose: () => void sims.close() },
  );
  return { controller, diagnostics };
}

export function deactivate(): Promise<void> {
  return sims.close();
}

async function setApiKey(context: vscode.ExtensionContext): Promise<void> {
  const key = await vscode.window.showInputBox({
    title: 'InfLab: API key for your endpoints',
    prompt: 'Kept in VS Code secret storage and sent only as an Authorization header; never written to a notebook.',
    password: true,
    ignoreFocusOut: true,
  });
  if (key === undefined) return;
  if (!key.trim()) {
    void vscode.window.showWarningMessage(
      'InfLab: an empty key was not stored. Run "InfLab: Clear API Key" to remove a key.',
    );
    return;
  }
  await context.secrets.store(KEY_SECRET, key.trim());
  void vscode.window.showInformationMessage('InfLab: API key stored in secret storage.');
}

/** Hosts the user named in their own settings need no confirmation; hosts from notebooks do, once. */
function userHosts(): Set<string> {
  const cfg = vscode.workspace.getConfiguration('inflab');
  const hosts = new Set<string>();
  for (const u of [cfg.get<string>('endpoint'), ...(cfg.get<string[]>('trustedEndpoints') ?? [])]) {
    if (!u) continue;
    try {
      hosts.add(new URL(u).host);
    } catch {
      /* not a URL: ignored */
    }
  }
  return hosts;
}

function hostServices(context: vscode.ExtensionContext): Services {
  const confirmed = new Set<string>(context.globalState.get<string[]>('inflab.confirmedHosts') ?? []);
  const asking = new Map<string, Promise<boolean>>();
  return {
    async getApiKey() {
      return (await context.secrets.get(KEY_SECRET)) || process.env.INFLAB_API_KEY || undefined;
    },
    async confirmHost(url: string) {
      if (!vscode.workspace.isTrusted) return false;
      let host: string;
      try {
        host = new URL(url).host;
      } catch {
        return false;
      }
      if (confirmed.has(host) || userHosts().has(host)) return true;
      let p = asking.get(host);
      if (!p) {
        p = (async () => {
          const allow = 'Allow';
          // A dialog that cannot be shown (or is dismissed) is a refusal.
          const pick = await Promise.resolve(
            vscode.window.showWarningMessage(
              `This notebook sends requests to ${host}. Allow InfLab to contact it? (asked once per host)`,
              { modal: true },
              allow,
            ),
          ).catch(() => undefined);
          if (pick === allow) {
            confirmed.add(host);
            await context.globalState.update('inflab.confirmedHosts', [...confirmed]);
            return true;
          }
          return false;
        })().finally(() => asking.delete(host));
        asking.set(host, p);
      }
      return p;
    },
    simEndpoint: (setup?: Setup) => sims.url(setup),
    async readFile(p: string) {
      return fs.readFile(p, 'utf8');
    },
  };
}
