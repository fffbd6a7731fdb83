/** The speculative-decoding keys shared by `predict: speculative` and a setup's `speculative:`. */
import { z } from 'zod';
import { findModel, MODELS } from '../catalog';
import { quantity } from '../engine/schema';
import { acceptanceProblem, type Acceptance } from '../physics/speculative';

/** One rate (0.7 or 70%) for every draft token, or per-position rates [0.8, 0.6, …] as vLLM logs them. */
export const acceptanceSchema = z.union([z.number(), quantity('ratio'), z.array(z.number()).min(1)]);

/** An acceptance as the schema parsed it → a rate or a list of rates. */
export function acceptanceOf(a: z.output<typeof acceptanceSchema>): Acceptance {
  return typeof a === 'number' || Array.isArray(a) ? a : a.value;
}

/** The draft: a catalog model id, or {params: N} for a draft known only by its size (bf16 weights). */
export const draftSchema = z.union([z.string(), z.object({ params: z.number().positive() }).strict()]);

/**
 * A setup's `speculative: {k: 4, acceptance: 0.7, draft: qwen3-0.6b}`: the server drafts k tokens
 * a step (num_speculative_tokens). The simulator runs it (acceptance default 0.7; no draft: drafting
 * costs nothing, as an n-gram drafter nearly does) and the decode-floor checks allow for it.
 */
export const speculativeSetupSchema = z
  .object({ k: z.number().int().positive(), acceptance: acceptanceSchema.optional(), draft: draftSchema.optional() })
  .strict()
  .superRefine((v, ctx) => {
    const msg = v.acceptance === undefined ? undefined : acceptanceProblem(v.k, acceptanceOf(v.acceptance));
    if (msg) ctx.addIssue({ code: 'custom', message: msg, path: ['acceptance'] });
    const d = draftProblem(v.draft);
    if (d) ctx.addIssue({ code: 'custom', message: d, path: ['draft'] });
  });

/** A message for a draft id the catalog does not have, saying what to write. */
export function draftProblem(draft: z.output<typeof draftSchema> | undefined): string | undefined {
  if (typeof draft !== 'string' || findModel(draft)) return undefined;
  return `draft: ${draft} is not a model of the catalog (${MODELS.map((m) => m.id).join(', ')}): write a catalog id (draft: qwen3-0.6b), or the draft's size (draft: {params: 600000000})`;
}
