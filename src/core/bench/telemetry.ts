/**
 * Telemetry dialects: what differs between servers' `/metrics` (metric names, what a counter
 * counts) and their streams (known quirks), one dialect per server. The sweep and the report ask
 * the dialect; nothing else tests a metric prefix.
 *
 * Sources (names as each server exposes them):
 * - vLLM: vllm/v1/metrics/loggers.py (prefix-cache token counters, newest names first; the V0
 *   `gpu_` names before mid-2025), vllm:prompt_tokens_total / vllm:generation_tokens_total.
 * - llama.cpp's llama-server (`--metrics`): the metrics handler of examples/server/server.cpp (2024)
 *   and tools/server since: llamacpp:prompt_tokens_total ("Number of prompt tokens processed": a
 *   prefix reused from the slot's cache is not processed, so it is not counted),
 *   llamacpp:tokens_predicted_total, kv_cache_usage_ratio, requests_processing, requests_deferred.
 * - SGLang: python/sglang/srt/metrics/collector.py (TokenizerMetricsCollector and the scheduler's
 *   gauges): sglang:prompt_tokens_total, sglang:generation_tokens_total, sglang:cached_tokens_total,
 *   num_running_reqs, num_queue_reqs, token_usage.
 */

/** A flat view: sample name → sum over label sets (servers label by model and engine). */
export type Snapshot = Map<string, number>;

/** A quantity a server exposes on /metrics, by our name (each dialect maps it to its own sample names). */
export type ServerMetric =
  | 'prefixHits'
  | 'prefixQueries'
  | 'prefixHitRateGauge'
  | 'preemptions'
  | 'kvUsage'
  | 'running'
  | 'waiting'
  | 'promptTokens'
  | 'generationTokens'
  | 'cachedTokens'
  | 'specDrafts'
  | 'specDraftTokens'
  | 'specAcceptedTokens';

export interface TelemetryDialect {
  id: 'vllm' | 'llamacpp' | 'sglang';
  /** The server, as a person names it. */
  server: string;
  /** The metric-name prefix its samples carry (only this module reads it). */
  prefix: string;
  /** Names of each quantity it exposes, newest first. */
  names: Partial<Record<ServerMetric, readonly string[]>>;
  /** What its prompt-token counter counts: every prompt token, or only those it had to process (not a cached prefix). */
  promptCounter: 'all' | 'processed';
  /** Known stream behaviour the client handles (shown with the server's findings). */
  quirks: string[];
}

export const VLLM: TelemetryDialect = {
  id: 'vllm',
  server: 'vLLM',
  prefix: 'vllm:',
  names: {
    prefixHits: [
      'vllm:prefix_cache_hits_total',
      'vllm:prefix_cache_hits',
      'vllm:gpu_prefix_cache_hits_total',
      'vllm:gpu_prefix_cache_hits',
    ],
    prefixQueries: [
      'vllm:prefix_cache_queries_total',
      'vllm:prefix_cache_queries',
      'vllm:gpu_prefix_cache_queries_total',
      'vllm:gpu_prefix_cache_queries',
    ],
    prefixHitRateGauge: ['vllm:gpu_prefix_cache_hit_rate'],
    preemptions: ['vllm:num_preemptions_total', 'vllm:num_preemptions'],
    kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    running: ['vllm:num_requests_running'],
    waiting: ['vllm:num_requests_waiting'],
    promptTokens: ['vllm:prompt_tokens_total', 'vllm:prompt_tokens'],
    generationTokens: ['vllm:generation_tokens_total', 'vllm:generation_tokens'],
    // Speculative decoding (vllm/v1/spec_decode/metrics.py SpecDecodingProm, vLLM v0.10–v0.11).
    specDrafts: ['vllm:spec_decode_num_drafts_total', 'vllm:spec_decode_num_drafts'],
    specDraftTokens: ['vllm:spec_decode_num_draft_tokens_total', 'vllm:spec_decode_num_draft_tokens'],
    specAcceptedTokens: ['vllm:spec_decode_num_accepted_tokens_total', 'vllm:spec_decode_num_accepted_tokens'],
  },
  promptCounter: 'all',
  quirks: [
    'with stream_options.continuous_usage_stats every chunk carries usage; the stream ends with a choices: [] usage chunk',
  ],
};

export const LLAMACPP: TelemetryDialect = {
  id: 'llamacpp',
  server: 'llama.cpp (llama-server)',
  prefix: 'llamacpp:',
  names: {
    kvUsage: ['llamacpp:kv_cache_usage_ratio'],
    running: ['llamacpp:requests_processing'],
    waiting: ['llamacpp:requests_deferred'],
    promptTokens: ['llamacpp:prompt_tokens_total'],
    generationTokens: ['llamacpp:tokens_predicted_total'],
  },
  promptCounter: 'processed',
  quirks: [
    'streams end with a chunk that carries no text (finish_reason, usage, timings); chat streams open with a role chunk',
    'closes the connection after each streamed response while advertising Keep-Alive',
  ],
};

export const SGLANG: TelemetryDialect = {
  id: 'sglang',
  server: 'SGLang',
  prefix: 'sglang:',
  names: {
    prefixHits: ['sglang:cached_tokens_total', 'sglang:cached_tokens'],
    prefixQueries: ['sglang:prompt_tokens_total', 'sglang:prompt_tokens'],
    prefixHitRateGauge: ['sglang:cache_hit_rate'],
    kvUsage: ['sglang:token_usage'],
    running: ['sglang:num_running_reqs'],
    waiting: ['sglang:num_queue_reqs'],
    promptTokens: ['sglang:prompt_tokens_total', 'sglang:prompt_tokens'],
    generationTokens: ['sglang:generation_tokens_total', 'sglang:generation_tokens'],
    cachedTokens: ['sglang:cached_tokens_total', 'sglang:cached_tokens'],
  },
  promptCounter: 'all',
  quirks: [],
};

export const DIALECTS: readonly TelemetryDialect[] = [VLLM, LLAMACPP, SGLANG];

/** The dialect whose samples a snapshot holds (the one with most of them), if any. */
export function detectDialect(s: Snapshot | undefined): TelemetryDialect | undefined {
  if (!s) return undefined;
  let best: TelemetryDialect | undefined;
  let most = 0;
  for (const d of DIALECTS) {
    let n = 0;
    for (const k of s.keys()) if (k.startsWith(d.prefix)) n++;
    if (n > most) {
      most = n;
      best = d;
    }
  }
  return best;
}

/** The first name of a quantity present in a snapshot, in a dialect (default vLLM's). */
export function pick(
  s: Snapshot,
  q: ServerMetric,
  d: TelemetryDialect = VLLM,
): { name: string; value: number } | undefined {
  for (const name of d.names[q] ?? []) {
    const v = s.get(name);
    if (v !== undefined) return { name, value: v };
  }
  return undefined;
}
