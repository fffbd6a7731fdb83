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
 * The highest load meeting the SLOs: from `start`, double (or halve) until the answer flips, then
 * bisect between the last pass and the first fail to the stated precision. Each probe is one
 * measured point; `probe` says whether it met every SLO.
 */
export async function searchCapacity(
  probe: (x: number) => Promise<boolean>,
  o: CapacityOptions,
): Promise<CapacityResult> {
  const probes: CapacityProbe[] = [];
  const maxProbes = o.maxProbes ?? 16;
  const round = (x: number) => (o.integer ? Math.max(1, Math.round(x)) : x);
  const test = async (x: number) => {
    const pass = await probe(x);
    probes.push({ x, pass });
    return pass;
  };
  let lo: number | undefined;
  let hi: number | undefined;
  let x = round(Math.min(o.max, Math.max(o.min, o.start)));
  // Bracket.
  while (probes.length < maxProbes && !o.signal?.aborted) {
    if (await test(x)) {
      lo = x;
      if (hi !== undefined || x >= o.max) break;
      x = round(Math.min(o.max, x * 2));
    } else {
      hi = x;
      if (lo !== undefined || x <= o.min) break;
      x = round(Math.max(o.min, x / 2));
    }
    if (lo !== undefined && hi !== undefined) break;
  }
  const gapOk = () =>
    lo === undefined || hi === undefined || (o.integer ? hi - lo <= 1 : (hi - lo) / lo <= o.precision);
  // Bisect.
  while (!gapOk() && probes.length < maxProbes && !o.signal?.aborted) {
    const mid = round(o.integer ? Math.floor((lo! + hi!) / 2) : Math.sqrt(lo! * hi!));
    if (mid === lo || mid === hi) break;
    if (await test(mid)) lo = mid;
    else hi = mid;
  }
  return {
    best: lo,
    failAt: hi,
    probes,
    precision: lo !== undefined && hi !== undefined ? (hi - lo) / lo : NaN,
    converged: gapOk() && lo !== undefined && hi !== undefined,
  };
}
