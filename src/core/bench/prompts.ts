/**
 * Seeded prompts of exact length: random token ids drawn over the model's vocabulary, so no local
 * tokenizer is needed and a random prompt shares no 16-token block with any other (a prefix cache
 * has nothing to hit). The seed is the client's own business and never goes into a request.
 * Workloads beyond fixed lengths (distributions, shared prefixes, sessions, traces, datasets, rate
 * schedules) come from the workload plan through planSource; fixed lengths keep these prompts.
 */
import type { PlannedRequest, RequestPlanner } from '../workload/plan';

/** splitmix32: a well-mixed 32-bit hash step, used to derive seeds. */
function mix32(x: number): number {
  x = (x + 0x9e3779b9) | 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** sfc32 generator; returns floats in [0, 1). */
export function rng(seed: number): () => number {
  let a = mix32(seed),
    b = mix32(a ^ 0x1234567),
    c = mix32(b ^ 0x7654321),
    d = 1;
  const next = () => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  return next;
}

/** The seed of point i: the base seed itself when fixed, else a hash of (base, i). */
export function pointSeed(base: number, index: number, fixed: boolean): number {
  return fixed ? base >>> 0 : mix32(mix32(base) ^ Math.imul(index + 1, 0x27d4eb2d));
}

/** Token ids are drawn from [low, high): away from the byte tokens and the special tokens at the top. */
function tokenRange(vocab: number): { low: number; high: number } {
  const high = Math.max(200, Math.floor(vocab * 0.98));
  return { low: Math.min(100, high - 100), high };
}

const WORDS =
  'time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name president team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education'.split(
    ' ',
  );

/** One request of a point: its prompt and, where a workload plan sets them, its output length and send time. */
export interface PlannedPrompt {
  /** Token ids (completions), or text (chat; a dataset's own text). */
  prompt: number[] | string;
  /** max_tokens (= min_tokens); absent: the point's output length. */
  outputTokens?: number;
  /** The prompt's tokens where the client knows them (token ids; a dataset text counted by the server's /tokenize). */
  inputTokens?: number;
  /** Trace replay or a rate schedule: when it is sent, s after the point's start (this client's clock). */
  arrivalS?: number;
  /** Multi-turn sessions: the conversation and its turn (0 = first). */
  session?: number;
  turn?: number;
}

/** A conversation of a multi-turn workload: its turns one after another. */
export interface SessionSource {
  readonly done: boolean;
  next(): PlannedPrompt;
}

export interface PromptSource {
  /** The prompt of request i of this point (deterministic in the seed and i order of calls). */
  next(): number[] | string;
  /** A source built from a workload plan gives whole requests; runPoint then uses this, not next(). */
  request?(): PlannedPrompt;
  /** Warm-up requests, drawn apart from the plan so the measured requests are the plan's from its first. */
  warmup?(): PlannedPrompt;
  /** Requests the plan holds (a trace's rows, a schedule's arrivals); absent or Infinity: any number. */
  size?: number;
  /** Multi-turn sessions (closed loop): a new conversation. */
  session?(): SessionSource;
  /** Think time between an answer and the conversation's next turn, s (this client's clock). */
  thinkS?: number;
}

/** Prompts for one point: token ids for completions; words for chat (length then only approximate). */
export function promptSource(
  seed: number,
  inputTokens: number,
  vocab: number,
  kind: 'ids' | 'words' = 'ids',
): PromptSource {
  const r = rng(seed);
  const { low, high } = tokenRange(vocab);
  const span = high - low;
  return {
    next() {
      if (kind === 'words') {
        const w: string[] = new Array(inputTokens);
        for (let i = 0; i < inputTokens; i++) w[i] = WORDS[Math.floor(r() * WORDS.length)];
        return w.join(' ');
      }
      const ids: number[] = new Array(inputTokens);
      for (let i = 0; i < inputTokens; i++) ids[i] = low + Math.floor(r() * span);
      return ids;
    },
  };
}

/** Token ids as the request carries them: the ids themselves, or (chat) one word per id, so equal ids are equal text. */
function asPrompt(ids: Uint32Array, kind: 'ids' | 'words'): number[] | string {
  if (kind === 'ids') return Array.from(ids);
  const w: string[] = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) w[i] = WORDS[ids[i] % WORDS.length];
  return w.join(' ');
}

export interface PlanSourceOptions {
  kind?: 'ids' | 'words';
  /**
   * Client seconds per planned second: 1 against a server; 1/speed against a simulated endpoint
   * that runs `speed`× faster than simulated time (its latencies are scaled back by speed), so
   * arrivals and think times land where the plan puts them in simulated time.
   */
  timeScale?: number;
  /** Where warm-up requests come from (a planner of another seed): they do not use up the plan's. */
  warm?: RequestPlanner;
  /** A dataset text's length in the server's tokens (its /tokenize count), where known. */
  textTokens?(text: string): number | undefined;
}

/**
 * The bench's prompts from a workload plan (workload/plan.ts), the one `predict: serving` runs in
 * virtual time: each request's ids (a dataset row's text as it is), output length and, for a trace
 * or a rate schedule, its send time; conversations for multi-turn sessions.
 */
export function planSource(planner: RequestPlanner, o: PlanSourceOptions = {}): PromptSource {
  const kind = o.kind ?? 'ids';
  const scale = o.timeScale ?? 1;
  const toPrompt = (r: PlannedRequest, arrivalS: number | undefined): PlannedPrompt => {
    const text = r.text !== undefined;
    const p: PlannedPrompt = {
      prompt: text ? r.text! : asPrompt(r.prompt, kind),
      outputTokens: Math.max(1, r.output),
    };
    // Ids are what the server counts; words and text are counted by its tokenizer.
    const counted = text ? o.textTokens?.(r.text!) : kind === 'ids' ? r.prompt.length : undefined;
    if (counted !== undefined) p.inputTokens = counted;
    if (arrivalS !== undefined) p.arrivalS = arrivalS * scale;
    if (r.session !== undefined) {
      p.session = r.session;
      p.turn = r.turn;
    }
    return p;
  };
  const request = () => {
    const r = planner.next();
    return toPrompt(r, planner.arrivalOf(r.index));
  };
  const warm = o.warm;
  const src: PromptSource = {
    next: () => request().prompt,
    request,
    size: planner.size,
    ...(warm ? { warmup: () => toPrompt(warm.next(), undefined) } : {}),
  };
  if (planner.sessions) {
    src.thinkS = planner.thinkS * scale;
    src.session = () => {
      const c = planner.startSession();
      return {
        get done() {
          return c.done;
        },
        next: () => toPrompt(c.next(), undefined),
      };
    };
  }
  return src;
}

/** Exponential (Poisson arrivals) or gamma inter-arrival times, s; burstiness = gamma shape (1 = Poisson). */
export function interArrivals(seed: number, rate: number, count: number, burstiness = 1): number[] {
  const r = rng(seed ^ 0x5bd1e995);
  const out: number[] = new Array(count);
  for (let i = 0; i < count; i++) out[i] = gammaSample(r, burstiness, 1 / (rate * burstiness));
  return out;
}

function normal(r: () => number): number {
  let u = 0;
  while (u === 0) u = r();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}

/** Marsaglia–Tsang gamma(shape k, scale θ). */
function gammaSample(r: () => number, k: number, theta: number): number {
  if (k < 1) {
    const u = r() || 1e-12;
    return gammaSample(r, k + 1, theta) * Math.pow(u, 1 / k);
  }
  const d = k - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (let i = 0; i < 1000; i++) {
    const x = normal(r);
    const v0 = 1 + c * x;
    if (v0 <= 0) continue;
    const v = v0 * v0 * v0;
    const u = r();
    if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * theta;
  }
  return k * theta;
}
