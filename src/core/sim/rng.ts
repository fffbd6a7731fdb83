/** Small seeded generators for the simulator: deterministic across runs and platforms. */

/** mulberry32: a fast 32-bit generator; returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit seed from any number or string. */
export function seedOf(v: number | string): number {
  const s = String(v);
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

/** Exponential variate with the given mean. */
export function expVariate(rand: () => number, mean: number): number {
  return -Math.log(1 - rand()) * mean;
}

/** mulberry32 as an object (the same sequence as mulberry32(seed)): one monomorphic method for hot loops. */
export class Mulberry32 {
  private a: number;
  constructor(seed: number) {
    this.a = seed >>> 0;
  }
  next(): number {
    const a = (this.a = (this.a + 0x6d2b79f5) >>> 0);
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /**
   * out[i] = low + floor(next() · span) for i in [from, to): random token ids, the same values as
   * that loop, with the state in a local (prompts are most of a virtual-time load's draws).
   */
  fill(out: Uint32Array, from: number, to: number, low: number, span: number): void {
    let a = this.a;
    for (let i = from; i < to; i++) {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      out[i] = low + Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * span);
    }
    this.a = a;
  }
  /** Move on as `n` calls of next() would, without computing them (the state is a counter). */
  skip(n: number): void {
    this.a = (this.a + Math.imul(n, 0x6d2b79f5)) >>> 0;
  }
}
