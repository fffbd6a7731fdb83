/**
 * Measurements, read from facts: every rule reads numbers in base units (seconds, tok/s, req/s,
 * tokens, bytes) from one shape, whatever cell stated them, with the path in the cell each one
 * stands at. A cell's facts are grouped by the point they stand at (one measurement per sweep
 * point; a record is one point); facts that stand at no point (a run's RTT) join every point.
 *
 * Latencies are kept as (metric, stat) pairs, so any percentile a cell states reaches the rules
 * with no code of its own; the other numbers have one name each (MKey).
 */
import type { Setup } from '../engine/types';
import { pointWords, statQuantile, type Fact, type LatencyMetric } from '../facts';
import type { CellPath } from '../findings';
import { DIMS, type Quantity } from '../units';
import type { CheckInput } from './types';
import { isObj } from '../values';

export type MKey =
  | 'per_user'
  /** token rate, tok/s, output or aggregate unspecified (a record's `throughput:` in tok/s) */
  | 'throughput'
  | 'output_throughput'
  | 'total_throughput'
  /** completed requests per second */
  | 'request_throughput'
  | 'batch'
  | 'concurrency'
  | 'rate'
  | 'prompt'
  | 'output'
  | 'kv_pool'
  | 'available_kv'
  | 'capacity'
  | 'prefix_cache_hit_rate'
  | 'little_observed'
  | 'little_predicted'
  | 'little_requests';

export interface Latency {
  metric: LatencyMetric;
  stat: string;
  /** seconds */
  s: number;
  path?: CellPath;
  written?: Quantity;
}

export interface Measurement {
  /** record: typed by a person; bench: measured by our client; audit: the server's log; predict: simulated. */
  origin: 'record' | 'bench' | 'audit' | 'predict';
  /** Appended to messages: "" for a record, " at concurrency 64" for a bench point. */
  label: string;
  /** Where a finding about this measurement stands when the number has no key of its own. */
  at: CellPath;
  latencies: Latency[];
  v: Partial<Record<MKey, number>>;
  paths: Partial<Record<MKey, CellPath>>;
  /** The quantities as typed (record cells), for messages and quick fixes. */
  written: Partial<Record<MKey, Quantity>>;
  source?: string;
  loop?: 'closed' | 'open';
  sampler?: string;
  sampling?: { top_p?: unknown; top_k?: unknown; seed?: unknown; present: boolean; path?: CellPath };
}

export function pathOf(m: Measurement, k: MKey): CellPath {
  return m.paths[k] ?? m.at;
}

/** The latencies of a metric, in the order the cell stated them. */
export function latencies(m: Measurement, metric: LatencyMetric): Latency[] {
  return m.latencies.filter((l) => l.metric === metric);
}

/** One latency by metric and stat. */
export function latency(m: Measurement, metric: LatencyMetric, stat: string): Latency | undefined {
  return m.latencies.find((l) => l.metric === metric && l.stat === stat);
}

/** The centre of a latency: its median, else its mean. */
export function central(m: Measurement, metric: LatencyMetric): Latency | undefined {
  return latency(m, metric, 'p50') ?? latency(m, metric, 'mean');
}

/** The tail of a latency: its highest percentile at or above p90. */
export function tail(m: Measurement, metric: LatencyMetric): Latency | undefined {
  let best: Latency | undefined;
  for (const l of latencies(m, metric)) {
    const q = statQuantile(l.stat);
    if (q !== undefined && q >= 90 && (!best || q > statQuantile(best.stat)!)) best = l;
  }
  return best;
}

/** A plain object (not null, not an array). */
const isQty = (x: unknown): x is Quantity => isObj(x) && typeof x.value === 'number' && isObj(x.dims);

function num(x: unknown): number | undefined {
  if (typeof x === 'number' && Number.isFinite(x)) return x;
  if (isQty(x) && Number.isFinite(x.value)) return x.value;
  return undefined;
}

/** First finite number among the named keys of `o` (a key "a.b" reads o.a.b). */
export function pickNum(o: unknown, names: string[]): number | undefined {
  if (!isObj(o)) return undefined;
  for (const n of names) {
    let cur: unknown = o;
    for (const seg of n.split('.')) cur = isObj(cur) ? cur[seg] : undefined;
    const v = num(cur);
    if (v !== undefined) return v;
  }
  return undefined;
}

const ORIGIN: Record<string, Measurement['origin']> = {
  record: 'record',
  bench: 'bench',
  audit: 'audit',
  predict: 'predict',
  // Another load generator's result file (kinds/import.ts): measured points, as a bench's are.
  import: 'bench',
};

/** The key of the number a fact states, for the facts that are not latencies. */
function keyOf(f: Fact): MKey | undefined {
  switch (f.kind) {
    case 'throughput':
      return f.metric === 'aggregate' ? 'throughput' : f.metric === 'per_user' ? 'per_user' : `${f.metric}_throughput`;
    case 'request-rate':
      return f.metric === 'completed'
        ? 'request_throughput'
        : f.metric === 'offered'
          ? 'rate'
          : f.metric === 'capacity'
            ? 'capacity'
            : undefined;
    case 'tokens':
      return f.metric;
    case 'prefix-hits':
      return 'prefix_cache_hit_rate';
    default:
      return undefined;
  }
}

function written(f: Fact, base: number, dim: keyof typeof DIMS): Quantity | undefined {
  return f.written_in ? { value: base, dims: DIMS[dim], unit: f.written_in } : undefined;
}

/** Fold one fact into a measurement. */
function add(m: Measurement, f: Fact): void {
  const path = f.at;
  if (f.kind === 'latency') {
    m.latencies.push({ metric: f.metric, stat: f.stat, s: f.ms / 1e3, path, written: written(f, f.ms / 1e3, 'time') });
    return;
  }
  const put = (k: MKey, v: number | undefined, q?: Quantity) => {
    if (v === undefined) return;
    m.v[k] = v;
    if (path) m.paths[k] = path;
    if (q) m.written[k] = q;
  };
  switch (f.kind) {
    case 'throughput':
    case 'request-rate':
    case 'tokens':
    case 'prefix-hits': {
      const k = keyOf(f)!;
      const v =
        f.kind === 'throughput'
          ? f.tok_s
          : f.kind === 'request-rate'
            ? f.req_s
            : f.kind === 'tokens'
              ? f.tokens
              : f.rate;
      put(k, v);
      break;
    }
    case 'kv-pool':
      put('kv_pool', f.tokens);
      put(
        'available_kv',
        f.available_bytes,
        f.available_bytes !== undefined ? written(f, f.available_bytes, 'bytes') : undefined,
      );
      break;
    case 'little':
      put('little_predicted', f.predicted);
      put('little_observed', f.observed);
      put('little_requests', f.requests);
      break;
    case 'sampling':
      if (f.sampler) m.sampler = f.sampler;
      m.sampling = {
        top_p: f.top_p,
        top_k: f.top_k,
        seed: f.request_seed,
        present: f.top_p !== undefined || f.top_k !== undefined,
        path,
      };
      break;
    default:
      break;
  }
  if (f.source && m.source === undefined) m.source = f.source;
}

/** The measurements a cell's facts offer its rules, one per point; [] for a cell that states none. */
export function measurementsOf(input: CheckInput): Measurement[] {
  const facts = input.facts ?? [];
  const origin = ORIGIN[input.kind.split(':')[0]];
  if (!origin || !facts.length) return [];
  const groups = new Map<string, Fact[]>();
  const shared: Fact[] = [];
  for (const f of facts) {
    if (f.kind === 'curve' || f.kind === 'seed' || f.kind === 'setup') continue;
    if (!f.point || origin === 'record') {
      shared.push(f);
      continue;
    }
    // A point is its load and its place in the cell: two points at the same concurrency stay two.
    const k = JSON.stringify([f.point, f.at]);
    groups.set(k, [...(groups.get(k) ?? []), f]);
  }
  const sets = groups.size ? [...groups.values()].map((g) => [...shared, ...g]) : [shared];
  return sets
    .filter((g) => g.length)
    .map((g) => {
      const pointed = g.find((f) => f.point);
      const p = pointed?.point;
      const m: Measurement = {
        origin,
        label: origin === 'record' ? '' : origin === 'audit' ? ' (from the log)' : pointWords(p),
        at: origin === 'record' ? ['record'] : (pointed?.at ?? []),
        latencies: [],
        v: {},
        paths: {},
        written: {},
      };
      for (const f of g) add(m, f);
      if (p?.batch !== undefined) m.v.batch = p.batch;
      if (p?.concurrency !== undefined) m.v.concurrency = p.concurrency;
      if (p?.req_s !== undefined && m.v.rate === undefined) m.v.rate = p.req_s;
      m.loop = p?.loop;
      // A record's point keys stand on their own lines.
      if (origin === 'record')
        for (const k of ['batch', 'concurrency'] as const) if (m.v[k] !== undefined) m.paths[k] = [k];
      return m;
    });
}

/** A setup knob that may be a number or a parsed Quantity. */
export function serverKnob(setup: Setup | undefined, key: string): number | undefined {
  return num(setup?.server?.[key]);
}
