/**
 * The notebook controller: runs inflab cells in order through the engine. The notebook context is
 * rebuilt from the cells above each run (setups re-prepared, earlier results restored from their
 * saved outputs), so running one cell after reopening a notebook sees the same numbers the whole
 * notebook would. Cancellation, execution order, duration, live outputs and a progress bar are the
 * adapter's business; computing is the engine's.
 */
import * as vscode from 'vscode';
import { createNotebookContext, loadCellFiles, restoreResult, runCell } from '../core/engine/engine';
import { MIME } from '../core/engine/outputs';
import type { CellOutput, CellResult, NotebookContext, ProgressUpdate, Services } from '../core/engine/types';
import type { Finding } from '../core/findings';
import { setupAt } from '../core/hover';
import { itemToBytes } from '../core/notebook/format';
import { inkMarkOf, inkMarks } from '../core/notebook/ink';
import { inkAfterVsRun } from './ink';
import { inflabLog } from './log';
import { CELL_LANGUAGE, itemFromBytes, NOTEBOOK_TYPE } from './serializer';

/** Cells that take longer than this get a progress notification with a cancel button. */
const PROGRESS_AFTER_MS = 800;

export interface RunListener {
  (cell: vscode.NotebookCell, result: CellResult): void;
}

export class InflabController implements vscode.Disposable {
  readonly controller: vscode.NotebookController;
  /** Execution order per notebook (by URI), continuing from the highest one the notebook shows. */
  private readonly orders = new Map<string, number>();
  /** The setup in force when each cell last ran here (by cell document URI), for stale marks. */
  readonly ranWith = new Map<string, string>();
  private readonly stale = new vscode.EventEmitter<void>();
  readonly onDidChangeRuns = this.stale.event;
  private readonly listeners: RunListener[] = [];
  /** How many run requests Restricted Mode refused (read by the test suite through the API). */
  restrictedRefusals = 0;

  constructor(private readonly services: Services) {
    this.controller = vscode.notebooks.createNotebookController('inflab-controller', NOTEBOOK_TYPE, 'InfLab');
    this.controller.supportedLanguages = [CELL_LANGUAGE];
    this.controller.supportsExecutionOrder = true;
    this.controller.description = 'Runs inflab cells: predict, bench, audit, record, compare';
    this.controller.executeHandler = (cells, notebook) => this.execute(cells, notebook);
  }

  onDidRunCell(l: RunListener): void {
    this.listeners.push(l);
  }

  dispose(): void {
    this.controller.dispose();
  }

  private async execute(cells: vscode.NotebookCell[], notebook: vscode.NotebookDocument): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      this.restrictedRefusals++;
      void vscode.window.showWarningMessage(
        'InfLab runs no cell in Restricted Mode: cells can send requests to the endpoints a notebook names. Trust this workspace (Manage Workspace Trust) to run them; the notebook stays readable meanwhile.',
      );
      return;
    }
    const toRun = new Set(
      cells
        .filter((c) => c.kind === vscode.NotebookCellKind.Code && c.document.languageId === CELL_LANGUAGE)
        .map((c) => c.index),
    );
    if (!toRun.size) return;
    const last = Math.max(...toRun);
    const dir =
      notebook.uri.scheme === 'file' || notebook.uri.scheme === 'vscode-remote'
        ? vscode.Uri.joinPath(notebook.uri, '..').fsPath
        : process.cwd();
    const nb = createNotebookContext(dir, this.services);
    // Which cells are in ink, as data the compare rows and bench verdicts read.
    nb.ink = inkMarks(notebook.getCells().map((c) => ({ metadata: c.metadata })));
    // Pending executions show a clock on every queued cell until its turn.
    const executions = new Map<number, vscode.NotebookCellExecution>();
    for (const i of [...toRun].sort((a, b) => a - b))
      executions.set(i, this.controller.createNotebookCellExecution(notebook.cellAt(i)));
    let cancelled = false;
    for (let i = 0; i <= last; i++) {
      const cell = notebook.cellAt(i);
      if (cell.kind !== vscode.NotebookCellKind.Code || cell.document.languageId !== CELL_LANGUAGE) continue;
      const execution = executions.get(i);
      if (!execution) {
        await loadCellFiles([cell.document.getText()], nb, 'run');
        restoreResult(cell.document.getText(), i, cellOutputs(cell), nb);
        continue;
      }
      if (cancelled || execution.token.isCancellationRequested) {
        cancelled = true;
        execution.end(undefined);
        continue;
      }
      const ok = await this.runOne(execution, cell, i, nb);
      if (ok === 'cancelled') cancelled = true;
    }
  }

  private nextOrder(notebook: vscode.NotebookDocument): number {
    const key = notebook.uri.toString();
    const seen = Math.max(0, ...notebook.getCells().map((c) => c.executionSummary?.executionOrder ?? 0));
    const n = Math.max(this.orders.get(key) ?? 0, seen) + 1;
    this.orders.set(key, n);
    return n;
  }

  private async runOne(
    execution: vscode.NotebookCellExecution,
    cell: vscode.NotebookCell,
    index: number,
    nb: NotebookContext,
  ): Promise<boolean | 'cancelled'> {
    execution.executionOrder = this.nextOrder(cell.notebook);
    const start = Date.now();
    execution.start(start);
    await execution.clearOutput();
    // From the first moment the cell says it is running; the progress message replaces it until
    // the first real output arrives (a long bench point shows its progress here, not only in a corner).
    const title = cellTitle(cell);
    let placeholder = true;
    let grew = false;
    let lastShown = 0;
    const showPlaceholder = (message?: string, fraction?: number) => {
      if (!placeholder) return;
      const pct = fraction !== undefined && fraction > 0 ? ` (${Math.round(fraction * 100)}%)` : '';
      const text = `Running ${title}…${message ? `\n${message}${pct}` : pct}`;
      return execution.replaceOutput(new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.text(text)]));
    };
    if (/^\s*(bench|audit)\s*:/m.test(cell.document.getText())) await showPlaceholder();
    const abort = new AbortController();
    const sub = execution.token.onCancellationRequested(() => abort.abort());
    let progress: { report(u: { message?: string; increment?: number }): void } | undefined;
    let lastFraction = 0;
    let pendingMessage: string | undefined;
    let progressDone: () => void = () => {};
    const finished = new Promise<void>((r) => (progressDone = r));
    // A progress notification only for cells that take a while; it has a cancel button.
    const timer = setTimeout(() => {
      void vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `InfLab: ${cellTitle(cell)}`, cancellable: true },
        async (p, token) => {
          progress = p;
          if (pendingMessage || lastFraction) p.report({ message: pendingMessage, increment: lastFraction * 100 });
          token.onCancellationRequested(() => abort.abort());
          await finished;
        },
      );
    }, PROGRESS_AFTER_MS);
    let outputsChain: Thenable<void> = Promise.resolve();
    const onProgress = (u: ProgressUpdate) => {
      if (u.outputs) {
        placeholder = false;
        grew = true;
        const outs = u.outputs.map(toVsOutput);
        outputsChain = outputsChain.then(() => execution.replaceOutput(outs));
      }
      if (u.message !== undefined || u.fraction !== undefined) {
        const f = u.fraction !== undefined ? Math.max(0, Math.min(1, u.fraction)) : lastFraction;
        const inc = f > lastFraction ? (f - lastFraction) * 100 : undefined;
        lastFraction = f;
        pendingMessage = u.message ?? pendingMessage;
        progress?.report({ message: u.message, increment: inc });
        if (placeholder && Date.now() - lastShown > 400) {
          lastShown = Date.now();
          const m = pendingMessage;
          outputsChain = outputsChain.then(() => showPlaceholder(m, f));
        }
      }
    };
    let result: CellResult;
    try {
      result = await runCell(cell.document.getText(), index, nb, { signal: abort.signal, onProgress });
    } finally {
      clearTimeout(timer);
      progressDone();
      sub.dispose();
    }
    placeholder = false;
    await outputsChain;
    const cancelled = abort.signal.aborted;
    const end = Date.now();
    // A prediction in ink (or asked for it) that ran: its original frozen, or a revision added (core/notebook/ink.ts).
    const inked = result.ok && !cancelled ? inkAfterVsRun(cell, result.outputs, end) : undefined;
    // A cancel reads as a cancel: no error output and no failed mark; a bench keeps the points it finished.
    const outputs =
      cancelled && result.error?.code === 'cancelled'
        ? [
            new vscode.NotebookCellOutput([
              vscode.NotebookCellOutputItem.text(
                `Cancelled after ${((Date.now() - start) / 1000).toFixed(1)} s: nothing finished to show. Run the cell again to measure.`,
              ),
            ]),
          ]
        : (inked?.outputs ?? result.outputs).map(toVsOutput);
    // Outputs replaced while the cell ran are cleared before the final ones go in, so that the
    // window lays the final outputs out afresh (replaced in place, plots were placed on top of each other).
    if (grew) await execution.clearOutput();
    await execution.replaceOutput(outputs);
    execution.end(cancelled ? undefined : result.ok, Date.now());
    if (inked) {
      const edit = new vscode.WorkspaceEdit();
      edit.set(cell.notebook.uri, [vscode.NotebookEdit.updateCellMetadata(cell.index, inked.metadata)]);
      if (await vscode.workspace.applyEdit(edit)) {
        const mark = inkMarkOf({ metadata: inked.metadata });
        if (mark) nb.ink.set(index, mark);
      } else inflabLog().warn(`${cell.notebook.uri.fsPath}: ${title}: its ink could not be written to the cell`);
    }
    if (!result.ok && !cancelled)
      inflabLog().warn(`${cell.notebook.uri.fsPath}: ${title} failed: ${result.error?.message ?? 'unknown error'}`);
    this.ranWith.set(cell.document.uri.toString(), this.setupKey(cell));
    this.stale.fire();
    for (const l of this.listeners) l(cell, result);
    return cancelled ? 'cancelled' : result.ok;
  }

  /** The setup in force for a cell, as text: what a stale mark compares. */
  setupKey(cell: vscode.NotebookCell): string {
    const cells = cell.notebook.getCells();
    const sources = cells.map((c) =>
      c.kind === vscode.NotebookCellKind.Code && c.document.languageId === CELL_LANGUAGE ? c.document.getText() : '',
    );
    try {
      const s = setupAt(sources, cell.index, vscode.Uri.joinPath(cell.notebook.uri, '..').fsPath);
      return s ? JSON.stringify({ ...s, cellIndex: undefined }) : '';
    } catch {
      return '';
    }
  }
}

function cellTitle(cell: vscode.NotebookCell): string {
  const first =
    cell.document
      .getText()
      .split('\n')
      .find((l) => l.trim() && !l.trim().startsWith('#')) ?? '';
  return `cell ${cell.index + 1} (${first.trim().slice(0, 60)})`;
}

/** The engine's outputs as VS Code outputs; the error item goes through VS Code's own error item. */
export function toVsOutput(o: CellOutput): vscode.NotebookCellOutput {
  return new vscode.NotebookCellOutput(
    o.items.map((it) => {
      if (it.mime === MIME.error) {
        const d = (it.data ?? {}) as { name?: string; message?: string };
        return vscode.NotebookCellOutputItem.error({ name: d.name ?? 'InfLab', message: d.message ?? String(it.data) });
      }
      return new vscode.NotebookCellOutputItem(itemToBytes(it), it.mime);
    }),
  );
}

export function cellOutputs(cell: vscode.NotebookCell): CellOutput[] {
  return cell.outputs.map((o) => ({ items: o.items.map((it) => itemFromBytes(it.mime, it.data)) }));
}

/** Findings saved in a cell's outputs by its last run. */
export function findingsOfOutputs(cell: vscode.NotebookCell): Finding[] {
  for (const o of cell.outputs) {
    for (const it of o.items) {
      if (it.mime === MIME.findings) {
        const d = itemFromBytes(it.mime, it.data).data;
        if (Array.isArray(d)) return d as Finding[];
      }
    }
  }
  return [];
}
