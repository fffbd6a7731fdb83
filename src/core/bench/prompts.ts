/**
 * Seeded prompts of exact length: random token ids drawn over the model's vocabulary, so no local
 * tokenizer is needed and a random prompt shares no 16-token block with any other (a prefix cache
 * has nothing to hit). The seed is the client's own business and never goes into a request.
 */

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

export interface PromptSource {
  /** The prompt of request i of this point (deterministic in the seed and i order of calls). */
  next(): number[] | string;
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
