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
  /** VS Code's own figures for this extension (ms), from its Startup Performance view. */
  vscode_record?: {
    load_code_ms: number;
    call_activate_ms: number;
    finish_activate_ms: number;
    event: string;
    eager: boolean;
  };
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

/** ms between the extension host's marks around loading the extension's code, if it keeps them. */
function requireMs(id: string): number | undefined {
  const perf = (globalThis as { MonacoPerformanceMarks?: { getMarks(): { name: string; startTime: number }[] } })
    .MonacoPerformanceMarks;
  const marks = perf?.getMarks?.() ?? [];
  const at = (what: string) =>
    marks.find((m) => m.name.toLowerCase() === `code/exthost/${what}/${id}`.toLowerCase())?.startTime;
  const a = at('willLoadExtensionCode');
  const b = at('didLoadExtensionCode');
  return a !== undefined && b !== undefined ? b - a : undefined;
}

export async function measureActivation(id: string, mode: string): Promise<ActivationFigures> {
  const r: ActivationFigures = { mode, vscode: vscode.version };
  const ext = vscode.extensions.getExtension(id);
  if (!ext) r.note = `extension ${id} not found`;
  else if (ext.isActive) r.note = 'already active when the suite started: activate() not timed';
  else {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    try {
      await ext.activate();
      r.activate_call_ms = Math.round((performance.now() - t0) * 10) / 10;
      const c = process.cpuUsage(c0);
      r.activate_cpu_ms = Math.round((c.user + c.system) / 100) / 10;
    } catch (e) {
      r.note = `activate() failed: ${(e as Error).message}`;
    }
  }
  if (ext?.isActive) {
    r.require_ms = requireMs(id);
    const rec = await vscodeRecord(id);
    if (typeof rec === 'string') r.note = [r.note, rec].filter(Boolean).join('; ');
    else r.vscode_record = rec;
  }
  say(`activation: ${JSON.stringify(r)}`);
  return r;
}
