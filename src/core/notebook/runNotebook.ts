/** Execute every inflab code cell of a notebook in order: what `inflab run` does headless. */
import { createNotebookContext, runCell } from '../engine/engine';
import { MIME } from '../engine/outputs';
import type { CellResult, ProgressUpdate, Services } from '../engine/types';
import type { NbCell, Notebook } from './format';
import { inkAfterRun, inkMarkOf, inkMarks } from './ink';

export const CELL_LANGUAGE = 'inflab';

export interface RunNotebookOptions {
  signal?: AbortSignal;
  onCell?(index: number, result: CellResult): void;
  /** A running cell's progress (a bench point finished, …). */
  onProgress?(index: number, update: ProgressUpdate): void;
}

export interface RunNotebookResult {
  notebook: Notebook;
  /** One per cell that ran (its index in the notebook), in order. */
  results: { index: number; result: CellResult }[];
  /** The signal fired: the cells after the one it stopped were not run and keep what they had. */
  interrupted: boolean;
}

/**
 * Run the code cells in order. On cancel nothing the notebook held is lost: a cell that did not
 * start, or was stopped before it had anything to show, keeps its saved outputs and lastRun byte
 * for byte; a cell stopped part way that still measured something (a bench with finished points)
 * gets those outputs marked partial (output metadata `partial: true`, a note first, lastRun failed).
 */
export async function runNotebook(
  nb: Notebook,
  dir: string,
  services: Services,
  opts: RunNotebookOptions = {},
): Promise<RunNotebookResult> {
  const ctx = createNotebookContext(dir, services);
  const results: RunNotebookResult['results'] = [];
  let order = 0;
  const cells = nb.cells.map((c) => ({ ...c }));
  ctx.ink = inkMarks(cells);
  const aborted = () => opts.signal?.aborted === true;
  for (let i = 0; i < cells.length && !aborted(); i++) {
    const c = cells[i];
    if (c.kind !== 'code' || c.language !== CELL_LANGUAGE) continue;
    const startTime = Date.now();
    const r = await runCell(c.source, i, ctx, { signal: opts.signal, onProgress: (u) => opts.onProgress?.(i, u) });
    const endTime = Date.now();
    results.push({ index: i, result: r });
    opts.onCell?.(i, r);
    const cut = aborted() ? cutShort(r) : undefined;
    if (cut === 'nothing') break; // stopped before it had anything to show: the cell keeps what it had
    if (cut) {
      cells[i] = markPartial(c, r, order + 1, startTime, endTime, cut);
      break;
    }
    // A cell in ink keeps its original outputs in its metadata; a successful run adds a revision.
    const outputs = r.outputs.map((o) => ({ items: o.items }));
    cells[i] = {
      ...(r.ok ? inkAfterRun(c, outputs, endTime) : { ...c, outputs }),
      lastRun: { executionOrder: ++order, success: r.ok, startTime, endTime },
    };
    // The cells after it see this run's ink (inked now, or a revision added).
    const mark = inkMarkOf(cells[i]);
    if (mark) ctx.ink.set(i, mark);
  }
  return { notebook: { ...nb, cells }, results, interrupted: aborted() };
}

/**
 * Whether the cancel cut this cell short: 'nothing' when it has nothing of its own to show (it
 * failed as cancelled, or a sweep stopped before its first point finished), the number of finished
 * points of a sweep stopped part way, or undefined when the cell finished regardless.
 */
function cutShort(r: CellResult): 'nothing' | number | undefined {
  if (r.error?.code === 'cancelled') return 'nothing';
  const stopped = r.values.stopped as { reason?: string } | null | undefined;
  if (!r.ok || stopped?.reason !== 'cancelled') return r.ok ? undefined : 'nothing';
  const points = r.values.points;
  const n = Array.isArray(points) ? points.length : 0;
  return n > 0 ? n : 'nothing';
}

function markPartial(c: NbCell, r: CellResult, order: number, startTime: number, endTime: number, n: number): NbCell {
  const note = `Interrupted: partial — the ${n} point${n === 1 ? '' : 's'} below finished before the run was stopped; the rest did not run.`;
  return {
    ...c,
    outputs: [
      { items: [{ mime: MIME.plain, data: note }], metadata: { partial: true } },
      ...r.outputs.map((o) => ({ items: o.items, metadata: { partial: true } })),
    ],
    lastRun: { executionOrder: order, success: false, startTime, endTime },
  };
}
