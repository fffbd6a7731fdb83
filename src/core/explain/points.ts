/**
 * A cell's facts grouped by the load they stand at (one group per sweep point), with readers for
 * the numbers the verdict and the calibration compare: a latency stat, a throughput, an engine
 * count, the prefix-cache hit rate, the server's usage. Everything here reads facts only.
 */
import type { Fact, FactOf, Loop, Point } from '../facts';

export interface PointView {
  /** "closed:16", "open:4" */
  key: string;
  loop: Loop;
  /** The concurrency (closed loop) or the offered rate, req/s (open loop). */
  x: number;
  point: Point;
  /** Where the point stands in its cell (["concurrency", 2]). */
  at?: (string | number)[];
  facts: Fact[];
}

export const pointKey = (loop: Loop, x: number) => `${loop}:${x}`;

/** "c=16", "4 req/s" */
export const pointLabel = (v: Pick<PointView, 'loop' | 'x'>) => (v.loop === 'open' ? `${v.x} req/s` : `c=${v.x}`);

/** The loop and x of a fact's point: an open-loop point by its rate, a closed-loop one by its concurrency. */
function loadOf(p: Point | undefined): { loop: Loop; x: number } | undefined {
  if (!p) return undefined;
  if (p.loop === 'open' || (p.loop === undefined && p.concurrency === undefined && p.req_s !== undefined))
    return p.req_s !== undefined ? { loop: 'open', x: p.req_s } : undefined;
  return p.concurrency !== undefined ? { loop: 'closed', x: p.concurrency } : undefined;
}

/** Group facts by point, in the order the points first appear. */
export function pointsOf(facts: readonly Fact[]): PointView[] {
  const out = new Map<string, PointView>();
  for (const f of facts) {
    const l = loadOf(f.point);
    if (!l) continue;
    const key = pointKey(l.loop, l.x);
    let v = out.get(key);
    if (!v) {
      v = { key, loop: l.loop, x: l.x, point: f.point!, at: f.at, facts: [] };
      out.set(key, v);
    }
    v.facts.push(f);
  }
  return [...out.values()];
}

const last = <T>(xs: T[]): T | undefined => xs[xs.length - 1];

/** A latency stat in ms ('p50' is the median). */
export function latencyMs(v: PointView | undefined, metric: string, stat: string): number | undefined {
  return last(
    (v?.facts ?? []).filter(
      (f): f is FactOf<'latency'> => f.kind === 'latency' && f.metric === metric && f.stat === stat,
    ),
  )?.ms;
}

/** How late the client ran at a point: its event loop, or requests leaving after their schedule (ms). */
export function clientLagMs(v: PointView | undefined, metric: FactOf<'client-lag'>['metric'], stat: string) {
  return last(
    (v?.facts ?? []).filter(
      (f): f is FactOf<'client-lag'> => f.kind === 'client-lag' && f.metric === metric && f.stat === stat,
    ),
  )?.ms;
}

export function throughput(v: PointView | undefined, metric: FactOf<'throughput'>['metric']): number | undefined {
  return last((v?.facts ?? []).filter((f): f is FactOf<'throughput'> => f.kind === 'throughput' && f.metric === metric))
    ?.tok_s;
}

export function requestRate(v: PointView | undefined, metric: FactOf<'request-rate'>['metric']): number | undefined {
  return last(
    (v?.facts ?? []).filter((f): f is FactOf<'request-rate'> => f.kind === 'request-rate' && f.metric === metric),
  )?.req_s;
}

export function engineValue(v: PointView | undefined, metric: FactOf<'engine'>['metric']): number | undefined {
  return last((v?.facts ?? []).filter((f): f is FactOf<'engine'> => f.kind === 'engine' && f.metric === metric))?.value;
}

export function prefixHits(v: PointView | undefined): FactOf<'prefix-hits'> | undefined {
  return last((v?.facts ?? []).filter((f): f is FactOf<'prefix-hits'> => f.kind === 'prefix-hits'));
}

export function usageOf(v: PointView | undefined): FactOf<'usage'> | undefined {
  return last((v?.facts ?? []).filter((f): f is FactOf<'usage'> => f.kind === 'usage'));
}

/** Completed requests of a point (from its Little's-law fact). */
export function completedOf(v: PointView | undefined): number | undefined {
  return last((v?.facts ?? []).filter((f): f is FactOf<'little'> => f.kind === 'little'))?.requests;
}

/** The request lengths a cell's facts state (the same at every point of a sweep). */
export function shapeOf(facts: readonly Fact[]): { input?: number; output?: number } {
  const tok = (m: 'prompt' | 'output') =>
    last(facts.filter((f): f is FactOf<'tokens'> => f.kind === 'tokens' && f.metric === m))?.tokens;
  return { input: tok('prompt'), output: tok('output') };
}

/** The model parameters a cell states (a serving prediction's step overhead, prefill MFU). */
export function parametersOf(facts: readonly Fact[]): Map<string, FactOf<'parameter'>> {
  const m = new Map<string, FactOf<'parameter'>>();
  for (const f of facts) if (f.kind === 'parameter') m.set(f.name, f);
  return m;
}

/**
 * y at x on a predicted curve: exact where it has the point, else linear in log x between its two
 * neighbours; undefined outside it (a prediction says nothing past its ends).
 */
export function curveAt(
  points: readonly { x: number; y: number }[],
  x: number,
): { y: number; exact: boolean } | undefined {
  const ps = [...points].sort((a, b) => a.x - b.x);
  const hit = ps.find((p) => p.x === x);
  if (hit) return { y: hit.y, exact: true };
  for (let i = 1; i < ps.length; i++) {
    const a = ps[i - 1];
    const b = ps[i];
    if (a.x < x && x < b.x && a.x > 0) {
      const t = (Math.log(x) - Math.log(a.x)) / (Math.log(b.x) - Math.log(a.x));
      return { y: a.y + t * (b.y - a.y), exact: false };
    }
  }
  return undefined;
}
