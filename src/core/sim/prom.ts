/**
 * `/metrics` of the simulated endpoint: Prometheus text exposition with vLLM V1's metric names and
 * labels (model_name, engine), as prometheus_client writes them (counters end in `_total`).
 */
import type { EngineCounters, SpecCounters } from './engine';

/** vLLM's buckets. */
export const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
  640.0, 2560.0,
];
export const E2E_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
  7680.0,
];
export const ITL_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];

export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly buckets: number[]) {
    this.counts = new Array(buckets.length).fill(0);
  }
  observe(v: number) {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]) this.counts[i]++;
  }
}

/** Thresholds (wall ms) of the simulator's own step-lateness counters. */
export const LATE_THRESHOLDS_MS = [1, 5, 10, 50] as const;

/**
 * How late the real-time simulator's steps went out (wall ms after the step's due time, to when its
 * first response's bytes were handed to the kernel): not vLLM's, the simulator's own jitter, so a
 * bench can tell it from the simulated server's latencies. The rest of a step's responses follow
 * one socket after another in the same order every step: a stream's place in that order is a
 * constant offset, not in its inter-token gaps (the perf script measures both). Separate counter
 * names per threshold (not buckets), so a scrape summed by metric name still tells them apart.
 */
export class StepLateness {
  steps = 0;
  sumMs = 0;
  readonly over = LATE_THRESHOLDS_MS.map(() => 0);
  /** The largest lateness since /metrics was last read. */
  maxSinceRead = 0;
  observe(ms: number) {
    const v = ms > 0 ? ms : 0;
    this.steps++;
    this.sumMs += v;
    for (let i = 0; i < LATE_THRESHOLDS_MS.length; i++) if (v > LATE_THRESHOLDS_MS[i]) this.over[i]++;
    if (v > this.maxSinceRead) this.maxSinceRead = v;
  }
}

/** Observations the server makes (latencies are engine-side, in simulated seconds). */
export class SimMetrics {
  readonly ttft = new Histogram(TTFT_BUCKETS);
  readonly e2e = new Histogram(E2E_BUCKETS);
  readonly itl = new Histogram(ITL_BUCKETS);
  readonly finished: Record<string, number> = { length: 0, stop: 0, abort: 0 };
  readonly lateness = new StepLateness();
}

/** Python's float repr for the values we print. */
function num(v: number): string {
  if (v === Infinity) return '+Inf';
  if (Number.isInteger(v)) return `${v}.0`;
  return String(v);
}

/** What /metrics reads of the engine (the engine itself, or the HTTP side's view of it). */
export interface EngineGauges {
  readonly counters: EngineCounters;
  readonly numRunning: number;
  readonly waiting: number;
  readonly kvUsage: number;
  /** Speculative decoding's counters, when the engine drafts. */
  readonly spec?: SpecCounters;
}

export function renderMetrics(engine: EngineGauges, m: SimMetrics, modelName: string): string {
  const labels = `engine="0",model_name="${modelName.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  const c = engine.counters;
  const out: string[] = [];
  const scalar = (name: string, type: 'gauge' | 'counter', help: string, v: number) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}{${labels}} ${num(v)}`);
  };
  const hist = (name: string, help: string, h: Histogram) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
    h.buckets.forEach((b, i) => out.push(`${name}_bucket{${labels},le="${num(b)}"} ${num(h.counts[i])}`));
    out.push(
      `${name}_bucket{${labels},le="+Inf"} ${num(h.count)}`,
      `${name}_count{${labels}} ${num(h.count)}`,
      `${name}_sum{${labels}} ${num(h.sum)}`,
    );
  };
  scalar('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', engine.numRunning);
  scalar('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', engine.waiting);
  scalar('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', engine.kvUsage);
  scalar(
    'vllm:prefix_cache_queries_total',
    'counter',
    'Prefix cache queries, in terms of number of queried tokens.',
    c.prefixQueries,
  );
  scalar(
    'vllm:prefix_cache_hits_total',
    'counter',
    'Prefix cache hits, in terms of number of cached tokens.',
    c.prefixHits,
  );
  scalar('vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.', c.preemptions);
  scalar('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', c.promptTokens);
  scalar('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', c.generationTokens);
  // Speculative decoding, only when the server drafts (vLLM registers them only then): the counters
  // of SpecDecodingProm (vllm/v1/spec_decode/metrics.py, vLLM v0.10–v0.11), per position too.
  const sc = engine.spec;
  if (sc?.acceptedPerPos.length) {
    scalar('vllm:spec_decode_num_drafts_total', 'counter', 'Number of spec decoding drafts.', sc.drafts);
    scalar('vllm:spec_decode_num_draft_tokens_total', 'counter', 'Number of draft tokens.', sc.draftTokens);
    scalar('vllm:spec_decode_num_accepted_tokens_total', 'counter', 'Number of accepted tokens.', sc.acceptedTokens);
    const pos = 'vllm:spec_decode_num_accepted_tokens_per_pos_total';
    out.push(`# HELP ${pos} Accepted tokens per draft position.`, `# TYPE ${pos} counter`);
    sc.acceptedPerPos.forEach((v, i) => out.push(`${pos}{${labels},position="${i}"} ${num(v)}`));
  }
  out.push(
    '# HELP vllm:request_success_total Count of successfully processed requests.',
    '# TYPE vllm:request_success_total counter',
  );
  for (const [reason, n] of Object.entries(m.finished))
    if (reason !== 'abort') out.push(`vllm:request_success_total{${labels},finished_reason="${reason}"} ${num(n)}`);
  hist('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', m.ttft);
  hist('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', m.e2e);
  hist('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', m.itl);
  const late = m.lateness;
  scalar(
    'inflab:sim_steps_total',
    'counter',
    "Steps the simulator ran against the wall clock (InfLab's own).",
    late.steps,
  );
  scalar(
    'inflab:sim_step_lateness_seconds_total',
    'counter',
    "Sum over steps of how late they went out (the first response's bytes handed to the kernel), wall seconds (the simulator's own jitter).",
    late.sumMs / 1000,
  );
  LATE_THRESHOLDS_MS.forEach((t, i) =>
    scalar(
      `inflab:sim_steps_late_over_${t}ms_total`,
      'counter',
      `Steps that went out more than ${t} ms (wall) after their due time.`,
      late.over[i],
    ),
  );
  scalar(
    'inflab:sim_step_lateness_max_seconds',
    'gauge',
    'The largest step lateness since /metrics was last read, wall seconds.',
    late.maxSinceRead / 1000,
  );
  late.maxSinceRead = 0;
  return out.join('\n') + '\n';
}
