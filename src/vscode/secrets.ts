/**
 * API keys per endpoint origin in SecretStorage, and the trust questions (hosts, files) the core
 * asks through Services. A key is stored under `inflab.apiKey:<origin>` (scheme://host:port) and
 * goes only to that origin; a host a notebook names gets no key unless the user set one for it,
 * and the dialog that confirms such a host says whether a key goes along. In Restricted Mode no
 * host is contacted and no file is read.
 */
import * as vscode from 'vscode';
import type { Services } from '../core/engine/types';
import { nodeFiles } from '../core/host/files';
import { parseCell } from '../core/notebook/cellSource';
import { originOf, redactUrl, urlCredentials } from '../core/urls';
import { CELL_LANGUAGE, NOTEBOOK_TYPE } from './serializer';

/** The one key of earlier versions, for every host; migrated to the user's own endpoint if set. */
const LEGACY_KEY = 'inflab.apiKey';
const ORIGINS = 'inflab.apiKeyOrigins';
const secretId = (origin: string) => `inflab.apiKey:${origin}`;

export class EndpointKeys {
  constructor(private readonly context: vscode.ExtensionContext) {}

  origins(): string[] {
    return this.context.globalState.get<string[]>(ORIGINS) ?? [];
  }
  /** The key the user set for this URL's origin, if any. */
  async get(url: string): Promise<string | undefined> {
    const origin = originOf(url);
    if (!origin) return undefined;
    return (await this.context.secrets.get(secretId(origin))) || undefined;
  }
  async set(origin: string, key: string): Promise<void> {
    await this.context.secrets.store(secretId(origin), key);
    await this.context.globalState.update(ORIGINS, [...new Set([...this.origins(), origin])].sort());
  }
  async delete(origin: string): Promise<void> {
    await this.context.secrets.delete(secretId(origin));
    await this.context.globalState.update(
      ORIGINS,
      this.origins().filter((o) => o !== origin),
    );
  }
  /** The single key of earlier versions: moved to the origin of `inflab.endpoint` when that is set. */
  async migrateLegacy(): Promise<void> {
    const old = await this.context.secrets.get(LEGACY_KEY);
    if (!old) return;
    const own = originOf(vscode.workspace.getConfiguration('inflab').get<string>('endpoint') ?? '');
    if (!own) return; // kept (unused) until the user sets keys per endpoint or clears it
    if (!(await this.context.secrets.get(secretId(own)))) await this.set(own, old);
    await this.context.secrets.delete(LEGACY_KEY);
  }
  hasLegacy(): Thenable<string | undefined> {
    return this.context.secrets.get(LEGACY_KEY);
  }
  deleteLegacy(): Thenable<void> {
    return this.context.secrets.delete(LEGACY_KEY);
  }
}

/** Hosts the user named in their own settings need no confirmation; hosts from notebooks do, once. */
function userHosts(): Set<string> {
  const cfg = vscode.workspace.getConfiguration('inflab');
  const hosts = new Set<string>();
  for (const u of [cfg.get<string>('endpoint'), ...(cfg.get<string[]>('trustedEndpoints') ?? [])]) {
    const o = u ? originOf(u) : undefined;
    if (o) hosts.add(new URL(o).host);
  }
  return hosts;
}

/** Endpoint origins the user may mean: their settings, the open notebooks' endpoints, stored keys. */
function knownEndpoints(keys: EndpointKeys): string[] {
  const cfg = vscode.workspace.getConfiguration('inflab');
  const out = new Set<string>();
  const add = (u: unknown) => {
    const o = typeof u === 'string' && !urlCredentials(u).length ? originOf(u) : undefined;
    if (o) out.add(o);
  };
  add(cfg.get<string>('endpoint'));
  for (const u of cfg.get<string[]>('trustedEndpoints') ?? []) add(u);
  for (const nb of vscode.workspace.notebookDocuments) {
    if (nb.notebookType !== NOTEBOOK_TYPE) continue;
    for (const c of nb.getCells()) {
      if (c.document.languageId !== CELL_LANGUAGE) continue;
      const data = parseCell(c.document.getText()).data as Record<string, unknown> | undefined;
      add(data?.endpoint);
    }
  }
  for (const o of keys.origins()) out.add(o);
  return [...out];
}

/** "InfLab: Set API Key": which endpoint, then its key. */
export async function setApiKeyCommand(keys: EndpointKeys): Promise<void> {
  const other = 'Another endpoint…';
  const items = knownEndpoints(keys).map((o) => ({
    label: o,
    description: keys.origins().includes(o) ? 'has a key' : undefined,
  }));
  let origin: string | undefined;
  const pick = items.length
    ? await vscode.window.showQuickPick([...items, { label: other, description: 'type its URL' }], {
        title: 'InfLab: which endpoint is this API key for?',
        placeHolder: 'The key goes only to this endpoint (scheme, host and port)',
        ignoreFocusOut: true,
      })
    : { label: other };
  if (!pick) return;
  if (pick.label === other) {
    const url = await vscode.window.showInputBox({
      title: 'InfLab: endpoint URL for this API key',
      prompt: 'e.g. http://gpu-box:8000 — the key goes only to this scheme, host and port',
      ignoreFocusOut: true,
      validateInput: (v) =>
        urlCredentials(v.trim()).length
          ? 'Write the URL without a user name, password or query: the key goes in the next box'
          : originOf(v.trim())
            ? undefined
            : 'an http(s) URL such as http://localhost:8000',
    });
    if (url === undefined) return;
    origin = originOf(url.trim());
  } else origin = pick.label;
  if (!origin) return;
  const key = await vscode.window.showInputBox({
    title: `InfLab: API key for ${origin}`,
    prompt: `Kept in VS Code secret storage and sent only to ${origin}, as an Authorization header; never written to a notebook.`,
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
  await keys.set(origin, key.trim());
  void vscode.window.showInformationMessage(`InfLab: API key for ${origin} stored in secret storage.`);
}

/** "InfLab: Clear API Key": which endpoint's key to remove. */
export async function clearApiKeyCommand(keys: EndpointKeys): Promise<void> {
  const legacy = 'The single key of an earlier InfLab version (no longer sent anywhere)';
  const items = keys.origins().map((o) => ({ label: o }));
  if (await keys.hasLegacy()) items.push({ label: legacy });
  if (!items.length) {
    void vscode.window.showInformationMessage('InfLab: no API key is stored.');
    return;
  }
  const pick = await vscode.window.showQuickPick(items, { title: 'InfLab: remove the API key of which endpoint?' });
  if (!pick) return;
  if (pick.label === legacy) await keys.deleteLegacy();
  else await keys.delete(pick.label);
  void vscode.window.showInformationMessage(`InfLab: the API key for ${pick.label} was removed from secret storage.`);
}

/** The Services hooks that ask the user or the key store: keys, hosts, files. */
export function trustServices(
  context: vscode.ExtensionContext,
  keys: EndpointKeys,
): Pick<Services, 'getApiKey' | 'confirmHost' | 'readFile' | 'openFile' | 'statFile' | 'listFiles'> {
  const confirmed = new Set<string>(context.globalState.get<string[]>('inflab.confirmedHosts') ?? []);
  const asking = new Map<string, Promise<boolean>>();
  const askingRead = new Map<string, Promise<boolean>>();
  const files = nodeFiles({
    trusted: () => vscode.workspace.isTrusted,
    roots: () =>
      (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath),
    confirm: (abs) => {
      let p = askingRead.get(abs);
      if (!p) {
        const allow = 'Read it';
        p = Promise.resolve(
          vscode.window.showWarningMessage(
            `This notebook reads ${abs}, outside its folder and the workspace. Allow InfLab to read it?`,
            { modal: true },
            allow,
          ),
        )
          .then(
            (pick) => pick === allow,
            () => false,
          )
          .finally(() => askingRead.delete(abs));
        askingRead.set(abs, p);
      }
      return p;
    },
  });
  return {
    getApiKey: (url) => (vscode.workspace.isTrusted ? keys.get(url) : Promise.resolve(undefined)),
    async confirmHost(url: string) {
      if (!vscode.workspace.isTrusted) return false;
      const origin = originOf(url);
      if (!origin) return false;
      const host = new URL(origin).host;
      if (confirmed.has(host) || userHosts().has(host)) return true;
      let p = asking.get(host);
      if (!p) {
        p = (async () => {
          const allow = 'Allow';
          const withKey = !!(await keys.get(origin));
          const keyNote = withKey
            ? `Your API key for ${origin} goes along with the requests.`
            : `No API key goes along (none is set for ${origin}; "InfLab: Set API Key" sets one).`;
          // A dialog that cannot be shown (or is dismissed) is a refusal.
          const pick = await Promise.resolve(
            vscode.window.showWarningMessage(
              `This notebook sends requests to ${redactUrl(host)}. Allow InfLab to contact it? (asked once per host)`,
              { modal: true, detail: keyNote },
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
    ...files,
  };
}
