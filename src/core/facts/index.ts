/**
 * Reading facts: validate what a notebook saved, name each fact for references (`CELL.fact(ttft.p95)`),
 * give its number in base units with its dimension, and list what a cell offers.
 */
import { finding, type Finding } from '../findings';
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
 * The name a reference uses for a fact: ttft.p95, tpot.mean, output_throughput, goodput, kv_pool,
 * little, prefix_hits, weights, floor.prefill, ceiling.per-user, ridge, curve.output_throughput.
 * Several facts share a name when they stand at different points (one per sweep point).
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
      return 'kv_pool';
    case 'prefix-hits':
      return 'prefix_hits';
    case 'floor':
      return `floor.${f.metric}`;
    case 'ceiling':
      return `ceiling.${f.metric}`;
    case 'roofline':
      return 'ridge';
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

/** One line per referenceable name a cell's facts offer, e.g. "ttft.p95 (ms, 3 points by concurrency)". */
export function factNames(facts: readonly Fact[]): { name: string; unit?: string; points: number; axis?: string }[] {
  const byName = new Map<string, { name: string; unit?: string; points: number; axis?: string }>();
  for (const f of facts) {
    const v = factValue(f);
    if (!v && f.kind !== 'curve') continue;
    const name = factName(f);
    const e = byName.get(name) ?? { name, unit: f.kind === 'curve' ? f.unit : v?.unit, points: 0 };
    const px = pointX(f.point);
    if (px) {
      e.points++;
      e.axis ??= px.axis;
    }
    byName.set(name, e);
  }
  return [...byName.values()];
}
