/**
 * Reading facts: validate what a notebook saved, name each fact for references (`CELL.fact(ttft.p95)`),
 * give its number in base units with its dimension, and list what a cell offers.
 */
import { finding, type Finding } from '../findings';
import { canonicalStat, LATENCY_METRICS } from './stat';
import type { DimName } from '../units';
import {
  FACTS_MIME,
  FACTS_VERSION,
  factSchema,
  savedFactsSchema,
  type Fact,
  type FactKind,
  type FactOf,
  type Point,
} from './schema';

export * from './schema';
export * from './stat';

/**
 * The latest fact of a kind stated by a cell above `beforeIndex` that ran (or was restored), with
 * the cell it came from; `accept` narrows which facts count.
 */
export function factAbove<K extends FactKind>(
  results: ReadonlyMap<number, { ok: boolean; kind: string; name?: string; facts: Fact[] }>,
  beforeIndex: number,
  kind: K,
  accept: (f: FactOf<K>) => boolean = () => true,
): { fact: FactOf<K>; cellIndex: number; cell: { kind: string; name?: string } } | undefined {
  let best: { fact: FactOf<K>; cellIndex: number; cell: { kind: string; name?: string } } | undefined;
  for (const [i, r] of results) {
    if (i >= beforeIndex || !r.ok || (best && best.cellIndex > i)) continue;
    const f = factsOf(r.facts, kind).filter(accept).pop();
    if (f) best = { fact: f, cellIndex: i, cell: r };
  }
  return best;
}

/** The facts of a kind, typed. */
export function factsOf<K extends FactKind>(facts: readonly Fact[] | undefined, kind: K): FactOf<K>[] {
  return (facts ?? []).filter((f): f is FactOf<K> => f.kind === kind);
}

/** The latest fact of a kind (the one a later reader takes when a cell states several). */
export function lastFact<K extends FactKind>(facts: readonly Fact[] | undefined, kind: K): FactOf<K> | undefined {
  const fs = factsOf(facts, kind);
  return fs[fs.length - 1];
}

/** What is saved in the notebook for a cell's facts. */
export function savedFacts(facts: Fact[]): { version: number; facts: Fact[] } {
  return { version: FACTS_VERSION, facts };
}

/**
 * Facts read back from a saved notebook. Whatever no longer validates is dropped, each with an
 * info finding that says what and why; nothing here throws.
 */
export function readSavedFacts(data: unknown): { facts: Fact[]; findings: Finding[] } {
  const env = savedFactsSchema.safeParse(data);
  if (!env.success) {
    const version = typeof data === 'object' && data !== null ? (data as { version?: unknown }).version : undefined;
    return {
      facts: [],
      findings: [
        finding(
          'info',
          'facts-unreadable',
          `The saved facts of this cell could not be read (${version !== undefined && version !== FACTS_VERSION ? `version ${String(version)}, this InfLab reads version ${FACTS_VERSION}` : 'not a facts record'}): run the cell again to restate them`,
        ),
      ],
    };
  }
  return checkFacts(env.data.facts, 'Saved fact');
}

/**
 * Keep the facts that validate; each one that does not is dropped with an info finding naming it
 * and why (`what` starts the message: "Saved fact", "Fact").
 */
export function checkFacts(list: readonly unknown[], what = 'Fact'): { facts: Fact[]; findings: Finding[] } {
  const facts: Fact[] = [];
  const findings: Finding[] = [];
  list.forEach((raw, i) => {
    const r = factSchema.safeParse(raw);
    if (r.success) facts.push(r.data);
    else {
      const kind = typeof raw === 'object' && raw !== null ? (raw as { kind?: unknown }).kind : undefined;
      const why = r.error.issues.map((x) => `${x.path.join('.') || 'fact'}: ${x.message}`).join('; ');
      findings.push(
        finding(
          'info',
          'fact-dropped',
          `${what} ${i + 1}${typeof kind === 'string' ? ` (${kind})` : ''} does not validate and was dropped (${why}): run the cell again to restate it`,
        ),
      );
    }
  });
  return { facts, findings };
}

export { FACTS_MIME };

/** A number in base units (seconds, tok/s, req/s, tokens, bytes; a fraction) and its dimension. */
export interface FactValue {
  base: number;
  dim?: DimName;
  /** The unit to show it in. */
  unit?: string;
}

/**
 * The name a reference uses for a fact (`CELL.fact(NAME)`): ttft.p95, tpot.mean, output_throughput,
 * goodput, kv_pool (available_kv for a pool known only by its memory), little, prefix_hits,
 * weights, floor.prefill, ceiling.per-user, ridge, curve.output_throughput, cost.output ($/Mtok). Several facts share a
 * name when they stand at different points (one per sweep point).
 */
export function factName(f: Fact): string {
  switch (f.kind) {
    case 'latency':
      return `${f.metric}.${f.stat}`;
    case 'throughput':
      return f.metric === 'aggregate' ? 'throughput' : f.metric === 'per_user' ? 'per_user' : `${f.metric}_throughput`;
    case 'request-rate':
      return f.metric === 'completed' ? 'request_throughput' : f.metric === 'offered' ? 'rate' : f.metric;
    case 'tokens':
      return `${f.metric}_tokens`;
    case 'curve':
      return `curve.${f.y}`;
    case 'kv-pool':
      // A pool known only by its memory (a record's available_kv) is named apart from one in tokens.
      return f.tokens === undefined && f.available_bytes !== undefined ? 'available_kv' : 'kv_pool';
    case 'prefix-hits':
      return 'prefix_hits';
    case 'floor':
      return `floor.${f.metric}`;
    case 'ceiling':
      return `ceiling.${f.metric}`;
    case 'roofline':
      return 'ridge';
    case 'engine':
      return f.metric;
    case 'parameter':
      return `param.${f.name}`;
    case 'cost':
      return `cost.${f.metric}`;
    default:
      return f.kind;
  }
}

/** The number a fact states, with its dimension; undefined for facts that are not one number. */
export function factValue(f: Fact): FactValue | undefined {
  switch (f.kind) {
    case 'latency':
    case 'floor':
      return { base: f.ms / 1e3, dim: 'time', unit: 'ms' };
    case 'throughput':
    case 'ceiling':
      return { base: f.tok_s, dim: 'token_rate', unit: 'tok/s' };
    case 'request-rate':
      return { base: f.req_s, dim: 'request_rate', unit: 'req/s' };
    case 'tokens':
      return { base: f.tokens, dim: 'tokens', unit: 'tokens' };
    case 'kv-pool':
      return f.tokens !== undefined
        ? { base: f.tokens, dim: 'tokens', unit: 'tokens' }
        : f.available_bytes !== undefined
          ? { base: f.available_bytes, dim: 'bytes', unit: 'GiB' }
          : undefined;
    case 'weights':
      return { base: f.bytes, dim: 'bytes', unit: 'GB' };
    case 'prefix-hits':
      return { base: f.rate, dim: 'ratio', unit: '%' };
    case 'little':
      return { base: f.observed > 0 ? f.predicted / f.observed : NaN };
    case 'roofline':
      return { base: f.ridge_flop_per_byte, unit: 'FLOP/byte' };
    case 'engine':
      return f.metric === 'kv_usage_peak' || f.metric === 'sim_late_share'
        ? { base: f.value, dim: 'ratio', unit: '%' }
        : { base: f.value };
    case 'parameter':
      return f.unit === 's' ? { base: f.value, dim: 'time', unit: 'ms' } : { base: f.value };
    case 'cost':
      return { base: f.usd_per_mtok / 1e6, dim: 'cost_per_token', unit: '$/Mtok' };
    default:
      return undefined;
  }
}

/** The x of a fact's point along a curve axis, if it has one. */
export function pointX(p: Point | undefined, axis?: string): { x: number; axis: string } | undefined {
  if (!p) return undefined;
  for (const a of axis ? [axis] : ['batch', 'concurrency', 'rate']) {
    const v = a === 'rate' ? p.req_s : a === 'batch' ? p.batch : a === 'concurrency' ? p.concurrency : undefined;
    if (v !== undefined) return { x: v, axis: a };
  }
  return undefined;
}

/** "at concurrency 16", "at 4 req/s", "at batch 1", "" */
export function pointWords(p: Point | undefined): string {
  if (!p) return '';
  if (p.req_s !== undefined && p.loop === 'open') return ` at rate ${p.req_s} req/s`;
  if (p.concurrency !== undefined) return ` at concurrency ${p.concurrency}`;
  if (p.req_s !== undefined) return ` at rate ${p.req_s} req/s`;
  return '';
}

/**
 * The one spelling of a fact name as a person may write it in a reference: stats in any spelling
 * (`ttft.median` → `ttft.p50`, `ttft_p99_9` → `ttft.p99.9`, `TTFT p95` → `ttft.p95`), a bare
 * latency metric is its mean (`ttft` → `ttft.mean`); other names lower-cased as they are.
 */
export function canonicalFactName(text: string): string {
  const t = text.trim().toLowerCase().replace(/\s+/g, ' ');
  const m = /^([a-z0-9]+)(?:[ ._](.+))?$/.exec(t);
  if (m && (LATENCY_METRICS as readonly string[]).includes(m[1])) {
    if (m[2] === undefined) return `${m[1]}.mean`;
    const stat = canonicalStat(m[2]);
    if (stat) return `${m[1]}.${stat}`;
  }
  return t.replace(/ /g, '_');
}

/** What a reference to one fact name of a cell gives: one number, or a curve over the facts' points. */
export interface Offer {
  /** The reference to write, e.g. `sweep.fact(ttft.p95)`. */
  ref: string;
  /** The fact name inside it, e.g. `ttft.p95`. */
  name: string;
  unit?: string;
  /** Facts of this name that stand at a point (0: one number). */
  points: number;
  /** The axis the points lie along, and their x values. */
  axis?: string;
  xs: number[];
}

/** Axis names a point may be picked by in a reference (`@ concurrency=16`, `@ c=16`). */
const AXES: Record<string, string> = { concurrency: 'concurrency', c: 'concurrency', batch: 'batch', rate: 'rate' };

/** `CELL.fact(NAME)`, or with one point picked: `CELL.fact(NAME @ concurrency=16)`. */
export function factRef(cell: string, name: string, point?: { axis: string; x: number }): string {
  return `${cell}.fact(${name}${point ? ` @ ${point.axis}=${point.x}` : ''})`;
}

/**
 * Parse what stands inside `.fact(…)`: a fact name, optionally `@ AXIS=X` to pick one point
 * (AXIS: concurrency or c, batch, rate). Throws a message saying what to write.
 */
export function parseFactArgs(inner: string): { name: string; point?: { axis: string; x: number } } {
  const [namePart, pointPart, ...extra] = inner.split('@');
  const name = canonicalFactName(namePart);
  if (!name || extra.length)
    throw new Error(`write .fact(NAME) or .fact(NAME @ concurrency=16), e.g. .fact(ttft.p95): "${inner}"`);
  if (pointPart === undefined) return { name };
  const m = /^\s*([a-z_]+)\s*=\s*([0-9.eE+-]+)\s*$/.exec(pointPart);
  const axis = m ? AXES[m[1]] : undefined;
  const x = m ? Number(m[2]) : NaN;
  if (!axis || !Number.isFinite(x))
    throw new Error(`pick a point as "@ concurrency=16", "@ batch=1" or "@ rate=4": "${pointPart.trim()}" is not one`);
  return { name, point: { axis, x } };
}

/**
 * Everything a cell offers a reference, one line per fact name: its reference string, its unit,
 * and the points it stands at (a name at several points is a curve; `@ AXIS=X` picks one). The one
 * list that a bad reference's message and the editor's completions both show.
 */
export function cellOffers(cell: string, facts: readonly Fact[]): Offer[] {
  const byName = new Map<string, Offer>();
  for (const f of facts) {
    const v = factValue(f);
    if (!v && f.kind !== 'curve') continue;
    const name = factName(f);
    const o = byName.get(name) ?? {
      ref: factRef(cell, name),
      name,
      unit: f.kind === 'curve' ? f.unit : v?.unit,
      points: 0,
      xs: [],
    };
    if (f.kind === 'curve') {
      o.axis ??= f.x;
      for (const p of f.points) if (!o.xs.includes(p.x)) o.xs.push(p.x);
      o.points = o.xs.length;
    } else {
      const px = pointX(f.point);
      if (px) {
        o.points++;
        o.axis ??= px.axis;
        if (!o.xs.includes(px.x)) o.xs.push(px.x);
      }
    }
    byName.set(name, o);
  }
  return [...byName.values()];
}

/** What an offer gives, in words: "ms, a curve over concurrency 1, 4, 16", "tokens, at batch 1". */
export function offerDetail(o: Offer): string {
  const where =
    o.points > 1 && o.axis
      ? `a curve over ${o.axis} ${o.xs.join(', ')}`
      : o.points === 1 && o.axis
        ? `at ${o.axis} ${o.xs[0]}`
        : '';
  return [o.unit, where].filter(Boolean).join(', ');
}

/** One offer as a person reads it: `sweep.fact(ttft.p95) (ms, a curve over concurrency 1, 4, 16)`. */
export function offerWords(o: Offer): string {
  const d = offerDetail(o);
  return d ? `${o.ref} (${d})` : o.ref;
}

/**
 * The facts a reference `NAME [@ AXIS=X]` picks from a cell's facts; a curve fact stands for its
 * points (one value each, along its x axis).
 */
export function pickFacts(
  facts: readonly Fact[],
  name: string,
  point?: { axis: string; x: number },
): { fact: Fact; x?: number; axis?: string; value: FactValue }[] {
  const out: { fact: Fact; x?: number; axis?: string; value: FactValue }[] = [];
  for (const f of facts) {
    if (factName(f) !== name) continue;
    if (f.kind === 'curve') {
      for (const p of f.points)
        if (!point || (point.axis === f.x && point.x === p.x))
          out.push({ fact: f, x: p.x, axis: f.x, value: { base: p.y, dim: 'token_rate', unit: f.unit } });
      continue;
    }
    const value = factValue(f);
    if (!value) continue;
    const px = pointX(f.point, point?.axis);
    if (point && (!px || px.x !== point.x)) continue;
    out.push({ fact: f, x: px?.x, axis: px?.axis, value });
  }
  return out;
}

const TOKEN_RATE_NAMES: Record<string, FactOf<'throughput'>['metric']> = {
  throughput: 'aggregate',
  per_user: 'per_user',
  output_throughput: 'output',
  total_throughput: 'total',
};
const REQUEST_RATE_NAMES: Record<string, FactOf<'request-rate'>['metric']> = {
  request_throughput: 'completed',
  throughput: 'completed',
  goodput: 'goodput',
  rate: 'offered',
  capacity: 'capacity',
};

/**
 * The fact a number stands for when a person names it (a compare row's `fact: ttft.p95` beside a
 * literal `measured: 23 ms`): the inverse of factName for the facts that are one number. Undefined
 * when the name and the number's dimension do not make a fact.
 */
export function factOfName(
  text: string,
  v: FactValue,
  common: { point?: Point; source?: string } = {},
): Fact | undefined {
  const name = canonicalFactName(text);
  const lat = /^([a-z0-9]+)\.(.+)$/.exec(name);
  if (
    v.dim === 'time' &&
    lat &&
    (LATENCY_METRICS as readonly string[]).includes(lat[1]) &&
    canonicalStat(lat[2]) === lat[2]
  )
    return {
      kind: 'latency',
      metric: lat[1] as FactOf<'latency'>['metric'],
      stat: lat[2],
      ms: v.base * 1e3,
      ...common,
    };
  if (v.dim === 'token_rate' && name in TOKEN_RATE_NAMES)
    return { kind: 'throughput', metric: TOKEN_RATE_NAMES[name], tok_s: v.base, ...common };
  if (v.dim === 'request_rate' && name in REQUEST_RATE_NAMES)
    return { kind: 'request-rate', metric: REQUEST_RATE_NAMES[name], req_s: v.base, ...common };
  if (v.dim === 'tokens' && (name === 'prompt_tokens' || name === 'output_tokens'))
    return { kind: 'tokens', metric: name === 'prompt_tokens' ? 'prompt' : 'output', tokens: v.base, ...common };
  if (v.dim === 'tokens' && name === 'kv_pool') return { kind: 'kv-pool', tokens: v.base, ...common };
  if (v.dim === 'bytes' && (name === 'kv_pool' || name === 'available_kv'))
    return { kind: 'kv-pool', available_bytes: v.base, ...common };
  if (v.dim === 'ratio' && name === 'prefix_hits') return { kind: 'prefix-hits', rate: v.base, ...common };
  const cost = /^cost\.(output|total|goodput)$/.exec(name);
  if (v.dim === 'cost_per_token' && cost)
    return { kind: 'cost', metric: cost[1] as FactOf<'cost'>['metric'], usd_per_mtok: v.base * 1e6, ...common };
  return undefined;
}
