/**
 * One parser per tool's result file, each from the tool's own source (versions named below). Every
 * parser returns points in vLLM's definitions and says, in `translations`, what it changed.
 */
import { z } from 'zod';
import { distribution, pKey } from '../bench/metrics';
import { percentileStat, type ImportedPoint, type ImportedRun, type ImportTool, type StatName } from './types';

const num = z.number().finite();
const maybeNum = z.union([num, z.null()]).optional();

/** Statistics of an array of values (ms) by the bench's own summary, keyed as stats ("p99.9"). */
function statsOf(values: number[], percentiles: number[]): Record<StatName, number> {
  if (!values.length) return {};
  const d = distribution(values, percentiles);
  const out: Record<StatName, number> = { mean: d.mean, std: d.std, min: d.min, max: d.max, p50: d.median };
  for (const q of percentiles) out[percentileStat(q)] = d.p[pKey(q)];
  return out;
}

// ---------------------------------------------------------------------------------------------
// vLLM `vllm bench serve --save-result` (vllm/benchmarks/serve.py, 0.10–0.11 and main as of
// 2026): per-request arrays in seconds (`ttfts`, `itls` as one list of chunk gaps per request,
// `latencies`, `input_lens`, `output_lens`, `errors` with "" for success) beside summary keys
// `mean_ttft_ms`, `median_ttft_ms`, `p99_ttft_ms` … for ttft, tpot, itl and e2el. Older
// versions (benchmarks/benchmark_serving.py) write the same keys without `latencies`.

const vllmSchema = z
  .object({
    ttfts: z.array(z.union([num, z.null()])).optional(),
    itls: z.array(z.array(num)).optional(),
    latencies: z.array(z.union([num, z.null()])).optional(),
    input_lens: z.array(num).optional(),
    output_lens: z.array(num).optional(),
    errors: z.array(z.union([z.string(), z.null()])).optional(),
    completed: num.optional(),
    failed: num.optional(),
    duration: num.optional(),
    request_throughput: maybeNum,
    output_throughput: maybeNum,
    total_token_throughput: maybeNum,
    max_concurrency: maybeNum,
    request_rate: z.union([num, z.string(), z.null()]).optional(),
    model_id: z.string().optional(),
    backend: z.string().optional(),
  })
  .loose();

const VLLM_SUMMARY_METRICS = { ttft: 'ttft', tpot: 'tpot', itl: 'itl', e2e: 'e2el' } as const;

function parseVllm(raw: unknown, percentiles: number[]): ImportedRun {
  const j = vllmSchema.parse(raw);
  const rec = raw as Record<string, unknown>;
  const warnings: string[] = [];
  const translations = ['vLLM bench serve: its definitions are InfLab’s own; nothing translated.'];
  const point: ImportedPoint = { label: '', latency: {} };
  if (j.ttfts && j.ttfts.length) {
    const ok = j.ttfts.map((_, i) => !(j.errors?.[i] ?? '') && j.ttfts![i] !== null);
    const pick = (xs: (number | null)[] | undefined) =>
      (xs ?? []).flatMap((x, i) => (ok[i] && typeof x === 'number' ? [x * 1e3] : []));
    point.latency.ttft = statsOf(pick(j.ttfts), percentiles);
    if (j.itls)
      point.latency.itl = statsOf(
        j.itls.flatMap((gaps, i) => (ok[i] ? gaps.map((g) => g * 1e3) : [])),
        percentiles,
      );
    if (j.latencies && j.output_lens) {
      const e2e = pick(j.latencies);
      point.latency.e2e = statsOf(e2e, percentiles);
      // TPOT per request as vLLM computes it: (latency − ttft) / (output − 1), requests of one token left out.
      const tpot: number[] = [];
      j.ttfts.forEach((t, i) => {
        const lat = j.latencies![i];
        const out = j.output_lens![i];
        if (ok[i] && typeof t === 'number' && typeof lat === 'number' && out > 1)
          tpot.push(((lat - t) / (out - 1)) * 1e3);
      });
      point.latency.tpot = statsOf(tpot, percentiles);
    }
    point.completed = ok.filter(Boolean).length;
    point.failed = ok.length - point.completed;
  }
  // Summary keys fill whatever the arrays could not (an older file without `latencies`).
  for (const [metric, key] of Object.entries(VLLM_SUMMARY_METRICS) as [keyof typeof VLLM_SUMMARY_METRICS, string][]) {
    if (point.latency[metric]) continue;
    const stats: Record<StatName, number> = {};
    for (const [k, v] of Object.entries(rec)) {
      const m = new RegExp(`^(mean|median|std|p\\d+(?:\\.\\d+)?)_${key}_ms$`).exec(k);
      if (m && typeof v === 'number') stats[m[1] === 'median' ? 'p50' : m[1]] = v;
    }
    if (Object.keys(stats).length) point.latency[metric] = stats;
  }
  if (!Object.keys(point.latency).length) throw new Error('no ttfts array and no mean_ttft_ms/p99_ttft_ms keys');
  point.completed ??= j.completed;
  point.failed ??= j.failed;
  point.durationS = j.duration;
  point.outputTokS = j.output_throughput ?? undefined;
  point.totalTokS = j.total_token_throughput ?? undefined;
  point.requestS = j.request_throughput ?? undefined;
  if (j.input_lens?.length) point.meanInputTokens = mean(j.input_lens);
  if (j.output_lens?.length) point.meanOutputTokens = mean(j.output_lens);
  if (typeof j.max_concurrency === 'number') point.concurrency = j.max_concurrency;
  const rate = typeof j.request_rate === 'number' ? j.request_rate : Number(j.request_rate);
  if (Number.isFinite(rate)) point.rate = rate;
  point.label = loadLabel(point);
  if (!j.ttfts) warnings.push('no per-request arrays (ttfts, itls): only the percentiles the file lists are known');
  return {
    tool: 'vllm',
    description: `vllm bench serve${j.backend ? ` (${j.backend})` : ''}${j.model_id ? `, ${j.model_id}` : ''}`,
    points: [point],
    translations,
    warnings,
  };
}

// ---------------------------------------------------------------------------------------------
// GuideLLM benchmarks.json (vllm-project/guidellm, src/guidellm/benchmark/schemas, 0.3–0.5):
// {"benchmarks": [{"config"?: {strategy…}, "metrics": {time_to_first_token_ms, time_per_output_token_ms,
// inter_token_latency_ms, request_latency (s), output_tokens_per_second, tokens_per_second,
// requests_per_second, request_totals, prompt_token_count, output_token_count …}}]}, each metric a
// StatusDistributionSummary {successful: {mean, median, std_dev, min, max, count, percentiles:
// {p001, p01, p05, p10, p25, p50, p75, p90, p95, p99, p999}}, errored, incomplete, total}.
// GuideLLM's time_per_output_token_ms is (last token − request start) / output tokens: it includes
// the first token's wait. Its inter_token_latency_ms is (last − first token) / (output − 1) per
// request: vLLM's TPOT. It keeps no per-chunk gaps, so vLLM's ITL is not in the file.

const distSchema = z
  .object({
    mean: maybeNum,
    median: maybeNum,
    std_dev: maybeNum,
    min: maybeNum,
    max: maybeNum,
    count: maybeNum,
    percentiles: z.record(z.string(), z.union([num, z.null()])).optional(),
  })
  .loose();
const statusDist = z.object({ successful: distSchema.optional() }).loose();
const guidellmSchema = z
  .object({
    benchmarks: z
      .array(
        z
          .object({
            config: z
              .object({ strategy: z.record(z.string(), z.unknown()).optional() })
              .loose()
              .optional(),
            metrics: z.record(z.string(), z.unknown()),
          })
          .loose(),
      )
      .min(1),
  })
  .loose();

/** GuideLLM's percentile keys: p001 = 0.1, p01 = 1, p05 = 5, p50 = 50, p999 = 99.9. */
function guidellmPercentile(key: string): number | undefined {
  const m = /^p(\d+)$/.exec(key);
  if (!m) return undefined;
  const d = m[1];
  if (d === '001') return 0.1;
  if (d === '999') return 99.9;
  return Number(d);
}

function fromGuidellmDist(x: unknown, scale: number): Record<StatName, number> | undefined {
  const s = statusDist.safeParse(x);
  const d = s.success ? s.data.successful : undefined;
  if (!d) return undefined;
  const out: Record<StatName, number> = {};
  if (typeof d.mean === 'number') out.mean = d.mean * scale;
  if (typeof d.median === 'number') out.p50 = d.median * scale;
  if (typeof d.std_dev === 'number') out.std = d.std_dev * scale;
  if (typeof d.min === 'number') out.min = d.min * scale;
  if (typeof d.max === 'number') out.max = d.max * scale;
  for (const [k, v] of Object.entries(d.percentiles ?? {})) {
    const p = guidellmPercentile(k);
    if (p !== undefined && typeof v === 'number') out[percentileStat(p)] = v * scale;
  }
  return Object.keys(out).length ? out : undefined;
}

function parseGuidellm(raw: unknown): ImportedRun {
  const j = guidellmSchema.parse(raw);
  const points = j.benchmarks.map((b, i): ImportedPoint => {
    const m = b.metrics;
    const latency: ImportedPoint['latency'] = {};
    const ttft = fromGuidellmDist(m.time_to_first_token_ms, 1);
    const tpot = fromGuidellmDist(m.inter_token_latency_ms, 1);
    const e2e = fromGuidellmDist(m.request_latency, 1e3);
    if (ttft) latency.ttft = ttft;
    if (tpot) latency.tpot = tpot;
    if (e2e) latency.e2e = e2e;
    const strategy = b.config?.strategy ?? {};
    const p: ImportedPoint = { label: '', latency };
    const streams = strategy.streams ?? strategy.max_concurrency;
    if (typeof streams === 'number') p.concurrency = streams;
    if (typeof strategy.rate === 'number') p.rate = strategy.rate;
    p.outputTokS = fromGuidellmDist(m.output_tokens_per_second, 1)?.mean;
    p.totalTokS = fromGuidellmDist(m.tokens_per_second, 1)?.mean;
    p.requestS = fromGuidellmDist(m.requests_per_second, 1)?.mean;
    p.meanInputTokens = fromGuidellmDist(m.prompt_token_count, 1)?.mean;
    p.meanOutputTokens = fromGuidellmDist(m.output_token_count, 1)?.mean;
    const totals = z.object({ successful: num, errored: num.optional() }).loose().safeParse(m.request_totals);
    if (totals.success) {
      p.completed = totals.data.successful;
      p.failed = totals.data.errored;
    }
    p.label = loadLabel(p, `benchmark ${i + 1}${typeof strategy.type_ === 'string' ? ` (${strategy.type_})` : ''}`);
    return p;
  });
  return {
    tool: 'guidellm',
    description: `GuideLLM, ${points.length} benchmark${points.length === 1 ? '' : 's'}`,
    points,
    translations: [
      'GuideLLM inter_token_latency_ms → TPOT: (last − first token) / (output − 1) per request, vLLM’s TPOT.',
      'GuideLLM time_per_output_token_ms is not used: it divides the whole request time, first token included, by the output tokens.',
      'GuideLLM request_latency (s) → E2E (ms). vLLM’s ITL (per-chunk gaps) is not in a GuideLLM file.',
    ],
    warnings: [],
  };
}

// ---------------------------------------------------------------------------------------------
// AIPerf profile_export_aiperf.json (ai-dynamo/aiperf, docs/tutorials/working-with-profile-exports
// and metrics reference, 0.2–0.5): each metric a top-level object {unit, avg, p1 … p99, min, max,
// std} (0.1 nested them under "records"). Its inter_token_latency is (request latency − TTFT) /
// (output − 1) per request: vLLM's TPOT. Its inter_chunk_latency is the gap between chunks: vLLM's
// ITL. request_latency is E2E. Units are read from each metric's "unit".

const aiperfMetric = z
  .object({
    unit: z.string(),
    avg: maybeNum,
    std: maybeNum,
    min: maybeNum,
    max: maybeNum,
  })
  .catchall(z.unknown());

const TIME_SCALE_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, ms: 1, s: 1e3, sec: 1e3 };

function fromAiperf(x: unknown, warnings: string[], name: string): Record<StatName, number> | undefined {
  const r = aiperfMetric.safeParse(x);
  if (!r.success) return undefined;
  const scale = TIME_SCALE_MS[r.data.unit];
  if (scale === undefined) {
    warnings.push(`AIPerf ${name} is in "${r.data.unit}", not a time unit: left out`);
    return undefined;
  }
  const out: Record<StatName, number> = {};
  for (const [k, v] of Object.entries(r.data)) {
    if (typeof v !== 'number') continue;
    if (k === 'avg') out.mean = v * scale;
    else if (k === 'std' || k === 'min' || k === 'max') out[k] = v * scale;
    else if (/^p\d+(\.\d+)?$/.test(k)) out[k] = v * scale;
  }
  return Object.keys(out).length ? out : undefined;
}

function parseAiperf(raw: unknown): ImportedRun {
  const top = z.record(z.string(), z.unknown()).parse(raw);
  const rec = (top.records && typeof top.records === 'object' ? top.records : top) as Record<string, unknown>;
  const warnings: string[] = [];
  const latency: ImportedPoint['latency'] = {};
  const ttft = fromAiperf(rec.time_to_first_token, warnings, 'time_to_first_token');
  const tpot = fromAiperf(rec.inter_token_latency, warnings, 'inter_token_latency');
  const itl = fromAiperf(rec.inter_chunk_latency, warnings, 'inter_chunk_latency');
  const e2e = fromAiperf(rec.request_latency, warnings, 'request_latency');
  if (ttft) latency.ttft = ttft;
  if (tpot) latency.tpot = tpot;
  if (itl) latency.itl = itl;
  if (e2e) latency.e2e = e2e;
  if (!ttft && !e2e) throw new Error('no time_to_first_token or request_latency metric');
  const avg = (k: string) => {
    const r = aiperfMetric.safeParse(rec[k]);
    return r.success && typeof r.data.avg === 'number' ? r.data.avg : undefined;
  };
  const p: ImportedPoint = {
    label: '',
    latency,
    outputTokS: avg('output_token_throughput'),
    requestS: avg('request_throughput'),
    meanInputTokens: avg('input_sequence_length'),
    meanOutputTokens: avg('output_sequence_length'),
    completed: avg('request_count'),
    failed: avg('error_request_count'),
    durationS: avg('benchmark_duration'),
  };
  const loadgen = (top.input_config as { loadgen?: Record<string, unknown> } | undefined)?.loadgen;
  if (typeof loadgen?.concurrency === 'number') p.concurrency = loadgen.concurrency;
  if (typeof loadgen?.request_rate === 'number') p.rate = loadgen.request_rate;
  p.label = loadLabel(p);
  return {
    tool: 'aiperf',
    description: 'AIPerf profile export',
    points: [p],
    translations: [
      'AIPerf inter_token_latency → TPOT: (request latency − TTFT) / (output − 1), vLLM’s TPOT.',
      'AIPerf inter_chunk_latency → ITL (gap between streamed chunks), vLLM’s ITL. request_latency → E2E.',
    ],
    warnings,
  };
}

// ---------------------------------------------------------------------------------------------
// genai-bench per-run JSON (sgl-project/genai-bench, genai_bench/metrics/metrics.py and
// request_metrics_collector.py, 0.0.1xx): {"aggregated_metrics": {num_concurrency, run_duration,
// mean_output_throughput_tokens_per_s, mean_total_tokens_throughput_tokens_per_s,
// requests_per_second, num_completed_requests, num_error_requests, stats: {ttft, tpot, e2e_latency,
// num_input_tokens, num_output_tokens … each {min, max, mean, stddev, sum, p25 … p99}}},
// "individual_request_metrics": […]}. Times are seconds unless the run set metrics_time_unit=ms.
// Its tpot is (e2e − ttft) / (output − 1): vLLM's TPOT. It records no per-chunk gaps (no ITL).

const gbStat = z
  .object({ mean: maybeNum, stddev: maybeNum, min: maybeNum, max: maybeNum })
  .catchall(z.union([num, z.null()]));
const genaiSchema = z
  .object({
    aggregated_metrics: z
      .object({
        num_concurrency: maybeNum,
        iteration_type: z.string().optional(),
        run_duration: maybeNum,
        mean_output_throughput_tokens_per_s: maybeNum,
        mean_total_tokens_throughput_tokens_per_s: maybeNum,
        requests_per_second: maybeNum,
        num_completed_requests: maybeNum,
        num_error_requests: maybeNum,
        scenario: z.union([z.string(), z.null()]).optional(),
        stats: z.record(z.string(), gbStat),
      })
      .loose(),
  })
  .loose();

function fromGenai(s: z.output<typeof gbStat> | undefined, scale: number): Record<StatName, number> | undefined {
  if (!s) return undefined;
  const out: Record<StatName, number> = {};
  for (const [k, v] of Object.entries(s)) {
    if (typeof v !== 'number') continue;
    if (k === 'mean' || k === 'min' || k === 'max') out[k] = v * scale;
    else if (k === 'stddev') out.std = v * scale;
    else if (/^p\d+$/.test(k)) out[k] = v * scale;
  }
  return Object.keys(out).length ? out : undefined;
}

function parseGenaiBench(raw: unknown, timeUnit: 's' | 'ms'): ImportedRun {
  const a = genaiSchema.parse(raw).aggregated_metrics;
  const scale = timeUnit === 's' ? 1e3 : 1;
  const latency: ImportedPoint['latency'] = {};
  const ttft = fromGenai(a.stats.ttft, scale);
  const tpot = fromGenai(a.stats.tpot, scale);
  const e2e = fromGenai(a.stats.e2e_latency, scale);
  if (ttft) latency.ttft = ttft;
  if (tpot) latency.tpot = tpot;
  if (e2e) latency.e2e = e2e;
  const p: ImportedPoint = {
    label: '',
    latency,
    durationS: a.run_duration ?? undefined,
    outputTokS: a.mean_output_throughput_tokens_per_s ?? undefined,
    totalTokS: a.mean_total_tokens_throughput_tokens_per_s ?? undefined,
    requestS: a.requests_per_second ?? undefined,
    completed: a.num_completed_requests ?? undefined,
    failed: a.num_error_requests ?? undefined,
    meanInputTokens: a.stats.num_input_tokens?.mean ?? undefined,
    meanOutputTokens: a.stats.num_output_tokens?.mean ?? undefined,
  };
  if (typeof a.num_concurrency === 'number') {
    // In open-loop runs genai-bench stores the QPS in num_concurrency.
    if (a.iteration_type === 'request_rate') p.rate = a.num_concurrency;
    else p.concurrency = a.num_concurrency;
  }
  p.label = loadLabel(p, a.scenario ?? undefined);
  return {
    tool: 'genai-bench',
    description: `genai-bench${a.scenario ? `, scenario ${a.scenario}` : ''}`,
    points: [p],
    translations: [
      `genai-bench tpot → TPOT: (e2e − ttft) / (output − 1), vLLM’s TPOT; times read in ${timeUnit === 's' ? 'seconds (its default)' : 'ms (metrics_time_unit: ms)'}.`,
      'genai-bench keeps no per-chunk gaps: vLLM’s ITL is not in the file.',
    ],
    warnings: [],
  };
}

// ---------------------------------------------------------------------------------------------

/** Which tool wrote this JSON, from the keys only that tool writes. */
export function sniffTool(raw: unknown): ImportTool | undefined {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const o = raw as Record<string, unknown>;
  if (Array.isArray(o.benchmarks)) return 'guidellm';
  if (o.aggregated_metrics && typeof o.aggregated_metrics === 'object') return 'genai-bench';
  if ('ttfts' in o || 'mean_ttft_ms' in o || 'median_ttft_ms' in o) return 'vllm';
  const rec = (o.records && typeof o.records === 'object' ? o.records : o) as Record<string, unknown>;
  const t = rec.time_to_first_token ?? rec.request_latency;
  if (t && typeof t === 'object' && 'unit' in t) return 'aiperf';
  return undefined;
}

export interface ParseOptions {
  tool?: ImportTool;
  percentiles?: number[];
  /** genai-bench only: the unit its times were written in. */
  timeUnit?: 's' | 'ms';
}

/** Parse one tool's result JSON; throws an Error whose message says what was expected. */
export function parseResult(raw: unknown, opts: ParseOptions = {}): ImportedRun {
  const tool = opts.tool ?? sniffTool(raw);
  const percentiles = opts.percentiles ?? [90, 99];
  switch (tool) {
    case 'vllm':
      return parseVllm(raw, percentiles);
    case 'guidellm':
      return parseGuidellm(raw);
    case 'aiperf':
      return parseAiperf(raw);
    case 'genai-bench':
      return parseGenaiBench(raw, opts.timeUnit ?? 's');
    default:
      throw new Error(
        'not a result file InfLab knows: expected vllm bench serve --save-result JSON (ttfts, mean_ttft_ms), GuideLLM benchmarks.json ("benchmarks"), AIPerf profile_export_aiperf.json (time_to_first_token with "unit") or a genai-bench run JSON ("aggregated_metrics")',
      );
  }
}

function mean(xs: number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s / xs.length;
}

function loadLabel(p: ImportedPoint, fallback?: string): string {
  if (p.concurrency !== undefined && p.rate !== undefined) return `rate ${p.rate} req/s, ≤ ${p.concurrency} in flight`;
  if (p.concurrency !== undefined) return `concurrency ${p.concurrency}`;
  if (p.rate !== undefined) return `rate ${p.rate} req/s`;
  return fallback ?? 'run';
}
