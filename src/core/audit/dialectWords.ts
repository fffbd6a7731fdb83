/**
 * What a server's log dialect says to a person: its name, what its stats line is called, the
 * Prometheus names an audit reads, and what to change per finding. Apart from dialect.ts (which
 * adds how a line is recognised and read) so the audit's check rules load no log classifier.
 */

export type DialectId = 'vllm' | 'sglang';

export interface DialectWords {
  id: DialectId;
  /** The server's name as outputs say it. */
  name: string;
  /** What the periodic stats line is called in this server's log. */
  statsLine: string;
  /** Prometheus names of what a /metrics audit reads (for messages and hints). */
  metrics: { prefixHits: string; prefixQueries: string; preemptions: string; kvUsage: string };
  /** What to change, per finding. */
  remedies: {
    noStats: string;
    preemptions: string;
    kvFull: string;
    prefixCache: string;
    oomWeights: string;
    oomStartup: string;
    oomServing: string;
    kvTooSmall: string;
  };
}

export const VLLM_WORDS: DialectWords = {
  id: 'vllm',
  name: 'vLLM',
  statsLine: 'periodic stats line ("Avg prompt throughput: …")',
  metrics: {
    prefixHits: 'vllm:prefix_cache_hits_total',
    prefixQueries: 'vllm:prefix_cache_queries_total',
    preemptions: 'vllm:num_preemptions_total',
    kvUsage: 'vllm:kv_cache_usage_perc',
  },
  remedies: {
    noStats:
      'restart vLLM without --disable-log-stats (it prints a stats line every 10 s while busy), or audit a /metrics URL instead',
    preemptions:
      'lower max_num_seqs (or the benchmark concurrency) to what the pool holds — pool tokens / (input + output) — or raise gpu_memory_utilization',
    kvFull:
      'read this point as capacity-bound; keep concurrency × (input + output) under the pool tokens, or free memory for KV (higher gpu_memory_utilization, fp8 KV cache)',
    prefixCache:
      'if the repeats were not meant, use a fresh seed per point ("seed: per-point") or run the server with --no-enable-prefix-caching, and check each point with Δvllm:prefix_cache_hits / Δvllm:prefix_cache_queries',
    oomWeights:
      'the weights do not fit on one GPU: raise --tensor-parallel-size, use a quantized checkpoint (fp8, AWQ), or use a GPU with more memory',
    oomStartup:
      'lower --gpu-memory-utilization (another process may hold GPU memory: check nvidia-smi), lower --max-num-seqs or --max-num-batched-tokens (the profiling run), or add --enforce-eager if it failed while capturing CUDA graphs',
    oomServing:
      'lower --max-num-seqs or --max-num-batched-tokens, or lower --gpu-memory-utilization to leave headroom for activations',
    kvTooSmall:
      'lower --max-model-len to what the KV cache holds, raise --gpu-memory-utilization, use --kv-cache-dtype fp8, or raise --tensor-parallel-size',
  },
};

export const SGLANG_WORDS: DialectWords = {
  id: 'sglang',
  name: 'SGLang',
  statsLine: '"Decode batch. …" line',
  metrics: {
    prefixHits: 'sglang:cache_hit_rate',
    prefixQueries: 'sglang:cache_hit_rate',
    preemptions: 'sglang:num_retracted_reqs',
    kvUsage: 'sglang:token_usage',
  },
  remedies: {
    noStats:
      'SGLang prints "Decode batch" every --decode-log-interval decode steps (default 40) at INFO: run with --log-level info, or audit its /metrics (--enable-metrics)',
    preemptions: 'lower --max-running-requests (or the benchmark concurrency), or raise --mem-fraction-static',
    kvFull:
      'read this point as capacity-bound; keep concurrency × (input + output) under max_total_num_tokens, or raise --mem-fraction-static',
    prefixCache:
      'if the repeats were not meant, use a fresh seed per point, or run the server with --disable-radix-cache',
    oomWeights: 'the weights do not fit: raise --tp-size, use a quantized checkpoint, or use a GPU with more memory',
    oomStartup:
      'lower --mem-fraction-static, --max-running-requests or --chunked-prefill-size, or add --disable-cuda-graph',
    oomServing: 'lower --mem-fraction-static or --max-running-requests, or --chunked-prefill-size',
    kvTooSmall: 'lower --context-length, or raise --mem-fraction-static or --tp-size',
  },
};

export function dialectWords(id: DialectId | undefined): DialectWords {
  return id === 'sglang' ? SGLANG_WORDS : VLLM_WORDS;
}
