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
