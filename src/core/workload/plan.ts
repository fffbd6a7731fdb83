/**
 * A workload made concrete: request i's prompt token ids, output length and (for a trace) arrival
 * time, deterministic in the seed, so the bench, the simulated endpoint and `predict: serving` send
 * the same requests. Prompts are random token ids (no tokenizer needed); a shared prefix is the same
 * ids at the start of every prompt of its group, and a trace's hash id is the same block of ids
 * wherever it appears, so a prefix cache hits exactly where the workload says it should.
 */
import { Mulberry32, seedOf } from '../sim/rng';
import type { LengthSpec, SessionSpec, SharedPrefixSpec } from './spec';

/** One request of the plan. */
export interface PlannedRequest {
  index: number;
  prompt: Uint32Array;
  output: number;
  /** Trace replay: seconds after the start at which the request is sent. */
  arrivalS?: number;
  /** Shared-prefix workloads: the group whose prefix the prompt starts with. */
  group?: number;
  /** Dataset rows given as text: the text (a live bench sends it; `prompt` is its simulated-server ids). */
  text?: string;
  /** Multi-turn sessions: which session, and which turn of it (0 = first). */
  session?: number;
  turn?: number;
}

/** A conversation's own random draws for its later turns. */
export interface SessionDraws {
  rng: Mulberry32;
  inLen: () => number;
  outLen: () => number;
}

/** Lengths already read from files, where the spec named one (the plan itself does no I/O). */
export interface LoadedLengths {
  input?: number[];
  output?: number[];
}

/** One row of a dataset file: the prompt's ids (or only its length), the text it came from, its output length. */
export interface DatasetRow {
  ids?: Uint32Array;
  text?: string;
  input: number;
  /** Absent: drawn from the cell's `output`. */
  output?: number;
}

export interface TraceRow {
  timestampMs: number;
  input: number;
  output: number;
  hashIds: number[];
}

export interface PlanOptions {
  input: LengthSpec;
  output: LengthSpec;
  seed: number;
  vocab: number;
  sharedPrefix?: SharedPrefixSpec;
  /** A parsed trace: replaces lengths and arrivals. */
  trace?: { rows: TraceRow[]; speed: number; blockSize: number };
  loaded?: LoadedLengths;
  sessions?: SessionSpec;
  /** Dataset rows, taken in order (wrapping) from row `datasetOffset`. */
  dataset?: DatasetRow[];
  datasetOffset?: number;
  /** Open loop under a rate schedule: each request's send time, s (see schedule.ts). */
  arrivals?: number[];
}

/** Token ids are drawn from [100, 0.98·vocab): away from byte and special tokens. */
function idRange(vocab: number): { low: number; span: number } {
  const high = Math.max(200, Math.floor(vocab * 0.98));
  const low = Math.min(100, high - 100);
  return { low, span: high - low };
}

function fill(out: Uint32Array, from: number, to: number, rng: Mulberry32, vocab: number) {
  const { low, span } = idRange(vocab);
  rng.fill(out, from, to, low, span);
}

/** A standard normal variate (Box–Muller). */
function gauss(rng: Mulberry32): number {
  let u = 0;
  while (u === 0) u = rng.next();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.next());
}

/** A length sampler for a spec: an integer ≥ 1. */
export function lengthSampler(spec: LengthSpec, rng: Mulberry32, loaded?: number[]): () => number {
  if ('value' in spec) {
    const n = Math.max(1, Math.round(spec.value));
    return () => n;
  }
  if ('file' in spec) {
    if (!loaded?.length) throw new Error(`no lengths read from ${spec.file}`);
    return () => loaded[Math.floor(rng.next() * loaded.length)];
  }
  if ('range_ratio' in spec) {
    const m = spec.mean.value;
    const lo = Math.max(1, Math.round(m * (1 - spec.range_ratio)));
    const hi = Math.max(lo, Math.round(m * (1 + spec.range_ratio)));
    return () => lo + Math.floor(rng.next() * (hi - lo + 1));
  }
  const m = spec.mean.value;
  const sd = spec.std.value;
  const lo = spec.min?.value ?? 1;
  const hi = spec.max?.value ?? Infinity;
  const clip = (x: number) => Math.min(hi, Math.max(lo, Math.round(x)));
  if (spec.dist === 'normal') return () => clip(m + sd * gauss(rng));
  // Lognormal with the given mean and std of the lengths themselves.
  const s2 = Math.log(1 + (sd * sd) / (m * m));
  const mu = Math.log(m) - s2 / 2;
  const s = Math.sqrt(s2);
  return () => clip(Math.exp(mu + s * gauss(rng)));
}

/** The mean of a length spec (for predictions that need one number). */
export function meanLength(spec: LengthSpec, loaded?: number[]): number {
  if ('value' in spec) return spec.value;
  if ('file' in spec) return loaded?.length ? loaded.reduce((a, b) => a + b, 0) / loaded.length : NaN;
  return spec.mean.value;
}

/**
 * Request i of the plan, one after another. `next()` is cheap and allocates only the prompt, so a
 * plan of 100,000 requests is never held whole.
 */
export class RequestPlanner {
  private readonly rng: Mulberry32;
  private readonly inLen: () => number;
  private readonly outLen: () => number;
  private readonly prefixes: Uint32Array[] = [];
  private readonly blockCache = new Map<number, Uint32Array>();
  private i = 0;
  private sessionsStarted = 0;

  constructor(private readonly o: PlanOptions) {
    this.rng = new Mulberry32(seedOf(`plan:${o.seed}`));
    this.inLen = lengthSampler(o.input, new Mulberry32(seedOf(`in:${o.seed}`)), o.loaded?.input);
    this.outLen = lengthSampler(o.output, new Mulberry32(seedOf(`out:${o.seed}`)), o.loaded?.output);
    const sp = o.sharedPrefix;
    if (sp) {
      for (let g = 0; g < sp.groups; g++) {
        const p = new Uint32Array(Math.round(sp.length.value));
        fill(p, 0, p.length, new Mulberry32(seedOf(`prefix:${o.seed}:${g}`)), o.vocab);
        this.prefixes.push(p);
      }
    }
  }

  /** Requests in the plan: a trace's rows, else unbounded (the caller counts). */
  get size(): number {
    return this.o.trace ? this.o.trace.rows.length : (this.o.arrivals?.length ?? Infinity);
  }

  /** Trace replay or a rate schedule: when request i is sent, s after the start (else undefined). */
  arrivalOf(i: number): number | undefined {
    const tr = this.o.trace;
    if (!tr) return this.o.arrivals?.[i];
    return (tr.rows[i % tr.rows.length].timestampMs - tr.rows[0].timestampMs) / 1000 / tr.speed;
  }

  next(): PlannedRequest {
    const index = this.i++;
    const tr = this.o.trace;
    if (tr) return this.traceRequest(index, tr);
    const ds = this.o.dataset;
    if (ds?.length) {
      const row = ds[(index + (this.o.datasetOffset ?? 0)) % ds.length];
      const prompt = row.ids ?? new Uint32Array(row.input);
      if (!row.ids) fill(prompt, 0, row.input, this.rng, this.o.vocab);
      return { index, prompt, output: row.output ?? this.outLen(), text: row.text };
    }
    const input = this.inLen();
    const output = this.outLen();
    const sp = this.o.sharedPrefix;
    const prompt = new Uint32Array(input);
    let group: number | undefined;
    let from = 0;
    const share = sp?.share?.value ?? 1;
    if (sp && this.rng.next() < share) {
      group = index % sp.groups;
      const p = this.prefixes[group];
      from = Math.min(p.length, input);
      prompt.set(p.subarray(0, from));
    }
    fill(prompt, from, input, this.rng, this.o.vocab);
    return { index, prompt, output, group };
  }

  private traceRequest(index: number, tr: NonNullable<PlanOptions['trace']>): PlannedRequest {
    const row = tr.rows[index % tr.rows.length];
    const prompt = new Uint32Array(row.input);
    let at = 0;
    for (const h of row.hashIds) {
      if (at >= row.input) break;
      const block = this.block(h, tr.blockSize);
      const n = Math.min(block.length, row.input - at);
      prompt.set(block.subarray(0, n), at);
      at += n;
    }
    fill(prompt, at, row.input, this.rng, this.o.vocab);
    return { index, prompt, output: Math.max(1, row.output), arrivalS: this.arrivalOf(index) };
  }

  /** Multi-turn sessions: a new conversation, whose turns come from the cursor. */
  startSession(): SessionCursor {
    return new SessionCursor(this, this.sessionsStarted++, this.o.sessions?.turns ?? 1);
  }

  get sessions(): SessionSpec | undefined {
    return this.o.sessions;
  }

  /** The think time between an answer and the next turn, s. */
  get thinkS(): number {
    return this.o.sessions?.think_time?.value ?? 0;
  }

  /**
   * Session s's own draws for its later turns: seeded by (seed, s), so a conversation's turns are
   * the same whatever the other conversations did meanwhile (a live bench interleaves them by
   * wall-clock time, the virtual-time load by simulated time).
   */
  sessionDraws(session: number): SessionDraws {
    const seed = this.o.seed;
    return {
      rng: new Mulberry32(seedOf(`session:${seed}:${session}`)),
      inLen: lengthSampler(this.o.input, new Mulberry32(seedOf(`session-in:${seed}:${session}`)), this.o.loaded?.input),
      outLen: lengthSampler(
        this.o.output,
        new Mulberry32(seedOf(`session-out:${seed}:${session}`)),
        this.o.loaded?.output,
      ),
    };
  }

  /** A later turn: the conversation so far, an answer of the previous output's length, new user tokens. */
  followUp(history: Uint32Array, previousOutput: number, d: SessionDraws): { prompt: Uint32Array; output: number } {
    const user = d.inLen();
    const output = d.outLen();
    const prompt = new Uint32Array(history.length + previousOutput + user);
    prompt.set(history);
    fill(prompt, history.length, prompt.length, d.rng, this.o.vocab);
    return { prompt, output };
  }

  /** The token ids a trace's hash id stands for: the same wherever it appears. */
  private block(h: number, size: number): Uint32Array {
    let b = this.blockCache.get(h);
    if (!b) {
      b = new Uint32Array(size);
      fill(b, 0, size, new Mulberry32(seedOf(`block:${this.o.seed}:${h}`)), this.o.vocab);
      this.blockCache.set(h, b);
    }
    return b;
  }
}

/**
 * The prefix-cache hit rate a shared-prefix workload should show once warm, in vLLM's terms
 * (cached prompt tokens / prompt tokens): the prefix's full blocks, for every request but the first
 * of each group. Block granularity: only whole blocks are cached.
 */
export function expectedPrefixHitRate(
  sp: SharedPrefixSpec,
  meanInput: number,
  requests: number,
  blockSize = 16,
): number {
  const share = sp.share?.value ?? 1;
  const cachedPerHit = Math.floor(Math.min(sp.length.value, meanInput) / blockSize) * blockSize;
  const withPrefix = requests * share;
  const hits = Math.max(0, withPrefix - Math.min(sp.groups, withPrefix));
  return (hits * cachedPerHit) / (requests * meanInput);
}

/**
 * One conversation of a multi-turn workload. The answer of a turn enters the next prompt as
 * generated-length random ids, not the server's own tokens: a prefix cache then reuses every earlier
 * prompt but not the earlier answers (a real chat client resends the answers' text, which the
 * server's cache also holds), so the hit rate here is a lower bound.
 */
export class SessionCursor {
  turn = 0;
  private history?: Uint32Array;
  private lastOutput = 0;
  private readonly draws: SessionDraws;

  constructor(
    private readonly planner: RequestPlanner,
    readonly session: number,
    readonly turns: number,
  ) {
    this.draws = planner.sessionDraws(session);
  }

  get done(): boolean {
    return this.turn >= this.turns;
  }

  next(): PlannedRequest {
    const turn = this.turn++;
    let prompt: Uint32Array;
    let output: number;
    let group: number | undefined;
    let index: number;
    if (!this.history) {
      const first = this.planner.next();
      ({ prompt, output, group, index } = first);
    } else {
      ({ prompt, output } = this.planner.followUp(this.history, this.lastOutput, this.draws));
      index = -1;
    }
    this.history = prompt;
    this.lastOutput = output;
    return { index, prompt, output, group, session: this.session, turn };
  }
}
