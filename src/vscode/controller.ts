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
import { itemToBytes } from '../core/notebook/format';
import { CELL_LANGUAGE, itemFromBytes, NOTEBOOK_TYPE } from './serializer';

/** Cells that take longer than this get a progress notification with a cancel button. */
const PROGRESS_AFTER_MS = 800;

export interface RunListener {
  (cell: vscode.NotebookCell, result: CellResult): void;
}

export class InflabController implements vscode.Disposable {
  readonly controller: vscode.NotebookController;
  private order = 0;
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

  private async runOne(
    execution: vscode.NotebookCellExecution,
    cell: vscode.NotebookCell,
    index: number,
    nb: NotebookContext,
  ): Promise<boolean | 'cancelled'> {
    execution.executionOrder = ++this.order;
    const start = Date.now();
    execution.start(start);
    await execution.clearOutput();
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
        const outs = u.outputs.map(toVsOutput);
        outputsChain = outputsChain.then(() => execution.replaceOutput(outs));
      }
      if (u.message !== undefined || u.fraction !== undefined) {
        const f = u.fraction !== undefined ? Math.max(0, Math.min(1, u.fraction)) : lastFraction;
        const inc = f > lastFraction ? (f - lastFraction) * 100 : undefined;
        lastFraction = f;
        pendingMessage = u.message ?? pendingMessage;
        progress?.report({ message: u.message, increment: inc });
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
    await outputsChain;
    await execution.replaceOutput(result.outputs.map(toVsOutput));
    const cancelled = abort.signal.aborted;
    execution.end(cancelled ? false : result.ok, Date.now());
    for (const l of this.listeners) l(cell, result);
    return cancelled ? 'cancelled' : result.ok;
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
