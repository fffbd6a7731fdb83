/**
 * Ink one prediction now (`inflab ink NOTEBOOK --cell N`): the cell is asked for ink and run alone,
 * with the cells above it restored from their saved outputs (their setups registered, their numbers
 * read back), as the editor runs one cell: no bench above is run again and no other cell's outputs
 * change. Its outputs are then frozen with the time and the inputs' hash (ink.ts). A cell already in
 * ink is left as it is (a re-run with `inflab run` adds a revision); a run that fails inks nothing.
 */
import { createNotebookContext, loadCellFiles, prepareCell, restoreResult, runCell } from '../engine/engine';
import type { CellResult, Services } from '../engine/types';
import type { Notebook } from './format';
import { inkAfterRun, inkMarks, inkOf, inkRefusal, requestInk } from './ink';
import { CELL_LANGUAGE } from './runNotebook';

export type InkCellOutcome =
  | { status: 'inked'; notebook: Notebook; result: CellResult; at: string }
  | { status: 'already'; message: string }
  | { status: 'refused'; message: string }
  | { status: 'failed'; message: string; result: CellResult };

/**
 * The index of the cell `ref` names: a number is the index `inflab run` prints (`# [N]`, every cell
 * counted from 0, markdown too), else the cell's `name:`. Throws a message listing what there is.
 */
export function cellIndexOf(nb: Notebook, ref: string): number {
  const code = nb.cells.map((c, i) => ({ c, i })).filter(({ c }) => c.kind === 'code' && c.language === CELL_LANGUAGE);
  if (/^\d+$/.test(ref.trim())) {
    const i = Number(ref);
    if (i < nb.cells.length) return i;
    throw new Error(
      `there is no cell ${i}: the notebook has ${nb.cells.length} cells, numbered from 0 as "inflab run" prints them ([0] … [${nb.cells.length - 1}])`,
    );
  }
  // Names as the engine gives them (a `name:` key; a record's, a compare's and a setup's own value).
  const ctx = createNotebookContext('.');
  const named = code
    .map(({ c, i }) => ({ i, name: prepareCell(c.source, i, ctx).name }))
    .filter((x) => x.name !== undefined);
  const hits = named.filter((x) => x.name === ref);
  if (hits.length === 1) return hits[0].i;
  if (hits.length > 1)
    throw new Error(
      `${hits.length} cells are named "${ref}" (${hits.map((h) => `[${h.i}]`).join(', ')}): give the number`,
    );
  throw new Error(
    `no cell is named "${ref}"${named.length ? `; named cells: ${named.map((x) => `"${x.name}" [${x.i}]`).join(', ')}` : ''}; or give the cell's number as "inflab run" prints it`,
  );
}

/** Ink cell `index` of `nb` (in `dir`): see the module's comment. Never changes `nb`. */
export async function inkCell(
  nb: Notebook,
  index: number,
  dir: string,
  services: Services,
  opts: { signal?: AbortSignal; now?: () => number } = {},
): Promise<InkCellOutcome> {
  const cell = nb.cells[index];
  if (!cell) return { status: 'refused', message: `there is no cell ${index}` };
  const refusal = inkRefusal(cell);
  if (refusal) return { status: 'refused', message: `cell [${index}]: ${refusal}` };
  const ink = inkOf(cell);
  if (ink && ink !== 'requested') {
    if ('problem' in ink) return { status: 'refused', message: `cell [${index}]: ${ink.problem}` };
    return {
      status: 'already',
      message: `cell [${index}] is in ink since ${ink.original.inked_at} (${ink.revisions.length} revision${ink.revisions.length === 1 ? '' : 's'}); nothing was changed. Running it again (inflab run) adds a revision and keeps the original.`,
    };
  }
  const ctx = createNotebookContext(dir, services);
  ctx.ink = inkMarks(nb.cells);
  for (let i = 0; i < index; i++) {
    const c = nb.cells[i];
    if (c.kind !== 'code' || c.language !== CELL_LANGUAGE) continue;
    await loadCellFiles([c.source], ctx, 'run', opts.signal);
    restoreResult(
      c.source,
      i,
      (c.outputs ?? []).map((o) => ({ items: o.items })),
      ctx,
    );
  }
  const now = opts.now ?? Date.now;
  const startTime = now();
  const result = await runCell(cell.source, index, ctx, { signal: opts.signal });
  const endTime = now();
  if (!result.ok)
    return {
      status: 'failed',
      message: `cell [${index}] failed, so nothing was inked and the notebook was not changed: ${result.error?.message ?? 'unknown error'}`,
      result,
    };
  const inked = inkAfterRun(
    requestInk(cell),
    result.outputs.map((o) => ({ items: o.items })),
    endTime,
  );
  const order = Math.max(0, ...nb.cells.map((c) => c.lastRun?.executionOrder ?? 0)) + 1;
  const cells = nb.cells.map((c, i) =>
    i === index ? { ...inked, lastRun: { executionOrder: order, success: true, startTime, endTime } } : c,
  );
  return { status: 'inked', notebook: { ...nb, cells }, result, at: new Date(endTime).toISOString() };
}
