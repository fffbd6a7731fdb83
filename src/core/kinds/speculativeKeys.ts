/** The speculative-decoding keys shared by `predict: speculative` and a setup's `speculative:`. */
import { z } from 'zod';
import { quantity } from '../engine/schema';
import { acceptanceProblem, type Acceptance } from '../physics/speculative';

/** One rate (0.7 or 70%) for every draft token, or per-position rates [0.8, 0.6, …] as vLLM logs them. */
export const acceptanceSchema = z.union([z.number(), quantity('ratio'), z.array(z.number()).min(1)]);

/** An acceptance as the schema parsed it → a rate or a list of rates. */
export function acceptanceOf(a: z.output<typeof acceptanceSchema>): Acceptance {
  return typeof a === 'number' || Array.isArray(a) ? a : a.value;
}

/** A setup's `speculative: {k: 4, acceptance: 0.7}`: the server drafts k tokens a step (num_speculative_tokens). */
export const speculativeSetupSchema = z
  .object({ k: z.number().int().positive(), acceptance: acceptanceSchema.optional() })
  .strict()
  .superRefine((v, ctx) => {
    const msg = v.acceptance === undefined ? undefined : acceptanceProblem(v.k, acceptanceOf(v.acceptance));
    if (msg) ctx.addIssue({ code: 'custom', message: msg, path: ['acceptance'] });
  });
