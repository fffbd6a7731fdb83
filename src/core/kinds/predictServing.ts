/**
 * `predict: serving` — what a bench cell would measure, predicted by running the simulated vLLM
 * engine in virtual time: continuous batching, prefills packed into decode steps, per-step
 * overhead, KV blocks, preemption and the prefix cache. Shown beside the decode roofline, with the
 * gap decomposed into step overhead and prefill (plus scheduling) tax.
 */
import { z } from 'zod';
import type { PointMetrics } from '../bench/metrics';
import { factsOutput, tableOutput } from '../engine/outputs';
import { oneOrMany, positiveInt, quantity } from '../engine/schema';
import type { KindModule, RunContext, Setup } from '../engine/types';
import { fitFindings } from '../checks/fit';
import { factAbove, factSchema, factsOf, LATENCY_METRICS, type Fact, type LatencyMetric, type Point } from '../facts';
import { fin, latencyFacts, setupFact as makeSetupFact } from '../facts/make';
import { benchCellFacts } from './benchFacts';
import { sloSchema, sloSpecOf } from './bench';
import type { SloSpec } from '../facts/stat';
import { CellError } from '../findings';
import { decodeRoofline, parallelWords, prefillFloorSimple, weightsBytes } from '../physics';
import {
  COST_FORMULA,
  costFacts,
  fmtDollarsPerMtok,
  priceWords,
  setupPricePerHour,
  tokenCosts,
  type TokenCosts,
} from '../cost';
import { resolveWhatIf, whatIfFindings, whatIfOutput, whatIfSchema } from '../cost/whatIf';
import { plotOutput } from '../plots/render';
import { fmtBytes, fmtNum } from '../units';
import { peakWords } from './predictShared';
import { loadCellWorkload, plannerFor, replayRate } from '../workload/cell';
import { meanLength, type RequestPlanner } from '../workload/plan';
import { lengthSpec, workloadKeys } from '../workload/spec';
import { isObj } from '../values';

const schema = z
  .object({
    predict: z.literal('serving'),
    /** A length, or a distribution of them (see workload/spec.ts). */
    input: lengthSpec,
    output: lengthSpec,
    ...workloadKeys,
    /** Closed loop: requests in flight per point. */
    concurrency: oneOrMany(positiveInt).optional(),
    /** Open loop: Poisson arrival rates per point. */
    rate: oneOrMany(quantity('request_rate', { bare: 'req/s', positive: true })).optional(),
    requests: positiveInt.default(200),
    /** "per-point" (default: a fresh prompt set per point) or a number reused by every point. */
    seed: z.union([z.literal('per-point'), z.number().int()]).default('per-point'),
    prefill_mfu: z.number().gt(0).max(1).optional(),
    step_overhead: quantity('time', { min: 0 }).optional(),
    max_num_seqs: positiveInt.optional(),
    max_num_batched_tokens: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    prefix_caching: z.boolean().optional(),
    /** Override the KV pool (default: the kv-pool prediction for the setup). */
    kv_pool: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    ignore_eos: z.boolean().default(true),
    /** SLOs as a bench cell writes them: the prediction's goodput, and its price per token served within them. */
    slo: sloSchema.optional(),
    /** Other setups to price against this one, each simulated with the same load (cost/whatIf.ts). */
    what_if: whatIfSchema.optional(),
    /**
     * A bench cell (its name) whose measured points fit the free parameters (step_overhead,
     * prefill_mfu) not given here; this cell's points are then predicted with the fitted values.
     */
    calibrate: z
      .string()
      .min(1)
      .optional()
      .describe(
        'A bench cell (its name) with two or more measured points: step_overhead and prefill_mfu (those not given here) are fitted to them, then carried over to this prediction.',
      ),
  })
  .strict()
  .refine(
    (c) =>
      c.trace || c.rate_schedule
        ? c.concurrency === undefined
        : (c.concurrency === undefined) !== (c.rate === undefined),
    {
      message:
        'Give either "concurrency: [1, 8, 64]" (closed loop) or "rate: [1, 4, 16]" req/s (open loop), not both; a trace or a rate_schedule sets its own arrivals (add "rate:" only to label the points, or leave both out)',
      path: ['concurrency'],
    },
  )
  .refine((c) => !c.sessions || c.concurrency !== undefined, {
    message: 'Multi-turn sessions run closed loop: give "concurrency:" (conversations at once)',
    path: ['sessions'],
  })
  .superRefine((c, ctx) => {
    const msg = workLimitMessage(
      c.requests,
      (c.concurrency ?? c.rate ?? [1]).length,
      meanLength(c.input),
      meanLength(c.output),
    );
    if (msg) ctx.addIssue({ code: 'custom', message: msg, path: ['requests'] });
  });

/**
 * How much one cell may simulate: bounded by wall time, not memory. A point is summarized as it runs
 * (LoadRun metricsOnly: exact percentiles up to a few million values, then an HDR sketch within
 * 0.05%), so memory stays near 200 MB at any size; the engine runs some 7–10 million tokens a
 * second on a small machine, so the largest point (100,000 requests of 2k/1k, 300 M tokens) takes
 * well under a minute, with progress and cancel throughout.
 */
export const SERVING_LIMITS = {
  /** Prompt + output tokens of one point. */
  tokensPerPoint: 320_000_000,
  /** Prompt + output tokens of the whole sweep (points × requests × (input + output)). */
  tokensPerCell: 640_000_000,
} as const;

/** The error for a sweep over the limits, saying what to write instead; undefined within them. */
export function workLimitMessage(requests: number, points: number, input: number, output: number): string | undefined {
  const per = Math.round(input) + Math.round(output);
  if (!(per > 0) || !(requests > 0)) return undefined;
  const fmt = (n: number) => Math.floor(n).toLocaleString('en-US');
  if (requests * per > SERVING_LIMITS.tokensPerPoint) {
    const max = Math.max(1, Math.floor(SERVING_LIMITS.tokensPerPoint / per));
    return `requests: ${fmt(requests)} × (${fmt(input)} + ${fmt(output)}) tokens is ${fmt(requests * per)} tokens per point, over the ${fmt(SERVING_LIMITS.tokensPerPoint)} a point may simulate: write requests: ${fmt(max)} or fewer (a few hundred requests give stable percentiles)`;
  }
  const total = requests * per * Math.max(1, points);
  if (total > SERVING_LIMITS.tokensPerCell) {
    const max = Math.max(1, Math.floor(SERVING_LIMITS.tokensPerCell / (per * Math.max(1, points))));
    return `${points} points × ${fmt(requests)} requests × (${fmt(input)} + ${fmt(output)}) tokens is ${fmt(total)} tokens, over the ${fmt(SERVING_LIMITS.tokensPerCell)} one cell may simulate: write requests: ${fmt(max)} or fewer, or split the points over several cells`;
  }
  return undefined;
}

/** Yield to the event loop (timers, I/O, a cancel) between slices of simulation. */
const yieldNow = () => new Promise<void>((resolve) => setImmediate(resolve));
/** Milliseconds of simulation between yields. */
const SLICE_MS = 8;

type Cell = z.output<typeof schema>;

export interface ServingPoint {
  loop: 'closed' | 'open';
  concurrency?: number;
  rate?: number;
  seed: number;
  metrics: PointMetrics;
  prefix_hit_rate: number;
  preemptions: number;
  mean_batch: number;
  /** Decode roofline aggregate tok/s at batch = concurrency (open loop: the simulated mean batch), live context. */
  roofline_tok_s: number;
  /** The same with the per-step overhead added to every step. */
  roofline_with_overhead_tok_s: number;
  simulated_tok_s: number;
  /** roofline − with overhead */
  overhead_loss_tok_s: number;
  /** with overhead − simulated: prefills packed into steps, chunked prefill, queueing, waves. */
  prefill_loss_tok_s: number;
  /** Fractions of the point's wall time. */
  time_share: { decode: number; prefill: number; overhead: number; idle: number };
  little_error: number;
  /** With a priced setup: $ per million output and total tokens at this point's throughput. */
  cost?: TokenCosts;
}

const ms = (v: number) => (Number.isFinite(v) ? fmtNum(v, v < 10 ? 2 : 1) : '—');
const pct = (v: number) => `${fmtNum(100 * v, 1)}%`;

/**
 * What a serving prediction states: the predicted throughput curve (what a bench plot draws as the
 * prediction), and per point every latency stat, throughputs, Little's law and prefix-cache hits.
 */
export function servingFacts(values: Record<string, unknown>): Fact[] {
  const source = 'predict: serving';
  const points = (Array.isArray(values.points) ? values.points : []).filter(isObj);
  const open = values.loop === 'open';
  const out: Fact[] = [];
  const curve: { x: number; y: number }[] = [];
  points.forEach((p, i) => {
    const x = fin(open ? p.rate : p.concurrency);
    const point: Point = {
      loop: open ? 'open' : 'closed',
      ...(x === undefined ? {} : open ? { req_s: x } : { concurrency: x }),
    };
    const common = { point, at: [open ? 'rate' : 'concurrency', i], source };
    const m = isObj(p.metrics) ? p.metrics : {};
    for (const metric of LATENCY_METRICS as readonly LatencyMetric[])
      out.push(...latencyFacts(metric, m[`${metric}_ms`], common));
    const tok = fin(m.output_throughput);
    if (tok !== undefined) {
      out.push({ kind: 'throughput', metric: 'output', tok_s: tok, ...common });
      if (x !== undefined) curve.push({ x, y: tok });
    }
    const req = fin(m.request_throughput);
    if (req !== undefined) out.push({ kind: 'request-rate', metric: 'completed', req_s: req, ...common });
    const good = fin(m.goodput);
    if (good !== undefined) out.push({ kind: 'request-rate', metric: 'goodput', req_s: good, ...common });
    const little = isObj(m.little) ? m.little : {};
    const predicted = fin(little.predicted_in_flight);
    const observed = fin(little.observed_in_flight);
    const requests = fin(m.completed);
    if (predicted !== undefined && observed !== undefined)
      out.push({ kind: 'little', predicted, observed, ...(requests === undefined ? {} : { requests }), ...common });
    const hit = fin(p.prefix_hit_rate);
    if (hit !== undefined) out.push({ kind: 'prefix-hits', rate: hit, ...common });
    const pre = fin(p.preemptions);
    if (pre !== undefined && pre >= 0) out.push({ kind: 'engine', metric: 'preemptions', value: pre, ...common });
    if (isObj(p.cost)) out.push(...costFacts(p.cost, common));
  });
  if (curve.length)
    out.unshift({
      kind: 'curve',
      x: open ? 'rate' : 'concurrency',
      y: 'output_throughput',
      unit: 'tok/s',
      points: curve,
      label: 'predict: serving',
      source,
    });
  const input = fin(values.input);
  const output = fin(values.output);
  if (input !== undefined) out.push({ kind: 'tokens', metric: 'prompt', tokens: input, source });
  if (output !== undefined) out.push({ kind: 'tokens', metric: 'output', tokens: output, source });
  // The model's free parameters as they were set (a calibration's fitted ones with their σ).
  for (const q of Array.isArray(values.parameters) ? values.parameters : []) {
    const r = parameterFact.safeParse({ kind: 'parameter', ...(isObj(q) ? q : {}), source });
    if (r.success) out.push(r.data);
  }
  const su = isObj(values.setup) ? values.setup : undefined;
  if (su) {
    const r = setupFact.safeParse({ kind: 'setup', ...su, source });
    if (r.success) out.push(r.data);
  }
  return out;
}

const parameterFact = factSchema.refine((f) => f.kind === 'parameter');
const setupFact = factSchema.refine((f) => f.kind === 'setup');

/** The setup a prediction was made for, as its setup fact states it. */
export function setupValues(setup: Setup) {
  const { kind: _kind, ...values } = makeSetupFact(setup);
  return values;
}

/** The serving model's free parameters as a prediction used them, saved in its values. */
export function parameterValues(
  cfg: { stepOverheadS: number; prefillMfu: number },
  given: { stepOverheadS?: number; prefillMfu?: number },
): {
  name: string;
  value: number;
  unit?: 's';
  origin: 'default' | 'given' | 'fitted';
  sigma?: number;
  from?: string;
}[] {
  return [
    {
      name: 'step_overhead',
      value: cfg.stepOverheadS,
      unit: 's',
      origin: given.stepOverheadS === undefined ? 'default' : 'given',
    },
    { name: 'prefill_mfu', value: cfg.prefillMfu, origin: given.prefillMfu === undefined ? 'default' : 'given' },
  ];
}

export const servingKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'serving',
  summary:
    'predict: serving — TTFT/TPOT/ITL/E2E and throughput from a simulated vLLM engine, beside the decode roofline',
  schema,
  needsSetup: true,
  migrate: (values, cell) => [...servingFacts(values), ...benchCellFacts(cell)],
  statedFacts: benchCellFacts,
  analyze: (cell, ctx) => whatIfFindings(ctx.setup, cell.what_if, ctx.notebook),
  // The fixed-seed prefix-cache trap is the checks module's rule (fixed-seed-prefix-cache), over the seed fact.
  async run(cell, ctx) {
    // The simulated engine and the metrics load only when the cell runs.
    const [{ FORMULAS }, { ENGINE_DEFAULTS }] = await Promise.all([
      import('../bench/metrics'),
      import('../sim/engine'),
    ]);
    const setup = ctx.setup!;
    // A setup whose weights do not fit has no server to simulate: say so instead of failing.
    const unfit = fitFindings(setup, ['predict'], ctx.cellIndex);
    if (unfit.some((f) => f.severity === 'error'))
      return {
        values: {},
        outputs: [
          factsOutput(
            'No serving prediction',
            unfit.map((f): [string, string] => [f.code, f.message]),
            'Nothing was simulated: a server with this setup cannot start.',
          ),
        ],
        // The findings themselves are the weights-fit rule's (checks/fit.ts), made once by the engine.
      };
    const workload = await loadCellWorkload(cell, ctx.notebook);
    const input = Math.round(meanLength(cell.input, workload.loaded.input));
    const output = Math.round(meanLength(cell.output, workload.loaded.output));
    // The KV pool: the cell's own, else the latest kv-pool fact above (a prediction, or the server's log), else physics.
    const poolFact = cell.kv_pool
      ? undefined
      : factAbove(ctx.notebook.results, ctx.cellIndex, 'kv-pool', (f) => f.tokens !== undefined);
    const poolTokens = cell.kv_pool?.value ?? poolFact?.fact.tokens;
    /** Where a scheduler limit came from: the setup's server, or vLLM's own default for this card. */
    const servedWords = (key: 'max_num_seqs' | 'max_num_batched_tokens') =>
      setup.server?.[key] !== undefined ? ' (setup)' : ` (vLLM's default for \`vllm serve\` on ${setup.gpu.id})`;
    const closed = cell.concurrency !== undefined;
    // Calibration: fit the free parameters to a bench's measured points, then carry them over.
    const cal = cell.calibrate ? await calibrateOn(cell, ctx) : undefined;
    const fitted = (name: string) => cal?.result.fitted.find((f) => f.name === name)?.value;
    const params: ServingParams = {
      prefillMfu: cell.prefill_mfu ?? fitted('prefill_mfu'),
      stepOverheadS: cell.step_overhead?.value ?? fitted('step_overhead'),
      maxNumSeqs: cell.max_num_seqs,
      maxNumBatchedTokens: cell.max_num_batched_tokens?.value,
      prefixCaching: cell.prefix_caching,
      numGpuBlocks: poolTokens !== undefined ? Math.floor(poolTokens / 16) : undefined,
    };
    const shape: ServingShape = {
      input,
      output,
      // A trace or a rate schedule sets its own arrivals: one point (labelled with the rate it averages)
      // unless rates were given (they then only label points).
      ...(closed
        ? { concurrency: cell.concurrency! }
        : { rate: cell.rate?.map((q) => q.value) ?? [replayRate(workload) ?? 1] }),
      requests: cell.requests,
      seed: cell.seed,
      ignoreEos: cell.ignore_eos,
      slo: sloSpecOf(cell.slo),
      // Per-point seeds: each point takes a dataset's rows after those the points before it sent.
      planner: (seed, vocab, i) => plannerFor(workload, seed, vocab, cell.seed === 'per-point' ? i * cell.requests : 0),
    };
    const sim = await simulateServing(setup, params, shape, ctx);
    const { points, cfg, engine, simMs, liveContext } = sim;

    const xLabel = closed ? 'concurrency' : 'rate (req/s)';
    const xOf = (p: ServingPoint) => (closed ? p.concurrency! : p.rate!);
    const loopWords = closed ? 'closed loop (max concurrency fixed)' : 'open loop (Poisson arrivals at the given rate)';
    const latency = tableOutput(
      `Predicted serving latency — ${setup.model.name} on ${setup.gpu.id}, ${input} in / ${output} out, ${loopWords}`,
      [
        { key: 'x', label: xLabel },
        { key: 'ttft_mean', label: 'TTFT mean', fmt: ms },
        { key: 'ttft_median', label: 'TTFT med', fmt: ms },
        { key: 'ttft_p90', label: 'TTFT p90', fmt: ms },
        { key: 'ttft_p99', label: 'TTFT p99', fmt: ms },
        { key: 'tpot_median', label: 'TPOT med', fmt: ms },
        { key: 'tpot_p99', label: 'TPOT p99', fmt: ms },
        { key: 'itl_median', label: 'ITL med', fmt: ms },
        { key: 'itl_p99', label: 'ITL p99', fmt: ms },
        { key: 'e2e_median', label: 'E2E med', fmt: ms },
        { key: 'e2e_p99', label: 'E2E p99', fmt: ms },
      ],
      points.map((p) => ({
        x: xOf(p),
        ttft_mean: p.metrics.ttft_ms.mean,
        ttft_median: p.metrics.ttft_ms.median,
        ttft_p90: p.metrics.ttft_ms.p.p90,
        ttft_p99: p.metrics.ttft_ms.p.p99,
        tpot_median: p.metrics.tpot_ms.median,
        tpot_p99: p.metrics.tpot_ms.p.p99,
        itl_median: p.metrics.itl_ms.median,
        itl_p99: p.metrics.itl_ms.p.p99,
        e2e_median: p.metrics.e2e_ms.median,
        e2e_p99: p.metrics.e2e_ms.p.p99,
      })),
      `All latencies in ms. ${FORMULAS.ttft}; ${FORMULAS.tpot}; ${FORMULAS.itl}.`,
    );
    // A priced setup: every throughput also reads as $ per million tokens (all the setup's GPUs rented).
    const perHour = setupPricePerHour(setup);
    if (perHour !== undefined)
      for (const p of points)
        p.cost = tokenCosts(perHour, {
          output_tok_s: p.metrics.output_throughput,
          total_tok_s: p.metrics.total_token_throughput,
          ...(p.metrics.good_output_tokens !== undefined && p.metrics.duration_s > 0
            ? { good_tok_s: p.metrics.good_output_tokens / p.metrics.duration_s }
            : {}),
        });
    const slo = shape.slo?.length ? shape.slo : undefined;
    const gap = tableOutput(
      `Throughput and the gap to the decode roofline (live context ${fmtNum(liveContext, 0)} tokens)`,
      [
        { key: 'x', label: xLabel },
        { key: 'req_s', label: 'req/s', fmt: (v) => fmtNum(v, 2) },
        { key: 'roof', label: 'roofline tok/s', fmt: (v) => fmtNum(v, 0) },
        { key: 'ovh', label: '− overhead', fmt: (v) => fmtNum(-v, 0) },
        { key: 'pre', label: '− prefill & sched.', fmt: (v) => fmtNum(-v, 0) },
        { key: 'sim', label: '= predicted tok/s', fmt: (v) => fmtNum(v, 0) },
        ...(perHour !== undefined
          ? [
              { key: 'usd_out' as const, label: '$ per M output tok', fmt: fmtDollarsPerMtok },
              { key: 'usd_total' as const, label: '$ per M total tok', fmt: fmtDollarsPerMtok },
            ]
          : []),
        ...(slo ? [{ key: 'goodput' as const, label: 'goodput req/s', fmt: (v: number) => fmtNum(v, 2) }] : []),
        ...(slo && perHour !== undefined
          ? [{ key: 'usd_good' as const, label: '$ per M tok within SLO', fmt: fmtDollarsPerMtok }]
          : []),
        { key: 'ratio', label: 'of roofline', fmt: pct },
        { key: 'share', label: 'time: decode/prefill/overhead/idle' },
        { key: 'hit', label: 'prefix hits', fmt: pct },
        { key: 'preempt', label: 'preemptions' },
        {
          key: 'little',
          label: "Little's law",
          fmt: (v) => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${fmtNum(100 * v, 2)}%` : '—'),
        },
      ],
      points.map((p) => ({
        x: xOf(p),
        req_s: p.metrics.request_throughput,
        roof: p.roofline_tok_s,
        ovh: p.overhead_loss_tok_s,
        pre: p.prefill_loss_tok_s,
        sim: p.simulated_tok_s,
        ...(p.cost ? { usd_out: p.cost.usd_per_mtok_output, usd_total: p.cost.usd_per_mtok_total } : {}),
        ...(slo ? { goodput: p.metrics.goodput ?? NaN, usd_good: p.cost?.usd_per_mtok_goodput ?? NaN } : {}),
        ratio: p.simulated_tok_s / p.roofline_tok_s,
        share:
          [p.time_share.decode, p.time_share.prefill, p.time_share.overhead, p.time_share.idle]
            .map((v) => fmtNum(100 * v, 0))
            .join('/') + ' %',
        hit: p.prefix_hit_rate,
        preempt: p.preemptions,
        little: p.little_error,
      })),
      `roofline = decode roofline at batch ${closed ? '= concurrency' : '= simulated mean batch'}; − overhead = roofline with ${fmtNum(cfg.stepOverheadS * 1e3, 2)} ms added to each step; ` +
        `− prefill & sched. = the rest: prefills packed into decode steps, chunked prefill, queueing. Little's law: λ·W against the engine's time-averaged requests in system.` +
        (slo
          ? ` Goodput: requests meeting every SLO (${slo.map((l) => `${l.metric} ${l.stat} ≤ ${fmtNum(l.ms, 0)} ms`).join(', ')}) / duration.`
          : '') +
        (perHour !== undefined
          ? ` Cost at ${priceWords(setup)}: ${COST_FORMULA} (output tokens; total counts prompt + output${slo ? '; within SLO counts the output tokens of requests meeting every SLO' : ''}).`
          : ''),
    );
    const assumptions = factsOutput(
      'Assumptions (edit these keys)',
      [
        [
          'prefill_mfu',
          `${fmtNum(cfg.prefillMfu, 4)}${cell.prefill_mfu !== undefined ? '' : fitted('prefill_mfu') !== undefined ? ` (fitted on "${cell.calibrate}")` : ' (default)'}`,
        ],
        [
          'step_overhead',
          `${fmtNum(cfg.stepOverheadS * 1e3, 3)} ms${cell.step_overhead !== undefined ? '' : fitted('step_overhead') !== undefined ? ` (fitted on "${cell.calibrate}")` : ' (default: 11.3 ms measured − 8.03 ms floor)'}`,
        ],
        ['max_num_seqs', `${cfg.maxNumSeqs}${cell.max_num_seqs === undefined ? servedWords('max_num_seqs') : ''}`],
        [
          'max_num_batched_tokens',
          `${cfg.maxNumBatchedTokens}${cell.max_num_batched_tokens === undefined ? servedWords('max_num_batched_tokens') : ''}`,
        ],
        ['prefix_caching', `${cfg.prefixCaching}${cell.prefix_caching === undefined ? ' (setup or default)' : ''}`],
        [
          'kv_pool',
          `${fmtNum(cfg.numGpuBlocks * cfg.blockSize, 0)} tokens (${fmtNum(cfg.numGpuBlocks, 0)} blocks of ${cfg.blockSize})${cell.kv_pool ? '' : poolFact ? ` from the kv-pool fact of ${poolFact.cell.kind}${poolFact.cell.name ? ` "${poolFact.cell.name}"` : ''} (${poolFact.fact.source ?? 'above'})` : ' from the kv-pool physics of the setup'}`,
        ],
        ['requests per point', String(cell.requests)],
        [
          'seed',
          cell.seed === 'per-point' ? 'per-point (a fresh prompt set at each point)' : `${cell.seed} at every point`,
        ],
        ['ignore_eos', String(cell.ignore_eos)],
        ['peak used', peakWords(setup)],
        [
          'weights',
          `${setup.weights}${setup.weights !== 'bf16' && setup.weights !== 'fp16' && setup.unquantized?.length ? ` (${setup.unquantized.join(', ')} at 16 bits)` : ''}: ${fmtBytes(weightsBytes(setup.model, setup.weights, setup.unquantized))}${engine.cfg.tensorParallel * engine.cfg.pipelineParallel > 1 ? `, ${parallelWords(setup)}` : ''}; KV cache ${setup.kvCache}`,
        ],
        ['prefill floor (2·params·input / peak)', `${ms(prefillFloorSimple(setup, input) * 1e3)} ms`],
        ['batch-1 decode step (floor + overhead)', `${ms(engine.decodeStepTime(input) * 1e3)} ms`],
        ['simulated in', `${fmtNum(simMs, 0)} ms (virtual time)`],
      ],
      'step = max((W + kv·Σctx) / BW, (2·params·tokens + attention FLOPs) / (peak·prefill_mfu)) + step_overhead; one simulated server serves every point in order.',
    );
    const data = points.flatMap((p) => [
      { x: xOf(p), series: 'decode roofline', tok_s: p.roofline_tok_s },
      { x: xOf(p), series: 'roofline + step overhead', tok_s: p.roofline_with_overhead_tok_s },
      { x: xOf(p), series: 'predicted serving', tok_s: p.simulated_tok_s },
    ]);
    const plot = await plotOutput({
      title: `Serving vs decode roofline: ${setup.model.name} on ${setup.gpu.id}`,
      width: 420,
      height: 260,
      data: { values: data },
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'x', type: 'quantitative', scale: { type: 'log', base: 2 }, title: xLabel },
        y: { field: 'tok_s', type: 'quantitative', scale: { type: 'log' }, title: 'output tokens/s' },
        color: { field: 'series', type: 'nominal', title: null },
        strokeDash: { field: 'series', type: 'nominal', legend: null },
        tooltip: [{ field: 'x', title: xLabel }, { field: 'series' }, { field: 'tok_s', format: ',.0f' }],
      },
    });
    // What if: the same load simulated on other setups, priced against this one. A pool taken from a
    // fact above was this setup's: an alternative gets its own from physics unless the cell gave kv_pool.
    const curveOf = (ps: ServingPoint[]) => ({
      points: ps.map((p) => ({ x: xOf(p), tok_s: p.metrics.output_throughput })),
    });
    const whatIf = cell.what_if
      ? await whatIfOutput(
          setup,
          curveOf(points),
          resolveWhatIf(setup, cell.what_if, ctx.notebook),
          async (s) =>
            curveOf(
              (
                await simulateServing(
                  s,
                  { ...params, numGpuBlocks: cell.kv_pool ? params.numGpuBlocks : undefined },
                  shape,
                  ctx,
                )
              ).points,
            ),
          (x) => (closed ? `c=${x}` : `${x} req/s`),
        )
      : undefined;
    const values = {
      loop: closed ? 'closed' : 'open',
      input,
      output,
      assumptions: {
        prefill_mfu: cfg.prefillMfu,
        step_overhead_s: cfg.stepOverheadS,
        max_num_seqs: cfg.maxNumSeqs,
        max_num_batched_tokens: cfg.maxNumBatchedTokens,
        prefix_caching: cfg.prefixCaching,
        kv_pool_tokens: cfg.numGpuBlocks * cfg.blockSize,
        defaults: ENGINE_DEFAULTS,
      },
      points,
      parameters: parameterValues(cfg, { stepOverheadS: cell.step_overhead?.value, prefillMfu: cell.prefill_mfu }).map(
        (q) => {
          const f = cal?.result.fitted.find((x) => x.name === q.name);
          return f && q.origin === 'default'
            ? {
                ...q,
                origin: 'fitted' as const,
                ...(f.sigma !== undefined ? { sigma: f.sigma } : {}),
                from: cell.calibrate,
              }
            : q;
        },
      ),
      ...(cal ? { calibration: { cell: cell.calibrate, ...cal.result } } : {}),
      setup: setupValues(setup),
      simulated_ms: simMs,
      ...(whatIf ? { what_if: whatIf.values } : {}),
    };
    return {
      values,
      facts: [...servingFacts(values), ...benchCellFacts(cell)],
      outputs: [...(cal ? cal.outputs : []), gap, latency, assumptions, plot, ...(whatIf ? [whatIf.output] : [])],
    };
  },
};

/** The serving model's knobs a cell (or a calibration) sets; the rest come from the setup and ENGINE_DEFAULTS. */
export interface ServingParams {
  prefillMfu?: number;
  stepOverheadS?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  prefixCaching?: boolean;
  numGpuBlocks?: number;
}

/** The load a serving simulation runs: one point per concurrency (closed loop) or rate (open loop). */
export interface ServingShape {
  input: number;
  output: number;
  concurrency?: number[];
  rate?: number[];
  requests: number;
  seed: 'per-point' | number;
  ignoreEos?: boolean;
  /** Per-request SLOs: each point's goodput (requests meeting every one). */
  slo?: SloSpec;
  /** The workload's requests per point seed (workload/plan.ts); none: fixed-length random prompts. */
  planner?: (seed: number, vocab: number, pointIndex: number) => RequestPlanner | undefined;
}

/**
 * Run the simulated engine in virtual time over every point of a shape, in slices that yield to the
 * event loop (a cancel lands, the host stays responsive). What `predict: serving` shows, what a
 * bench runs as its own prediction, and what a calibration evaluates at each trial.
 */
export async function simulateServing(
  setup: Setup,
  params: ServingParams,
  shape: ServingShape,
  hooks: { signal?: AbortSignal; progress?: RunContext['progress'] } = {},
) {
  const [{ createEngine }, { LoadRun }, { seedOf }] = await Promise.all([
    import('../sim/engine'),
    import('../sim/load'),
    import('../sim/rng'),
  ]);
  const { input, output } = shape;
  const engine = createEngine({ setup, ...params });
  const cfg = engine.cfg;
  const dp = engine.replicaCount;
  if (input + output > cfg.maxModelLen)
    throw new Error(
      `input + output = ${input + output} tokens is over max_model_len ${cfg.maxModelLen}: shorten them or raise max_model_len in the setup`,
    );
  const closed = shape.concurrency !== undefined;
  const list: number[] = closed ? shape.concurrency! : (shape.rate ?? [1]);
  const liveContext = input + output / 2;
  const points: ServingPoint[] = [];
  const t0 = performance.now();
  const progress = hooks.progress ?? (() => undefined);
  for (let i = 0; i < list.length; i++) {
    if (hooks.signal?.aborted) throw new Error('cancelled');
    const x = list[i];
    const seed = shape.seed === 'per-point' ? seedOf(`serving:${i}:${x}`) : shape.seed;
    // Run the point in slices, yielding every few ms so the host stays responsive and a cancel lands.
    const plan = shape.planner?.(seed, cfg.vocab, i);
    const load = new LoadRun(engine, {
      input,
      output,
      // A trace's rows, a schedule's arrivals; else the shape's count.
      requests: plan && Number.isFinite(plan.size) ? plan.size : shape.requests,
      seed,
      plan,
      ignoreEos: shape.ignoreEos ?? true,
      ...(closed ? { concurrency: x } : { rate: x }),
      // Summarized as it runs: no point holds every output token's time (exact below the sketch threshold).
      metricsOnly: true,
      ...(shape.slo?.length ? { slo: shape.slo } : {}),
    });
    let sliceStart = performance.now();
    let lastReport = -Infinity;
    while (!load.advance(256)) {
      const now = performance.now();
      if (now - sliceStart < SLICE_MS) continue;
      if (now - lastReport > 100) {
        lastReport = now;
        progress({
          message: `${closed ? 'concurrency' : 'rate'} ${x}: ${load.done} of ${load.N} requests`,
          fraction: (i + load.done / Math.max(1, load.N)) / list.length,
        });
      }
      await yieldNow();
      if (hooks.signal?.aborted) throw new Error('cancelled');
      sliceStart = performance.now();
    }
    const r = load.result();
    // Latencies from the send time, which in the simulator is the scheduled time (open loop) too.
    const m = load.metrics!.result({ observedInFlight: r.observedInFlight, durationMs: r.durationS * 1000 });
    // Per replica: a data-parallel endpoint spreads the load over dp engines.
    const batch = closed ? Math.max(1, x / dp) : Math.max(1, r.meanBatch);
    const roofRow = decodeRoofline(setup, liveContext, [batch]).rows[0];
    const roof = { ...roofRow, aggregate_tok_s: roofRow.aggregate_tok_s * dp };
    const withOverhead = (dp * batch) / (roof.step_ms / 1000 + cfg.stepOverheadS);
    const tok = m.output_throughput;
    const d = (r.durationS || 1) * dp;
    points.push({
      loop: closed ? 'closed' : 'open',
      ...(closed ? { concurrency: x } : { rate: x }),
      seed,
      metrics: m,
      prefix_hit_rate: r.prefixQueries > 0 ? r.prefixHits / r.prefixQueries : 0,
      preemptions: r.preemptions,
      mean_batch: r.meanBatch,
      roofline_tok_s: roof.aggregate_tok_s,
      roofline_with_overhead_tok_s: withOverhead,
      simulated_tok_s: tok,
      overhead_loss_tok_s: roof.aggregate_tok_s - withOverhead,
      prefill_loss_tok_s: withOverhead - tok,
      time_share: {
        decode: r.time.decodeS / d,
        prefill: r.time.prefillS / d,
        overhead: r.time.overheadS / d,
        idle: r.time.idleS / d,
      },
      little_error: m.little.error ?? NaN,
    });
    progress({
      message: `${closed ? 'concurrency' : 'rate'} ${x}: ${fmtNum(tok, 0)} tok/s`,
      fraction: (i + 1) / list.length,
    });
  }
  return { points, cfg, engine, dp, liveContext, simMs: performance.now() - t0 };
}

/** Fit the cell's free parameters to the named bench cell's points; the tables that say how. */
async function calibrateOn(cell: Cell, ctx: RunContext) {
  const [{ calibrate }, { calibrationOutputs }] = await Promise.all([
    import('../explain/calibrate'),
    import('../explain/calibrateOutput'),
  ]);
  const name = cell.calibrate!;
  const r = ctx.notebook.named.get(name);
  const i = r ? [...ctx.notebook.results].find(([, x]) => x === r)?.[0] : undefined;
  if (!r || i === undefined || i >= ctx.cellIndex || !r.ok)
    throw new CellError(
      `calibrate: "${name}" is not a cell above that ran: name a bench cell with two or more measured points (its "name:")`,
      ['calibrate'],
      'calibrate-cell',
    );
  // The fit runs on the setup the bench measured; the prediction then runs on this cell's.
  const measuredOn = factsOf(r.facts, 'setup')[0];
  const benchSetup = (measuredOn && ctx.notebook.setups.get(measuredOn.name)) || ctx.setup!;
  let result;
  try {
    result = await calibrate(
      benchSetup,
      r.facts,
      { stepOverheadS: cell.step_overhead?.value, prefillMfu: cell.prefill_mfu },
      { signal: ctx.signal, progress: (u) => ctx.progress(u) },
    );
  } catch (e) {
    throw new CellError(`calibrate: "${name}": ${(e as Error).message}`, ['calibrate'], 'calibrate-fit');
  }
  return { result, outputs: calibrationOutputs(result, name, benchSetup, ctx.setup!) };
}
