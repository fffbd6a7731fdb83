/**
 * Predictions in ink: "write the prediction down before measuring". A cell whose metadata asks for
 * ink (`"ink": true`) has its outputs frozen the first time it runs, with the time and a hash of the
 * inputs they came from (the cell's source), into its metadata (`ink.original`). Running it again
 * later never touches the original: the run's outputs become the cell's outputs, and a revision
 * (its time, its inputs' hash, whether the inputs changed) is added to `ink.revisions`.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { MIME } from '../engine/outputs';
import type { Fact, Point } from '../facts/schema';
import type { NbCell } from './format';

export const INK_KEY = 'ink';

const frozenOutputs = z.array(
  z.object({ items: z.array(z.object({ mime: z.string(), data: z.unknown() }).strict()) }).passthrough(),
);

const inkSchema = z
  .object({
    original: z.object({ inked_at: z.string(), inputs_hash: z.string(), outputs: frozenOutputs }).strict(),
    revisions: z.array(z.object({ at: z.string(), inputs_hash: z.string(), inputs_changed: z.boolean() }).strict()),
  })
  .strict();

export type Ink = z.infer<typeof inkSchema>;

/** The inputs a prediction came from, as a short hash: the cell's source (setup changes show as a new source's run). */
export function inputsHash(source: string): string {
  return createHash('sha256').update(source).digest('hex').slice(0, 16);
}

/** A cell's ink: undefined (none), 'requested' (`"ink": true`, not run since), the stored record, or what is wrong with it. */
export function inkOf(cell: NbCell): Ink | 'requested' | { problem: string } | undefined {
  const v = cell.metadata?.[INK_KEY];
  if (v === undefined || v === false) return undefined;
  if (v === true) return 'requested';
  const r = inkSchema.safeParse(v);
  if (!r.success)
    return {
      problem: `The cell's "${INK_KEY}" metadata is not an ink record (${r.error.issues[0]?.message ?? 'unreadable'}), so it was left as it is and this run added no revision: restore it as InfLab wrote it, or write "${INK_KEY}": true to ink the cell anew.`,
    };
  return r.data;
}

/**
 * The cell after a run with these outputs: a requested ink is written (the outputs frozen with the
 * time and the inputs' hash), a stored one gains a revision and keeps its original, with a note
 * first among the outputs saying since when the prediction is in ink.
 */
export function inkAfterRun(cell: NbCell, outputs: NonNullable<NbCell['outputs']>, at: number): NbCell {
  const ink = inkOf(cell);
  if (!ink) return { ...cell, outputs };
  if (ink !== 'requested' && 'problem' in ink) return { ...cell, outputs: [note(ink.problem), ...outputs] };
  const when = new Date(at).toISOString();
  const hash = inputsHash(cell.source);
  if (ink === 'requested') {
    const record: Ink = {
      original: { inked_at: when, inputs_hash: hash, outputs: structuredClone(outputs) },
      revisions: [],
    };
    return {
      ...cell,
      metadata: { ...cell.metadata, [INK_KEY]: record },
      outputs: [
        note(`In ink since ${when} (inputs ${hash}): these outputs are frozen in the cell's metadata.`),
        ...outputs,
      ],
    };
  }
  const revisions = [
    ...ink.revisions,
    { at: when, inputs_hash: hash, inputs_changed: hash !== ink.original.inputs_hash },
  ];
  const changed = hash !== ink.original.inputs_hash;
  return {
    ...cell,
    metadata: { ...cell.metadata, [INK_KEY]: { original: ink.original, revisions } },
    outputs: [
      note(
        `Revision ${revisions.length} of a prediction in ink since ${ink.original.inked_at} (inputs ${ink.original.inputs_hash}${changed ? `; this run's inputs ${hash} differ` : ', the same inputs'}): the original outputs are kept in the cell's metadata.`,
      ),
      ...outputs,
    ],
  };
}

function note(text: string): NonNullable<NbCell['outputs']>[number] {
  return { items: [{ mime: MIME.plain, data: text }], metadata: { ink: true } };
}

/**
 * What a run needs to know of a cell's ink (epoch ms): when its original was frozen and, for each
 * revision since, when it ran and whether its inputs differed from the original's. Hosts read it
 * from the cell's metadata (inkMarkOf) into NotebookContext.ink before cells run; compare rows and
 * bench verdicts read it from there, never from a file.
 */
export interface InkMark {
  inkedAt: number;
  revisions: { at: number; inputsChanged: boolean }[];
}

/** A cell's ink as a mark, or undefined when it is not in ink (none, only requested, or unreadable). */
export function inkMarkOf(cell: Pick<NbCell, 'metadata'>): InkMark | undefined {
  const ink = inkOf(cell as NbCell);
  if (!ink || ink === 'requested' || 'problem' in ink) return undefined;
  const inkedAt = Date.parse(ink.original.inked_at);
  if (!Number.isFinite(inkedAt)) return undefined;
  return {
    inkedAt,
    revisions: ink.revisions
      .map((r) => ({ at: Date.parse(r.at), inputsChanged: r.inputs_changed }))
      .filter((r) => Number.isFinite(r.at)),
  };
}

/** The ink marks of a notebook's cells, by cell index: what a host puts in NotebookContext.ink. */
export function inkMarks(cells: readonly Pick<NbCell, 'metadata'>[]): Map<number, InkMark> {
  const out = new Map<number, InkMark>();
  cells.forEach((c, i) => {
    const m = inkMarkOf(c);
    if (m) out.set(i, m);
  });
  return out;
}

/**
 * Whether a prediction was written down before its measurement ran:
 * - `before`: inked before the measurement began, and the outputs compared were made before it too
 *   (or re-made after it from the same inputs);
 * - `revised-after`: inked before, but the outputs compared are a revision with other inputs made after;
 * - `after`: inked after the measurement began;
 * - `inked`: inked, but when the measurement ran is not known (a literal, a record, an older notebook);
 * - `not-inked`.
 */
export type InkState = 'before' | 'revised-after' | 'after' | 'inked' | 'not-inked';

export interface InkStatus {
  state: InkState;
  /** For a table cell: "inked before measurement", "not inked", … */
  words: string;
  /** ISO times, where known. */
  inked_at?: string;
  revised_at?: string;
  measured_at?: string;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** A prediction's ink (undefined: not in ink) against when its measurement began (epoch ms; undefined: not known). */
export function inkStatus(mark: InkMark | undefined, measuredAt: number | undefined): InkStatus {
  if (!mark) return { state: 'not-inked', words: 'not inked' };
  const inked_at = iso(mark.inkedAt);
  if (measuredAt === undefined)
    return { state: 'inked', words: `inked ${inked_at} (measurement time not known)`, inked_at };
  const measured_at = iso(measuredAt);
  if (mark.inkedAt > measuredAt) return { state: 'after', words: 'inked after measurement', inked_at, measured_at };
  // The outputs compared are the latest run's: the original, or the last revision.
  const last = mark.revisions[mark.revisions.length - 1];
  if (last && last.at > measuredAt && last.inputsChanged)
    return {
      state: 'revised-after',
      words: 'inked before measurement, revised after it (other inputs)',
      inked_at,
      revised_at: iso(last.at),
      measured_at,
    };
  return {
    state: 'before',
    words:
      last && last.at > measuredAt
        ? 'inked before measurement (re-run after it, same inputs)'
        : 'inked before measurement',
    inked_at,
    measured_at,
  };
}

/**
 * Whether a cell may be inked, from its source: a prediction (`predict: …`) only, since ink is
 * "written down before measuring". Undefined when it may; else what to do instead.
 */
export function inkRefusal(cell: Pick<NbCell, 'kind' | 'language' | 'source' | 'metadata'>): string | undefined {
  if (cell.kind !== 'code' || cell.language !== 'inflab')
    return 'only an inflab code cell holding a prediction can be inked; this one is not a code cell of the notebook';
  const first = /^\s*([A-Za-z_][\w-]*)\s*:/m.exec(
    cell.source
      .split('\n')
      .filter((l) => l.trim() && !l.trim().startsWith('#'))
      .join('\n'),
  );
  if (first?.[1] !== 'predict')
    return `only a prediction (a "predict: …" cell) can be inked; this cell is ${first ? `"${first[1]}: …"` : 'empty'}: a measurement is not written down in advance`;
  return undefined;
}

/** The cell with its ink requested (`"ink": true`): its next successful run freezes its outputs. */
export function requestInk<C extends Pick<NbCell, 'metadata'>>(cell: C): C {
  return { ...cell, metadata: { ...cell.metadata, [INK_KEY]: true } };
}

/**
 * When a measurement began, from its cell's facts (`measured-at`, a bench point's start): the
 * point's own when one is named and stated, else the earliest. Undefined when the cell states none.
 */
export function measuredAtOf(facts: readonly Fact[], point?: Point): number | undefined {
  const at = facts.filter((f): f is Extract<Fact, { kind: 'measured-at' }> => f.kind === 'measured-at');
  const key = (p: Point | undefined) => JSON.stringify(p ?? {});
  const own = point ? at.filter((f) => key(f.point) === key(point)) : [];
  const from = own.length ? own : at;
  return from.length ? Math.min(...from.map((f) => f.epoch_ms)) : undefined;
}
