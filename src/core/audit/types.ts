/**
 * What one log line is, in any dialect: the shape the dialects' classifiers return and the auditor
 * aggregates. Matching is on message text, never on `file:line`, which moves with every release.
 */

export type LineKind =
  | 'stats' // periodic "Avg prompt throughput: …" line, V0 or V1 (or a dialect's equivalent)
  | 'prefix-v0' // V0 "Prefix cache hit rate: GPU: …, CPU: …"
  | 'preemption' // V0 "Sequence group … is preempted by PreemptionMode…"
  | 'startup' // one or more startup facts (weights, KV pool, graphs, version, model, …)
  | 'sampler' // sampler backend chosen or fallen back
  | 'info' // an informative periodic line: speculative decoding, KV transfer, a dialect's prefill batch
  | 'access' // uvicorn access line
  | 'vllm' // a server-format line whose message carries no fact we use
  | 'blank'
  | 'unknown'; // not in the server's log format at all (tracebacks, progress bars, …)

export type Level = 'DEBUG' | 'INFO' | 'WARNING' | 'ERROR' | 'CRITICAL';

export interface StatsFields {
  format: 'v0' | 'v1' | 'sglang';
  /** Engine index ("Engine 001: "), or the number of engines for "N Engines Aggregated: ". */
  engine?: number;
  aggregatedEngines?: number;
  prompt_tok_s: number;
  gen_tok_s: number;
  running: number;
  /** V1 "Waiting", V0 "Pending". */
  waiting: number;
  swapped?: number;
  deferred?: number;
  corrupted?: number;
  /** V1 (late 2025+) "Preemptions: N" — preemptions in this window. */
  preemptions?: number;
  kv_usage_pct: number;
  cpu_kv_usage_pct?: number;
  /** V1 only on this line; V0 prints it on a separate line. Rolling over the last 1,000 requests. */
  prefix_hit_pct?: number;
  external_prefix_hit_pct?: number;
  mm_hit_pct?: number;
}

export type StartupKey =
  | 'version'
  | 'model'
  | 'weights_gib'
  | 'model_load_s'
  | 'weights_load_s'
  | 'available_kv_gib'
  | 'pool_tokens'
  | 'max_concurrency'
  | 'cuda_graph'
  | 'engine_init_s'
  | 'gpu_blocks'
  | 'cpu_blocks'
  | 'blocks_total'
  | 'device_memory'
  | 'parallel';

export interface StartupFact {
  key: StartupKey;
  value: number | string;
  extra?: Record<string, number>;
  /** How the value was read, when it needs saying (a unit assumed, a version's wording). */
  note?: string;
}

/** An informative periodic line the auditor surfaces (facts and timeline). */
export interface InfoLine {
  kind: 'spec-decode' | 'spec-decode-v0' | 'kv-transfer' | 'prefill-batch';
  /** Which wording, e.g. "acceptance rate" / "acceptance length" / "throughput" for V1 SpecDecoding. */
  generation?: string;
  fields: Record<string, number>;
  /** Per-position acceptance rates (V1 SpecDecoding). */
  perPosition?: number[];
}

/** A line that says the server failed: an error, a traceback, an engine death, an out-of-memory. */
export interface CrashMark {
  kind: 'oom' | 'kv-too-small' | 'engine-dead' | 'traceback' | 'exception' | 'error';
  /** The exception or message text (cut and redacted before it is quoted). */
  text: string;
}

export interface Classified {
  kind: LineKind;
  level?: Level;
  /** "MM-DD HH:MM:SS" as printed. */
  stamp?: string;
  /** Month, day, seconds of day — parsed from the stamp. */
  month?: number;
  day?: number;
  secOfDay?: number;
  /** Process prefix, e.g. "EngineCore_DP0", "APIServer", "VllmWorker rank=0". */
  process?: string;
  /** The rest of the process prefix after the name: "pid=12", "pid=3433, ip=10.0.0.2". */
  processTail?: string;
  message?: string;
  stats?: StatsFields;
  prefixV0?: { gpu_pct: number; cpu_pct: number };
  preemption?: { mode: string; cumulative?: number };
  /** The first startup fact of the line (see `startups` for all of them). */
  startup?: StartupFact;
  startups?: StartupFact[];
  sampler?: { backend: 'flashinfer' | 'fallback'; text: string };
  info?: InfoLine;
  crash?: CrashMark;
  access?: { client: string; method: string; path: string; status: number };
  /** The model named on the engine-config line, which also carries the version. */
  configModel?: string;
}
