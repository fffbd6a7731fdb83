/**
 * Load shapes over time: a rate schedule of steps and ramps, turned into Poisson arrival times (an
 * inhomogeneous Poisson process: unit-rate exponential gaps mapped through the inverse of the
 * cumulative rate), and the capacity search that finds the highest load meeting the SLOs.
 *
 *   rate_schedule: [{rate: 1 req/s, for: 30 s}, {ramp: [1 req/s, 8 req/s], for: 60 s}, {rate: 8 req/s, for: 30 s}]
 */
import { z } from 'zod';
import { quantity } from '../engine/schema';
import { expVariate, Mulberry32, seedOf } from '../sim/rng';

const rate = quantity('request_rate', { bare: 'req/s', min: 0 });
const span = quantity('time', { positive: true });

const stepSeg = z.object({ rate, for: span }).strict();
const rampSeg = z.object({ ramp: z.tuple([rate, rate]), for: span }).strict();
export const rateScheduleSpec = z
  .array(z.union([stepSeg, rampSeg]), {
    error:
      'give a list of segments: {rate: 2 req/s, for: 30 s} (a step) or {ramp: [1 req/s, 8 req/s], for: 60 s} (a ramp)',
  })
  .min(1);
export type RateSchedule = z.output<typeof rateScheduleSpec>;

/** Linear pieces r(t) = a + b·(t − t0) over [t0, t1), s and req/s. */
function pieces(s: RateSchedule): { t0: number; t1: number; a: number; b: number }[] {
  let t = 0;
  return s.map((seg) => {
    const d = seg.for.value;
    const [r0, r1] = 'ramp' in seg ? [seg.ramp[0].value, seg.ramp[1].value] : [seg.rate.value, seg.rate.value];
    const p = { t0: t, t1: t + d, a: r0, b: (r1 - r0) / d };
    t += d;
    return p;
  });
}

/** The schedule's length, s, and the requests it offers on average. */
export function scheduleTotals(s: RateSchedule): { durationS: number; expectedRequests: number } {
  let n = 0;
  const ps = pieces(s);
  for (const p of ps) {
    const d = p.t1 - p.t0;
    n += p.a * d + (p.b * d * d) / 2;
  }
  return { durationS: ps.length ? ps[ps.length - 1].t1 : 0, expectedRequests: n };
}

/** Arrival times (s from the start) of a schedule, in order, deterministic in the seed. */
export function scheduleArrivals(s: RateSchedule, seed: number): number[] {
  const rng = new Mulberry32(seedOf(`schedule:${seed}`));
  const out: number[] = [];
  let target = expVariate(() => rng.next(), 1); // cumulative intensity of the next arrival
  let acc = 0; // cumulative intensity at the start of the piece
  for (const p of pieces(s)) {
    const d = p.t1 - p.t0;
    const total = p.a * d + (p.b * d * d) / 2;
    while (target <= acc + total) {
      const need = target - acc; // solve a·τ + b·τ²/2 = need for τ in [0, d]
      const tau =
        Math.abs(p.b) < 1e-12 ? need / p.a : (-p.a + Math.sqrt(Math.max(0, p.a * p.a + 2 * p.b * need))) / p.b;
      out.push(p.t0 + Math.min(d, Math.max(0, tau)));
      target += expVariate(() => rng.next(), 1);
      if (out.length > 10_000_000) throw new Error('the schedule offers more than 10 million requests');
    }
    acc += total;
  }
  return out;
}

export interface CapacityProbe {
  x: number;
  pass: boolean;
  /** Bracketing (doubling or halving from the start), bisecting between a pass and a fail, or a repeat that refuted a pass. */
  phase: 'bracket' | 'bisect' | 'confirm';
}

export interface CapacityResult {
  /** The highest load that met the SLOs (undefined: not even the lowest probe did). */
  best?: number;
  /** The lowest load that failed them (undefined: the highest probe still passed). */
  failAt?: number;
  probes: CapacityProbe[];
  /** (failAt − best) / best once the search stopped. */
  precision: number;
  converged: boolean;
}

export interface CapacityOptions {
  start: number;
  min: number;
  max: number;
  /** Stop when (fail − pass) / pass is at most this (e.g. 0.1); integer loads stop at a gap of 1. */
  precision: number;
  integer?: boolean;
  maxProbes?: number;
  signal?: AbortSignal;
}

/**
 * The highest load meeting the SLOs, one probe at a time: from `start`, double (or halve) until the
 * answer flips, then bisect (geometrically; integer loads by halves) between the last pass and the
 * first fail to the stated precision. `next()` names the load to measure, `report()` says whether
 * it met every SLO; a live bench and virtual time drive the same search.
 */
export class CapacitySearch {
  private readonly probes: CapacityProbe[] = [];
  private lo: number | undefined;
  private hi: number | undefined;
  private pending: { x: number; phase: 'bracket' | 'bisect' } | undefined;
  private bracketing = true;
  private stopped = false;

  constructor(private readonly o: CapacityOptions) {}

  private round(x: number): number {
    return this.o.integer ? Math.max(1, Math.round(x)) : x;
  }

  private gapOk(): boolean {
    const { lo, hi } = this;
    return lo === undefined || hi === undefined || (this.o.integer ? hi - lo <= 1 : (hi - lo) / lo <= this.o.precision);
  }

  /** The next load to measure, or undefined when the search is over. */
  next(): { x: number; phase: 'bracket' | 'bisect' } | undefined {
    if (this.pending) return this.pending;
    const o = this.o;
    if (this.stopped || this.probes.length >= (o.maxProbes ?? 16) || o.signal?.aborted) return undefined;
    const { lo, hi } = this;
    let x: number;
    if (this.bracketing) {
      const last = this.probes[this.probes.length - 1];
      if (!last) x = this.round(Math.min(o.max, Math.max(o.min, o.start)));
      else if (lo !== undefined && hi !== undefined) {
        this.bracketing = false;
        return this.next();
      } else if (last.pass) {
        if (last.x >= o.max) return this.stop();
        x = this.round(Math.min(o.max, last.x * 2));
      } else {
        if (last.x <= o.min) return this.stop();
        x = this.round(Math.max(o.min, last.x / 2));
      }
      if (this.probes.some((p) => p.x === x)) return this.stop();
    } else {
      if (this.gapOk()) return this.stop();
      x = this.round(o.integer ? Math.floor((lo! + hi!) / 2) : Math.sqrt(lo! * hi!));
      if (x === lo || x === hi) return this.stop();
    }
    this.pending = { x, phase: this.bracketing ? 'bracket' : 'bisect' };
    return this.pending;
  }

  private stop(): undefined {
    this.stopped = true;
    return undefined;
  }

  /** Whether the load `next()` named met every SLO. */
  report(pass: boolean): void {
    const p = this.pending;
    if (!p) throw new Error('report() without a load from next()');
    this.pending = undefined;
    this.probes.push({ ...p, pass });
    if (pass) this.lo = this.lo === undefined ? p.x : Math.max(this.lo, p.x);
    else this.hi = this.hi === undefined ? p.x : Math.min(this.hi, p.x);
  }

  /**
   * A later measurement of `x` (a repeat with fresh prompts) missed the SLOs: `x` no longer counts
   * as a pass, the search's upper end comes down to it and the search goes on below it.
   */
  refute(x: number): void {
    this.probes.push({ x, pass: false, phase: 'confirm' });
    this.hi = this.hi === undefined ? x : Math.min(this.hi, x);
    const below = this.probes.filter((p) => p.pass && p.x < this.hi!).map((p) => p.x);
    this.lo = below.length ? Math.max(...below) : undefined;
    // With no pass left below, bracket downwards again from the refuted load.
    this.bracketing = this.lo === undefined;
    this.stopped = false;
  }

  result(): CapacityResult {
    const { lo, hi } = this;
    return {
      best: lo,
      failAt: hi,
      probes: [...this.probes],
      precision: lo !== undefined && hi !== undefined ? (hi - lo) / lo : NaN,
      converged: this.gapOk() && lo !== undefined && hi !== undefined,
    };
  }
}

/** The capacity search with each probe an async measurement that says whether it met every SLO. */
export async function searchCapacity(
  probe: (x: number) => Promise<boolean>,
  o: CapacityOptions,
): Promise<CapacityResult> {
  const s = new CapacitySearch(o);
  for (let step = s.next(); step; step = s.next()) s.report(await probe(step.x));
  return s.result();
}
