/**
 * `compare: NAME` — the verdict table: each prediction in ink against its measurement.
 *
 *   compare: day4 verdict
 *   tolerance: 10%
 *   rows:
 *     - {quantity: batch-1 decode, predicted: roofline.rows[0].per_user_tok_s, measured: day4 validation run.per_user}
 *     - {quantity: TTFT, predicted: 52.5 ms, measured: 23 ms, prompt: 1000 tokens}
 *     - {quantity: aggregate tok/s, predicted: "roofline.rows[*].aggregate_tok_s", measured: {1: 88.4 tok/s, 64: 2,530 tok/s}, x: batch}
 *
 * `predicted` and `measured` are each a literal quantity ("52.5 ms", "88.4 tok/s", a bare number),
 * or a reference into an earlier named cell:
 *
 *   - `CELL.fact(NAME)` reads the cell's facts: `sweep.fact(ttft.p95)`, `pool.fact(kv_pool)`,
 *     `roofline.fact(curve.output_throughput)`. A name stated at several points is a curve (paired
 *     with the other side by x); `sweep.fact(ttft.p95 @ concurrency=16)` picks one point. The unit
 *     is the fact's, and the physics check on the measured side is the one for that fact.
 *   - `CELL.path` reads its values (the older form, kept): `.key`, `[n]`, and `[*]` for every
 *     element of a list (a curve, paired by `x`, default the first of batch / concurrency / rate
 *     the elements carry). A key may leave out its unit suffix (`day4.ttft` reads `ttft_ms`). The
 *     number is matched to the fact the cell states with it, whose unit and check it then takes;
 *     a value that matches no fact takes its unit from its key's suffix.
 *
 * A curve may also be written as a mapping {x: quantity}. A literal measured number is checked when
 * the row says what it is: `fact: ttft.p95`, or a `quantity:` that is itself a fact name (`TTFT`,
 * `ttft p95`). A bad reference's message lists what the cell offers (cellOffers), nearest first.
 *
 * Every row: ratio = measured / predicted and a verdict within the tolerance (the cell's, or the
 * row's own `tolerance:`); 0 against 0 is within. The cause column comes from the physics checks
 * run on the measured fact (a TTFT below the prefill floor reads "prefix-cache hit?"); those
 * findings also stand on the row's `measured:` line as the user types. `prompt`, `output`, `batch`,
 * `concurrency` on a row give the checks their context when the measured fact's cell does not.
 */
import { z } from 'zod';
import { causeTag, runChecks } from '../checks';
import { gib, short, time } from '../checks/common';
import { isObj } from '../values';
import { tableOutput } from '../engine/outputs';
import { nearestFirst, quantity } from '../engine/schema';
import type { AnalyzeContext, CellOutput, CellResult, KindModule, NotebookContext, Setup } from '../engine/types';
import {
  cellOffers,
  factName,
  factOfName,
  factValue,
  offerWords,
  parseFactArgs,
  pickFacts,
  type Fact,
  type FactOf,
  type Point,
} from '../facts';
import { CellError, finding, type CellPath, type Finding } from '../findings';
import { inkStatus, measuredAtOf, type InkStatus } from '../notebook/ink';
import { plotOutput } from '../plots/render';
import type { difference as Difference } from '../stats/ci';
import { DIMS, GiB, inUnit, parseQuantity, type DimName } from '../units';

const ALL_DIMS = Object.keys(DIMS) as DimName[];
const side = z.union([z.string(), z.number(), z.record(z.string(), z.union([z.string(), z.number()]))]);
const rowSchema = z
  .object({
    quantity: z.union([z.string(), z.number()]).transform(String),
    predicted: side,
    measured: side,
    tolerance: quantity('ratio', { min: 0 }).optional(),
    /** Key of the x value in list elements: one name, or [predicted's, measured's]. */
    x: z.union([z.string(), z.tuple([z.string(), z.string()])]).optional(),
    /** What a literal measured number is, as a fact name (ttft.p95, per_user, kv_pool), for its physics check. */
    fact: z.string().optional(),
    prompt: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    output: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    batch: z.number().positive().optional(),
    concurrency: z.number().positive().optional(),
  })
  .strict();

const schema = z
  .object({
    compare: z.union([z.string(), z.number()]).transform(String),
    tolerance: quantity('ratio', { min: 0 }).optional(),
    rows: z.array(rowSchema).min(1, 'Give at least one row: - {quantity: TTFT, predicted: 52.5 ms, measured: 23 ms}'),
  })
  .strict();

type Cell = z.output<typeof schema>;
type Row = z.output<typeof rowSchema>;

export const DEFAULT_TOLERANCE = 0.1;

/** A number with its dimension (base units) and the unit to show it in; no dim = a bare number. */
export interface Val {
  base: number;
  dim?: DimName;
  unit?: string;
}

/**
 * Unit suffixes of value names (the older reference form): the unit of a value that matches no
 * fact of its cell.
 */
const SUFFIXES: [string, DimName, string, number][] = [
  ['_tok_s', 'token_rate', 'tok/s', 1],
  ['_req_s', 'request_rate', 'req/s', 1],
  ['_gb_s', 'bandwidth', 'GB/s', 1e9],
  ['_ms', 'time', 'ms', 1e-3],
  ['_us', 'time', 'µs', 1e-6],
  ['_s', 'time', 's', 1],
  ['_tokens', 'tokens', 'tokens', 1],
  ['_bytes', 'bytes', 'B', 1],
  ['_gib', 'bytes', 'GiB', GiB],
  ['_gb', 'bytes', 'GB', 1e9],
];

/** A value named `key` holding `n`: its unit from the name's suffix (ttft_ms → 23 ms). */
function valFromKey(key: string, n: number): Val {
  for (const [suf, dim, unit, f] of SUFFIXES)
    if (key.endsWith(suf) || key === suf.slice(1)) return { base: n * f, dim, unit };
  return { base: n };
}

function stripSuffix(key: string): string {
  for (const [suf] of SUFFIXES) if (key.endsWith(suf) && key.length > suf.length) return key.slice(0, -suf.length);
  return key;
}

function literal(v: string | number): Val | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? { base: v } : undefined;
  const r = parseQuantity(v, { dims: ALL_DIMS, bare: undefined });
  if (r.ok) return { base: r.quantity.value, dim: r.dim, unit: r.quantity.unit };
  const n = Number(v.replace(/,/g, ''));
  return v.trim() !== '' && Number.isFinite(n) ? { base: n } : undefined;
}

/** One number of a side, with the fact it stands for (when one is known) and that fact's cell. */
interface Picked {
  val: Val;
  fact?: Fact;
  /** The number is a mean over repeated runs: its spread, in the value's base units (a `ci` fact of its cell). */
  ci?: Spread;
  /** The facts of the cell the number came from: the context of its check. */
  cellFacts?: readonly Fact[];
}

export interface Resolved {
  /** The named cell the side reads (absent for a literal): whose ink a prediction carries. */
  from?: CellResult;
  /** One value, or a curve of (x, value) points. */
  scalar?: Picked & { key: string; cell?: CellResult };
  list?: (Picked & { x: number })[];
  xName?: string;
}

const X_KEYS = ['batch', 'concurrency', 'max_concurrency', 'rate', 'request_rate'];

/** Two numbers in base units that are the same one (rounding in a unit conversion aside). */
const same = (a: number, b: number) => a === b || Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));

/**
 * The fact a cell states with the number a value path reads, if exactly one name fits: the same
 * number in the same dimension and, where the path indexes a list of points, the fact of that point.
 */
function factOfValue(facts: readonly Fact[], val: Val, index: number | undefined): Fact | undefined {
  const hits = facts.filter((f) => {
    const fv = factValue(f);
    return !!fv && fv.dim === val.dim && same(fv.base, val.base);
  });
  const names = new Set(hits.map(factName));
  if (names.size !== 1) return undefined;
  if (hits.length === 1) return hits[0];
  const at = hits.filter((f) => index !== undefined && f.at?.[1] === index);
  return at.length === 1 ? at[0] : undefined;
}

/** A mean's spread over n runs (base units), at a confidence level. */
interface Spread {
  sd: number;
  n: number;
  level: number;
}

/** Base units per one of a ci fact's unit. */
const CI_SCALE: Record<FactOf<'ci'>['unit'], number> = { ms: 1e-3, 'tok/s': 1, 'req/s': 1 };

const sameLoad = (a: Point | undefined, b: Point | undefined) =>
  a?.loop === b?.loop && a?.concurrency === b?.concurrency && a?.req_s === b?.req_s && a?.batch === b?.batch;

/** The cell's ci fact over the repeats of `f` (the same stat at the same point), if it has one. */
function ciOf(f: Fact, facts: readonly Fact[]): FactOf<'ci'> | undefined {
  return facts.find((c): c is FactOf<'ci'> => {
    if (c.kind !== 'ci' || !sameLoad(c.point, f.point)) return false;
    const o = c.of;
    if (o.kind === 'latency') return f.kind === 'latency' && f.metric === o.metric && f.stat === o.stat;
    if (o.kind === 'throughput') return f.kind === 'throughput' && f.metric === o.metric;
    return f.kind === 'request-rate' && f.metric === o.metric;
  });
}

/** `f` stating `mean` (its ci's unit) instead of one run's number. */
function withMean(f: Fact, mean: number): Fact {
  if (f.kind === 'latency') return { ...f, ms: mean };
  if (f.kind === 'throughput') return { ...f, tok_s: mean };
  if (f.kind === 'request-rate') return { ...f, req_s: mean };
  return f;
}

/**
 * A repeated point states its stat once per run and once more as a mean with its interval (a `ci`
 * fact): a reference reads the mean, with its spread, once per point.
 */
function overRepeats(picked: ReturnType<typeof pickFacts>, facts: readonly Fact[]) {
  const seen = new Set<FactOf<'ci'>>();
  const out: (ReturnType<typeof pickFacts>[number] & { ci?: Spread })[] = [];
  for (const p of picked) {
    const c = ciOf(p.fact, facts);
    if (!c) {
      out.push(p);
      continue;
    }
    if (seen.has(c)) continue;
    seen.add(c);
    const k = CI_SCALE[c.unit];
    out.push({
      ...p,
      fact: withMean(p.fact, c.mean),
      value: { ...p.value, base: c.mean * k },
      ci: { sd: c.sd * k, n: c.n, level: c.level },
    });
  }
  return out;
}

/** The value of a picked fact: the fact's own number and unit. */
function valOfFact(v: { base: number; dim?: DimName; unit?: string }): Val {
  return { base: v.base, dim: v.dim, unit: v.unit };
}

/** `CELL.fact(NAME [@ AXIS=X])` against a cell's facts. Throws a message listing what it offers. */
function resolveFact(text: string, name: string, inner: string, result: CellResult): Resolved {
  const args = parseFactArgs(inner);
  const picked = overRepeats(pickFacts(result.facts, args.name, args.point), result.facts);
  const offers = cellOffers(name, result.facts);
  if (!picked.length) {
    if (!offers.length)
      throw new Error(
        `"${name}" states no facts${result.ok ? '' : ' (it failed)'}: run it again, or refer to its values (${name}.key)`,
      );
    const known = offers.find((o) => o.name === args.name);
    const order = nearestFirst(
      args.name,
      offers.map((o) => o.name),
    );
    const list = order.map((n) => offerWords(offers.find((o) => o.name === n)!)).join('; ');
    throw new Error(
      known && args.point
        ? `${text}: "${args.name}" has no point at ${args.point.axis} ${args.point.x} (it has ${known.axis ?? 'no axis'} ${known.xs.join(', ')}); "${name}" offers: ${list}`
        : `${text}: "${name}" has no fact "${args.name}"; it offers (nearest first): ${list}`,
    );
  }
  const withX = picked.filter((p) => p.x !== undefined);
  if (withX.length >= 2)
    return {
      list: withX.map((p) => ({ x: p.x!, val: valOfFact(p.value), fact: p.fact, ci: p.ci, cellFacts: result.facts })),
      xName: withX[0].axis,
    };
  const one = withX[0] ?? picked[picked.length - 1];
  return {
    scalar: {
      val: valOfFact(one.value),
      fact: one.fact,
      ci: one.ci,
      cellFacts: result.facts,
      key: args.name,
      cell: result,
    },
  };
}

/** Parse `name.path[0].key` or `name.fact(…)` against the notebook's named results. Throws a message on failure. */
function resolveRef(text: string, nb: NotebookContext, xKey?: string): Resolved {
  const names = [...nb.named.keys()].sort((a, b) => b.length - a.length);
  const name = names.find((n) => text === n || text.startsWith(`${n}.`) || text.startsWith(`${n}[`));
  if (name === undefined) {
    const head = text.split(/[.[]/)[0];
    const ordered = nearestFirst(head, names);
    throw new Error(
      `"${text}" is neither a quantity (e.g. "23 ms") nor a reference to a named cell above: no cell named "${head}"${names.length ? `; named cells: ${ordered.join(', ')}` : ''}`,
    );
  }
  const result = nb.named.get(name)!;
  const rest = text.slice(name.length);
  const fact = /^\.fact\((.*)\)$/s.exec(rest);
  if (fact) return { ...resolveFact(text, name, fact[1], result), from: result };
  if (rest.startsWith('.fact(')) throw new Error(`${text}: close the parenthesis, e.g. ${name}.fact(ttft.p95)`);
  const segs: (string | number | '*')[] = [];
  const re = /\.([A-Za-z_][\w-]*)|\[(\d+|\*)\]/gy;
  let m: RegExpExecArray | null;
  let pos = 0;
  while (pos < rest.length && (m = re.exec(rest))) {
    segs.push(m[1] ?? (m[2] === '*' ? '*' : Number(m[2])));
    pos = re.lastIndex;
  }
  if (pos !== rest.length)
    throw new Error(
      `cannot read "${rest.slice(pos)}" in "${text}": write CELL.fact(NAME), CELL.key, CELL.list[0].key or CELL.list[*].key`,
    );
  /** What the cell's facts offer, nearest to the word that did not resolve first. */
  const offered = (word: string) => {
    const o = cellOffers(name, result.facts);
    const order = nearestFirst(
      word,
      o.map((x) => x.name),
    );
    return o.length ? `; its facts: ${order.map((n) => offerWords(o.find((x) => x.name === n)!)).join('; ')}` : '';
  };
  const where = (i: number) =>
    `${name}${rest.slice(
      0,
      segs
        .slice(0, i)
        .reduce<number>(
          (acc, s) => acc + (typeof s === 'string' && s !== '*' ? s.length + 1 : String(s).length + 2),
          0,
        ),
    )}`;
  const step = (cur: unknown, seg: string | number, i: number, last: boolean): { v: unknown; key?: string } => {
    if (typeof seg === 'number') {
      if (!Array.isArray(cur)) throw new Error(`${where(i)} is not a list`);
      if (seg >= cur.length) throw new Error(`${where(i)} has ${cur.length} elements; [${seg}] is past the end`);
      return { v: cur[seg] };
    }
    if (!isObj(cur)) throw new Error(`${where(i)} has no keys`);
    if (seg in cur) return { v: cur[seg], key: seg };
    if (last) {
      const cands = Object.keys(cur).filter((k) => stripSuffix(k) === seg && typeof cur[k] === 'number');
      if (cands.length >= 1) return { v: cur[cands[0]], key: cands[0] };
    }
    throw new Error(`${where(i)} has no "${seg}"; it has: ${Object.keys(cur).join(', ')}${offered(seg)}`);
  };
  /**
   * A value's unit and fact: the fact its cell states with this number, else the unit of the
   * nearest key on its path that names one (`ttft_ms.median` is in ms), else a bare number.
   */
  const valueOf = (keys: string[], n: number, index: number | undefined): Picked => {
    const suffixed = [...keys].reverse().find((k) => valFromKey(k, 1).dim);
    const val = suffixed ? valFromKey(suffixed, n) : { base: n };
    const f = val.dim ? factOfValue(result.facts, val, index) : undefined;
    if (f) return { val: valOfFact(factValue(f)!), fact: f, cellFacts: result.facts };
    return { val, cellFacts: result.facts };
  };
  const star = segs.indexOf('*');
  if (star >= 0) {
    let cur: unknown = result.values;
    for (let i = 0; i < star; i++) cur = step(cur, segs[i] as string | number, i, false).v;
    if (!Array.isArray(cur)) throw new Error(`${where(star)} is not a list, so [*] cannot run over it`);
    const tail = segs.slice(star + 1);
    if (tail.includes('*')) throw new Error(`only one [*] per reference: "${text}"`);
    const list = cur.filter(isObj).map((item, index) => {
      let v: unknown = item;
      const keys: string[] = [];
      tail.forEach((s, j) => {
        const r = step(v, s as string | number, star + 1 + j, j === tail.length - 1);
        v = r.v;
        if (r.key) keys.push(r.key);
      });
      const xName = xKey ?? X_KEYS.find((k) => typeof item[k] === 'number');
      const x = xName ? item[xName] : undefined;
      if (typeof v !== 'number' || typeof x !== 'number')
        throw new Error(
          `${text}: every element needs a number here and an x (${xKey ?? X_KEYS.join(' / ')}); give "x:" on the row`,
        );
      return { x, ...valueOf(keys, v, index) };
    });
    const first = cur.find(isObj);
    return { list, xName: xKey ?? X_KEYS.find((k) => first && typeof first[k] === 'number'), from: result };
  }
  let cur: unknown = result.values;
  const keys: string[] = [];
  let index: number | undefined;
  segs.forEach((s, i) => {
    const r = step(cur, s as string | number, i, i === segs.length - 1);
    cur = r.v;
    if (r.key) keys.push(r.key);
    if (typeof s === 'number') index = s;
  });
  if (typeof cur !== 'number')
    throw new Error(
      `${text} is ${Array.isArray(cur) ? 'a list: pick one element ([0]) or all of them ([*])' : isObj(cur) ? `an object; pick a key: ${Object.keys(cur).join(', ')}` : 'not a number'}${offered(keys[keys.length - 1] ?? '')}`,
    );
  return { scalar: { ...valueOf(keys, cur, index), key: keys[keys.length - 1] ?? name, cell: result }, from: result };
}

function resolveSide(v: Row['predicted'], nb: NotebookContext, xKey?: string): Resolved {
  if (isObj(v)) {
    const list = Object.entries(v).map(([k, s]) => {
      const x = Number(k);
      const val = literal(s as string | number);
      if (!Number.isFinite(x))
        throw new Error(`"${k}" is not a number: a curve is written {x: value}, e.g. {1: 88.4 tok/s, 64: 2,530 tok/s}`);
      if (!val) throw new Error(`"${s}" is not a quantity, e.g. 88.4 tok/s`);
      return { x, val };
    });
    return { list };
  }
  const lit = literal(v);
  if (lit) return { scalar: { val: lit, key: '' } };
  return resolveRef(String(v), nb, xKey);
}

const samePoint = (a: Point | undefined, b: Point | undefined) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {});

/** The row's own point keys over a fact's point. */
function pointOf(row: Row, base: Point | undefined, xName?: string, x?: number): Point | undefined {
  const p: Point = { ...(base ?? {}) };
  if ((xName === 'batch' || xName === 'concurrency') && x !== undefined) p[xName] = x;
  if (row.batch !== undefined) p.batch = row.batch;
  if (row.concurrency !== undefined) p.concurrency = row.concurrency;
  return Object.keys(p).length ? p : undefined;
}

/**
 * Physics findings on one measured fact, re-pathed onto the row. Its context (prompt and output
 * tokens) is what its own cell states at the same point, else what the row or a record the cell
 * refers to says.
 */
function checkMeasured(
  measured: Fact | undefined,
  own: readonly Fact[] | undefined,
  lent: readonly Fact[] | undefined,
  row: Row,
  at: CellPath,
  ctx: { nb: NotebookContext; setup: Setup | undefined; cellIndex: number; label: string; xName?: string; x?: number },
): Finding[] {
  if (!measured || !ctx.setup) return [];
  const point = pointOf(row, measured.point, ctx.xName, ctx.x);
  const facts: Fact[] = [{ ...measured, at: ['measured'], ...(point ? { point } : {}) }];
  const tokens = (metric: 'prompt' | 'output'): Fact | undefined => {
    const q = row[metric];
    if (q) return { kind: 'tokens', metric, tokens: q.value };
    const from = (fs: readonly Fact[] | undefined, pointed: boolean) =>
      fs?.find((f) => f.kind === 'tokens' && f.metric === metric && (!pointed || samePoint(f.point, measured.point)));
    return from(own, true) ?? from(own, false) ?? from(lent, false);
  };
  for (const t of [tokens('prompt'), tokens('output')]) if (t) facts.push({ ...t, at: ['context'] });
  return runChecks({
    kind: 'record',
    cell: { record: 'compare' },
    facts,
    setup: ctx.setup,
    notebook: ctx.nb,
    cellIndex: ctx.cellIndex,
  })
    .filter((f) => f.path[0] === 'measured')
    .map(({ quickFix: _q, ...f }) => ({ ...f, path: at, message: `${ctx.label}: ${f.message}` }));
}

/** What a literal measured number is: the row's `fact:`, or a `quantity:` that is a fact name. */
function literalFact(row: Row, val: Val): Fact | undefined {
  if (!val.dim) return undefined;
  const v = { base: val.base, dim: val.dim, unit: val.unit };
  return factOfName(row.fact ?? row.quantity, v);
}

function fmtVal(v: Val): string {
  switch (v.dim) {
    case undefined:
      return short(v.base);
    case 'time':
      return time(v.base);
    case 'bytes':
      return gib(v.base);
    case 'tokens':
      return `${short(v.base)} tokens`;
    case 'ratio':
      return `${short(v.base * 100)}%`;
    default: {
      const unit =
        v.unit ||
        (
          {
            token_rate: 'tok/s',
            request_rate: 'req/s',
            bandwidth: 'GB/s',
            compute: 'TFLOP/s',
            flops: 'TFLOP',
            requests: 'requests',
          } as Partial<Record<DimName, string>>
        )[v.dim] ||
        '';
      return `${short(v.base / unitFactor({ ...v, unit }))} ${unit}`.trim();
    }
  }
}

/** Base units per one of `like`'s display unit (ms → 1e-3); 1 when it has none. */
function unitFactor(like: Val): number {
  if (!like.dim || !like.unit) return 1;
  try {
    return 1 / inUnit({ value: 1, dims: DIMS[like.dim], unit: like.unit }, like.unit);
  } catch {
    return 1;
  }
}

/** Value in the display unit of `like` (for plots): ms for a time shown in ms, and so on. */
function inUnitOf(v: Val, like: Val): number {
  return v.base / unitFactor(like);
}

/** A bare number next to a quantity is read in that quantity's unit: `measured: 23` beside `52.5 ms`. */
function adopt(v: Val, like: Val): Val {
  return !v.dim && like.dim ? { base: v.base * unitFactor(like), dim: like.dim, unit: like.unit } : v;
}

export interface CompareRow {
  quantity: string;
  predicted: string;
  measured: string;
  ratio?: number;
  ok?: boolean;
  verdict: string;
  cause: string;
  tolerance: number;
  x?: number;
  /** Whether the predicted side was in ink before the measured side ran (notebook/ink.ts). */
  ink: InkStatus;
  /** Where a side is a mean over repeats: measured − predicted against the noise, in words. */
  noise?: string;
  /** The interval for measured − predicted (the row's display unit) and whether it excludes zero. */
  difference?: { diff: number; lo: number; hi: number; df: number; level: number; unit: string; beyond: boolean };
}

interface Evaluated {
  rows: CompareRow[];
  findings: Finding[];
  curves: {
    row: number;
    quantity: string;
    xName: string;
    unit: string;
    points: { x: number; series: 'predicted' | 'measured'; y: number }[];
  }[];
}

function unitLabel(v: Val): string {
  if (!v.dim) return '';
  if (v.dim === 'time') return v.unit === 's' ? 's' : 'ms';
  return v.unit ?? '';
}

/** Evaluate every row; `strict` throws on unresolved references (run), else skips them (analysis). */
function evaluate(
  cell: Cell,
  nb: NotebookContext,
  setup: Setup | undefined,
  cellIndex: number,
  strict: boolean,
  /** stats/ci.ts's difference, loaded by run: the rows with a mean over repeats are judged against the noise. */
  diff?: typeof Difference,
): Evaluated {
  const tolAll = cell.tolerance?.value ?? DEFAULT_TOLERANCE;
  const out: Evaluated = { rows: [], findings: [], curves: [] };
  // A record referenced anywhere in the cell lends its context (prompt, output, its point) to rows
  // whose measured number has none of its own.
  const records = new Map<string, readonly Fact[]>();
  const lookup = (v: Row['predicted'], row: Row, side: 'predicted' | 'measured', i: number): Resolved | undefined => {
    const xk = Array.isArray(row.x) ? row.x[side === 'predicted' ? 0 : 1] : row.x;
    try {
      const r = resolveSide(v, nb, xk);
      const c = r.scalar?.cell;
      if (c?.kind === 'record') records.set(c.name ?? '', c.facts);
      return r;
    } catch (e) {
      if (strict)
        throw new CellError(`rows[${i}].${side}: ${(e as Error).message}`, ['rows', i, side], 'compare-reference');
      return undefined;
    }
  };
  const resolved = cell.rows.map(
    (row, i) => [lookup(row.predicted, row, 'predicted', i), lookup(row.measured, row, 'measured', i)] as const,
  );
  const lent = records.size === 1 ? [...records.values()][0] : undefined;
  const lentPoint = lent?.find((f) => f.point)?.point;
  /** The fact a measured number stands for: its own, else what the row says it is. */
  const measuredFact = (row: Row, pk: Picked, val: Val): Fact | undefined => {
    if (pk.fact) return pk.fact;
    const f = literalFact(row, val);
    return f && !pk.cellFacts && lentPoint ? { ...f, point: lentPoint } : f;
  };
  cell.rows.forEach((row, i) => {
    const [p, m] = resolved[i];
    if (!p || !m) return;
    const tol = row.tolerance?.value ?? tolAll;
    // The prediction's ink (its cell's, from the host) against when the measured number was measured.
    const mark = p.from ? nb.ink.get(indexOfResult(nb, p.from) ?? -1) : undefined;
    const inkAt = (pk: Picked) => inkStatus(mark, m.from ? measuredAtOf(m.from.facts, pk.fact?.point) : undefined);
    const at: CellPath = ['rows', i, 'measured'];
    const verdictOf = (pv: Val, mv: Val): Pick<CompareRow, 'ratio' | 'ok' | 'verdict'> => {
      if (pv.dim && mv.dim && pv.dim !== mv.dim) {
        const msg = `rows[${i}]: predicted ${fmtVal(pv)} and measured ${fmtVal(mv)} are different kinds of quantity; compare like with like`;
        if (strict) throw new CellError(msg, ['rows', i], 'compare-units');
        out.findings.push(finding('error', 'compare-units', msg, ['rows', i]));
        return { verdict: '—' };
      }
      // 0 against 0 agrees (ratio 1); 0 predicted against anything else has no ratio.
      const ratio = pv.base !== 0 ? mv.base / pv.base : mv.base === 0 ? 1 : NaN;
      const ok = Number.isFinite(ratio) && Math.abs(ratio - 1) <= tol + 1e-12;
      return { ratio, ok, verdict: ok ? '✅' : '❌' };
    };
    /**
     * Measured − predicted against the noise of the sides that are means over repeats (Welch's
     * interval when both are; one side's t interval against the other as a fixed number).
     */
    const noiseOf = (pk: Picked, pv: Val, mk: Picked, mv: Val): Pick<CompareRow, 'noise' | 'difference'> => {
      if (!diff || (!pk.ci && !mk.ci) || (pv.dim && mv.dim && pv.dim !== mv.dim)) return {};
      const est = (k: Picked, v: Val) =>
        k.ci ? { mean: v.base, sd: k.ci.sd, n: k.ci.n } : { mean: v.base, sd: 0, n: 1 };
      const level = (mk.ci ?? pk.ci)!.level;
      const d = diff(est(pk, pv), est(mk, mv), level);
      if (!d) return {};
      const like = mv.dim ? mv : pv;
      const show = (x: number) => fmtVal({ ...like, base: x });
      const how = pk.ci && mk.ci ? 'Welch' : `t over the ${(mk.ci ?? pk.ci)!.n} runs`;
      const sign = d.diff > 0 ? '+' : d.diff < 0 ? '−' : '';
      return {
        noise: `${d.beyondNoise ? 'beyond the noise' : 'within the noise'}: Δ ${sign}${show(Math.abs(d.diff))} ± ${show(d.half)} (${short(level * 100)}%, ${how})`,
        difference: {
          diff: inUnitOf({ ...like, base: d.diff }, like),
          lo: inUnitOf({ ...like, base: d.lo }, like),
          hi: inUnitOf({ ...like, base: d.hi }, like),
          df: d.df,
          level,
          unit: unitLabel(like),
          beyond: d.beyondNoise,
        },
      };
    };
    if (p.scalar && m.scalar) {
      const mv = m.scalar.val;
      const pv = p.scalar.val;
      // Literal bare numbers take the other side's unit.
      const mvv = adopt(mv, pv);
      const pvv = adopt(pv, mv);
      const fact = measuredFact(row, m.scalar, mvv);
      const fs = checkMeasured(fact, m.scalar.cellFacts, lent, row, at, {
        nb,
        setup,
        cellIndex,
        label: `${row.quantity} (measured)`,
      });
      out.findings.push(...fs);
      // A record's own findings on the key the number came from.
      const key = m.scalar.fact?.at?.length === 1 ? m.scalar.fact.at[0] : undefined;
      const fromCell = key === undefined ? [] : (m.scalar.cell?.findings.filter((f) => f.path[0] === key) ?? []);
      out.rows.push({
        quantity: row.quantity,
        predicted: fmtVal(pvv),
        measured: fmtVal(mvv),
        ...verdictOf(pvv, mvv),
        cause: tags([...fs, ...fromCell]),
        tolerance: tol,
        ink: inkAt(m.scalar),
        ...noiseOf(p.scalar, pvv, m.scalar, mvv),
      });
      return;
    }
    if (p.list && m.list) {
      const xName = (Array.isArray(row.x) ? row.x[0] : row.x) ?? p.xName ?? m.xName ?? 'x';
      const like = p.list[0]?.val ?? m.list[0]?.val;
      const curve = {
        row: i,
        quantity: row.quantity,
        xName,
        unit: like ? unitLabel(like) : '',
        points: [] as Evaluated['curves'][number]['points'],
      };
      for (const pt of p.list) curve.points.push({ x: pt.x, series: 'predicted', y: inUnitOf(pt.val, like!) });
      for (const pt of m.list) curve.points.push({ x: pt.x, series: 'measured', y: inUnitOf(pt.val, like!) });
      out.curves.push(curve);
      for (const mp of m.list) {
        const pp = p.list.find((q) => q.x === mp.x);
        if (!pp) continue;
        const mv = adopt(mp.val, pp.val);
        const fs = checkMeasured(measuredFact(row, mp, mv), mp.cellFacts, lent, row, at, {
          nb,
          setup,
          cellIndex,
          label: `${row.quantity} at ${xName} ${mp.x} (measured)`,
          xName,
          x: mp.x,
        });
        out.findings.push(...fs);
        out.rows.push({
          quantity: `${row.quantity} @ ${xName} ${mp.x}`,
          predicted: fmtVal(pp.val),
          measured: fmtVal(mv),
          ...verdictOf(pp.val, mv),
          cause: tags(fs),
          tolerance: tol,
          x: mp.x,
          ink: inkAt(mp),
          ...noiseOf(pp, pp.val, mp, mv),
        });
      }
      if (!m.list.some((mp) => p.list!.some((q) => q.x === mp.x))) {
        const msg = `rows[${i}]: no ${xName} value is on both sides (predicted: ${p.list.map((q) => q.x).join(', ')}; measured: ${m.list.map((q) => q.x).join(', ')})`;
        out.findings.push(
          finding('warning', 'compare-no-overlap', msg, ['rows', i], {
            fix: 'predict at the batch sizes or concurrencies you measured',
          }),
        );
      }
      return;
    }
    const msg = `rows[${i}]: one side is a single number and the other a curve; pick one point ([0], or .fact(NAME @ concurrency=16)), or give a curve on both sides`;
    if (strict) throw new CellError(msg, ['rows', i], 'compare-shape');
    out.findings.push(finding('error', 'compare-shape', msg, ['rows', i]));
  });
  return out;
}

/** The cell index of a result in the notebook's results. */
function indexOfResult(nb: NotebookContext, r: CellResult): number | undefined {
  for (const [i, x] of nb.results) if (x === r) return i;
  return undefined;
}

function tags(fs: Finding[]): string {
  return [...new Set(fs.map((f) => causeTag(f.code)).filter((t): t is string => !!t))].join('; ');
}

async function plots(ev: Evaluated, tol: number): Promise<CellOutput[]> {
  const out: CellOutput[] = [];
  for (const c of ev.curves) {
    const xs = c.points.map((p) => p.x).filter((x) => x > 0);
    const logX = xs.length > 1 && Math.max(...xs) / Math.min(...xs) >= 8 && xs.length === c.points.length;
    out.push(
      await plotOutput({
        title: `${c.quantity}: predicted and measured`,
        width: 420,
        height: 260,
        data: { values: c.points },
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'x', type: 'quantitative', title: c.xName, ...(logX ? { scale: { type: 'log', base: 2 } } : {}) },
          y: { field: 'y', type: 'quantitative', title: `${c.quantity}${c.unit ? ` (${c.unit})` : ''}` },
          color: { field: 'series', type: 'nominal', title: null, scale: { domain: ['predicted', 'measured'] } },
          strokeDash: {
            field: 'series',
            type: 'nominal',
            legend: null,
            scale: {
              domain: ['predicted', 'measured'],
              range: [
                [4, 4],
                [1, 0],
              ],
            },
          },
          tooltip: [{ field: 'series' }, { field: 'x', title: c.xName }, { field: 'y', format: ',.4~g' }],
        },
      }),
    );
  }
  const scalar = ev.rows.filter(
    (r) => r.x === undefined && r.ratio !== undefined && Number.isFinite(r.ratio) && r.ratio > 0,
  );
  if (!ev.curves.length && scalar.length) {
    out.push(
      await plotOutput({
        title: `measured / predicted (tolerance ±${short(tol * 100)}%)`,
        width: 420,
        height: Math.max(80, 28 * scalar.length),
        layer: [
          {
            data: { values: [{ lo: 1 - tol, hi: 1 + tol }] },
            mark: { type: 'rect', opacity: 0.15, color: 'green' },
            encoding: { x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } },
          },
          {
            data: { values: [{ one: 1 }] },
            mark: { type: 'rule', strokeDash: [4, 4] },
            encoding: { x: { field: 'one', type: 'quantitative' } },
          },
          {
            data: {
              values: scalar.map((r) => ({
                quantity: r.quantity,
                ratio: r.ratio,
                verdict: r.ok ? 'within' : 'outside',
              })),
            },
            mark: { type: 'point', filled: true, size: 80 },
            encoding: {
              x: { field: 'ratio', type: 'quantitative', scale: { type: 'log' }, title: 'measured / predicted' },
              y: { field: 'quantity', type: 'nominal', title: null, sort: null },
              color: {
                field: 'verdict',
                type: 'nominal',
                scale: { domain: ['within', 'outside'], range: ['#2a9d3f', '#d1372c'] },
                title: null,
              },
              tooltip: [{ field: 'quantity' }, { field: 'ratio', format: '.3f' }],
            },
          },
        ],
      }),
    );
  }
  return out;
}

export const compareKind: KindModule<Cell> = {
  key: 'compare',
  summary:
    'compare: NAME — predicted against measured (literal quantities, CELL.fact(NAME) or CELL.path references): ratio, ✅/❌ within a tolerance, likely cause',
  schema,
  analyze(cell, ctx: AnalyzeContext) {
    return evaluate(cell, ctx.notebook, ctx.setup, ctx.cellIndex, false).findings;
  },
  async run(cell, ctx) {
    // The t quantile's library loads only for a run, and only where a side is a mean over repeats.
    const repeated = cell.rows.some((r) =>
      [r.predicted, r.measured].some((v) => typeof v === 'string' && v.includes('.fact(')),
    );
    const diff = repeated ? (await import('../stats/ci')).difference : undefined;
    const ev = evaluate(cell, ctx.notebook, ctx.setup, ctx.cellIndex, true, diff);
    const tol = cell.tolerance?.value ?? DEFAULT_TOLERANCE;
    const pass = ev.rows.filter((r) => r.ok).length;
    const fail = ev.rows.filter((r) => r.ok === false).length;
    const noisy = ev.rows.some((r) => r.noise);
    const table = tableOutput<CompareRow>(
      `compare ${cell.compare}: ${pass} within, ${fail} outside ±${short(tol * 100)}%`,
      [
        { key: 'quantity', label: 'quantity', align: 'left' },
        { key: 'predicted', label: 'predicted', align: 'right' },
        { key: 'measured', label: 'measured', align: 'right' },
        {
          key: 'ratio',
          label: 'ratio',
          fmt: (v) => (typeof v === 'number' && Number.isFinite(v) ? `${short(v)}×` : '—'),
          align: 'right',
        },
        // The word after the glyph is the text fallback where no emoji font is installed.
        {
          key: 'verdict',
          label: 'verdict',
          align: 'left',
          fmt: (v) => (v === '✅' ? '✅ within' : v === '❌' ? '❌ outside' : String(v ?? '')),
        },
        { key: 'cause', label: 'cause', align: 'left' },
        { key: 'ink', label: 'ink', align: 'left', fmt: (v: InkStatus) => v.words },
        ...(noisy ? [{ key: 'noise' as const, label: 'against the noise', align: 'left' as const }] : []),
      ],
      ev.rows,
      `ratio = measured / predicted; ✅ within ±${short(tol * 100)}%${ev.rows.some((r) => r.tolerance !== tol) ? " (or the row's own tolerance)" : ''}; cause from the physics checks on the measured number; ink: whether the prediction was written down (inked) before its measurement ran${noisy ? "; against the noise: where a side is a mean over repeats (repeats:), the interval for measured − predicted (Welch's when both sides are), beyond the noise when it excludes zero" : ''}`,
    );
    return {
      values: {
        tolerance: tol,
        passed: pass,
        failed: fail,
        rows: ev.rows.map(({ tolerance, ...r }) => ({ ...r, tolerance })),
      },
      // A verdict is read by people, not by later cells: it states no facts.
      facts: [],
      outputs: [table, ...(await plots(ev, tol))],
      findings: ev.findings,
    };
  },
};
