/**
 * vLLM server log parser. One line at a time: classifyLine() says what a line is and pulls out its
 * fields; LogAuditor aggregates a stream of lines into facts incrementally, so a multi-GB log is
 * read without holding it in memory. Only the stats windows are kept as a series (columnar typed
 * arrays, a few dozen bytes a window). Matching is on message text, never on `file:line`, which
 * moves with every vLLM release.
 *
 * Files are read as bytes (LogAuditor.feedChunk): access and stats lines — nearly all of a big log —
 * are read by the byte scanner in scan.ts without decoding; every other line is decoded and goes
 * through classifyLine(), which stays the definition of what a line means.
 */
import { ACCESS, BLANK, FALLBACK, LEVEL_NAMES, OTHER, scanAccessRun, ScanState, scanLine, STATS } from './scan';

export type LineKind =
  | 'stats' // periodic "Avg prompt throughput: …" line, V0 or V1
  | 'prefix-v0' // V0 "Prefix cache hit rate: GPU: …, CPU: …"
  | 'preemption' // V0 "Sequence group … is preempted by PreemptionMode…"
  | 'startup' // a startup fact (weights, KV pool, graphs, version, model, …)
  | 'sampler' // sampler backend chosen or fallen back
  | 'access' // uvicorn access line
  | 'vllm' // a vLLM-format line whose message carries no fact we use
  | 'blank'
  | 'unknown'; // not in vLLM's log format at all (tracebacks, progress bars, …)

export type Level = 'DEBUG' | 'INFO' | 'WARNING' | 'ERROR' | 'CRITICAL';

export interface StatsFields {
  format: 'v0' | 'v1';
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
  | 'gpu_blocks';

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
  message?: string;
  stats?: StatsFields;
  prefixV0?: { gpu_pct: number; cpu_pct: number };
  preemption?: { mode: string; cumulative?: number };
  startup?: { key: StartupKey; value: number | string; extra?: Record<string, number> };
  sampler?: { backend: 'flashinfer' | 'fallback'; text: string };
  access?: { client: string; method: string; path: string; status: number };
  /** The model named on the engine-config line, which also carries the version. */
  configModel?: string;
}

const ANSI_RE = /\x1b\[[0-9;]*[A-Za-z]/g;
// (Process pid=N) or (VllmWorker rank=0 pid=N), then LEVEL MM-DD HH:MM:SS [file:line] message.
// Before 2025-02 the opening bracket is missing: "INFO 01-10 10:00:00 metrics.py:351] …".
// After the optional process prefix: "METHOD PATH HTTP/x" STATUS, uvicorn's access format.
const ACCESS_RE = /(?:INFO|WARNING|ERROR):\s+(\S+) - "([A-Z]+) (\S+) HTTP\/[\d.]+" (\d{3})/y;
// No prototype: a word like "toString" is no level.
const LEVELS: Record<string, Level> = Object.assign(Object.create(null) as Record<string, Level>, {
  DEBUG: 'DEBUG',
  INFO: 'INFO',
  WARNING: 'WARNING',
  ERROR: 'ERROR',
  CRITICAL: 'CRITICAL',
});

const isDigit = (c: number) => c >= 48 && c <= 57;
const two = (s: string, i: number) => (s.charCodeAt(i) - 48) * 10 + (s.charCodeAt(i + 1) - 48);

const num = (s: string) => Number(s.replace(/,/g, ''));

interface StartupRule {
  needle: string;
  re: RegExp;
  make(m: RegExpExecArray): Classified['startup'];
}

const STARTUP_RULES: StartupRule[] = [
  {
    needle: 'vLLM API server version',
    re: /vLLM API server version (\S+)/,
    make: (m) => ({ key: 'version', value: m[1] }),
  },
  {
    needle: 'LLM engine (v',
    re: /LLM engine \(v([^)\s]+)\) with config: /,
    make: (m) => ({ key: 'version', value: m[1] }),
  },
  {
    needle: 'Model loading took',
    re: /Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds/,
    make: (m) => ({ key: 'weights_gib', value: num(m[1]), extra: { seconds: num(m[2]) } }),
  },
  {
    needle: 'Loading weights took',
    re: /Loading weights took ([\d.]+) seconds/,
    make: (m) => ({ key: 'weights_load_s', value: num(m[1]) }),
  },
  {
    needle: 'Available KV cache memory:',
    re: /Available KV cache memory: ([\d.]+) GiB/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]) }),
  },
  {
    needle: 'reserved for KV Cache is',
    re: /reserved for KV Cache is ([\d.]+) ?GiB/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]) }),
  },
  {
    needle: 'GPU KV cache size:',
    re: /GPU KV cache size: ([\d,]+) tokens/,
    make: (m) => ({ key: 'pool_tokens', value: num(m[1]) }),
  },
  {
    needle: 'Maximum concurrency for',
    re: /Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/,
    make: (m) => ({ key: 'max_concurrency', value: num(m[2]), extra: { tokens_per_request: num(m[1]) } }),
  },
  {
    needle: 'Graph capturing finished',
    re: /Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB/,
    make: (m) => ({ key: 'cuda_graph', value: num(m[2]), extra: { seconds: num(m[1]) } }),
  },
  {
    needle: 'init engine (profile, create kv cache',
    re: /init engine \(profile, create kv cache, warmup model\) took ([\d.]+) seconds/,
    make: (m) => ({ key: 'engine_init_s', value: num(m[1]) }),
  },
  {
    needle: '# GPU blocks:',
    re: /# GPU blocks: (\d+), # CPU blocks: (\d+)/,
    make: (m) => ({ key: 'gpu_blocks', value: num(m[1]), extra: { cpu_blocks: num(m[2]) } }),
  },
  {
    needle: 'non-default args:',
    re: /non-default args: .*?'model(?:_tag)?': '([^']+)'/,
    make: (m) => ({ key: 'model', value: m[1] }),
  },
  {
    needle: 'args: Namespace(',
    re: /args: Namespace\(.*?\bmodel='([^']+)'/,
    make: (m) => ({ key: 'model', value: m[1] }),
  },
];

const SAMPLER_FALLBACKS = [
  'Falling back to the PyTorch-native implementation of top-p & top-k sampling',
  'Falling back to default sampling implementation',
  'using PyTorch-native sampler',
];

/**
 * Every text that makes classifyLine() read a vLLM-format message as more than an "other" line
 * (plus ESC: ANSI stripping could join one). A message with none of them is an "other" line.
 */
export const MESSAGE_NEEDLES = new RegExp(
  [
    'Avg prompt throughput: ',
    'Prefix cache hit rate: GPU: ',
    'is preempted by PreemptionMode.',
    'sampl',
    ...STARTUP_RULES.map((r) => r.needle),
  ]
    .map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .concat('\\x1b')
    .join('|'),
);

/** Parse "Key: value unit" pairs of a stats line (field order and optional fields vary by version). */
function parseStats(msg: string, at: number): StatsFields | undefined {
  const head = msg.slice(0, at);
  const body = msg.slice(at);
  const f: StatsFields = {
    format: 'v1',
    prompt_tok_s: NaN,
    gen_tok_s: NaN,
    running: NaN,
    waiting: NaN,
    kv_usage_pct: NaN,
  };
  let e = /Engine (\d+):\s*$/.exec(head);
  if (e) f.engine = Number(e[1]);
  else if ((e = /(\d+) Engines Aggregated:\s*$/.exec(head))) f.aggregatedEngines = Number(e[1]);
  let sawPending = false;
  for (const part of body.split(', ')) {
    const c = part.indexOf(': ');
    if (c < 0) continue;
    const key = part.slice(0, c);
    const v = parseFloat(part.slice(c + 2).replace(/,/g, ''));
    switch (key) {
      case 'Avg prompt throughput':
        f.prompt_tok_s = v;
        break;
      case 'Avg generation throughput':
        f.gen_tok_s = v;
        break;
      case 'Running':
        f.running = v;
        break;
      case 'Waiting':
        f.waiting = v;
        break;
      case 'Pending':
        f.waiting = v;
        sawPending = true;
        break;
      case 'Swapped':
        f.swapped = v;
        break;
      case 'Deferred':
        f.deferred = v;
        break;
      case 'Preemptions':
        f.preemptions = v;
        break;
      case 'GPU KV cache usage':
        f.kv_usage_pct = v;
        break;
      case 'CPU KV cache usage':
        f.cpu_kv_usage_pct = v;
        break;
      case 'Prefix cache hit rate':
        f.prefix_hit_pct = v;
        break;
      case 'External prefix cache hit rate':
        f.external_prefix_hit_pct = v;
        break;
      case 'MM cache hit rate':
        f.mm_hit_pct = v;
        break;
    }
  }
  if (sawPending || f.swapped !== undefined || f.cpu_kv_usage_pct !== undefined) f.format = 'v0';
  if (Number.isNaN(f.prompt_tok_s) || Number.isNaN(f.gen_tok_s)) return undefined;
  if (Number.isNaN(f.running)) f.running = 0;
  if (Number.isNaN(f.waiting)) f.waiting = 0;
  return f;
}

/** Say what one log line is. Fast for the common cases (access and stats lines). */
export function classifyLine(raw: string): Classified {
  let line = raw;
  const n0 = line.length;
  if (n0 && line.charCodeAt(n0 - 1) === 13) line = line.slice(0, -1);
  if (line.indexOf('\x1b') >= 0) line = line.replace(ANSI_RE, '');
  const n = line.length;
  let off = 0;
  while (off < n && line.charCodeAt(off) <= 32) off++;
  if (off === n) return { kind: 'blank' };
  // Process prefix "(EngineCore_DP0 pid=4711) " / "(VllmWorker rank=0 pid=12) ".
  let process: string | undefined;
  if (line.charCodeAt(off) === 40) {
    const e = line.indexOf(') ', off);
    const pid = e > 0 ? line.lastIndexOf(' pid=', e) : -1;
    if (pid > off && e - off < 96) {
      process = line.slice(off + 1, pid);
      off = e + 2;
    }
  }
  // LEVEL MM-DD HH:MM:SS [file:line] message — before 2025-02 without the opening bracket.
  const sp = line.indexOf(' ', off);
  const level = sp > off && sp - off <= 8 ? LEVELS[line.slice(off, sp)] : undefined;
  const p = sp + 1;
  if (
    !level ||
    p + 14 > n ||
    line.charCodeAt(p + 2) !== 45 ||
    line.charCodeAt(p + 5) !== 32 ||
    line.charCodeAt(p + 8) !== 58 ||
    line.charCodeAt(p + 11) !== 58 ||
    !isDigit(line.charCodeAt(p)) ||
    !isDigit(line.charCodeAt(p + 13))
  ) {
    if (line.indexOf(' - "', off) > 0) {
      ACCESS_RE.lastIndex = off;
      const a = ACCESS_RE.exec(line);
      if (a)
        return { kind: 'access', process, access: { client: a[1], method: a[2], path: a[3], status: Number(a[4]) } };
    }
    // uvicorn's own lines: "INFO:     Started server process [4650]".
    const uv = line.indexOf(':     ', off);
    if (uv > off && uv - off <= 8 && LEVELS[line.slice(off, uv)])
      return { kind: 'vllm', level: LEVELS[line.slice(off, uv)], process, message: line.slice(uv + 6) };
    return { kind: 'unknown' };
  }
  let q = p + 14;
  if (line.charCodeAt(q) === 44 || line.charCodeAt(q) === 46) {
    // fractional seconds, ",mmm" or ".mmm"
    q++;
    while (q < n && isDigit(line.charCodeAt(q))) q++;
  }
  if (line.charCodeAt(q) !== 32) return { kind: 'unknown' };
  const close = line.indexOf(']', q);
  if (close < 0 || close - q > 120) return { kind: 'unknown' };
  const msg = line.charCodeAt(close + 1) === 32 ? line.slice(close + 2) : line.slice(close + 1);
  const base: Classified = {
    kind: 'vllm',
    level,
    stamp: line.slice(p, p + 14),
    month: two(line, p),
    day: two(line, p + 3),
    secOfDay: two(line, p + 6) * 3600 + two(line, p + 9) * 60 + two(line, p + 12),
    process,
    message: msg,
  };
  const at = msg.indexOf('Avg prompt throughput: ');
  if (at >= 0) {
    const s = parseStats(msg, at);
    if (s) return { ...base, kind: 'stats', stats: s };
    return base;
  }
  if (msg.startsWith('Prefix cache hit rate: GPU: ')) {
    const p = /GPU: ([\d.]+)%, CPU: ([\d.]+)%/.exec(msg);
    if (p) return { ...base, kind: 'prefix-v0', prefixV0: { gpu_pct: Number(p[1]), cpu_pct: Number(p[2]) } };
  }
  if (msg.indexOf('is preempted by PreemptionMode.') >= 0) {
    const p = /PreemptionMode\.(\w+)(?:.*total_num_cumulative_preemption=(\d+))?/.exec(msg);
    return {
      ...base,
      kind: 'preemption',
      preemption: { mode: p?.[1] ?? 'RECOMPUTE', cumulative: p?.[2] !== undefined ? Number(p[2]) : undefined },
    };
  }
  if (msg.indexOf('sampl') >= 0) {
    if (msg.indexOf('Using FlashInfer for top-p & top-k sampling') >= 0)
      return { ...base, kind: 'sampler', sampler: { backend: 'flashinfer', text: msg } };
    if (SAMPLER_FALLBACKS.some((s) => msg.indexOf(s) >= 0))
      return { ...base, kind: 'sampler', sampler: { backend: 'fallback', text: msg } };
  }
  for (const r of STARTUP_RULES) {
    if (msg.indexOf(r.needle) < 0) continue;
    const mm = r.re.exec(msg);
    if (!mm) continue;
    const st = r.make(mm)!;
    if (r.needle === 'LLM engine (v') {
      // The engine-config line carries the model too.
      const model = /\bmodel=['"]([^'"]+)['"]/.exec(msg);
      if (model) return { ...base, kind: 'startup', startup: st, configModel: model[1] };
    }
    return { ...base, kind: 'startup', startup: st };
  }
  return base;
}

// ------------------------------------------------------------------------------------------------
// Time: "MM-DD HH:MM:SS" has no year. Seconds are counted from the first stamp; a stamp that jumps
// back by more than half a year is the year rolling over (12-31 → 01-01).

export class LogClock {
  private year = 2000; // a leap year, so 02-29 parses
  origin?: number;
  private last = -Infinity;
  // A stamp as printed, or (from the byte scanner) its ten digits MMDDhhmmss as a number.
  private first?: string | number;
  private latest?: string | number;
  rollovers = 0;
  get firstStamp(): string | undefined {
    return stampText(this.first);
  }
  get lastStamp(): string | undefined {
    return stampText(this.latest);
  }
  /** Seconds since the first stamp, monotonic across midnight and new year. */
  private dayKey = -1;
  private dayBase = 0;
  seconds(month: number, day: number, secOfDay: number, stamp: string | number): number {
    const key = month * 32 + day;
    if (key !== this.dayKey) {
      this.dayKey = key;
      this.dayBase = Date.UTC(this.year, month - 1, day) / 1000;
      if (this.dayBase + secOfDay < this.last - 183 * 86400) {
        this.year++;
        this.rollovers++;
        this.dayBase = Date.UTC(this.year, month - 1, day) / 1000;
      }
    }
    const abs = this.dayBase + secOfDay;
    if (this.origin === undefined) {
      this.origin = abs;
      this.first = stamp;
    }
    // Lines from several processes may interleave a second out of order; never step back.
    if (abs > this.last) this.last = abs;
    this.latest = stamp;
    return this.last - this.origin;
  }
}

/** "MM-DD HH:MM:SS" from a printed stamp or its ten digits. */
function stampText(s: string | number | undefined): string | undefined {
  if (typeof s !== 'number') return s;
  const d = String(s).padStart(10, '0');
  return `${d.slice(0, 2)}-${d.slice(2, 4)} ${d.slice(4, 6)}:${d.slice(6, 8)}:${d.slice(8, 10)}`;
}

// ------------------------------------------------------------------------------------------------
// The stats windows, columnar.

export interface StatsWindow {
  /** Seconds since the log's first timestamp. */
  t: number;
  stamp: string;
  /** Line number (1-based, counted across all files read). */
  line: number;
  prompt_tok_s: number;
  gen_tok_s: number;
  running: number;
  waiting: number;
  /** Preemptions reported in the window (V1 field, or V0 warnings seen since the last window). */
  preemptions: number;
  kv_usage_pct: number;
  /** NaN when the log did not say. */
  prefix_hit_pct: number;
  /** Access-log lines (completed requests) logged since the previous window. */
  requests: number;
  /** Engines summed into this window (data parallel). */
  engines: number;
}

export class WindowSeries {
  length = 0;
  private cap = 0;
  t = new Float64Array(0);
  line = new Float64Array(0);
  prompt = new Float32Array(0);
  gen = new Float32Array(0);
  running = new Float32Array(0);
  waiting = new Float32Array(0);
  preempt = new Float32Array(0);
  kv = new Float32Array(0);
  hit = new Float32Array(0);
  reqs = new Float32Array(0);
  engines = new Uint16Array(0);
  /** Absolute seconds (UTC, in the clock's notional year) of t = 0; stamps are derived from it. */
  origin = 0;
  private grow(): void {
    const cap = Math.max(1024, this.cap * 2);
    const g = <T extends Float64Array | Float32Array | Uint16Array>(a: T, C: new (n: number) => T): T => {
      const b = new C(cap);
      b.set(a);
      return b;
    };
    this.t = g(this.t, Float64Array);
    this.line = g(this.line, Float64Array);
    this.prompt = g(this.prompt, Float32Array);
    this.gen = g(this.gen, Float32Array);
    this.running = g(this.running, Float32Array);
    this.waiting = g(this.waiting, Float32Array);
    this.preempt = g(this.preempt, Float32Array);
    this.kv = g(this.kv, Float32Array);
    this.hit = g(this.hit, Float32Array);
    this.reqs = g(this.reqs, Float32Array);
    this.engines = g(this.engines, Uint16Array);
    this.cap = cap;
  }
  push(w: Omit<StatsWindow, 'stamp'>): void {
    if (this.length === this.cap) this.grow();
    const i = this.length++;
    this.t[i] = w.t;
    this.line[i] = w.line;
    this.prompt[i] = w.prompt_tok_s;
    this.gen[i] = w.gen_tok_s;
    this.running[i] = w.running;
    this.waiting[i] = w.waiting;
    this.preempt[i] = w.preemptions;
    this.kv[i] = w.kv_usage_pct;
    this.hit[i] = w.prefix_hit_pct;
    this.reqs[i] = w.requests;
    this.engines[i] = w.engines;
  }
  /** "MM-DD HH:MM:SS" of window i, as the log printed it (no strings are held per window). */
  stamp(i: number): string {
    return new Date((this.origin + this.t[i]) * 1000)
      .toISOString()
      .replace(/^\d+-(\d\d-\d\d)T(\d\d:\d\d:\d\d).*$/, '$1 $2');
  }
  get(i: number): StatsWindow {
    const r = (x: number) => Math.round(x * 100) / 100; // undo float32 noise: the log prints ≤ 2 decimals
    return {
      t: this.t[i],
      stamp: this.stamp(i),
      line: this.line[i],
      prompt_tok_s: r(this.prompt[i]),
      gen_tok_s: r(this.gen[i]),
      running: this.running[i],
      waiting: this.waiting[i],
      preemptions: this.preempt[i],
      kv_usage_pct: r(this.kv[i]),
      prefix_hit_pct: Number.isNaN(this.hit[i]) ? NaN : r(this.hit[i]),
      requests: this.reqs[i],
      engines: this.engines[i],
    };
  }
  toArray(): StatsWindow[] {
    return Array.from({ length: this.length }, (_, i) => this.get(i));
  }
}

// ------------------------------------------------------------------------------------------------
// Facts.

export interface Fact<T> {
  value: T;
  line: number;
}

export interface AuditFacts {
  files: { path: string; firstLine: number; lines: number; bytes: number }[];
  lines: number;
  bytes: number;
  /** Lines in vLLM's format whose message we do not use. */
  other_lines: number;
  /** Lines not in vLLM's log format at all (tracebacks, progress bars, other programs). */
  unknown_lines: number;
  /** The first few unknown lines, for the reader. */
  unknown_samples: { line: number; text: string }[];
  blank_lines: number;
  levels: Record<string, number>;
  format?: 'v0' | 'v1';
  version?: Fact<string>;
  model?: Fact<string>;
  weights_gib?: Fact<number>;
  model_load_s?: Fact<number>;
  weights_load_s?: Fact<number>;
  available_kv_gib?: Fact<number> & { workers: number; values: number[] };
  /** Deduplicated: one line per tensor-parallel worker prints the same size. */
  pool_tokens?: Fact<number> & { workers: number; values: number[]; lines: number[]; derived?: string };
  max_concurrency?: Fact<number> & { tokens_per_request: number };
  cuda_graph_gib?: Fact<number> & { seconds: number };
  engine_init_s?: Fact<number>;
  gpu_blocks?: Fact<number> & { cpu_blocks: number };
  sampler?: Fact<'flashinfer' | 'fallback'> & { text: string; lines: number[] };
  sampler_lines: { line: number; backend: 'flashinfer' | 'fallback' }[];
  windows: WindowSeries;
  /** V0 preemption warnings (vLLM prints every 50th): line, seconds, cumulative count. */
  preemption_warnings: { line: number; t: number; cumulative?: number }[];
  preemption_warning_count: number;
  access: {
    requests: number;
    by_status: Record<string, number>;
    by_route: Record<string, number>;
    /** Access lines after the last stats window. */
    after_last_window: number;
    first_line?: number;
    last_line?: number;
  };
  first_stamp?: string;
  last_stamp?: string;
  year_rollovers: number;
}

const MAX_SAMPLES = 5;
const MAX_PREEMPTION_RECORDS = 10_000;

/** Aggregates lines into AuditFacts. Feed lines in order; call finish() once. */
export class LogAuditor {
  private clock = new LogClock();
  private lineNo = 0;
  private reqSinceWindow = 0;
  private preemptSinceWindow = 0;
  /** DP engines print one line each per interval; merged into one window. */
  private pendingEngines = new Set<number>();
  private lastWindowT = -Infinity;
  private v0HitPending = false;
  readonly facts: AuditFacts = {
    files: [],
    lines: 0,
    bytes: 0,
    other_lines: 0,
    unknown_lines: 0,
    unknown_samples: [],
    blank_lines: 0,
    levels: {},
    sampler_lines: [],
    windows: new WindowSeries(),
    preemption_warnings: [],
    preemption_warning_count: 0,
    access: { requests: 0, by_status: {}, by_route: {}, after_last_window: 0 },
    year_rollovers: 0,
  };

  // Byte input: the scanner's state, the partial line carried from one chunk to the next, and
  // counts kept as numbers until finish() (status codes; the run of one route).
  private scan = Object.assign(new ScanState(), { needles: MESSAGE_NEEDLES });
  private carry: Buffer = Buffer.allocUnsafe(0);
  private carryLen = 0;
  private statusCounts = new Float64Array(1000);
  private routeId = -1;
  private routeKey = '';
  private routeRun = 0;
  /** Lines of byte input that the scanner left to classifyLine() (decoded); the rest were read as bytes. */
  decodedLines = 0;

  beginFile(path: string): void {
    this.closeFile();
    this.facts.files.push({ path, firstLine: this.lineNo + 1, lines: 0, bytes: 0 });
  }

  private closeFile(): void {
    const file = this.facts.files[this.facts.files.length - 1];
    if (file) file.lines = this.lineNo - file.firstLine + 1;
  }

  /**
   * Feed the next bytes of a log (UTF-8). Lines may be split anywhere, between chunks, inside a
   * character or a CRLF pair; call endChunks() after the last. The chunk is not kept.
   */
  feedChunk(chunk: Uint8Array): void {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const n = b.length;
    let s = 0;
    if (this.carryLen) {
      const nl = b.indexOf(10);
      if (nl < 0) {
        this.toCarry(b, 0, n);
        return;
      }
      this.toCarry(b, 0, nl);
      const len = this.carryLen;
      this.carryLen = 0;
      this.lineBytes(this.carry, 0, len);
      s = nl + 1;
    }
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const st = this.scan;
    st.dv = dv;
    st.dvBuf = b;
    while (s < n) {
      const z = scanAccessRun(b, dv, s, n, st);
      if (z >= 0) {
        this.onAccess(++this.lineNo);
        s = z + 1;
        continue;
      }
      const nl = b.indexOf(10, s);
      if (nl < 0) break;
      this.lineBytes(b, s, nl);
      s = nl + 1;
    }
    st.dvBuf = undefined;
    if (s < n) this.toCarry(b, s, n);
  }

  /** The last line, when the log does not end with a newline. */
  endChunks(): void {
    if (!this.carryLen) return;
    const n = this.carryLen;
    this.carryLen = 0;
    this.lineBytes(this.carry, 0, n);
  }

  private toCarry(b: Buffer, from: number, to: number): void {
    const need = this.carryLen + (to - from);
    if (need > this.carry.length) {
      const c = Buffer.allocUnsafe(Math.max(need, 2 * this.carry.length, 4096));
      this.carry.copy(c, 0, 0, this.carryLen);
      this.carry = c;
    }
    b.copy(this.carry, this.carryLen, from, to);
    this.carryLen = need;
  }

  /** One line, buf[s, e) without its newline: the byte scanner, or decoded into feed(). */
  private lineBytes(buf: Buffer, s: number, e: number): void {
    const st = this.scan;
    const k = scanLine(buf, s, e, st);
    if (k === FALLBACK) {
      this.decodedLines++;
      this.feed(buf.toString('utf8', s, e));
      return;
    }
    const line = ++this.lineNo;
    const f = this.facts;
    if (k === ACCESS) return this.onAccess(line);
    if (k === BLANK) {
      f.blank_lines++;
      return;
    }
    const level = LEVEL_NAMES[st.level];
    f.levels[level] = (f.levels[level] ?? 0) + 1;
    const t = this.clock.seconds(st.month, st.day, st.secOfDay, st.stampDigits);
    if (k === STATS) this.onStats(st.stats!, t, line);
    else if (k === OTHER) f.other_lines++;
  }

  /** An access line read by the scanner (status and route in its state). */
  private onAccess(line: number): void {
    const st = this.scan;
    const a = this.facts.access;
    a.requests++;
    this.statusCounts[st.status]++;
    if (st.routeId !== this.routeId) {
      this.flushRoute();
      this.routeId = st.routeId;
      this.routeKey = st.routeKey;
      a.by_route[st.routeKey] ??= 0; // the route's place in the record: first seen
    }
    this.routeRun++;
    a.first_line ??= line;
    a.last_line = line;
    this.reqSinceWindow++;
  }

  private flushRoute(): void {
    if (this.routeRun) this.facts.access.by_route[this.routeKey] += this.routeRun;
    this.routeRun = 0;
  }

  /** Feed one line (without its newline). */
  feed(raw: string): void {
    const line = ++this.lineNo;
    const f = this.facts;
    const c = classifyLine(raw);
    if (c.level) f.levels[c.level] = (f.levels[c.level] ?? 0) + 1;
    let t = NaN;
    if (c.stamp) t = this.clock.seconds(c.month!, c.day!, c.secOfDay!, c.stamp);
    switch (c.kind) {
      case 'blank':
        f.blank_lines++;
        return;
      case 'unknown':
        f.unknown_lines++;
        if (f.unknown_samples.length < MAX_SAMPLES)
          f.unknown_samples.push({ line, text: raw.length > 200 ? raw.slice(0, 200) + '…' : raw });
        return;
      case 'vllm':
        f.other_lines++;
        return;
      case 'access': {
        const a = c.access!;
        f.access.requests++;
        f.access.by_status[a.status] = (f.access.by_status[a.status] ?? 0) + 1;
        const q = a.path.indexOf('?');
        const route = a.method + ' ' + (q >= 0 ? a.path.slice(0, q) : a.path);
        f.access.by_route[route] = (f.access.by_route[route] ?? 0) + 1;
        f.access.first_line ??= line;
        f.access.last_line = line;
        this.reqSinceWindow++;
        return;
      }
      case 'stats':
        this.onStats(c.stats!, t, line);
        return;
      case 'prefix-v0': {
        // Belongs to the V0 stats line just before it.
        const w = f.windows;
        if (w.length && this.v0HitPending) {
          w.hit[w.length - 1] = c.prefixV0!.gpu_pct;
          this.v0HitPending = false;
        }
        return;
      }
      case 'preemption': {
        f.preemption_warning_count++;
        this.preemptSinceWindow++;
        if (f.preemption_warnings.length < MAX_PREEMPTION_RECORDS)
          f.preemption_warnings.push({ line, t, cumulative: c.preemption!.cumulative });
        return;
      }
      case 'sampler': {
        const s = c.sampler!;
        f.sampler_lines.push({ line, backend: s.backend });
        // A fallback outranks a selection: it is what ran.
        if (!f.sampler || (f.sampler.value === 'flashinfer' && s.backend === 'fallback'))
          f.sampler = { value: s.backend, line, text: s.text, lines: [line] };
        else if (f.sampler.value === s.backend) f.sampler.lines.push(line);
        return;
      }
      case 'startup':
        this.onStartup(c, line);
        return;
    }
  }

  private onStartup(c: Classified, line: number): void {
    const f = this.facts;
    const s = c.startup!;
    const v = s.value;
    const model = c.configModel;
    switch (s.key) {
      case 'version':
        f.version ??= { value: String(v), line };
        if (model) f.model ??= { value: model, line };
        break;
      case 'model':
        f.model ??= { value: String(v), line };
        break;
      case 'weights_gib':
        f.weights_gib ??= { value: v as number, line };
        f.model_load_s ??= { value: s.extra!.seconds, line };
        break;
      case 'weights_load_s':
        f.weights_load_s ??= { value: v as number, line };
        break;
      case 'available_kv_gib':
        if (!f.available_kv_gib) f.available_kv_gib = { value: v as number, line, workers: 1, values: [v as number] };
        else {
          f.available_kv_gib.workers++;
          f.available_kv_gib.values.push(v as number);
        }
        break;
      case 'pool_tokens':
        if (!f.pool_tokens || f.pool_tokens.derived)
          f.pool_tokens = { value: v as number, line, workers: 1, values: [v as number], lines: [line] };
        else {
          f.pool_tokens.workers++;
          f.pool_tokens.values.push(v as number);
          f.pool_tokens.lines.push(line);
          f.pool_tokens.value = Math.min(f.pool_tokens.value, v as number);
        }
        break;
      case 'max_concurrency':
        f.max_concurrency ??= { value: v as number, line, tokens_per_request: s.extra!.tokens_per_request };
        break;
      case 'cuda_graph':
        f.cuda_graph_gib ??= { value: v as number, line, seconds: s.extra!.seconds };
        break;
      case 'engine_init_s':
        f.engine_init_s ??= { value: v as number, line };
        break;
      case 'gpu_blocks':
        f.gpu_blocks ??= { value: v as number, line, cpu_blocks: s.extra!.cpu_blocks };
        break;
    }
  }

  private onStats(s: StatsFields, t: number, line: number): void {
    const f = this.facts;
    const w = f.windows;
    f.format ??= s.format;
    const engine = s.engine ?? 0;
    // Data parallel: "Engine 000", "Engine 001" … at the same tick merge into one window.
    if (s.engine !== undefined && w.length && t - this.lastWindowT <= 1 && !this.pendingEngines.has(engine)) {
      const i = w.length - 1;
      this.pendingEngines.add(engine);
      const n = w.engines[i];
      w.prompt[i] += s.prompt_tok_s;
      w.gen[i] += s.gen_tok_s;
      w.running[i] += s.running;
      w.waiting[i] += s.waiting;
      w.preempt[i] += s.preemptions ?? 0;
      w.kv[i] = (w.kv[i] * n + s.kv_usage_pct) / (n + 1);
      if (s.prefix_hit_pct !== undefined)
        w.hit[i] = Number.isNaN(w.hit[i]) ? s.prefix_hit_pct : (w.hit[i] * n + s.prefix_hit_pct) / (n + 1);
      w.engines[i] = n + 1;
      return;
    }
    this.pendingEngines = new Set([engine]);
    this.lastWindowT = t;
    w.push({
      t,
      line,
      prompt_tok_s: s.prompt_tok_s,
      gen_tok_s: s.gen_tok_s,
      running: s.running,
      waiting: s.waiting,
      preemptions: (s.preemptions ?? 0) + this.preemptSinceWindow,
      kv_usage_pct: s.kv_usage_pct,
      prefix_hit_pct: s.prefix_hit_pct ?? NaN,
      requests: this.reqSinceWindow,
      engines: s.aggregatedEngines ?? 1,
    });
    this.v0HitPending = s.format === 'v0';
    this.reqSinceWindow = 0;
    this.preemptSinceWindow = 0;
  }

  finish(): AuditFacts {
    const f = this.facts;
    this.closeFile();
    this.flushRoute();
    const sc = this.statusCounts;
    for (let i = 0; i < sc.length; i++) if (sc[i]) f.access.by_status[i] = (f.access.by_status[i] ?? 0) + sc[i];
    sc.fill(0);
    f.lines = this.lineNo;
    f.access.after_last_window = this.reqSinceWindow;
    f.first_stamp = this.clock.firstStamp;
    f.last_stamp = this.clock.lastStamp;
    f.year_rollovers = this.clock.rollovers;
    f.windows.origin = this.clock.origin ?? 0;
    // V0 prints blocks, not tokens: tokens = GPU blocks × block size (16).
    if (!f.pool_tokens && f.gpu_blocks)
      f.pool_tokens = {
        value: f.gpu_blocks.value * 16,
        line: f.gpu_blocks.line,
        workers: 1,
        values: [f.gpu_blocks.value * 16],
        lines: [f.gpu_blocks.line],
        derived: 'GPU blocks × 16',
      };
    return f;
  }
}
