/**
 * Facts: what a cell tells the cells after it. Each fact is a tagged record whose number fields
 * are named by their unit (ms, tok_s, req_s, tokens, bytes) or are dimensionless by type (a rate
 * of hits is a fraction, Little's law counts requests in flight). Checks, compare, hovers and plots
 * read facts, never a value found by guessing its name.
 *
 * Facts are saved in the notebook under their own versioned mime (FACTS_MIME) and validated when a
 * notebook is reopened; a fact that no longer validates is dropped with a finding.
 */
import { z } from 'zod';
import { canonicalStat, LATENCY_METRICS } from './stat';

export const FACTS_VERSION = 1;
export const FACTS_MIME = 'application/vnd.inflab.facts.v1+json';

const finite = z.number().refine(Number.isFinite, 'must be a finite number');
const nonNeg = finite.refine((x) => x >= 0, 'must not be negative');

/** Closed loop fixes the requests in flight (concurrency); open loop fixes the arrival rate. */
export const LOOPS = ['closed', 'open'] as const;
export type Loop = (typeof LOOPS)[number];

/** The load a fact was measured or predicted at. */
export const pointSchema = z
  .object({
    loop: z.enum(LOOPS).optional(),
    concurrency: finite.optional(),
    /** Offered arrival rate, req/s (open loop). */
    req_s: finite.optional(),
    batch: finite.optional(),
  })
  .strict();
export type Point = z.output<typeof pointSchema>;

/** Fields every fact may carry. */
const common = {
  point: pointSchema.optional(),
  /** Where the number stands in its cell, for findings and related information. */
  at: z.array(z.union([z.string(), z.number()])).optional(),
  /** Who produced the number: 'client', 'log', 'predict: serving', a record's `source:` text. */
  source: z.string().optional(),
  /** The unit a person wrote the number in ("GB" in `available_kv: 56.34 GB`), for messages and quick fixes. */
  written_in: z.string().optional(),
  /**
   * The server-log lines that printed this fact's numbers, by field ({tokens: 7, available_bytes: 6}):
   * 1-based, counted across every file an audit read as one timeline (the log fact names the files).
   */
  log_lines: z.record(z.string(), z.number().int().min(1)).optional(),
};

/** A line of a server log: 1-based, counted across every file an audit read as one timeline. */
const logLine = z.number().int().min(1);

/** A stat string, stored in its one spelling (parseStat in stat.ts says what it means). */
const stat = z.string().refine((s) => canonicalStat(s) === s, { message: 'a stat: mean, min, max, p50, p95, p99.9 …' });

const latency = z
  .object({ kind: z.literal('latency'), metric: z.enum(LATENCY_METRICS), stat, ms: nonNeg, ...common })
  .strict();

/** Tokens per second: output, total (prompt + output), aggregate (unspecified), one stream's. */
export const TOKEN_RATE_METRICS = ['output', 'total', 'aggregate', 'per_user'] as const;
const throughput = z
  .object({ kind: z.literal('throughput'), metric: z.enum(TOKEN_RATE_METRICS), tok_s: nonNeg, ...common })
  .strict();

/** Requests per second: completed, goodput (meeting every SLO), offered (open loop), capacity (claimed). */
export const REQUEST_RATE_METRICS = ['completed', 'goodput', 'offered', 'capacity'] as const;
const requestRate = z
  .object({ kind: z.literal('request-rate'), metric: z.enum(REQUEST_RATE_METRICS), req_s: nonNeg, ...common })
  .strict();

/**
 * What a token costs at a throughput (cost/index.ts): the setup's rental price over output tokens,
 * total tokens (prompt + output), or goodput (output tokens of requests meeting every SLO), in $
 * per million tokens, and the $/h it was priced at (absent for a number typed in).
 */
export const COST_METRICS = ['output', 'total', 'goodput'] as const;
const cost = z
  .object({
    kind: z.literal('cost'),
    metric: z.enum(COST_METRICS),
    usd_per_mtok: nonNeg,
    usd_per_hour: nonNeg.optional(),
    ...common,
  })
  .strict();

/** Tokens per request: the prompt and the output of the requests a fact was measured with. */
const tokens = z
  .object({ kind: z.literal('tokens'), metric: z.enum(['prompt', 'output']), tokens: nonNeg, ...common })
  .strict();

export const CURVE_X = ['batch', 'concurrency', 'rate'] as const;
export const CURVE_Y = ['output_throughput', 'per_user_throughput'] as const;
/** A predicted curve (tok/s against load); `label` names what drew it. */
const curve = z
  .object({
    kind: z.literal('curve'),
    x: z.enum(CURVE_X),
    y: z.enum(CURVE_Y),
    unit: z.literal('tok/s'),
    points: z.array(z.object({ x: finite, y: nonNeg }).strict()),
    label: z.string(),
    ...common,
  })
  .strict();

const kvPool = z
  .object({
    kind: z.literal('kv-pool'),
    /** "GPU KV cache size" (vLLM), tokens; absent when only the memory is known. */
    tokens: nonNeg.optional(),
    /** Bytes the whole blocks of the pool take. */
    bytes: nonNeg.optional(),
    /** "Available KV cache memory" (vLLM), bytes. */
    available_bytes: nonNeg.optional(),
    /** The pool each tensor-parallel worker printed (an audit of a log where several did), with its line. */
    workers: z.array(z.object({ tokens: nonNeg, line: logLine }).strict()).optional(),
    /** How the tokens were worked out when no line printed them (an audit: "blocks × block size"). */
    derived: z.string().optional(),
    ...common,
  })
  .strict();

/** Little's law L = λ·W: λ·W (predicted) against the observed time-averaged requests in flight. */
const little = z
  .object({
    kind: z.literal('little'),
    predicted: nonNeg,
    observed: nonNeg,
    /** Completed requests the closure was computed over (a handful cannot test it). */
    requests: nonNeg.optional(),
    ...common,
  })
  .strict();

/** Prefix-cache hit rate, a fraction of prompt tokens. */
const prefixHits = z.object({ kind: z.literal('prefix-hits'), rate: nonNeg, ...common }).strict();

const weights = z.object({ kind: z.literal('weights'), bytes: nonNeg, ...common }).strict();

/**
 * Lower bounds on a time: the prefill compute floor (simple, strict), the decode step floor, and the
 * TPOT floor with speculative decoding (the decode floor / expected tokens per target step).
 */
export const FLOOR_METRICS = ['prefill', 'prefill-strict', 'decode-step', 'tpot-speculative'] as const;
const floor = z
  .object({
    kind: z.literal('floor'),
    metric: z.enum(FLOOR_METRICS),
    ms: nonNeg,
    prompt_tokens: nonNeg.optional(),
    formula: z.string(),
    ...common,
  })
  .strict();

/** Upper bounds on a token rate. */
export const CEILING_METRICS = ['per-user', 'compute-roof', 'bandwidth-asymptote'] as const;
const ceiling = z
  .object({
    kind: z.literal('ceiling'),
    metric: z.enum(CEILING_METRICS),
    tok_s: nonNeg,
    formula: z.string(),
    ...common,
  })
  .strict();

const roofline = z
  .object({
    kind: z.literal('roofline'),
    ridge_flop_per_byte: nonNeg,
    peak_flop_s: nonNeg,
    bandwidth_bytes_s: nonNeg,
    dtype: z.string(),
    ...common,
  })
  .strict();

const setup = z
  .object({
    kind: z.literal('setup'),
    name: z.string(),
    gpu: z.string(),
    model: z.string(),
    weights: z.string(),
    kv_cache: z.string(),
    endpoint: z.string().optional(),
    params_total: nonNeg,
    params_active: nonNeg,
    ...common,
  })
  .strict();

/** How a benchmark generated its prompts: one fixed seed for every point, or a seed per point. */
const seed = z
  .object({
    kind: z.literal('seed'),
    mode: z.enum(['fixed', 'per-point']),
    value: finite.optional(),
    /** Sweep points that share it. */
    points: nonNeg.optional(),
    /** Whether the server caches prefixes, when the cell says (else the setup, else vLLM V1's default: on). */
    prefix_caching: z.boolean().optional(),
    ...common,
  })
  .strict();

const knob = z.union([finite, z.string(), z.boolean(), z.null()]);
/** The sampler a server selected and what the requests asked of it. */
const sampling = z
  .object({
    kind: z.literal('sampling'),
    sampler: z.string().optional(),
    top_p: knob.optional(),
    top_k: knob.optional(),
    request_seed: knob.optional(),
    /** The server's own line about the sampler it chose (an audit), quoted. */
    text: z.string().optional(),
    /** Every sampler line of a log (the first eight): the backend each named, and where. */
    backends: z
      .array(z.object({ sampler: z.string(), line: logLine }).strict())
      .max(8)
      .optional(),
    ...common,
  })
  .strict();

/**
 * How a point's requests ended: how many were sent and failed, the count of each error kind (a
 * request that succeeded may count a stream quirk here: 'missing-usage', 'no-done', 'bad-usage'),
 * how many were sent a second time, and the first messages (the first of a failed request, the
 * first retry's cause, and up to MAX_ERROR_MESSAGES distinct messages in the order they came).
 */
export const MAX_ERROR_MESSAGES = 10;
const requests = z
  .object({
    kind: z.literal('requests'),
    sent: nonNeg,
    failed: nonNeg,
    retried: nonNeg.optional(),
    errors: z.record(z.string(), nonNeg),
    first_error: z.string().optional(),
    first_retry_error: z.string().optional(),
    messages: z.array(z.string()).max(MAX_ERROR_MESSAGES).optional(),
    ...common,
  })
  .strict();

/**
 * The server's usage against what a point asked for and the chunks that came: requests are
 * counts of requests, tokens are tokens per request, tokens_per_chunk is Σ usage tokens / Σ chunks.
 */
const usage = z
  .object({
    kind: z.literal('usage'),
    /** Completed requests whose usage the server sent. */
    with_usage: nonNeg,
    prompt_tokens_requested: nonNeg,
    prompt_tokens_mean: nonNeg.optional(),
    output_tokens_requested: nonNeg,
    output_tokens_mean: nonNeg.optional(),
    /** Requests whose usage.completion_tokens is not the output asked for. */
    output_mismatched: nonNeg,
    /** Requests whose usage claims fewer tokens than the chunks of text that came. */
    fewer_tokens_than_chunks: nonNeg,
    tokens_per_chunk: nonNeg.optional(),
    /** Requests whose usage was not a count (negative, fractional). */
    bad_usage: nonNeg,
    ...common,
  })
  .strict();

const tokenCount = z.object({ client_tokens: nonNeg, server_tokens: nonNeg }).strict();
/** The client's token totals over a point (warm-up included) against the Δ of the server's counters. */
const serverCounters = z
  .object({
    kind: z.literal('server-counters'),
    /** The server whose counters were read ("vLLM", "llama.cpp (llama-server)"). */
    server: z.string(),
    /** What its prompt counter counts: every prompt token, or only those it processed (a cached prefix is not). */
    prompt_counter: z.enum(['all', 'processed']),
    prompt: tokenCount.optional(),
    generation: tokenCount.optional(),
    /** Requests that reached the server without reporting usage: their tokens are unknown to the client. */
    unknown_requests: nonNeg,
    ...common,
  })
  .strict();

/** The most requests a point had in flight at once, against its concurrency (or cap) and its requests. */
const inFlight = z
  .object({
    kind: z.literal('in-flight'),
    peak: nonNeg,
    requests: nonNeg,
    concurrency: nonNeg.optional(),
    ...common,
  })
  .strict();

/** How late the client ran: its event loop's delay, or requests leaving after their scheduled time. */
export const CLIENT_LAG_METRICS = ['event-loop', 'dispatch'] as const;
const clientLag = z
  .object({ kind: z.literal('client-lag'), metric: z.enum(CLIENT_LAG_METRICS), stat, ms: nonNeg, ...common })
  .strict();

/** The share (a fraction) of a point's gaps between chunks under `under_ms`: chunks read together. */
const readBursts = z
  .object({ kind: z.literal('read-bursts'), share: nonNeg, gaps: nonNeg, under_ms: nonNeg, ...common })
  .strict();

/** A point the prefix cache served (the server had seen its prompts), and the evidence. */
const contamination = z.object({ kind: z.literal('contamination'), reason: z.string(), ...common }).strict();

/** The RTT probe, when it could not be quoted beside the TTFTs it should be inside. */
const rttProbe = z
  .object({
    kind: z.literal('rtt-probe'),
    reliable: z.boolean(),
    reason: z.string().optional(),
    probes: nonNeg.optional(),
    ...common,
  })
  .strict();

/** The vocabulary prompt ids were drawn from: its size, from the server (/v1/models) or the setup's model. */
const vocab = z
  .object({
    kind: z.literal('vocab'),
    size: nonNeg,
    from: z.enum(['server', 'setup']),
    server_size: nonNeg.optional(),
    setup_size: nonNeg.optional(),
    ...common,
  })
  .strict();

/** Something a run noticed about its endpoint that is no number (GET /v1/models answered HTTP 404). */
const note = z.object({ kind: z.literal('note'), text: z.string(), ...common }).strict();

/** A run that ended before its last point, why, and what it said. */
export const STOP_REASONS = ['cancelled', 'failure-policy', 'crash'] as const;
const stopped = z
  .object({
    kind: z.literal('stopped'),
    reason: z.enum(STOP_REASONS),
    message: z.string(),
    after_point: nonNeg.optional(),
    ...common,
  })
  .strict();

/** What a server's /metrics (or a simulation) said about the engine over a point: counts and peaks. */
export const ENGINE_METRICS = [
  /** Requests preempted (recomputed) during the point. */
  'preemptions',
  /** Most requests waiting in the server's queue at one scrape. */
  'waiting_peak',
  'running_peak',
  /** Peak KV-cache usage, a fraction. */
  'kv_usage_peak',
  /** InfLab's simulator only: share of its steps more than 10 ms late on its own clock. */
  'sim_late_share',
] as const;
const engine = z
  .object({ kind: z.literal('engine'), metric: z.enum(ENGINE_METRICS), value: nonNeg, ...common })
  .strict();

/**
 * A free parameter of a model (the serving simulation's step overhead, prefill MFU): its value in
 * base units (seconds for a time; a fraction), how it was set, and its 1σ uncertainty when fitted.
 */
export const PARAMETER_ORIGINS = ['default', 'given', 'fitted', 'carried'] as const;
const parameter = z
  .object({
    kind: z.literal('parameter'),
    name: z.string(),
    value: finite,
    /** 's' for a time, absent for a dimensionless number. */
    unit: z.enum(['s']).optional(),
    origin: z.enum(PARAMETER_ORIGINS),
    sigma: nonNeg.optional(),
    /** The cell a fitted or carried value came from. */
    from: z.string().optional(),
    ...common,
  })
  .strict();

/**
 * When a measurement ran: a bench point's wall-clock start (epoch ms). A prediction in ink is
 * judged "inked before measurement" against it (notebook/ink.ts).
 */
const measuredAt = z.object({ kind: z.literal('measured-at'), epoch_ms: nonNeg, ...common }).strict();

/**
 * A confidence interval on a stat measured over repeated runs of one point (`repeats:`): `mean` is
 * the mean of the per-run values of `of` (a latency stat in ms, a token rate in tok/s, a request
 * rate in req/s, as `unit` says), [`lo`, `hi`] its interval at `level`, `sd` the spread of the runs.
 */
const ci = z
  .object({
    kind: z.literal('ci'),
    of: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('latency'), metric: z.enum(LATENCY_METRICS), stat }).strict(),
      z.object({ kind: z.literal('throughput'), metric: z.enum(TOKEN_RATE_METRICS) }).strict(),
      z.object({ kind: z.literal('request-rate'), metric: z.enum(REQUEST_RATE_METRICS) }).strict(),
    ]),
    unit: z.enum(['ms', 'tok/s', 'req/s']),
    mean: finite,
    lo: finite,
    hi: finite,
    sd: nonNeg,
    /** Runs the interval is over (at least two). */
    n: finite.refine((x) => Number.isInteger(x) && x >= 2, 'at least two runs'),
    level: finite.refine((x) => x > 0 && x < 1, 'a confidence level between 0 and 1'),
    method: z.literal('student-t'),
    ...common,
  })
  .strict();

/**
 * A server log as an audit read it: the server whose log it is (absent: no line read as one), the
 * files read as one timeline (oldest first, each with the timeline's number of its first line),
 * its lines, its stats windows, and how many errors and crashes it held.
 */
const log = z
  .object({
    kind: z.literal('log'),
    server: z.enum(['vllm', 'sglang']).optional(),
    /** The stats line's generation: vLLM's V0 or V1 engine, or SGLang's. */
    format: z.enum(['v0', 'v1', 'sglang']).optional(),
    files: z.array(z.object({ path: z.string(), first_line: logLine, lines: nonNeg }).strict()),
    lines: nonNeg,
    windows: nonNeg,
    /** Errors, tracebacks and crashes seen; the first MAX_LOG_CRASHES stand as log-crash facts. */
    crashes: nonNeg,
    ...common,
  })
  .strict();

/**
 * One column of a log's stats windows; null where the window's line did not print the number.
 * (zod's number takes finite numbers only: no per-entry refinement over a day's windows.)
 */
const column = z.array(z.number().nullable());
/**
 * A log's periodic stats lines, columnar (one entry per window, in order): where each stands, when
 * (seconds since the log's first timestamp), and what it printed, in the units `units` names.
 */
const logWindows = z
  .object({
    kind: z.literal('log-windows'),
    units: z
      .object({
        t: z.literal('s'),
        interval: z.literal('s'),
        prompt: z.literal('tok/s'),
        generation: z.literal('tok/s'),
        kv_usage: z.literal('%'),
        prefix_hit: z.literal('%'),
      })
      .strict(),
    /** Time between stats lines (the median). */
    interval: nonNeg,
    line: z.array(z.number().int().min(1)),
    t: z.array(z.number()),
    prompt: column,
    generation: column,
    /** Requests running and waiting at the window's tick, and preemptions in the window (counts). */
    running: column,
    waiting: column,
    preemptions: column,
    kv_usage: column,
    /** vLLM V1's is rolling over the last 1,000 requests. */
    prefix_hit: column,
    ...common,
  })
  .strict()
  .refine(
    (w) =>
      [w.t, w.prompt, w.generation, w.running, w.waiting, w.preemptions, w.kv_usage, w.prefix_hit].every(
        (c) => c.length === w.line.length,
      ),
    { message: 'every column must have one entry per window' },
  );

/**
 * A run of busy stats windows at one load (a sweep's point, as the log shows it): windows
 * `first`..`last` of the log-windows fact, why it started (the log's start, after idle time, or a
 * change in load), its stamps as the log printed them, and its summary in the units `units` names.
 */
const logSegment = z
  .object({
    kind: z.literal('log-segment'),
    index: nonNeg,
    first: nonNeg,
    last: nonNeg,
    windows: nonNeg,
    starts_after: z.enum(['start', 'idle', 'load-change']),
    start_stamp: z.string(),
    end_stamp: z.string(),
    /** Median requests running + waiting: the level the segment was split on. */
    load: nonNeg,
    preemptions: nonNeg,
    /** Mean "Avg generation throughput" over its windows (the log's heartbeat figure). */
    generation: nonNeg,
    prefix_hit_max: nonNeg.optional(),
    units: z.object({ generation: z.literal('tok/s'), prefix_hit_max: z.literal('%') }).strict(),
    ...common,
  })
  .strict();

/**
 * Lines of a log the audit counts rather than reads: lines not in the server's format, lines that
 * look informative but are not read, lines too long to read, values that cannot be right, and V0
 * preemption warnings. `count` is how many; `samples` the first (text quoted only from a server log).
 */
export const LOG_LINE_KINDS = ['unknown', 'informative', 'too-long', 'cannot-be-right', 'preemption-warning'] as const;
const logLineSample = z
  .object({
    line: logLine,
    text: z.string().optional(),
    /** What the audit made of it ("prefix cache hit rate 340%"). */
    what: z.string().optional(),
    /** A preemption warning's cumulative count. */
    cumulative: nonNeg.optional(),
  })
  .strict();
export const MAX_LOG_LINE_SAMPLES = 8;
const logLines = z
  .object({
    kind: z.literal('log-lines'),
    what: z.enum(LOG_LINE_KINDS),
    count: nonNeg,
    samples: z.array(logLineSample).max(MAX_LOG_LINE_SAMPLES),
    /** The last one, when it says more than the first (a preemption warning's cumulative count). */
    last: logLineSample.optional(),
    /** too-long: the longest line's size, and the size over which a line is skipped unread. */
    max_bytes: nonNeg.optional(),
    limit_bytes: nonNeg.optional(),
    ...common,
  })
  .strict();

/**
 * A line that says the server failed: out of memory, a KV cache too small for one request, the
 * engine dead, a traceback or exception, an error line; at startup (it never served) or serving,
 * and for an out-of-memory at startup what had loaded when it failed.
 */
export const LOG_CRASH_KINDS = ['oom', 'kv-too-small', 'engine-dead', 'traceback', 'exception', 'error'] as const;
export const MAX_LOG_CRASHES = 20;
const logCrash = z
  .object({
    kind: z.literal('log-crash'),
    crash: z.enum(LOG_CRASH_KINDS),
    line: logLine,
    phase: z.enum(['startup', 'serving']),
    after: z.enum(['nothing', 'weights', 'kv-cache', 'graphs']).optional(),
    /** The message, cut and redacted; only from a file recognised as a server log. */
    text: z.string().optional(),
    ...common,
  })
  .strict();

/**
 * One /metrics snapshot (vLLM's counters and gauges): lifetime totals since the server started.
 * Hits and queries are counts of prompt tokens; `prefix_hit_rate` a fraction, where only a gauge
 * said it; `kv_usage` a fraction; running and waiting are requests at the snapshot.
 */
const metricsSnapshot = z
  .object({
    kind: z.literal('metrics-snapshot'),
    samples: nonNeg,
    bad_lines: nonNeg,
    gpu_blocks: nonNeg.optional(),
    block_size: nonNeg.optional(),
    prefix_hits: nonNeg.optional(),
    prefix_queries: nonNeg.optional(),
    prefix_hit_rate: nonNeg.optional(),
    /** The metric names the rate came from ("vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"). */
    prefix_metric: z.string().optional(),
    preemptions: nonNeg.optional(),
    running: nonNeg.optional(),
    waiting: nonNeg.optional(),
    kv_usage: nonNeg.optional(),
    prompt_tokens: nonNeg.optional(),
    generation_tokens: nonNeg.optional(),
    requests_success: nonNeg.optional(),
    ...common,
  })
  .strict();

export const factSchema = z.discriminatedUnion('kind', [
  engine,
  parameter,
  latency,
  throughput,
  requestRate,
  cost,
  tokens,
  curve,
  kvPool,
  little,
  prefixHits,
  weights,
  floor,
  ceiling,
  roofline,
  setup,
  seed,
  sampling,
  requests,
  usage,
  serverCounters,
  inFlight,
  clientLag,
  readBursts,
  contamination,
  rttProbe,
  vocab,
  note,
  stopped,
  measuredAt,
  ci,
  log,
  logWindows,
  logSegment,
  logLines,
  logCrash,
  metricsSnapshot,
]);

export type Fact = z.output<typeof factSchema>;
export type FactKind = Fact['kind'];
export type FactOf<K extends FactKind> = Extract<Fact, { kind: K }>;

/** What is saved in the notebook under FACTS_MIME. */
export const savedFactsSchema = z.object({ version: z.literal(FACTS_VERSION), facts: z.array(z.unknown()) }).strict();
