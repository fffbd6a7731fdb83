/**
 * The one workload definition read by a bench against a live endpoint, the simulated endpoint and
 * `predict: serving` in virtual time: request lengths (fixed or drawn from a distribution), shared
 * prefixes, and traces with arrival times and block hashes. Cell keys, zod-validated.
 *
 *   input: {mean: 1000 tokens, range_ratio: 0.5}      # vLLM's --random-range-ratio: U[500, 1500]
 *   output: {dist: lognormal, mean: 300, std: 200, min: 16, max: 2000}
 *   shared_prefix: {length: 512 tokens, groups: 8}     # SGLang's generated-shared-prefix shape
 *   trace: {file: traces/mooncake.jsonl, speed: 2}     # Mooncake: timestamp, lengths, hash_ids
 *   rate_schedule: [{rate: 1 req/s, for: 30 s}, {ramp: [1 req/s, 8 req/s], for: 60 s}]
 */
import { z } from 'zod';
import { quantity } from '../engine/schema';
import { rateScheduleSpec } from './schedule';

const tokens = quantity('tokens', { bare: 'tokens', positive: true });
const bound = quantity('tokens', { bare: 'tokens', min: 1 });

/** Uniform in [mean·(1 − r), mean·(1 + r)], as vLLM's random dataset draws with --random-range-ratio r. */
const uniform = z.object({ mean: tokens, range_ratio: z.number().min(0).max(1) }).strict();
/** Normal or lognormal with this mean and standard deviation of the lengths, clipped to [min, max]. */
const shaped = z
  .object({
    dist: z.enum(['normal', 'lognormal']),
    mean: tokens,
    std: quantity('tokens', { bare: 'tokens', min: 0 }),
    min: bound.optional(),
    max: bound.optional(),
  })
  .strict();
/** Lengths drawn from a file of observed lengths (one number a line, or a JSON array). */
const empirical = z.object({ file: z.string().min(1) }).strict();

export const lengthSpec = z.union([tokens, uniform, shaped, empirical], {
  error:
    'give a length ("1000 tokens"), a uniform range {mean: 1000 tokens, range_ratio: 0.5}, a distribution {dist: lognormal, mean: 300, std: 200} or observed lengths {file: lengths.txt}',
});
export type LengthSpec = z.output<typeof lengthSpec>;

export const sharedPrefixSpec = z
  .object({
    /** Tokens every request of a group shares at the start of its prompt (system prompt, few-shot, document). */
    length: tokens,
    /** Number of distinct prefixes; requests are dealt to them in turn. */
    groups: z.number().int().positive(),
    /** Fraction of requests that carry a group's prefix (the rest are unique); default all. */
    share: quantity('ratio', { min: 0 }).optional(),
  })
  .strict();
export type SharedPrefixSpec = z.output<typeof sharedPrefixSpec>;

export const traceSpec = z
  .object({
    /** JSONL: {timestamp (ms), input_length, output_length, hash_ids} per line (the Mooncake trace shape). */
    file: z.string().min(1),
    /** Replay faster (2 = twice the trace's rate) or slower. */
    speed: z.number().positive().default(1),
    /** Tokens each hash id stands for (Mooncake: 512). */
    block_size: z.number().int().positive().default(512),
  })
  .strict();
export type TraceSpec = z.output<typeof traceSpec>;

/**
 * Multi-turn chat sessions: each turn's prompt is the whole conversation so far (earlier prompts and
 * answers) plus `input` new tokens, sent `think_time` after the previous answer ended. Closed loop:
 * `concurrency` sessions at once.
 */
export const sessionSpec = z
  .object({
    turns: z.number().int().min(1).max(1000),
    think_time: quantity('time', { min: 0 }).optional(),
  })
  .strict();
export type SessionSpec = z.output<typeof sessionSpec>;

/**
 * A dataset file: JSONL of {prompt | prompt_token_ids | input_len, output_len} (vLLM's custom
 * dataset shape), or ShareGPT JSON ([{conversations: [{from: human, value}, {from: gpt, value}]}]).
 * Requests take its rows in order (wrapping); `input`/`output` then describe only the mean.
 */
export const datasetSpec = z
  .object({
    file: z.string().min(1),
    format: z.enum(['jsonl', 'sharegpt']).optional(),
  })
  .strict();
export type DatasetSpec = z.output<typeof datasetSpec>;

/** The workload keys a bench or serving cell accepts beside its input/output lengths. */
export const workloadKeys = {
  shared_prefix: sharedPrefixSpec.optional(),
  trace: traceSpec.optional(),
  sessions: sessionSpec.optional(),
  dataset: datasetSpec.optional(),
  /** Open loop whose rate changes over time: steps and ramps (schedule.ts); one point. */
  rate_schedule: rateScheduleSpec.optional(),
};
