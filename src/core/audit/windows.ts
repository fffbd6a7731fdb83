/** The stats windows, columnar: a few dozen bytes a window, so a multi-GB log is held as a series. */

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
  /** The fields only some versions print (NaN when the window's line did not): V1 connectors, multimodal, V0 CPU. */
  external_prefix_hit_pct: number;
  mm_hit_pct: number;
  cpu_prefix_hit_pct: number;
  deferred: number;
  corrupted: number;
  /** Speculative decoding: the draft acceptance rate printed right after this window's line. */
  spec_accept_pct: number;
}

/** The optional columns, NaN unless the log printed them. */
export const OPTIONAL_COLUMNS = ['ext', 'mm', 'cpuHit', 'deferred', 'corrupted', 'spec'] as const;

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
  ext = new Float32Array(0);
  mm = new Float32Array(0);
  cpuHit = new Float32Array(0);
  deferred = new Float32Array(0);
  corrupted = new Float32Array(0);
  spec = new Float32Array(0);
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
    for (const k of OPTIONAL_COLUMNS) this[k] = g(this[k], Float32Array);
    this.cap = cap;
  }
  push(
    w: Omit<
      StatsWindow,
      | 'stamp'
      | 'external_prefix_hit_pct'
      | 'mm_hit_pct'
      | 'cpu_prefix_hit_pct'
      | 'deferred'
      | 'corrupted'
      | 'spec_accept_pct'
    > &
      Partial<Pick<StatsWindow, 'external_prefix_hit_pct' | 'mm_hit_pct' | 'deferred' | 'corrupted'>>,
  ): void {
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
    this.ext[i] = w.external_prefix_hit_pct ?? NaN;
    this.mm[i] = w.mm_hit_pct ?? NaN;
    this.cpuHit[i] = NaN;
    this.deferred[i] = w.deferred ?? NaN;
    this.corrupted[i] = w.corrupted ?? NaN;
    this.spec[i] = NaN;
  }
  /** "MM-DD HH:MM:SS" of window i, as the log printed it (no strings are held per window). */
  stamp(i: number): string {
    return new Date((this.origin + this.t[i]) * 1000)
      .toISOString()
      .replace(/^\d+-(\d\d-\d\d)T(\d\d:\d\d:\d\d).*$/, '$1 $2');
  }
  get(i: number): StatsWindow {
    const r = (x: number) => Math.round(x * 100) / 100; // undo float32 noise: the log prints ≤ 2 decimals
    const opt = (x: number) => (Number.isNaN(x) ? NaN : r(x));
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
      external_prefix_hit_pct: opt(this.ext[i]),
      mm_hit_pct: opt(this.mm[i]),
      cpu_prefix_hit_pct: opt(this.cpuHit[i]),
      deferred: opt(this.deferred[i]),
      corrupted: opt(this.corrupted[i]),
      spec_accept_pct: opt(this.spec[i]),
    };
  }
  toArray(): StatsWindow[] {
    return Array.from({ length: this.length }, (_, i) => this.get(i));
  }
}
