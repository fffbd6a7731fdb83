/**
 * The log auditor: aggregates a stream of lines into facts incrementally, so a multi-GB log is
 * read without holding it in memory. Only the stats windows are kept as a series (columnar typed
 * arrays, a few dozen bytes a window).
 *
 * Two ways in, one result: files are read as bytes (feedChunk) — access and stats lines, nearly all
 * of a big vLLM log, are read by the byte scanner in scan.ts without decoding — and every other
 * line is decoded and goes through the text path (feed): the line reader (lineReader.ts: wrappers,
 * rejoined and split lines), then the dialect's classifier (dialect.ts), which stays the definition
 * of what a line means. The byte path hands a line to the text path whenever the reader would
 * change it; the tests hold both paths to the same facts.
 *
 * Lines longer than MAX_LINE_BYTES are skipped (counted, with their line numbers) without being
 * held: a file that is one 2 GB line is read in bounded memory.
 */
import { LogClock } from './clock';
import { DIALECTS, VLLM, type DialectId, type LogDialect } from './dialect';
import { LineReader, type LineShape, type LogicalLine, type WrapperCounts } from './lineReader';
import { ParallelTracker, type ParallelFacts } from './parallel';
import { quoteLine } from './quote';
import {
  ACCESS,
  BLANK,
  FALLBACK,
  LEVEL_NAMES,
  OTHER,
  reasonTail,
  scanAccessRun,
  ScanState,
  scanLine,
  STATS,
} from './scan';
import type { Classified, CrashMark, StatsFields } from './types';
import { MESSAGE_NEEDLES } from './vllm/classify';
import { crashOf } from './vllm/startup';
import { WindowSeries } from './windows';

export { classifyLine, MESSAGE_NEEDLES } from './vllm/classify';
export { LogClock } from './clock';
export { WindowSeries } from './windows';
export type { StatsWindow } from './windows';
export type { Classified, Level, LineKind, StartupKey, StatsFields } from './types';

/** Lines longer than this (bytes, with a CR) are skipped, not read. */
export const MAX_LINE_BYTES = 1 << 20;

// ------------------------------------------------------------------------------------------------
// Facts.

export interface Fact<T> {
  value: T;
  line: number;
  /** How the value was read, when it needs saying (e.g. the unit assumed for a "GB" label). */
  note?: string;
}

export interface CrashFact {
  line: number;
  kind: CrashMark['kind'];
  /** Quoted (cut, redacted) only when the file was recognised as a server log. */
  text?: string;
  /** Before the first stats window and the first request: the server never served. */
  phase: 'startup' | 'serving';
  /** For an out-of-memory at startup: what had loaded when it failed. */
  after?: 'nothing' | 'weights' | 'kv-cache' | 'graphs';
}

export interface EngineFacts {
  engine: number;
  windows: number;
  first_line: number;
  last_line: number;
  mean_gen_tok_s: number;
  mean_prompt_tok_s: number;
  peak_running: number;
  peak_kv_usage_pct: number;
  preemptions: number;
  /** This engine's KV pool, when the log says which engine printed it. */
  pool_tokens?: number;
}

export interface InfoSeries {
  lines: number;
  first_line: number;
  last_line: number;
  /** Which wording the server used. */
  generation?: string;
  /** Field means over the lines (or sums, for token counts). */
  mean: Record<string, number>;
  sum: Record<string, number>;
  /** The last line's per-position acceptance rates (V1 SpecDecoding). */
  per_position?: number[];
}

export interface AuditFacts {
  files: { path: string; firstLine: number; lines: number; bytes: number }[];
  lines: number;
  bytes: number;
  /** The server whose log this is, when a line said so unmistakably; absent: not recognised as a server log. */
  dialect?: DialectId;
  /** Lines in the server's format whose message we do not use. */
  other_lines: number;
  /** Lines not in the server's log format at all (tracebacks, progress bars, other programs). */
  unknown_lines: number;
  /** The first few unknown lines, for the reader (text only from a recognised server log). */
  unknown_samples: { line: number; text?: string }[];
  /** Unknown lines that look informative ("a key: a number"): the next gap in the parser. */
  informative_unknown: { count: number; samples: { line: number; text?: string }[] };
  blank_lines: number;
  /** Lines over MAX_LINE_BYTES, skipped unread. */
  long_lines: { count: number; lines: number[]; max_bytes: number };
  /** Wrappers peeled before the server's prefix, by kind; terminal-wrapped lines rejoined; glued lines split. */
  wrappers: WrapperCounts;
  rejoined_lines: number;
  split_lines: number;
  levels: Record<string, number>;
  format?: 'v0' | 'v1' | 'sglang';
  version?: Fact<string>;
  model?: Fact<string>;
  weights_gib?: Fact<number>;
  model_load_s?: Fact<number>;
  weights_load_s?: Fact<number>;
  available_kv_gib?: Fact<number> & { workers: number; values: number[]; total?: number };
  /** Deduplicated: one line per tensor-parallel worker prints the same size; data-parallel engines each have a pool. */
  pool_tokens?: Fact<number> & {
    workers: number;
    values: number[];
    lines: number[];
    derived?: string;
    /** Data-parallel engines, each with its own pool, and their total. */
    engines?: { engine: number; tokens: number; workers: number; line: number }[];
    total?: number;
  };
  max_concurrency?: Fact<number> & { tokens_per_request: number };
  cuda_graph_gib?: Fact<number> & { seconds: number };
  engine_init_s?: Fact<number> & { compilation_s?: number };
  gpu_blocks?: Fact<number> & { cpu_blocks?: number };
  /** The CPU backend's block count ("# cpu blocks: N"). */
  cpu_blocks?: Fact<number>;
  /** "num_gpu_blocks is: N" — summed over data-parallel engines by vLLM's front end. */
  blocks_total?: Fact<number>;
  device_memory_gib?: Fact<number> & { free_gib: number };
  sampler?: Fact<'flashinfer' | 'fallback'> & { text: string; lines: number[] };
  sampler_lines: { line: number; backend: 'flashinfer' | 'fallback' }[];
  windows: WindowSeries;
  /** Data-parallel engines seen in the stats lines ("Engine 001: …"), each summarised. */
  engines: EngineFacts[];
  parallel: ParallelFacts;
  /** V0 preemption warnings (vLLM prints every 50th): line, seconds, cumulative count. */
  preemption_warnings: { line: number; t: number; cumulative?: number }[];
  preemption_warning_count: number;
  spec_decode?: InfoSeries;
  kv_transfer?: InfoSeries;
  /** Stats fields only some versions print: windows that had them, and their peak. */
  stats_extras: Partial<
    Record<
      'external_prefix_hit_pct' | 'mm_hit_pct' | 'cpu_prefix_hit_pct' | 'deferred' | 'corrupted',
      { windows: number; max: number; first_line: number }
    >
  >;
  /** Errors, tracebacks, engine deaths, out-of-memory: each with its line. */
  crashes: CrashFact[];
  crash_count: number;
  /** Values the log printed that cannot be right (a hit rate over 100%): the log is corrupt there. */
  parse_warnings: { line: number; what: string }[];
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
const MAX_CRASHES = 20;
const MAX_WARNINGS = 20;
/** "Key: 12", "key=3.5", "took 4 s": what an informative line looks like. */
const INFORMATIVE = /[A-Za-z)][\w )/-]{0,40}(?::\s+|=)-?\d[\d,.]*(?:\s?[%A-Za-z/]+)?(?:[,;)\s]|$)/;

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
  private dialect: LogDialect = VLLM;
  private par = new ParallelTracker();
  private engineAcc = new Map<number, EngineFacts & { sumGen: number; sumPrompt: number }>();
  private pools = new Map<string, { values: number[]; lines: number[] }>();
  private kvs = new Map<string, number[]>();
  private openTrace = -1;
  private served = false;
  private loaded: CrashFact['after'] = 'nothing';
  // SGLang: prefill tokens between two "Decode batch" windows.
  private prefillTokens = 0;
  private cachedTokens = 0;
  private reader = new LineReader(
    (t) => this.shape(t),
    (l) => this.onLogical(l),
  );
  readonly facts: AuditFacts = {
    files: [],
    lines: 0,
    bytes: 0,
    other_lines: 0,
    unknown_lines: 0,
    unknown_samples: [],
    informative_unknown: { count: 0, samples: [] },
    blank_lines: 0,
    long_lines: { count: 0, lines: [], max_bytes: 0 },
    wrappers: {},
    rejoined_lines: 0,
    split_lines: 0,
    levels: {},
    sampler_lines: [],
    windows: new WindowSeries(),
    engines: [],
    parallel: { workers: 0, sources: [] },
    preemption_warnings: [],
    preemption_warning_count: 0,
    stats_extras: {},
    crashes: [],
    crash_count: 0,
    parse_warnings: [],
    access: { requests: 0, by_status: {}, by_route: {}, after_last_window: 0 },
    year_rollovers: 0,
  };

  // Byte input: the scanner's state, the partial line carried from one chunk to the next, and
  // counts kept as numbers until finish() (status codes; the run of one route).
  private scan = Object.assign(new ScanState(), { needles: MESSAGE_NEEDLES });
  private carry: Buffer = Buffer.allocUnsafe(0);
  private carryLen = 0;
  /** Bytes of the current line past MAX_LINE_BYTES (the line is being skipped), or 0. */
  private skipping = 0;
  private statusCounts = new Float64Array(1000);
  private routeId = -1;
  private routeKey = '';
  private routeRun = 0;
  /** Lines of byte input that the scanner left to the text path (decoded); the rest were read as bytes. */
  decodedLines = 0;

  beginFile(path: string): void {
    this.closeFile();
    this.facts.files.push({ path, firstLine: this.lineNo + 1, lines: 0, bytes: 0 });
  }

  private closeFile(): void {
    this.reader.end();
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
    if (this.carryLen || this.skipping) {
      const nl = b.indexOf(10);
      if (nl < 0) {
        this.toCarry(b, 0, n);
        return;
      }
      this.toCarry(b, 0, nl);
      const len = this.carryLen;
      this.carryLen = 0;
      this.endCarried(len);
      s = nl + 1;
    }
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const st = this.scan;
    st.dv = dv;
    st.dvBuf = b;
    while (s < n) {
      if (!this.reader.busy && this.dialect === VLLM && !this.reader.learned.length) {
        const z = scanAccessRun(b, dv, s, n, st);
        if (z >= 0) {
          this.onAccess(++this.lineNo);
          s = z + 1;
          continue;
        }
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
    if (!this.carryLen && !this.skipping) return;
    const n = this.carryLen;
    this.carryLen = 0;
    this.endCarried(n);
  }

  private endCarried(len: number): void {
    if (this.skipping) {
      const bytes = this.skipping;
      this.skipping = 0;
      this.longLine(++this.lineNo, bytes);
      return;
    }
    this.lineBytes(this.carry, 0, len);
  }

  private toCarry(b: Buffer, from: number, to: number): void {
    if (this.skipping) {
      this.skipping += to - from;
      return;
    }
    const need = this.carryLen + (to - from);
    if (need > MAX_LINE_BYTES) {
      // Too long to read: count its bytes and drop them until the newline.
      this.skipping = need;
      this.carryLen = 0;
      if (this.carry.length > 1 << 16) this.carry = Buffer.allocUnsafe(0);
      return;
    }
    if (need > this.carry.length) {
      const c = Buffer.allocUnsafe(Math.max(need, 2 * this.carry.length, 4096));
      this.carry.copy(c, 0, 0, this.carryLen);
      this.carry = c;
    }
    b.copy(this.carry, this.carryLen, from, to);
    this.carryLen = need;
  }

  private longLine(line: number, bytes: number): void {
    const l = this.facts.long_lines;
    l.count++;
    if (l.lines.length < 10) l.lines.push(line);
    l.max_bytes = Math.max(l.max_bytes, bytes);
  }

  private decode(buf: Buffer, s: number, e: number): void {
    this.decodedLines++;
    this.scan.procInside = undefined;
    this.feed(buf.toString('utf8', s, e));
  }

  /** One line, buf[s, e) without its newline: the byte scanner, or decoded into feed(). */
  private lineBytes(buf: Buffer, s: number, e: number): void {
    if (e - s > MAX_LINE_BYTES) return this.longLine(++this.lineNo, e - s);
    if (this.reader.busy || this.dialect !== VLLM) return this.decode(buf, s, e);
    const st = this.scan;
    if (this.reader.learned.length && this.reader.hasLearnedPrefix(buf.toString('latin1', s, Math.min(e, s + 400))))
      return this.decode(buf, s, e);
    const k = scanLine(buf, s, e, st);
    if (k === FALLBACK) return this.decode(buf, s, e);
    // Lines the text path would treat differently: a glued or cut stats line, an access line with
    // more than a reason phrase after its status, an error line (a crash record).
    if (k === STATS && this.reader.wouldChange(buf.toString('latin1', s, e))) return this.decode(buf, s, e);
    if (k === ACCESS && !reasonTail(buf, st.statusEnd, e)) return this.decode(buf, s, e);
    if (k === OTHER && st.level >= 3) return this.decode(buf, s, e);
    const line = ++this.lineNo;
    const f = this.facts;
    if (st.procInside !== undefined) {
      this.par.noteProcess(st.procInside);
      st.procInside = undefined;
    }
    if (k === ACCESS) return this.onAccess(line);
    if (k === BLANK) {
      f.blank_lines++;
      return;
    }
    f.dialect ??= 'vllm';
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
    this.served = true;
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

  /** Feed one physical line (without its newline): the text path. */
  feed(raw: string): void {
    const line = ++this.lineNo;
    if (raw.length > MAX_LINE_BYTES / 4) {
      const bytes = Buffer.byteLength(raw);
      if (bytes > MAX_LINE_BYTES) return this.longLine(line, bytes);
    }
    this.reader.push(raw, line);
  }

  private shape(text: string): LineShape {
    const s = this.dialect.shape(text);
    return { ...s, parsed: { by: this.dialect, c: s.parsed } };
  }

  /** A logical line from the reader (wrappers peeled, rejoined or split). */
  private onLogical(l: LogicalLine): void {
    const f = this.facts;
    if (f.dialect === undefined)
      for (const d of DIALECTS)
        if (d.sniff(l.text)) {
          f.dialect = d.id;
          this.dialect = d;
          if (d.id === 'sglang') {
            this.reader.learn = false;
            this.reader.learned.length = 0;
          }
          break;
        }
    const p = l.parsed as { by: LogDialect; c: Classified } | undefined;
    const c = p && p.by === this.dialect ? p.c : this.dialect.classify(l.text);
    this.process(c, l.line, l.text);
  }

  private process(c: Classified, line: number, text: string): void {
    const f = this.facts;
    if (c.level) f.levels[c.level] = (f.levels[c.level] ?? 0) + 1;
    if (c.process !== undefined && c.processTail !== undefined) this.par.noteProcess(`${c.process} ${c.processTail}`);
    let t = NaN;
    if (c.stamp) t = this.clock.seconds(c.month!, c.day!, c.secOfDay!, c.stamp);
    if (c.crash) this.onCrash(c.crash, line);
    switch (c.kind) {
      case 'blank':
        f.blank_lines++;
        return;
      case 'unknown': {
        f.unknown_lines++;
        if (f.unknown_samples.length < MAX_SAMPLES) f.unknown_samples.push({ line, text: quoteLine(text) });
        const crash = crashOf(text, false, true);
        if (crash) this.onCrash(crash, line);
        else if (INFORMATIVE.test(text.length > 2000 ? text.slice(0, 2000) : text)) {
          const u = f.informative_unknown;
          u.count++;
          if (u.samples.length < MAX_SAMPLES) u.samples.push({ line, text: quoteLine(text) });
        }
        return;
      }
      case 'vllm':
        f.other_lines++;
        return;
      case 'access': {
        const a = c.access!;
        f.access.requests++;
        this.served = true;
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
          const i = w.length - 1;
          w.hit[i] = this.checkedPct(c.prefixV0!.gpu_pct, line, 'prefix cache hit rate (GPU)');
          w.cpuHit[i] = this.checkedPct(c.prefixV0!.cpu_pct, line, 'prefix cache hit rate (CPU)');
          this.extra('cpu_prefix_hit_pct', w.cpuHit[i], line);
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
          f.sampler = { value: s.backend, line, text: quoteLine(s.text, 200), lines: [line] };
        else if (f.sampler.value === s.backend) f.sampler.lines.push(line);
        return;
      }
      case 'info':
        this.onInfo(c, line);
        return;
      case 'startup':
        for (const s of c.startups ?? [c.startup!]) this.onStartup(c, s, line);
        return;
    }
  }

  private onCrash(m: CrashMark, line: number): void {
    const f = this.facts;
    const phase: CrashFact['phase'] = f.windows.length || this.served ? 'serving' : 'startup';
    // Inside a traceback its lines belong to it; the exception line that ends it names it.
    if (this.openTrace >= 0) {
      const tr = f.crashes[this.openTrace];
      if (m.kind === 'error' || m.kind === 'traceback') return;
      if (tr && line - tr.line < 400) {
        tr.text = m.text;
        if (m.kind === 'oom' || m.kind === 'kv-too-small' || m.kind === 'engine-dead') tr.kind = m.kind;
        if (tr.kind === 'oom' && tr.phase === 'startup') tr.after = this.loaded;
        this.openTrace = -1;
        return;
      }
      this.openTrace = -1;
    }
    f.crash_count++;
    if (f.crashes.length >= MAX_CRASHES) return;
    f.crashes.push({
      line,
      kind: m.kind,
      text: m.text,
      phase,
      ...(m.kind === 'oom' && phase === 'startup' ? { after: this.loaded } : {}),
    });
    if (m.kind === 'traceback') this.openTrace = f.crashes.length - 1;
  }

  private onInfo(c: Classified, line: number): void {
    const f = this.facts;
    const info = c.info!;
    if (info.kind === 'prefill-batch') {
      this.prefillTokens += info.fields.new_token ?? 0;
      this.cachedTokens += info.fields.cached_token ?? 0;
      return;
    }
    const key = info.kind === 'kv-transfer' ? 'kv_transfer' : 'spec_decode';
    const s = (f[key] ??= { lines: 0, first_line: line, last_line: line, mean: {}, sum: {} });
    s.lines++;
    s.last_line = line;
    if (info.generation) s.generation = info.generation;
    for (const [k, v] of Object.entries(info.fields)) {
      // Token counts add up; rates and lengths average over the lines.
      if (/tokens$/.test(k) || info.kind === 'kv-transfer') s.sum[k] = (s.sum[k] ?? 0) + v;
      s.mean[k] = ((s.mean[k] ?? 0) * (s.lines - 1) + v) / s.lines;
    }
    if (info.perPosition) s.per_position = info.perPosition;
    // The timeline: the acceptance rate of the window whose stats line came just before.
    const w = f.windows;
    if (
      key === 'spec_decode' &&
      w.length &&
      info.fields.acceptance_pct !== undefined &&
      Number.isNaN(w.spec[w.length - 1])
    )
      w.spec[w.length - 1] = info.fields.acceptance_pct;
  }

  private onStartup(c: Classified, s: NonNullable<Classified['startup']>, line: number): void {
    const f = this.facts;
    const v = s.value;
    const model = c.configModel;
    const note = s.note ? { note: s.note } : {};
    const dp = ParallelTracker.dpRank(c.process);
    const dpKey = dp === undefined ? '?' : String(dp);
    switch (s.key) {
      case 'version':
        f.version ??= { value: String(v), line };
        if (model) f.model ??= { value: model, line };
        break;
      case 'model':
        f.model ??= { value: String(v), line };
        break;
      case 'weights_gib':
        f.weights_gib ??= { value: v as number, line, ...note };
        if (s.extra?.seconds !== undefined) f.model_load_s ??= { value: s.extra.seconds, line };
        this.loaded = 'weights';
        break;
      case 'weights_load_s':
        f.weights_load_s ??= { value: v as number, line };
        break;
      case 'available_kv_gib': {
        (this.kvs.get(dpKey) ?? this.kvs.set(dpKey, []).get(dpKey)!).push(v as number);
        if (!f.available_kv_gib) f.available_kv_gib = { value: v as number, line, workers: 1, values: [v as number] };
        else {
          f.available_kv_gib.workers++;
          f.available_kv_gib.values.push(v as number);
        }
        this.loaded = 'kv-cache';
        break;
      }
      case 'pool_tokens': {
        const p = this.pools.get(dpKey) ?? this.pools.set(dpKey, { values: [], lines: [] }).get(dpKey)!;
        p.values.push(v as number);
        p.lines.push(line);
        if (!f.pool_tokens || f.pool_tokens.derived)
          f.pool_tokens = { value: v as number, line, workers: 1, values: [v as number], lines: [line] };
        else {
          f.pool_tokens.workers++;
          f.pool_tokens.values.push(v as number);
          f.pool_tokens.lines.push(line);
          f.pool_tokens.value = Math.min(f.pool_tokens.value, v as number);
        }
        this.loaded = 'kv-cache';
        break;
      }
      case 'max_concurrency':
        f.max_concurrency ??= { value: v as number, line, tokens_per_request: s.extra!.tokens_per_request };
        break;
      case 'cuda_graph':
        f.cuda_graph_gib ??= { value: v as number, line, seconds: s.extra!.seconds };
        this.loaded = 'graphs';
        break;
      case 'engine_init_s':
        f.engine_init_s ??= {
          value: v as number,
          line,
          ...(s.extra?.compilation_s !== undefined ? { compilation_s: s.extra.compilation_s } : {}),
        };
        break;
      case 'gpu_blocks':
        f.gpu_blocks ??= {
          value: v as number,
          line,
          ...(s.extra?.cpu_blocks !== undefined ? { cpu_blocks: s.extra.cpu_blocks } : {}),
        };
        this.loaded = 'kv-cache';
        break;
      case 'cpu_blocks':
        f.cpu_blocks ??= { value: v as number, line };
        break;
      case 'blocks_total':
        f.blocks_total ??= { value: v as number, line };
        break;
      case 'device_memory':
        f.device_memory_gib ??= { value: v as number, line, free_gib: s.extra!.free_gib };
        break;
      case 'parallel':
        this.par.noteConfig(s.extra ?? {});
        break;
    }
  }

  /** A percentage the log printed; one outside 0–100 is a parse warning and reads as "not said". */
  private checkedPct(v: number | undefined, line: number, what: string): number {
    if (v === undefined || Number.isNaN(v)) return NaN;
    if (v >= 0 && v <= 100.05) return v;
    const w = this.facts.parse_warnings;
    if (w.length < MAX_WARNINGS) w.push({ line, what: `${what} ${v}% is outside 0–100%` });
    return NaN;
  }

  private extra(key: keyof AuditFacts['stats_extras'], v: number | undefined, line: number): void {
    if (v === undefined || Number.isNaN(v)) return;
    const e = (this.facts.stats_extras[key] ??= { windows: 0, max: v, first_line: line });
    e.windows++;
    e.max = Math.max(e.max, v);
  }

  private onStats(s: StatsFields, t: number, line: number): void {
    const f = this.facts;
    const w = f.windows;
    f.format ??= s.format;
    const engine = s.engine ?? 0;
    const hit = this.checkedPct(s.prefix_hit_pct, line, 'prefix cache hit rate');
    const kv =
      s.kv_usage_pct > 100.05 || s.kv_usage_pct < 0
        ? this.checkedPct(s.kv_usage_pct, line, 'GPU KV cache usage')
        : s.kv_usage_pct;
    const ext = this.checkedPct(s.external_prefix_hit_pct, line, 'external prefix cache hit rate');
    const mm = this.checkedPct(s.mm_hit_pct, line, 'MM cache hit rate');
    this.extra('external_prefix_hit_pct', ext, line);
    this.extra('mm_hit_pct', mm, line);
    this.extra('deferred', s.deferred, line);
    this.extra('corrupted', s.corrupted, line);
    if (s.engine !== undefined) {
      this.par.noteStatsEngine(engine);
      let e = this.engineAcc.get(engine);
      if (!e)
        this.engineAcc.set(
          engine,
          (e = {
            engine,
            windows: 0,
            first_line: line,
            last_line: line,
            mean_gen_tok_s: 0,
            mean_prompt_tok_s: 0,
            peak_running: 0,
            peak_kv_usage_pct: 0,
            preemptions: 0,
            sumGen: 0,
            sumPrompt: 0,
          }),
        );
      e.windows++;
      e.last_line = line;
      e.sumGen += s.gen_tok_s;
      e.sumPrompt += s.prompt_tok_s;
      e.peak_running = Math.max(e.peak_running, s.running);
      if (!Number.isNaN(kv)) e.peak_kv_usage_pct = Math.max(e.peak_kv_usage_pct, kv);
      e.preemptions += s.preemptions ?? 0;
    }
    let prompt = s.prompt_tok_s;
    let winHit = hit;
    if (s.format === 'sglang') {
      // The prefill lines since the last window give its prompt tokens and its cache hits.
      const dt = t - this.lastWindowT;
      prompt = Number.isFinite(dt) && dt > 0 ? this.prefillTokens / dt : 0;
      const total = this.prefillTokens + this.cachedTokens;
      winHit = total > 0 ? (100 * this.cachedTokens) / total : NaN;
      this.prefillTokens = this.cachedTokens = 0;
    }
    // Data parallel: "Engine 000", "Engine 001" … at the same tick merge into one window.
    if (s.engine !== undefined && w.length && t - this.lastWindowT <= 1 && !this.pendingEngines.has(engine)) {
      const i = w.length - 1;
      this.pendingEngines.add(engine);
      const n = w.engines[i];
      w.prompt[i] += prompt;
      w.gen[i] += s.gen_tok_s;
      w.running[i] += s.running;
      w.waiting[i] += s.waiting;
      w.preempt[i] += s.preemptions ?? 0;
      w.kv[i] = (w.kv[i] * n + kv) / (n + 1);
      if (!Number.isNaN(winHit)) w.hit[i] = Number.isNaN(w.hit[i]) ? winHit : (w.hit[i] * n + winHit) / (n + 1);
      w.engines[i] = n + 1;
      return;
    }
    this.pendingEngines = new Set([engine]);
    this.lastWindowT = t;
    w.push({
      t,
      line,
      prompt_tok_s: prompt,
      gen_tok_s: s.gen_tok_s,
      running: s.running,
      waiting: s.waiting,
      preemptions: (s.preemptions ?? 0) + this.preemptSinceWindow,
      kv_usage_pct: kv,
      prefix_hit_pct: winHit,
      requests: this.reqSinceWindow,
      engines: s.aggregatedEngines ?? 1,
      external_prefix_hit_pct: ext,
      mm_hit_pct: mm,
      deferred: s.deferred,
      corrupted: s.corrupted,
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
    f.wrappers = { ...this.reader.wrappers };
    f.rejoined_lines = this.reader.rejoined;
    f.split_lines = this.reader.split;
    f.parallel = this.par.facts();
    f.engines = [...this.engineAcc.values()]
      .sort((a, b) => a.engine - b.engine)
      .map(({ sumGen, sumPrompt, ...e }) => ({
        ...e,
        mean_gen_tok_s: Math.round((sumGen / e.windows) * 100) / 100,
        mean_prompt_tok_s: Math.round((sumPrompt / e.windows) * 100) / 100,
      }));
    this.finishPools();
    // V0 prints blocks, not tokens: tokens = GPU blocks × block size (16, V0's default).
    const blocks = f.gpu_blocks ?? f.blocks_total;
    if (!f.pool_tokens && blocks)
      f.pool_tokens = {
        value: blocks.value * 16,
        line: blocks.line,
        workers: 1,
        values: [blocks.value * 16],
        lines: [blocks.line],
        derived: `${f.gpu_blocks ? 'GPU blocks' : 'num_gpu_blocks'} × 16 (the default block size; the log does not print it)`,
      };
    // A file not recognised as a server log is not quoted: its content could be anything (a key).
    if (f.dialect === undefined) {
      for (const s of f.unknown_samples) delete s.text;
      for (const s of f.informative_unknown.samples) delete s.text;
      for (const c of f.crashes) delete c.text;
    } else for (const c of f.crashes) if (c.text !== undefined) c.text = quoteLine(c.text, 200);
    return f;
  }

  /** Tensor-parallel workers print the same pool (one value); data-parallel engines each have their own. */
  private finishPools(): void {
    const f = this.facts;
    const pool = f.pool_tokens;
    if (!pool || pool.derived) return;
    const ranked = [...this.pools.entries()].filter(([k]) => k !== '?');
    let engines: { engine: number; tokens: number; workers: number; line: number }[] = [];
    if (ranked.length >= 2)
      engines = ranked
        .map(([k, p]) => ({
          engine: Number(k),
          tokens: Math.min(...p.values),
          workers: p.values.length,
          line: p.lines[0],
        }))
        .sort((a, b) => a.engine - b.engine);
    else if (!ranked.length && f.engines.length >= 2 && pool.values.length === f.engines.length)
      // No process prefix: one pool line per engine the stats lines show, in engine order.
      engines = pool.values.map((tokens, i) => ({
        engine: f.engines[i].engine,
        tokens,
        workers: 1,
        line: pool.lines[i],
      }));
    if (engines.length >= 2) {
      pool.engines = engines;
      pool.total = engines.reduce((a, e) => a + e.tokens, 0);
      pool.workers = Math.max(...engines.map((e) => e.workers));
      for (const e of engines) {
        const ef = f.engines.find((x) => x.engine === e.engine);
        if (ef) ef.pool_tokens = e.tokens;
      }
      const kv = [...this.kvs.entries()].filter(([k]) => k !== '?');
      if (f.available_kv_gib && kv.length >= 2)
        f.available_kv_gib.total = Math.round(kv.reduce((a, [, vs]) => a + Math.min(...vs), 0) * 100) / 100;
    }
  }
}
