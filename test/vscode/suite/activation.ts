/**
 * Activation time inside the real extension host, measured before any test opens a notebook (so
 * the extension is not yet active): the wall time from `getExtension(id).activate()` to its
 * resolution; the time between the extension host's own performance marks around the require of
 * the extension's main file (code/extHost/willLoadExtensionCode/ID → didLoadExtensionCode/ID); and
 * VS Code's own record of that activation (the "Extension Activation Stats" table of its Startup
 * Performance view: code loading, which also counts loading the extension's localized messages,
 * the activate() call, its resolution). Printed as
 * one line `activation: {json}` for the harness (scripts/test-vscode.mjs writes
 * perf-results/activation.json). A figure, never an assertion: nothing here fails the suite.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import { say } from './runner';

export interface ActivationFigures {
  mode: string;
  vscode: string;
  /** Wall time from activate() to its resolution, in this extension host. */
  activate_call_ms?: number;
  /** CPU time of the extension host process over the same span (user + system, every thread): less swayed by a busy machine than the wall time. */
  activate_cpu_ms?: number;
  /** The extension host's marks around require(main): compiling and running the bundle's top level (1 ms resolution). */
  require_ms?: number;
  /**
   * Where activate_call_ms went, from the extension host's own marks (Date.now(), 1 ms): before =
   * activate() asked → willLoadExtensionCode (the activator, the localized messages); require =
   * willLoad → didLoadExtensionCode; context = didLoad → willActivateExtension (waiting for the
   * ExtensionContext: globalState/workspaceState come from the window over RPC); activate =
   * willActivate → didActivateExtension (our activate() and its promise); after = didActivate →
   * the suite's await resumed.
   */
  spans_ms?: { before: number; require: number; context: number; activate: number; after: number };
  /** Other extensions that became active in the same extension host while ours activated (they share its thread). */
  others_activated?: string[];
  /**
   * From activate() asked to the rest of the extension loaded (dist/extension-host.js, which the shim
   * requires on the next turn of the event loop): when diagnostics as you type, hovers and completions
   * are registered. The suite's timer runs after the shim's, so the time includes that require.
   */
  until_host_ms?: number;
  /** Whether the rest of the extension (dist/extension-host.js) had been required when activate() resolved. */
  host_loaded_at_resolve?: boolean;
  /** VS Code's own figures for this extension (ms), from its Startup Performance view. */
  vscode_record?: {
    load_code_ms: number;
    call_activate_ms: number;
    finish_activate_ms: number;
    event: string;
    eager: boolean;
  };
  /**
   * What the suite waited for before it asked: the other extensions that activate at start-up ('*',
   * onStartupFinished) share the extension host's one thread and the window's RPC with ours, so an
   * activation measured while they load times them too (at load 9 on 2 cores: 126 ms, of which 114 ms
   * waiting for VS Code's ExtensionContext while merge-conflict and debug-auto-launch activated).
   */
  settled?: { waited_ms: number; waited_for: string[]; still_inactive: string[] };
  note?: string;
}

const PERF_URI = vscode.Uri.from({ scheme: 'perf', path: 'Startup Performance' });

/** The row of `id` in the "Extension Activation Stats" markdown table, if the view lists it. */
export function activationRow(text: string, id: string): ActivationFigures['vscode_record'] | undefined {
  const at = text.indexOf('Extension Activation Stats');
  if (at < 0) return undefined;
  for (const line of text.slice(at).split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells[0] === '') cells.shift();
    if (cells[cells.length - 1] === '') cells.pop();
    if (cells[0]?.toLowerCase() !== id.toLowerCase()) continue;
    const [, eager, load, call, finish, event] = cells;
    const n = (s: string | undefined) => Number(s);
    if (![load, call, finish].every((s) => Number.isFinite(n(s)))) return undefined;
    return {
      eager: eager === 'true',
      load_code_ms: n(load),
      call_activate_ms: n(call),
      finish_activate_ms: n(finish),
      event: event ?? '',
    };
  }
  return undefined;
}

async function vscodeRecord(id: string): Promise<ActivationFigures['vscode_record'] | string> {
  try {
    // The view's content provider registers when the view is first shown.
    await vscode.commands.executeCommand('perfview.show');
  } catch (e) {
    return `no Startup Performance view (${(e as Error).message})`;
  }
  try {
    const deadline = Date.now() + 20_000;
    let doc: vscode.TextDocument | undefined;
    while (Date.now() < deadline) {
      doc ??= await Promise.resolve(vscode.workspace.openTextDocument(PERF_URI)).catch(() => undefined);
      const row = doc && activationRow(doc.getText(), id);
      if (row) return row;
      await new Promise((r) => setTimeout(r, 250));
    }
    return doc
      ? 'the Startup Performance view did not list the extension within 20 s'
      : 'the Startup Performance view could not be read';
  } finally {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors').then(undefined, () => undefined);
  }
}

/** The extension host's performance mark `code/extHost/WHAT/ID` (its time, Date.now()), if it keeps them. */
function markAt(id: string, what: string): number | undefined {
  const perf = (globalThis as { MonacoPerformanceMarks?: { getMarks(): { name: string; startTime: number }[] } })
    .MonacoPerformanceMarks;
  const marks = perf?.getMarks?.() ?? [];
  return marks.find((m) => m.name.toLowerCase() === `code/exthost/${what}/${id}`.toLowerCase())?.startTime;
}

/** activate_call_ms split at the extension host's marks (see ActivationFigures.spans_ms). */
function spans(id: string, asked: number, resumed: number): ActivationFigures['spans_ms'] {
  const at = ['willLoadExtensionCode', 'didLoadExtensionCode', 'willActivateExtension', 'didActivateExtension'].map(
    (w) => markAt(id, w),
  );
  if (at.some((t) => t === undefined)) return undefined;
  const [a, b, c, d] = at as number[];
  return { before: a - asked, require: b - a, context: c - b, activate: d - c, after: resumed - d };
}

/** Whether `file` is in the extension host's module cache (it has been required). */
function required(file: string): boolean {
  // The suite is bundled as CommonJS: require is the extension host's own.
  return Object.keys(require.cache).some((k) => path.resolve(k) === path.resolve(file));
}

const STARTUP_EVENTS = new Set(['*', 'onStartupFinished']);

/**
 * Waits until every other extension that activates at start-up is active (at most `deadlineMs`), then
 * for the extension host's event loop to be idle (a 50 ms timer late by under 10 ms, three times in a row).
 */
async function startupSettled(id: string, deadlineMs = 20_000): Promise<NonNullable<ActivationFigures['settled']>> {
  const t0 = Date.now();
  const eager = vscode.extensions.all.filter(
    (e) =>
      e.id.toLowerCase() !== id.toLowerCase() &&
      ((e.packageJSON?.activationEvents ?? []) as string[]).some((ev) => STARTUP_EVENTS.has(ev)),
  );
  const waitedFor = eager.filter((e) => !e.isActive).map((e) => e.id);
  while (Date.now() - t0 < deadlineMs && eager.some((e) => !e.isActive)) await new Promise((r) => setTimeout(r, 100));
  let quiet = 0;
  while (Date.now() - t0 < deadlineMs && quiet < 3) {
    const t = performance.now();
    await new Promise((r) => setTimeout(r, 50));
    quiet = performance.now() - t < 60 ? quiet + 1 : 0;
  }
  return {
    waited_ms: Date.now() - t0,
    waited_for: waitedFor,
    still_inactive: eager.filter((e) => !e.isActive).map((e) => e.id),
  };
}

export async function measureActivation(id: string, mode: string): Promise<ActivationFigures> {
  const r: ActivationFigures = { mode, vscode: vscode.version };
  const ext = vscode.extensions.getExtension(id);
  if (ext && !ext.isActive) r.settled = await startupSettled(id);
  if (!ext) r.note = `extension ${id} not found`;
  else if (ext.isActive)
    r.note = `already active ${r.settled ? 'after the start-up wait' : 'when the suite started'}: activate() not timed`;
  else {
    const activeBefore = new Set(vscode.extensions.all.filter((e) => e.isActive).map((e) => e.id));
    const c0 = process.cpuUsage();
    const asked = Date.now();
    const t0 = performance.now();
    try {
      await ext.activate();
      r.activate_call_ms = Math.round((performance.now() - t0) * 10) / 10;
      const resumed = Date.now();
      const c = process.cpuUsage(c0);
      r.activate_cpu_ms = Math.round((c.user + c.system) / 100) / 10;
      r.host_loaded_at_resolve = required(path.join(ext.extensionPath, 'dist', 'extension-host.js'));
      r.spans_ms = spans(id, asked, resumed);
      await new Promise((res) => setTimeout(res, 0));
      const hostFile = path.join(ext.extensionPath, 'dist', 'extension-host.js');
      if (required(hostFile)) r.until_host_ms = Math.round((performance.now() - t0) * 10) / 10;
      r.others_activated = vscode.extensions.all
        .filter((e) => e.isActive && e.id !== ext.id && !activeBefore.has(e.id))
        .map((e) => e.id);
    } catch (e) {
      r.note = `activate() failed: ${(e as Error).message}`;
    }
  }
  if (ext?.isActive) {
    const [a, b] = [markAt(id, 'willLoadExtensionCode'), markAt(id, 'didLoadExtensionCode')];
    if (a !== undefined && b !== undefined) r.require_ms = b - a;
    const rec = await vscodeRecord(id);
    if (typeof rec === 'string') r.note = [r.note, rec].filter(Boolean).join('; ');
    else r.vscode_record = rec;
  }
  say(`activation: ${JSON.stringify(r)}`);
  return r;
}
