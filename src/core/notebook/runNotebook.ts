/** Execute every inflab code cell of a notebook in order: what `inflab run` does headless. */
import { createNotebookContext, runCell } from '../engine/engine';
import type { CellResult, Services } from '../engine/types';
import type { Notebook } from './format';

export const CELL_LANGUAGE = 'inflab';

export interface RunNotebookOptions {
  signal?: AbortSignal;
  onCell?(index: number, result: CellResult): void;
}

export async function runNotebook(
  nb: Notebook,
  dir: string,
  services: Services,
  opts: RunNotebookOptions = {},
): Promise<{ notebook: Notebook; results: CellResult[] }> {
  const ctx = createNotebookContext(dir, services);
  const results: CellResult[] = [];
  let order = 0;
  const cells = nb.cells.map((c) => ({ ...c }));
  for (let i = 0; i < cells.length; i++) {
    const c = cells[i];
    if (c.kind !== 'code' || c.language !== CELL_LANGUAGE) continue;
    const startTime = Date.now();
    const r = await runCell(c.source, i, ctx, { signal: opts.signal });
    const endTime = Date.now();
    cells[i] = {
      ...c,
      outputs: r.outputs.map((o) => ({ items: o.items })),
      lastRun: { executionOrder: ++order, success: r.ok, startTime, endTime },
    };
    results.push(r);
    opts.onCell?.(i, r);
  }
  return { notebook: { ...nb, cells }, results };
}
