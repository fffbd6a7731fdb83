/**
 * What a sweep shows: the summary table (formulas beside the numbers), the facts of the run, plots
 * (throughput against load with a predicted curve overlaid, TTFT/TPOT percentiles with SLO lines,
 * per-point ITL quantiles), the raw records (columnar), the named values with vLLM `--save-result`
 * field names beside ours, and the findings. Shared by the bench cell and `inflab bench`.
 */
import { MIME, factsOutput, tableOutput } from '../engine/outputs';
import type { Loop } from '../facts/schema';
import type { CellOutput } from '../engine/types';
import { factAbove, MAX_ERROR_MESSAGES, type Fact, type FactOf } from '../facts';
import { plotOutput } from '../plots/render';
import { COST_FORMULA, fmtDollarsPerMtok, tokenCosts } from '../cost';
import { fmtNum } from '../units';
import { FORMULAS, percentile, percentileSorted, pKey, toVllmResult, type Dist, type SloSpec } from './metrics';
import { doneLabel, loadLabel, qualityFacts, rttFact, rttNote } from './quality';
import { fromColumnar } from './records';
import { repeatMeans, type MeanRow } from './repeats';
import type { PointResult, SweepResult } from './sweep';
import type { ServerEvidence } from './prometheus';

export interface ReportSpec {
  loop: Loop;
  input: number;
  output: number;
  requests?: number;
  durationS?: number;
  seed: { mode: 'per-point'; base: number } | { mode: 'fixed'; value: number };
  slo?: SloSpec;
  percentiles: number[];
  stopAbove?: number;
  burstiness?: number;
  /** The setup's rental price, $/h of every GPU (cost.setupPricePerHour): each throughput also reads as $/Mtok. */
  pricePerHour?: number;
  /** Runs of each point (each with its own seed); above 1 the run reports means with confidence intervals. */
  repeats?: number;
}

export interface PredictedCurve {
  label: string;
  /** What drew it: a serving prediction, or only the decode roofline. */
  source: 'serving' | 'roofline';
  cellIndex?: number;
  points: { x: number; tok_s: number }[];
}

const r3 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? null : Math.round(x * 1000) / 1000);
const dshort = (d: Dist) => ({
  n: d.n,
  mean: r3(d.mean),
  median: r3(d.median),
  std: r3(d.std),
  ...Object.fromEntries(Object.entries(d.p).map(([k, v]) => [k, r3(v)])),
});

/** Strip user:password@ from a URL before it is shown. */
function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//');
  }
}

function pointLabel(p: Pick<PointResult, 'loop' | 'concurrency' | 'rate'>): string {
  return p.loop === 'open' ? `${p.rate} req/s` : `c=${p.concurrency}`;
}

/** The named values of a sweep: ours per point, and vLLM's --save-result names beside them. */
export function benchValues(
  r: Pick<SweepResult, 'points' | 'endpoint' | 'model' | 'rtt' | 'thread' | 'stopped' | 'metricsAvailable' | 'runId'> &
    Partial<Pick<SweepResult, 'telemetry' | 'vocab' | 'timeouts' | 'notes' | 'tokenize' | 'capacity'>>,
  spec: ReportSpec,
): Record<string, unknown> {
  const pk = spec.percentiles;
  const points = r.points.map((p) => {
    const m = p.metrics;
    const burst = burstShare(p);
    return {
      ...(p.loop === 'open' ? { rate: p.rate } : { concurrency: p.concurrency }),
      seed: p.seed,
      // When the point ran (wall clock, UTC): what a prediction in ink is dated against.
      ...(Number.isFinite(p.t0EpochMs) ? { started_at: new Date(Math.round(p.t0EpochMs)).toISOString() } : {}),
      ...(p.slot !== undefined ? { slot: p.slot, repeat: p.repeat } : {}),
      ...(p.probe ? { probe: p.probe } : {}),
      completed: m.completed,
      failed: m.failed,
      failure_rate: r3(m.failure_rate),
      errors: m.errors,
      duration_s: r3(m.duration_s),
      request_throughput: r3(m.request_throughput),
      output_throughput: r3(m.output_throughput),
      total_token_throughput: r3(m.total_token_throughput),
      goodput: r3(m.goodput),
      slo_met: m.slo_met,
      ...(spec.pricePerHour !== undefined ? { cost: jsonNum({ ...pointCosts(spec.pricePerHour, m) }) } : {}),
      ttft_ms: dshort(m.ttft_ms),
      ttft_content_ms: m.ttft_content_ms ? dshort(m.ttft_content_ms) : undefined,
      tpot_ms: dshort(m.tpot_ms),
      itl_ms: dshort(m.itl_ms),
      itl_read_together_share: r3(burst?.share),
      itl_read_together: burst ? { ...burst, under_ms: BURST_GAP_MS } : undefined,
      e2e_ms: dshort(m.e2e_ms),
      little: {
        lambda: r3(m.little.lambda),
        w_s: r3(m.little.w_s),
        lambda_w: r3(m.little.predicted_in_flight),
        observed_in_flight: r3(m.little.observed_in_flight),
        error: r3(m.little.error),
      },
      max_in_flight: p.maxInFlight,
      retried: m.retried,
      ...errorMessages(p),
      load: p.load,
      usage: p.usage,
      server_counters: p.serverCounters,
      client_loop_lag_ms: { p50: r3(p.loopLag.p50_ms), p99: r3(p.loopLag.p99_ms), max: r3(p.loopLag.max_ms) },
      dispatch_lag_ms: p.dispatchLagMs ? dshort(p.dispatchLagMs) : undefined,
      server: p.evidence,
      cached_share: r3(p.cached_share),
      contaminated: p.contaminated,
      contamination: p.contaminationReason,
    };
  });
  const rows = r.points.map((p) => ({
    x: p.loop === 'open' ? p.rate : p.concurrency,
    concurrency: p.concurrency,
    rate: p.rate,
    output_throughput: r3(p.metrics.output_throughput),
    request_throughput: r3(p.metrics.request_throughput),
    median_ttft_ms: r3(p.metrics.ttft_ms.median),
    p99_ttft_ms: r3(p.metrics.ttft_ms.p[pKey(99)] ?? percentileFallback(p, 99, 'ttft')),
    median_tpot_ms: r3(p.metrics.tpot_ms.median),
    median_itl_ms: r3(p.metrics.itl_ms.median),
  }));
  const vllm = r.points.map((p) =>
    jsonNum(
      toVllmResult(p.metrics, {
        endpoint_type: 'openai',
        model_id: r.model,
        num_prompts: p.metrics.completed + p.metrics.failed,
        request_rate: p.loop === 'open' ? p.rate : 'inf',
        burstiness: p.loop === 'open' ? (spec.burstiness ?? 1) : 1,
        max_concurrency: p.loop === 'closed' ? p.concurrency : null,
        percentile_metrics: 'ttft,tpot,itl,e2el',
        metric_percentiles: pk.join(','),
      }),
    ),
  );
  return {
    // Saved notebooks (and benchFacts) read this key: it keeps its name.
    mode: spec.loop,
    load_shape:
      spec.loop === 'closed'
        ? 'closed loop: concurrency fixes L (in flight); latencies from the actual send time'
        : 'open loop: rate fixes λ; latencies from the scheduled send time',
    endpoint: displayUrl(r.endpoint),
    model: r.model,
    input_tokens: spec.input,
    output_tokens: spec.output,
    seed:
      spec.seed.mode === 'fixed'
        ? { mode: 'fixed', value: spec.seed.value }
        : { mode: 'per-point', base: spec.seed.base },
    thread: r.thread,
    rtt_ms: r.rtt
      ? {
          median: r3(r.rtt.median_ms),
          min: r3(r.rtt.min_ms),
          n: r.rtt.n,
          path: r.rtt.path,
          method: r.rtt.method,
          reliable: r.rtt.reliable ?? true,
          unreliable_reason: r.rtt.unreliable_reason,
        }
      : null,
    server_metrics: r.metricsAvailable,
    telemetry: r.telemetry ?? null,
    vocab: r.vocab ?? null,
    timeouts: r.timeouts ?? null,
    // Present for a dataset of text prompts: the server's /tokenize count against the dataset's.
    ...(r.tokenize ? { tokenize: r.tokenize } : {}),
    notes: r.notes ?? [],
    run_id: r.runId,
    stopped: r.stopped ?? null,
    ...(spec.pricePerHour !== undefined ? { price_per_hour: spec.pricePerHour } : {}),
    points,
    rows,
    vllm,
    ...(spec.repeats && spec.repeats > 1 ? { repeats: spec.repeats, means: repeatMeans(points) } : {}),
    ...(r.capacity ? { capacity: r.capacity } : {}),
  };
}

/** The first message of a failed request, the first retry's cause, and the distinct messages in the order they came. */
function errorMessages(p: Pick<PointResult, 'records'>): {
  first_error?: string;
  first_retry_error?: string;
  error_messages?: string[];
} {
  const c = p.records;
  if (!c) return {};
  const first = c.error_message.find((x, i) => x && c.ok[i] === 0);
  const retry = c.retry_error?.find((x) => x);
  const distinct: string[] = [];
  for (const x of c.error_message) {
    if (distinct.length >= MAX_ERROR_MESSAGES) break;
    if (x && !distinct.includes(x)) distinct.push(x);
  }
  return {
    ...(first ? { first_error: first } : {}),
    ...(retry ? { first_retry_error: retry } : {}),
    ...(distinct.length ? { error_messages: distinct } : {}),
  };
}

function percentileFallback(p: PointResult, q: number, which: 'ttft'): number | undefined {
  if (!p.records) return undefined;
  const xs = fromColumnar(p.records)
    .filter((x) => x.ok && x.chunkMs.length)
    .map((x) => x.chunkMs[0] - (p.loop === 'open' ? x.scheduledMs : x.sentMs));
  return which === 'ttft' && xs.length ? percentile(xs, q) : undefined;
}

function jsonNum<T extends Record<string, unknown>>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) out[k] = typeof v === 'number' && !Number.isFinite(v) ? null : v;
  return out as T;
}

const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '—' : fmtNum(v, v >= 100 ? 0 : 1));

export function summaryTable(r: Pick<SweepResult, 'points' | 'rtt'>, spec: ReportSpec, title: string): CellOutput {
  // The tail shown beside the median: the p99 when asked for, else the highest percentile asked for.
  const tailQ = spec.percentiles.includes(99) ? 99 : (spec.percentiles[spec.percentiles.length - 1] ?? 99);
  const p99 = pKey(tailQ);
  const pl = `p${tailQ}`;
  const priced = spec.pricePerHour !== undefined;
  const anySlo = r.points.some((p) => p.metrics.goodput !== undefined);
  const rows = r.points.map((p) => {
    const m = p.metrics;
    return {
      load: `${loadLabel(p)}${p.repeat !== undefined && (spec.repeats ?? 1) > 1 ? ` #${p.repeat + 1}` : ''}`,
      done: doneLabel(p),
      req_s: fmtNum(m.request_throughput, 2),
      out_tok_s: fmtNum(m.output_throughput, 1),
      ttft: `${ms(m.ttft_ms.median)} / ${ms(m.ttft_ms.p[p99])}`,
      tpot: `${ms(m.tpot_ms.median)} / ${ms(m.tpot_ms.p[p99])}`,
      itl: `${ms(m.itl_ms.median)} / ${ms(m.itl_ms.p[p99])}`,
      e2e: `${ms(m.e2e_ms.median)} / ${ms(m.e2e_ms.p[p99])}`,
      goodput: m.goodput === undefined ? '—' : fmtNum(m.goodput, 2),
      ...(priced ? costCells(pointCosts(spec.pricePerHour!, m)) : {}),
      little: !Number.isFinite(m.little.predicted_in_flight)
        ? '—'
        : m.little.observed_in_flight === undefined
          ? fmtNum(m.little.predicted_in_flight, 2)
          : `${fmtNum(m.little.predicted_in_flight, 2)} vs ${fmtNum(m.little.observed_in_flight, 2)}`,
      hit:
        p.evidence?.prefix_hit_rate !== undefined
          ? `${fmtNum(p.evidence.prefix_hit_rate * 100, 1)}%${p.contaminated ? ' ⚠' : ''}`
          : p.cached_share !== undefined
            ? `${fmtNum(p.cached_share * 100, 1)}% (usage)${p.contaminated ? ' ⚠' : ''}`
            : '—',
      lag: ms(p.loopLag.p99_ms),
      spec: specWords(p.evidence?.spec_decode),
    };
  });
  // Speculative decoding: the server's acceptance over the point (its spec_decode_* counters), when it drafts.
  const anySpec = r.points.some((p) => p.evidence?.spec_decode);
  const rtt = rttNote(r);
  const note =
    rtt +
    (spec.loop === 'closed'
      ? 'Closed loop (concurrency fixes L): with fixed lengths requests move in waves, so p99 TTFT measures burst collisions. '
      : 'Open loop (rate fixes λ): latencies count from the scheduled send time. ') +
    `Latencies in ms as median / ${pl}. ${FORMULAS.ttft}; ${FORMULAS.tpot}; ${FORMULAS.itl}; ${FORMULAS.e2e}; ${FORMULAS.output_throughput}; ${FORMULAS.goodput}; ${FORMULAS.little}; ${FORMULAS.hit_rate}; client lag = event-loop delay p99 of the load thread.` +
    (priced ? ` ${costNote(r.points, spec.pricePerHour!)}` : '');
  return tableOutput(
    title,
    [
      { key: 'load', label: spec.loop === 'closed' ? 'concurrency' : 'rate' },
      { key: 'done', label: 'ok/sent', align: 'right' },
      { key: 'req_s', label: 'req/s', align: 'right' },
      { key: 'out_tok_s', label: 'out tok/s', align: 'right' },
      ...(priced
        ? [
            { key: 'usd_out' as const, label: '$/M out tok', align: 'right' as const },
            { key: 'usd_total' as const, label: '$/M tok (in+out)', align: 'right' as const },
          ]
        : []),
      { key: 'ttft', label: 'TTFT', align: 'right' },
      { key: 'tpot', label: 'TPOT', align: 'right' },
      { key: 'itl', label: 'ITL', align: 'right' },
      { key: 'e2e', label: 'E2E', align: 'right' },
      { key: 'goodput', label: 'goodput req/s', align: 'right' },
      ...(priced && anySlo ? [{ key: 'usd_good' as const, label: '$/M tok within SLO', align: 'right' as const }] : []),
      { key: 'little', label: 'λ·W vs L', align: 'right' },
      { key: 'hit', label: 'prefix hit', align: 'right' },
      { key: 'lag', label: 'client lag', align: 'right' },
      ...(anySpec ? [{ key: 'spec' as const, label: 'spec. accepted (tokens/step)', align: 'right' as const }] : []),
    ],
    rows,
    anySpec
      ? `${note} Spec. accepted = Δvllm:spec_decode_num_accepted_tokens / Δ…_num_draft_tokens; tokens/step = 1 + Δaccepted / Δvllm:spec_decode_num_drafts (vLLM's mean acceptance length).`
      : note,
  );
}

/** A point's costs at `perHour`: output, total, and within-SLO output tokens (good_output_tokens / duration). */
function pointCosts(perHour: number, m: PointResult['metrics']) {
  return tokenCosts(perHour, {
    output_tok_s: m.output_throughput,
    total_tok_s: m.total_token_throughput,
    ...(m.good_output_tokens !== undefined && m.duration_s > 0
      ? { good_tok_s: m.good_output_tokens / m.duration_s }
      : {}),
  });
}

function costCells(c: ReturnType<typeof pointCosts>) {
  return {
    usd_out: fmtDollarsPerMtok(c.usd_per_mtok_output),
    usd_total: fmtDollarsPerMtok(c.usd_per_mtok_total),
    usd_good: fmtDollarsPerMtok(c.usd_per_mtok_goodput),
  };
}

/**
 * The price, the formula, and the number a provider sells: the cheapest point per output token,
 * against the cheapest point whose stats meet every SLO (and how many times dearer that is).
 */
function costNote(points: PointResult[], perHour: number): string {
  const at = (p: PointResult) => `${pointLabel(p)} (${fmtNum(p.metrics.output_throughput, 0)} tok/s)`;
  const cost = (p: PointResult) => pointCosts(perHour, p.metrics).usd_per_mtok_output;
  const cheapest = (ps: PointResult[]) =>
    ps.filter((p) => Number.isFinite(cost(p))).sort((a, b) => cost(a) - cost(b))[0];
  const raw = cheapest(points);
  const slo = points.some((p) => p.metrics.slo_met !== undefined);
  let out = `Cost at $${fmtNum(perHour, 2)}/h: ${COST_FORMULA}${slo ? '; within SLO counts the output tokens of requests that met every SLO' : ''}.`;
  if (!raw) return out;
  out += ` Cheapest point: ${at(raw)} at ${fmtDollarsPerMtok(cost(raw))}`;
  if (slo) {
    const ok = cheapest(points.filter((p) => p.metrics.slo_met));
    out += ok
      ? `; cheapest meeting the SLOs: ${at(ok)} at ${fmtDollarsPerMtok(cost(ok))}${ok === raw ? ' (the same point)' : `, ${fmtNum(cost(ok) / cost(raw), 1)}× the cheapest`}`
      : '; no point met the SLOs';
  }
  return `${out}.`;
}

/** "71.2% (2.77; per position 0.70, 0.49, …)": a point's acceptance rate, mean acceptance length and per-position rates. */
function specWords(s: ServerEvidence['spec_decode']): string {
  if (!s || s.acceptance_rate === undefined) return '—';
  const pos = s.per_position?.length ? `; per position ${s.per_position.map((r) => fmtNum(r, 2)).join(', ')}` : '';
  return `${fmtNum(100 * s.acceptance_rate, 1)}%${s.mean_acceptance_length !== undefined ? ` (${fmtNum(s.mean_acceptance_length, 2)}${pos})` : ''}`;
}

/**
 * With repeats: each point's mean over its runs with the 95% confidence interval (Student t over
 * the runs), one row a point. Undefined when nothing was run more than once.
 */
export function repeatsTable(r: Pick<SweepResult, 'points'>, spec: ReportSpec): CellOutput | undefined {
  if (!spec.repeats || spec.repeats < 2) return undefined;
  const means = repeatMeans(benchValues({ ...EMPTY_RUN, points: r.points }, spec).points as unknown[]);
  if (!means.length) return undefined;
  const p99 = pKey(spec.percentiles.includes(99) ? 99 : (spec.percentiles[spec.percentiles.length - 1] ?? 99));
  const cols: [string, string, number][] = [
    ['output_throughput_tok_s', 'out tok/s', 1],
    ['request_throughput_req_s', 'req/s', 2],
    ['ttft_p50_ms', 'TTFT p50', 1],
    [`ttft_${p99.replace('_', '.')}_ms`, `TTFT ${p99.replace('_', '.')}`, 1],
    ['tpot_p50_ms', 'TPOT p50', 2],
    [`tpot_${p99.replace('_', '.')}_ms`, `TPOT ${p99.replace('_', '.')}`, 2],
    [`e2e_${p99.replace('_', '.')}_ms`, `E2E ${p99.replace('_', '.')}`, 0],
    ['goodput_req_s', 'goodput req/s', 2],
  ];
  const shown = cols.filter(([k]) => means.some((m) => m.ci[k]));
  const cell = (m: MeanRow, k: string, d: number) => {
    const c = m.ci[k];
    return c ? `${fmtNum(m[k] as number, d)} ± ${fmtNum(c.half, d)}` : '—';
  };
  return tableOutput<Record<string, string>>(
    `Means over ${spec.repeats} repeats with 95% confidence intervals`,
    [
      { key: 'load', label: spec.loop === 'closed' ? 'concurrency' : 'rate' },
      { key: 'n', label: 'runs', align: 'right' },
      ...shown.map(([k, label]) => ({ key: k, label, align: 'right' as const })),
    ],
    means.map((m) => ({
      load: m.rate !== undefined ? `${m.rate} req/s` : `c=${m.concurrency}`,
      n: String(m.n),
      ...Object.fromEntries(shown.map(([k, , d]) => [k, cell(m, k, d)])),
    })),
    'mean ± half-width of the 95% confidence interval over the runs: t(0.975, n − 1) · s / √n, s the standard deviation of the per-run values (latencies in ms). Each run had its own prompts (a seed per repeat). Compare rows reading these means say whether a difference is larger than this noise.',
  );
}

const EMPTY_RUN = { endpoint: '', model: '', thread: 'main' as const, metricsAvailable: false, runId: '' };

export function runFacts(r: SweepResult, spec: ReportSpec): CellOutput {
  const facts: [string, string][] = [
    ['endpoint', displayUrl(r.endpoint)],
    ['model (from /v1/models)', r.model],
    [
      'load',
      spec.loop === 'closed'
        ? 'closed loop (concurrency list)'
        : `open loop (rate list, ${spec.burstiness && spec.burstiness !== 1 ? `gamma, burstiness ${spec.burstiness}` : 'Poisson'})`,
    ],
    [
      'per point',
      `${spec.requests !== undefined ? `${spec.requests} requests` : `${spec.durationS} s`}${(spec.repeats ?? 1) > 1 ? `, run ${spec.repeats} times with fresh prompts (a seed per repeat)` : ''}`,
    ],
    [
      'prompt / output',
      `${spec.input} tokens (random ids) / ${spec.output} tokens (ignore_eos, min_tokens = max_tokens)`,
    ],
    [
      'seeds',
      spec.seed.mode === 'fixed'
        ? `fixed ${spec.seed.value} at every point (prefix-cache trap)`
        : `per point, from base ${spec.seed.base}`,
    ],
    ['network RTT', rttFact(r)],
    [
      'server /metrics',
      r.metricsAvailable
        ? `${r.telemetry ? `${r.telemetry.server}: ` : ''}scraped before, during and after each point`
        : 'not available',
    ],
    [
      'failure policy',
      spec.stopAbove === undefined
        ? 'continue'
        : `stop after a point with more than ${fmtNum(spec.stopAbove * 100, 0)}% failed`,
    ],
    ['load thread', r.thread === 'worker' ? 'worker thread' : 'main thread (no worker could start)'],
  ];
  const late = simLatenessFact(r);
  if (late) facts.push(late);
  facts.push(...qualityFacts(r, spec.input));
  if (r.stopped) facts.push(['stopped', r.stopped.message]);
  return factsOutput('Bench run', facts);
}

/**
 * Against InfLab's simulator: how late it ran during each point, from its own /metrics (the
 * inflab:sim_* counters), so its jitter is not read as the simulated server's latency.
 */
export function simLatenessFact(r: Pick<SweepResult, 'points'>): [string, string] | undefined {
  const parts: string[] = [];
  for (const p of r.points) {
    const l = p.evidence?.sim_lateness;
    if (!l || !l.steps) continue;
    const over = (t: string) => `${fmtNum(100 * (l.over_share[t] ?? 0), 1)}% > ${t} ms`;
    parts.push(
      `${pointLabel(p)}: ${fmtNum(l.steps, 0)} steps, mean ${ms(l.mean_ms)} ms late, ${over('5')}, ${over('10')}${l.max_ms !== undefined ? `, max ${ms(l.max_ms)} ms` : ''}`,
    );
  }
  if (!parts.length) return undefined;
  return ['simulator lateness (its own clock, wall ms; not part of the simulated latencies)', parts.join('; ')];
}

/** Gaps under this are chunks the client read together (one socket read), not the server's timing. */
export const BURST_GAP_MS = 0.1;

/** Share of a point's gaps between chunks (ok requests) under BURST_GAP_MS, and how many gaps there were. */
function burstShare(p: Pick<PointResult, 'records'>): { share: number; gaps: number } | undefined {
  const c = p.records;
  if (!c) return undefined;
  let gaps = 0;
  let burst = 0;
  let k = 0;
  for (let i = 0; i < c.n; i++) {
    for (let j = 0; j < c.chunks[i]; j++, k++) {
      if (j === 0 || !c.ok[i]) continue;
      gaps++;
      if (c.chunk_ms[k] < BURST_GAP_MS) burst++;
    }
  }
  return gaps ? { share: burst / gaps, gaps } : undefined;
}

/** Precomputed ITL quantiles per point (the raw ITLs stay in the records). */
function itlQuantiles(p: PointResult): { q: number; itl_ms: number }[] {
  if (!p.records) return [];
  const itl: number[] = [];
  let k = 0;
  const c = p.records;
  for (let i = 0; i < c.n; i++) {
    for (let j = 0; j < c.chunks[i]; j++, k++) if (j > 0 && c.ok[i]) itl.push(c.chunk_ms[k]);
  }
  if (!itl.length) return [];
  const s = Float64Array.from(itl).sort();
  return [1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9].map((q) => ({
    q,
    itl_ms: Math.round(percentileSorted(s, q) * 1000) / 1000,
  }));
}

export async function benchPlots(
  r: Pick<SweepResult, 'points'>,
  spec: ReportSpec,
  predicted?: PredictedCurve,
  only: 'all' | 'throughput' = 'all',
): Promise<CellOutput[]> {
  if (!r.points.length) return [];
  const xTitle = spec.loop === 'closed' ? 'concurrency (requests in flight)' : 'request rate (req/s)';
  const xScale = spec.loop === 'closed' ? { type: 'log', base: 2 } : { type: 'linear' };
  const xOf = (p: PointResult) => (p.loop === 'open' ? p.rate! : p.concurrency!);
  const thr = r.points.map((p) => ({
    x: xOf(p),
    series: 'measured output tok/s',
    tok_s: Math.round(p.metrics.output_throughput * 10) / 10,
  }));
  const layers: Record<string, unknown>[] = [
    {
      data: { values: thr },
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'x', type: 'quantitative', scale: xScale, title: xTitle },
        y: { field: 'tok_s', type: 'quantitative', title: 'output tokens/s' },
        color: { field: 'series', type: 'nominal', title: null },
        tooltip: [
          { field: 'x', title: spec.loop === 'closed' ? 'concurrency' : 'rate' },
          { field: 'tok_s', format: ',.1f' },
        ],
      },
    },
  ];
  const drawn = predicted && predicted.points.length && spec.loop === 'closed' ? predicted : undefined;
  if (drawn) {
    layers.push({
      data: { values: drawn.points.map((p) => ({ x: p.x, series: drawn.label, tok_s: p.tok_s })) },
      mark: { type: 'line', strokeDash: [5, 4], point: true },
      encoding: {
        x: { field: 'x', type: 'quantitative' },
        y: { field: 'tok_s', type: 'quantitative' },
        color: { field: 'series', type: 'nominal', title: null },
      },
    });
  }
  const out: CellOutput[] = [
    await plotOutput({
      title: `Output throughput vs ${spec.loop === 'closed' ? 'concurrency' : 'rate'}${drawn ? (drawn.source === 'serving' ? ', against the serving prediction' : ', against the decode roofline only (no serving prediction above)') : ''}`,
      width: 420,
      height: 240,
      layer: layers,
    }),
  ];
  if (only === 'throughput') return out;

  const pcts = [50, ...spec.percentiles.filter((q) => q !== 50)];
  const lat = r.points
    .flatMap((p) =>
      (['ttft_ms', 'tpot_ms'] as const).flatMap((k) =>
        pcts.map((q) => ({
          x: xOf(p),
          metric: k === 'ttft_ms' ? 'TTFT' : 'TPOT',
          pct: `p${q}`,
          ms: Math.round((q === 50 ? p.metrics[k].median : p.metrics[k].p[pKey(q)]) * 1000) / 1000,
        })),
      ),
    )
    .filter((d) => Number.isFinite(d.ms));
  const slo = (spec.slo ?? [])
    .filter((l) => l.metric === 'ttft' || l.metric === 'tpot')
    .map((l) => ({ metric: l.metric.toUpperCase(), ms: l.ms, label: `SLO ${l.stat} ${l.ms} ms` }));
  const panel = (metric: 'TTFT' | 'TPOT') => ({
    title: `${metric} percentiles`,
    width: 260,
    height: 200,
    layer: [
      {
        data: { values: lat.filter((d) => d.metric === metric) },
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'x', type: 'quantitative', scale: xScale, title: xTitle },
          y: { field: 'ms', type: 'quantitative', title: `${metric} (ms)` },
          color: { field: 'pct', type: 'nominal', title: 'percentile' },
          tooltip: [{ field: 'x' }, { field: 'pct' }, { field: 'ms', format: ',.1f' }],
        },
      },
      ...(slo.some((s) => s.metric === metric)
        ? [
            {
              data: { values: slo.filter((s) => s.metric === metric) },
              mark: { type: 'rule', strokeDash: [4, 4], color: 'firebrick' },
              encoding: { y: { field: 'ms', type: 'quantitative' }, tooltip: [{ field: 'label' }] },
            },
          ]
        : []),
    ],
  });
  out.push(await plotOutput({ hconcat: [panel('TTFT'), panel('TPOT')] }));

  const itl = r.points.flatMap((p) => itlQuantiles(p).map((d) => ({ ...d, point: pointLabel(p) })));
  if (itl.length)
    out.push(
      await plotOutput({
        title: 'ITL distribution per point (quantiles of the gaps between chunks)',
        width: 420,
        height: 220,
        data: { values: itl },
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'q', type: 'quantitative', title: 'percentile', scale: { type: 'linear', domain: [0, 100] } },
          y: { field: 'itl_ms', type: 'quantitative', scale: { type: 'log' }, title: 'ITL (ms)' },
          color: { field: 'point', type: 'nominal', title: 'point', sort: null },
          tooltip: [{ field: 'point' }, { field: 'q' }, { field: 'itl_ms', format: ',.2f' }],
        },
      }),
    );
  return out;
}

/** The records of every point, columnar, as one notebook output (MIME.records). */
export function recordsOutput(r: Pick<SweepResult, 'points'>): CellOutput | undefined {
  const pts = r.points.filter((p) => p.records);
  if (!pts.length) return undefined;
  const n = pts.reduce((s, p) => s + p.records!.n, 0);
  const data = {
    format: 'inflab.bench-records.v1',
    points: pts.map((p) => ({
      index: p.index,
      concurrency: p.concurrency,
      rate: p.rate,
      seed: p.seed,
      t0_epoch_ms: Math.round(p.t0EpochMs),
      records: p.records,
    })),
  };
  return {
    items: [
      { mime: MIME.records, data },
      {
        mime: MIME.plain,
        data: `raw records: ${n} requests in ${pts.length} point(s), columnar, times in ms rounded to the µs (${MIME.records})`,
      },
    ],
  };
}

/**
 * The predicted throughput curve a sweep is drawn against: the latest `predict: serving` curve
 * above the cell when there is one (what serving predicts), else the latest decode-roofline curve
 * (the naive bound, which a batch of real requests misses by the prefill and step overhead it does
 * not bill). Read from the cells' curve facts; the label says which one it is.
 */
export function findPredicted(
  results: ReadonlyMap<number, { ok: boolean; kind: string; name?: string; facts: Fact[] }>,
  beforeIndex: number,
): PredictedCurve | undefined {
  const throughput = (f: FactOf<'curve'>) => f.y === 'output_throughput' && f.points.length > 0;
  const found =
    factAbove(results, beforeIndex, 'curve', (f) => throughput(f) && f.source === 'predict: serving') ??
    factAbove(results, beforeIndex, 'curve', throughput);
  if (!found) return undefined;
  const { fact, cellIndex, cell } = found;
  const serving = fact.source === 'predict: serving';
  return {
    label: `${serving ? 'predicted serving' : 'decode roofline (no serving prediction above)'} — ${cell.kind}${cell.name ? ` "${cell.name}"` : ''}`,
    source: serving ? 'serving' : 'roofline',
    cellIndex,
    points: fact.points.map((p) => ({ x: p.x, tok_s: p.y })),
  };
}
