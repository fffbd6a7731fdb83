/**
 * `bench: sweep` (closed loop over a concurrency list, or open loop over a rate list) and
 * `bench: rate` (open loop): measure the setup's endpoint the way `vllm bench serve` defines its
 * metrics, in a worker thread, with the output growing point by point.
 */
import { z } from 'zod';
// The client (undici, worker threads) and the report load only when a bench cell runs: the schema
// and analyze stay here, for diagnostics as you type.
import type { PointResult, SweepOptions } from '../bench';
import type { ReportSpec } from '../bench/report';
import { oneOrMany, positiveInt, quantity } from '../engine/schema';
import type { AnalyzeContext, CellOutput, KindModule, RunContext } from '../engine/types';
import { CellError, finding, type Finding } from '../findings';
import type { Fact } from '../facts';
import { setupPricePerHour } from '../cost';
import { setupFact } from '../facts/make';
import { parseSloKey, SLO_METRICS, sloOf, type SloSpec } from '../facts/stat';
import type { CellWorkload } from '../workload/cell';
import { expectedPrefixHitRate } from '../workload/plan';
import { lengthSpec, workloadKeys } from '../workload/spec';
import { benchCellFacts, benchFacts } from './benchFacts';

/** The longest a timer can wait (setTimeout's 2^31 − 1 ms, about 24.8 days); past it Node fires at once. */
const MAX_TIMER_S = (2 ** 31 - 1) / 1000;
/** More streams than one client machine holds open (each is a socket and a file descriptor). */
const MAX_CONCURRENCY = 10_000;
const MIN_RATE = 0.001;
const MAX_RATE = 100_000;

/** A time a timer waits for: above zero and no longer than a timer can wait. */
const timerSpan = () =>
  quantity('time', { positive: true }).refine((q) => q.value <= MAX_TIMER_S, {
    message: `must be at most ${Math.floor(MAX_TIMER_S / 86_400)} days (longer than a timer can wait)`,
  });

/** A share of requests, 0% to 100%. */
const share = () =>
  quantity('ratio', { min: 0 }).refine((q) => q.value <= 1, { message: 'must be at most 100% (a share of requests)' });

const concurrencyValue = positiveInt.max(MAX_CONCURRENCY);

/** One request every 1,000 s up to 100,000 req/s: below it the arrival gaps overflow the timers. */
const rateValue = quantity('request_rate', { bare: 'req/s', positive: true }).refine(
  (q) => q.value >= MIN_RATE && q.value <= MAX_RATE,
  {
    // Written when a value fails, not when the schema is built: the first number format loads ICU's data
    // (some 15 ms), which diagnostics as you type would otherwise wait for.
    error: () =>
      `must be between ${MIN_RATE} req/s (one request every ${1 / MIN_RATE} s) and ${MAX_RATE.toLocaleString('en-US')} req/s`,
  },
);

/**
 * SLOs: METRIC_STAT keys for any stat (ttft_p95, tpot_p99.9, e2e_median, ttft for the mean), each a
 * time. The three below are listed for completion; any other key of that form is taken the same way.
 */
const sloLimit = quantity('time', { positive: true });
export const sloSchema = z
  .object({
    ttft_p99: sloLimit.optional(),
    tpot_p99: sloLimit.optional(),
    e2e_p99: sloLimit.optional(),
  })
  .catchall(sloLimit)
  .superRefine((o, ctx) => {
    for (const k of Object.keys(o))
      if (!parseSloKey(k))
        ctx.addIssue({
          code: 'custom',
          path: [k],
          message: `"${k}" is not an SLO: write METRIC_STAT with METRIC one of ${SLO_METRICS.join(', ')} and STAT mean, p50, p95, p99.9 …, e.g. ttft_p95: 200 ms`,
        });
  });

const onFailure = z.union([z.literal('continue'), z.object({ stop_above: share() }).strict()]);

const base = {
  input: lengthSpec.describe(
    'Prompt length of every request, or a distribution: {mean: 1000 tokens, range_ratio: 0.5}, {dist: lognormal, mean, std}, {file: lengths.txt}.',
  ),
  output: lengthSpec.describe(
    'Tokens generated per request (ignore_eos, so every request runs to this length), or a distribution as for input.',
  ),
  // Shared prefixes, multi-turn sessions, trace replay, dataset files, rate schedules (workload/spec.ts):
  // the same plan predict: serving runs.
  ...workloadKeys,
  /** Closed loop: one point per value. With `rate`, a single value caps requests in flight. */
  concurrency: oneOrMany(concurrencyValue)
    .optional()
    .describe(
      'Closed loop: requests kept in flight, one sweep point per value. With `rate`, one value caps requests in flight.',
    ),
  rate: oneOrMany(rateValue)
    .optional()
    .describe(
      'Open loop: offered arrival rate, one point per value (Poisson arrivals unless `burstiness` says otherwise).',
    ),
  /** Gamma shape of inter-arrival times (1 = Poisson; < 1 burstier). */
  burstiness: z
    .number()
    .positive()
    .max(1000)
    .optional()
    .describe('Gamma shape of inter-arrival times: 1 = Poisson, below 1 burstier.'),
  requests: quantity('requests', { bare: 'requests', positive: true })
    .refine((q) => Number.isInteger(q.value), { message: 'must be a whole number of requests' })
    .optional()
    .describe('Requests per point.'),
  duration: timerSpan().optional().describe('Length of each point, instead of a request count.'),
  warmup: z
    .number()
    .int()
    .min(0)
    .max(100_000)
    .default(0)
    .describe('Requests sent and discarded before each point is measured.'),
  seed: z
    .union([z.literal('per-point'), z.number().int().min(0)])
    .default('per-point')
    .describe(
      'Prompt seed: per-point gives each point its own prompts; one fixed number reuses them (the prefix-cache trap).',
    ),
  /** Base of the per-point seeds (default: random, recorded in the values). */
  base_seed: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Base of the per-point seeds (default: random, recorded in the values).'),
  slo: sloSchema.optional().describe('Service-level objectives for goodput: a request counts when it meets every one.'),
  percentiles: z
    .array(z.number().gt(0).lt(100))
    .min(1)
    .default([90, 99])
    .describe('Percentiles reported for TTFT, TPOT, ITL and E2E.'),
  api: z
    .enum(['completions', 'chat'])
    .default('completions')
    .describe('OpenAI API the requests use: /v1/completions or /v1/chat/completions.'),
  timeout: timerSpan()
    .optional()
    .describe(
      'Stream idle: no SSE event for this long (comments and pings do not count) ends a request as a timeout. Default 60 s.',
    ),
  request_timeout: timerSpan().optional().describe('Longest a whole request may take. Default 10 min.'),
  on_failure: onFailure
    .optional()
    .describe('What a point does when requests fail: continue, or stop above a failure ratio.'),
  contamination_threshold: share()
    .optional()
    .describe('Prefix-cache hit rate above which a point is flagged as served from the cache.'),
  top_p: z
    .number()
    .gt(0)
    .max(1)
    .default(0.95)
    .describe("Sampling top-p sent with each request (below 1 keeps vLLM's fused sampler)."),
  top_k: z
    .number()
    .int()
    .default(50)
    .describe("Sampling top-k sent with each request (positive keeps vLLM's fused sampler)."),
  temperature: z.number().min(0).default(1).describe('Sampling temperature sent with each request.'),
  scrape: z
    .boolean()
    .default(true)
    .describe("Read the server's /metrics before and after each point (prefix-cache hits, preemptions)."),
  records: z.boolean().default(true).describe("Keep every request's record in the notebook."),
  predicted: z
    .string()
    .min(1)
    .default('auto')
    .describe(
      'The serving prediction each point is judged against: auto (the latest predict: serving above of the same shape and setup, else one run here in virtual time), the name of a predict: serving cell, or none.',
    ),
  tolerance: quantity('ratio', { min: 0 })
    .optional()
    .describe('How far measured may be from predicted and still be within (default 10%).'),
  repeats: z
    .number()
    .int()
    .min(1)
    .max(100)
    .default(1)
    .describe(
      'Runs of each point, each with fresh prompts (a seed per repeat): means with 95% confidence intervals (Student t) over them.',
    ),
};

/** The keys every bench kind takes (a capacity search moves `rate` or `concurrency` itself). */
export const benchBase = base;
/** A bench cell's keys but the loads (a list of rates or concurrencies, or a capacity search's range). */
export type BenchBase = Omit<
  z.output<z.ZodObject<typeof base>>,
  'rate' | 'concurrency' | 'trace' | 'rate_schedule' | 'predicted' | 'tolerance'
>;

const sweepSchema = z
  .object({ bench: z.literal('sweep'), ...base })
  .strict()
  .refine((c) => !!c.concurrency || !!c.rate || !!c.trace || !!c.rate_schedule, {
    message: 'Give "concurrency: [1, 2, 4, 8]" (closed loop) or "rate: [1, 2, 4] req/s" (open loop)',
    path: ['concurrency'],
  })
  .refine((c) => !c.sessions || (!!c.concurrency && !c.rate && !c.trace && !c.rate_schedule), {
    message: 'Multi-turn sessions run closed loop: give "concurrency: [4, 16]" (conversations at once), not a rate',
    path: ['sessions'],
  })
  .refine((c) => !((c.trace || c.rate_schedule) && c.concurrency && c.concurrency.length > 1), {
    message:
      'A trace or a rate_schedule sets its own arrivals: "concurrency:" is then one cap on requests in flight, e.g. "concurrency: 64"',
    path: ['concurrency'],
  })
  .refine((c) => !(c.rate && c.concurrency && c.concurrency.length > 1), {
    message: 'With "rate:", "concurrency:" is one cap on requests in flight, e.g. "concurrency: 64"',
    path: ['concurrency'],
  })
  .refine((c) => !(c.requests && c.duration), {
    message: 'Give "requests:" or "duration:" per point, not both',
    path: ['duration'],
  });

const rateSchema = z
  .object({
    bench: z.literal('rate'),
    ...base,
    rate: oneOrMany(rateValue).describe('Offered arrival rate, one point per value.'),
  })
  .strict()
  .refine((c) => !(c.concurrency && c.concurrency.length > 1), {
    message: 'In "bench: rate", "concurrency:" is one cap on requests in flight, e.g. "concurrency: 64"',
    path: ['concurrency'],
  })
  .refine((c) => !(c.requests && c.duration), {
    message: 'Give "requests:" or "duration:" per point, not both',
    path: ['duration'],
  });

type Cell = z.output<typeof sweepSchema> | z.output<typeof rateSchema>;

function analyze(cell: Cell, ctx: AnalyzeContext): Finding[] {
  const fs: Finding[] = [];
  // The fixed-seed prefix-cache trap is the checks module's rule (fixed-seed-prefix-cache).
  if (cell.top_k <= 0 || cell.top_p >= 1)
    fs.push(
      finding(
        'warning',
        'sampler-native-path',
        'With top_k ≤ 0 or top_p = 1 vLLM skips its fused top-p/top-k sampler and takes the native path: the benchmark then measures a sampler real traffic does not use.',
        [cell.top_k <= 0 ? 'top_k' : 'top_p'],
        {
          fix: 'keep top_p below 1 and top_k positive (defaults 0.95 and 50)',
        },
      ),
    );
  const maxLen = ctx.setup?.server?.max_model_len as { value: number } | undefined;
  const fixedLen = 'value' in cell.input && 'value' in cell.output ? cell.input.value + cell.output.value : NaN;
  if (maxLen && fixedLen > maxLen.value)
    fs.push(
      finding(
        'error',
        'exceeds-max-model-len',
        `input + output = ${fixedLen} tokens exceeds the setup's max_model_len ${maxLen.value}: every request would be refused`,
        ['input'],
        { fix: 'shorten input or output, or raise max_model_len in the setup' },
      ),
    );
  return fs;
}

export function reportSpec(
  cell: BenchBase,
  seed: ReportSpec['seed'],
  requests: number | undefined,
  open: boolean,
  means: { input: number; output: number },
): ReportSpec {
  return {
    loop: open ? 'open' : 'closed',
    input: means.input,
    output: means.output,
    requests,
    durationS: cell.duration?.value,
    seed,
    slo: sloSpecOf(cell.slo),
    percentiles: cell.percentiles,
    stopAbove: stopAbove(cell),
    burstiness: cell.burstiness,
    repeats: cell.repeats,
  };
}

const ms = (s: number | undefined) => (s === undefined ? undefined : s * 1000);

/** A cell's `slo:` keys as the metrics take them (limits in ms); undefined without any. */
export function sloSpecOf(slo: z.output<typeof sloSchema> | undefined): SloSpec | undefined {
  return slo ? sloOf(Object.fromEntries(Object.entries(slo).map(([k, q]) => [k, ms(q?.value)]))) : undefined;
}

/**
 * A workload that reuses prefixes on purpose is not contaminated by its own hits: a shared prefix
 * is flagged only 10 points above the hit rate it implies; sessions and traces (whose reuse is the
 * conversation's or the trace's own) are not flagged. Undefined: the default threshold.
 */
export function designedReuse(w: CellWorkload, meanInput: number, requests: number | undefined): number | undefined {
  if (w.sessions || w.trace) return 1;
  if (w.sharedPrefix) return Math.min(1, expectedPrefixHitRate(w.sharedPrefix, meanInput, requests ?? 100) + 0.1);
  return undefined;
}

export function stopAbove(cell: BenchBase): number | undefined {
  if (cell.on_failure === 'continue') return undefined;
  return cell.on_failure?.stop_above.value ?? 0.5;
}

/** The endpoint a bench cell measures (the simulated one, started, when the setup says `sim`) and its key. */
export async function benchEndpoint(ctx: RunContext): Promise<{ endpoint: string; apiKey?: string }> {
  const setup = ctx.setup!;
  const services = ctx.notebook.services;
  let endpoint = setup.endpoint ?? 'sim';
  if (endpoint === 'sim') {
    if (!services.simEndpoint)
      throw new CellError(
        'This host cannot start the simulated endpoint: set "endpoint: http://host:8000" in the setup',
        ['bench'],
        'no-sim',
      );
    try {
      endpoint = await services.simEndpoint(setup);
    } catch (e) {
      throw new CellError(
        `The simulated endpoint did not start (${(e as Error).message}): set "endpoint: http://host:8000" in the setup to measure a real server`,
        ['bench'],
        'sim-unavailable',
      );
    }
  } else if (services.confirmHost) {
    const ok = await services.confirmHost(endpoint);
    if (!ok)
      throw new CellError(
        `Requests to ${endpoint} were not allowed: confirm the host, or change "endpoint:" in the setup`,
        ['bench'],
        'host-refused',
      );
  }
  // The key the user set for this endpoint's origin; the simulated endpoint never gets one.
  const simulated = (setup.endpoint ?? 'sim') === 'sim';
  const apiKey = simulated ? undefined : (await services.getApiKey?.(endpoint)) || undefined;
  return { endpoint, apiKey };
}

/** The prompt seeds a bench cell asks for: per point from a base (random unless given, recorded in the values), or one fixed. */
export function benchSeed(cell: BenchBase): ReportSpec['seed'] {
  return cell.seed === 'per-point'
    ? { mode: 'per-point', base: cell.base_seed ?? (Math.random() * 2 ** 32) >>> 0 }
    : { mode: 'fixed', value: cell.seed };
}

/** The sweep options a bench cell's keys give; the loads (lists, a replay rate, a capacity search) are the caller's. */
export function benchSweepOptions(
  cell: BenchBase,
  ctx: RunContext,
  at: { endpoint: string; apiKey?: string },
  spec: ReportSpec,
  workload: CellWorkload,
  planned: boolean,
): SweepOptions {
  const setup = ctx.setup!;
  const services = ctx.notebook.services;
  return {
    endpoint: at.endpoint,
    apiKey: at.apiKey,
    api: cell.api,
    vocab: setup.model.vocab,
    setupModel: [setup.model.id, setup.model.name],
    input: Math.round(spec.input),
    output: Math.round(spec.output),
    workload: planned ? workload : undefined,
    burstiness: cell.burstiness,
    requests: spec.requests,
    durationMs: cell.duration ? cell.duration.value * 1000 : undefined,
    warmup: cell.warmup,
    seed: spec.seed,
    repeats: cell.repeats,
    idleTimeoutMs: cell.timeout ? cell.timeout.value * 1000 : undefined,
    requestTimeoutMs: cell.request_timeout ? cell.request_timeout.value * 1000 : undefined,
    topP: cell.top_p,
    topK: cell.top_k,
    temperature: cell.temperature,
    scrape: cell.scrape,
    stopAbove: stopAbove(cell),
    percentiles: cell.percentiles,
    slo: spec.slo,
    contaminationThreshold: cell.contamination_threshold?.value ?? designedReuse(workload, spec.input, spec.requests),
    keepRecords: cell.records,
    threads: services.settings?.benchThreads,
    workerScript: services.settings?.benchWorker,
  };
}

async function run(cell: Cell, ctx: RunContext) {
  const [
    { runSweep },
    { benchPlots, benchValues, findPredicted, recordsOutput, repeatsTable, runFacts, summaryTable },
    { isPlainWorkload, loadCellWorkload, replayRate, workloadMeans },
  ] = await Promise.all([import('../bench'), import('../bench/report'), import('../workload/cell')]);
  const setup = ctx.setup!;
  // The workload's files are read here, through the host (the worker reads none); its plan is predict: serving's.
  const workload = await loadCellWorkload(cell, ctx.notebook);
  const planned = !isPlainWorkload(workload);
  const means = workloadMeans(workload, setup.model.vocab);
  const services = ctx.notebook.services;
  const { endpoint, apiKey } = await benchEndpoint(ctx);
  // A trace or a rate schedule is one open-loop point at the rate it averages (its own arrivals).
  const replay = cell.trace || cell.rate_schedule ? replayRate(workload) : undefined;
  const rates = cell.rate ? cell.rate.map((r) => r.value) : replay !== undefined ? [replay] : undefined;
  const open = !!rates;
  const concurrency = cell.concurrency ?? [];
  // A trace replays all its rows and a schedule all its arrivals, unless "requests:" caps them.
  const requests = cell.duration
    ? undefined
    : (cell.requests?.value ??
      (cell.trace
        ? workload.trace!.rows.length
        : cell.rate_schedule
          ? undefined
          : Math.max(100, 4 * Math.max(1, ...concurrency))));
  const seed = benchSeed(cell);
  const spec = { ...reportSpec(cell, seed, requests, open, means), pricePerHour: setupPricePerHour(setup) };
  const opts: SweepOptions = {
    ...benchSweepOptions(cell, ctx, { endpoint, apiKey }, spec, workload, planned),
    concurrency: open ? undefined : concurrency,
    rate: rates,
    maxConcurrency: open ? cell.concurrency?.[0] : undefined,
  };
  const predicted = findPredicted(ctx.notebook.results, ctx.cellIndex);
  const sameLengths = 'value' in cell.input && 'value' in cell.output && !cell.trace && !cell.dataset && !cell.sessions;
  const mean = sameLengths ? '' : 'mean ';
  const title = `${cell.trace ? 'Trace replay' : cell.rate_schedule ? 'Rate schedule' : open ? 'Open-loop rate run' : 'Concurrency sweep'}: ${mean}${Math.round(means.input)} in / ${Math.round(means.output)} out tokens`;
  const points: PointResult[] = [];
  const nPoints = (open ? rates!.length : concurrency.length) * cell.repeats;
  // Live outputs: the table and the throughput plot grow as each point finishes.
  let chain: Promise<void> = Promise.resolve();
  const result = await runSweep(opts, {
    worker: services.settings?.benchWorker,
    signal: ctx.signal,
    onProgress: (p) =>
      ctx.progress({
        message: p.message,
        fraction: (p.point + (p.total ? p.done / p.total : 0)) / Math.max(1, nPoints),
      }),
    onPoint: (p) => {
      points.push(p);
      const snapshot = [...points];
      chain = chain.then(async () => {
        try {
          const outs: CellOutput[] = [
            summaryTable({ points: snapshot }, spec, `${title} (${snapshot.length}/${nPoints} points)`),
            ...(await benchPlots({ points: snapshot }, spec, predicted, 'throughput')),
          ];
          ctx.progress({
            outputs: outs,
            fraction: snapshot.length / nPoints,
            message: `${snapshot.length} of ${nPoints} points done`,
          });
        } catch {
          // a progress rendering failure must not cost the measurement
        }
      });
    },
  });
  await chain;
  const values = benchValues(result, spec);
  // The setup measured, so a calibration on this cell fits on it (and says so when it predicts another).
  const facts: Fact[] = [...benchFacts(values, cell), setupFact(setup, { source: 'bench' })];
  // Measured beside predicted: the verdict per point, with the causes the run's evidence names.
  const { benchVerdict, predictedCurve } = await import('../explain/bench');
  // A verdict that could not be made is a note fact (the bench-note rule says it), never a lost measurement.
  const verdictNotes: Fact[] = [];
  let verdict: Awaited<ReturnType<typeof benchVerdict>>;
  // A cancelled run keeps what it measured and judges nothing; a verdict that fails never costs the measurement.
  if (result.points.length && !ctx.signal.aborted)
    try {
      verdict = await benchVerdict(
        {
          input: Math.round(means.input),
          output: Math.round(means.output),
          loop: open ? 'open' : 'closed',
          points: result.points.map((p) => (open ? p.rate! : p.concurrency!)),
          workload,
          requests: requests ?? Math.max(1, ...result.points.map((p) => p.metrics.completed + p.metrics.failed)),
          predicted: cell.predicted,
          tolerance: cell.tolerance?.value,
        },
        facts,
        ctx,
      );
    } catch (e) {
      if (!ctx.signal.aborted)
        verdictNotes.push({
          kind: 'note',
          text: `no verdict against a prediction: ${(e as Error).message}`,
          at: ['predicted'],
          source: 'bench',
        });
    }
  if (verdict) values.verdict = verdict.values;
  // The plot draws the prediction the verdict used when it came from a cell above, else the one in force as before.
  const drawn =
    verdict?.prediction.origin === 'above'
      ? predictedCurve(verdict.prediction)
      : (predicted ?? (verdict && predictedCurve(verdict.prediction)));
  const repeated = repeatsTable(result, spec);
  const outputs: CellOutput[] = [
    summaryTable(result, spec, title),
    ...(repeated ? [repeated] : []),
    ...(verdict ? [verdict.output] : []),
    runFacts(result, spec),
    ...(await benchPlots(result, spec, drawn)),
  ];
  const rec = recordsOutput(result);
  if (rec) outputs.push(rec);
  // Its findings are check rules over these facts (checks/bench.ts, checks/method.ts), made by the engine.
  return { values, facts: [...facts, ...verdictNotes], outputs };
}

export const benchSweepKind: KindModule<Cell> = {
  key: 'bench',
  variant: 'sweep',
  summary:
    'bench: sweep — concurrency (or rate) sweep against the endpoint: TTFT/TPOT/ITL/E2E, throughput, goodput, /metrics evidence',
  schema: sweepSchema as unknown as z.ZodType<Cell>,
  needsSetup: true,
  analyze,
  run,
  statedFacts: benchCellFacts,
  migrate: benchFacts,
};

export const benchRateKind: KindModule<Cell> = {
  key: 'bench',
  variant: 'rate',
  summary:
    'bench: rate — open-loop request-rate run (Poisson or gamma arrivals); latencies from the scheduled send time',
  schema: rateSchema as unknown as z.ZodType<Cell>,
  needsSetup: true,
  analyze,
  run,
  statedFacts: benchCellFacts,
  migrate: benchFacts,
};
