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
 * or a reference `CELL NAME.path` into an earlier named cell's values: `.key`, `[n]`, and `[*]`
 * for every element of a list (a curve, paired with the other side by `x`, default the first of
 * batch / concurrency / rate the elements carry). A key may leave out its unit suffix
 * (`day4.ttft` reads `ttft_ms`); the suffix gives the unit (_ms, _s, _tok_s, _req_s, _tokens,
 * _bytes, _gib). A curve may also be written as a mapping {x: quantity}.
 *
 * Every row: ratio = measured / predicted and a verdict within the tolerance (the cell's, or the
 * row's own `tolerance:`). The cause column comes from the physics checks run on the measured
 * number (a TTFT below the prefill floor reads "prefix-cache hit?"); those findings also stand on
 * the row's `measured:` line as the user types. `prompt`, `output`, `batch`, `concurrency` on a
 * row give the checks their context when the measured side does not carry it.
 */
import { z } from 'zod';
import { causeTag, runChecks } from '../checks';
import { gib, short, time } from '../checks/common';
import { isObj, pickNum } from '../checks/measurements';
import { tableOutput } from '../engine/outputs';
import { quantity } from '../engine/schema';
import type { AnalyzeContext, CellOutput, CellResult, KindModule, NotebookContext, Setup } from '../engine/types';
import { CellError, finding, type CellPath, type Finding } from '../findings';
import { plotOutput } from '../plots/render';
import { recordFacts } from './record';
import { DIMS, GiB, inUnit, parseQuantity, type DimName, type Quantity } from '../units';

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

export interface Resolved {
  /** One value, or a curve of (x, value) points. */
  scalar?: { val: Val; key: string; parent?: Record<string, unknown>; cell?: CellResult; cellIndex?: number };
  list?: { x: number; val: Val; item: Record<string, unknown> }[];
  xName?: string;
  key?: string;
}

const X_KEYS = ['batch', 'concurrency', 'max_concurrency', 'rate', 'request_rate'];

/** Parse `name.path[0].key` against the notebook's named results. Throws a message on failure. */
function resolveRef(text: string, nb: NotebookContext, xKey?: string): Resolved {
  const names = [...nb.named.keys()].sort((a, b) => b.length - a.length);
  const name = names.find((n) => text === n || text.startsWith(`${n}.`) || text.startsWith(`${n}[`));
  if (name === undefined) {
    const head = text.split(/[.[]/)[0];
    throw new Error(
      `"${text}" is neither a quantity (e.g. "23 ms") nor a reference to a named cell above: no cell named "${head}"${names.length ? `; named cells: ${names.join(', ')}` : ''}`,
    );
  }
  const result = nb.named.get(name)!;
  const cellIndex = [...nb.results].find(([, r]) => r === result)?.[0];
  const rest = text.slice(name.length);
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
      `cannot read "${rest.slice(pos)}" in "${text}": write CELL.key, CELL.list[0].key or CELL.list[*].key`,
    );
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
    throw new Error(`${where(i)} has no "${seg}"; it has: ${Object.keys(cur).join(', ')}`);
  };
  const star = segs.indexOf('*');
  if (star >= 0) {
    let cur: unknown = result.values;
    for (let i = 0; i < star; i++) cur = step(cur, segs[i] as string | number, i, false).v;
    if (!Array.isArray(cur)) throw new Error(`${where(star)} is not a list, so [*] cannot run over it`);
    const tail = segs.slice(star + 1);
    if (tail.includes('*')) throw new Error(`only one [*] per reference: "${text}"`);
    let key = '';
    const list = cur.filter(isObj).map((item) => {
      let v: unknown = item;
      tail.forEach((s, j) => {
        const r = step(v, s as string | number, star + 1 + j, j === tail.length - 1);
        v = r.v;
        if (r.key) key = r.key;
      });
      const xName = xKey ?? X_KEYS.find((k) => typeof item[k] === 'number');
      const x = xName ? item[xName] : undefined;
      if (typeof v !== 'number' || typeof x !== 'number')
        throw new Error(
          `${text}: every element needs a number here and an x (${xKey ?? X_KEYS.join(' / ')}); give "x:" on the row`,
        );
      return { x, val: valFromKey(key, v), item };
    });
    return { list, key, xName: xKey ?? X_KEYS.find((k) => list.length && typeof list[0].item[k] === 'number') };
  }
  let cur: unknown = result.values;
  let key = name;
  let parent: Record<string, unknown> | undefined;
  segs.forEach((s, i) => {
    if (isObj(cur)) parent = cur;
    const r = step(cur, s as string | number, i, i === segs.length - 1);
    cur = r.v;
    if (r.key) key = r.key;
  });
  if (typeof cur !== 'number')
    throw new Error(
      `${text} is ${Array.isArray(cur) ? 'a list: pick one element ([0]) or all of them ([*])' : isObj(cur) ? `an object; pick a key: ${Object.keys(cur).join(', ')}` : 'not a number'}`,
    );
  return { scalar: { val: valFromKey(key, cur), key, parent, cell: result, cellIndex } };
}

function resolveSide(v: Row['predicted'], nb: NotebookContext, xKey?: string): Resolved {
  if (isObj(v)) {
    const list = Object.entries(v).map(([k, s]) => {
      const x = Number(k);
      const val = literal(s as string | number);
      if (!Number.isFinite(x))
        throw new Error(`"${k}" is not a number: a curve is written {x: value}, e.g. {1: 88.4 tok/s, 64: 2,530 tok/s}`);
      if (!val) throw new Error(`"${s}" is not a quantity, e.g. 88.4 tok/s`);
      return { x, val, item: {} };
    });
    return { list };
  }
  const lit = literal(v);
  if (lit) return { scalar: { val: lit, key: '' } };
  return resolveRef(String(v), nb, xKey);
}

/** Record keys the checks know, and the dimension each holds. */
const CHECK_KEYS: Record<string, DimName> = {
  ttft: 'time',
  ttft_p50: 'time',
  ttft_p90: 'time',
  ttft_p99: 'time',
  tpot: 'time',
  tpot_p50: 'time',
  tpot_p99: 'time',
  itl: 'time',
  e2e: 'time',
  step: 'time',
  rtt: 'time',
  per_user: 'token_rate',
  throughput: 'token_rate',
  output_throughput: 'token_rate',
  total_throughput: 'token_rate',
  request_throughput: 'request_rate',
  kv_pool: 'tokens',
  available_kv: 'bytes',
  capacity: 'request_rate',
};

/** Which record key a row's measured number stands for: from its value name, else from the row's words. */
function checkKeyFor(quantityText: string, valueKey: string | undefined, val: Val): string | undefined {
  if (!val.dim) return undefined;
  let k = valueKey ? stripSuffix(valueKey) : '';
  const v = /^(mean|median|p(\d+))_(ttft|tpot|itl|e2el)$/.exec(k);
  if (v) k = `${v[3] === 'e2el' ? 'e2e' : v[3]}${v[1] === 'mean' ? '' : v[1] === 'median' ? '_p50' : `_p${v[2]}`}`;
  if (k === 'aggregate' || k === 'total_token_throughput') k = k === 'aggregate' ? 'throughput' : 'total_throughput';
  if (k === 'throughput' && val.dim === 'request_rate') k = 'request_throughput';
  if (CHECK_KEYS[k] === val.dim) return k;
  const q = quantityText.toLowerCase();
  const pctl = /p99/.test(q) ? '_p99' : /p50|median/.test(q) ? '_p50' : '';
  const guesses: [RegExp, string][] = [
    [/ttft|first token/, `ttft${pctl}`],
    [/tpot|per output token/, `tpot${pctl === '_p99' ? '_p99' : pctl}`],
    [/\bitl\b|inter.?token/, 'itl'],
    [/e2e|end.to.end/, 'e2e'],
    [/\bstep\b/, 'step'],
    [/\brtt\b|round.?trip/, 'rtt'],
    [/per.?user|batch.?1|single.?stream|one stream/, 'per_user'],
    [/kv.?pool|kv cache size/, 'kv_pool'],
    [/available.?kv|kv.?memory/, 'available_kv'],
    [/capacity/, 'capacity'],
    [/throughput|aggregate|tok\/s/, val.dim === 'request_rate' ? 'request_throughput' : 'throughput'],
  ];
  for (const [re, key] of guesses) if (re.test(q) && CHECK_KEYS[key] === val.dim) return key;
  return undefined;
}

function toQuantity(v: Val): Quantity {
  return { value: v.base, dims: DIMS[v.dim!], unit: v.unit ?? '' };
}

/** Context the checks need besides the number: prompt and output tokens, batch, concurrency. */
function contextOf(
  row: Row,
  parent: Record<string, unknown> | undefined,
  fallback: Record<string, unknown> | undefined,
  xName?: string,
  x?: number,
): Record<string, unknown> {
  const ctx: Record<string, unknown> = {};
  const tok = (n: number | undefined) =>
    n === undefined ? undefined : { value: n, dims: DIMS.tokens, unit: 'tokens' };
  for (const src of [fallback, parent]) {
    if (!isObj(src)) continue;
    const prompt = pickNum(src, ['prompt_tokens', 'input_tokens', 'input', 'prompt']);
    const output = pickNum(src, ['output_tokens', 'output']);
    if (prompt !== undefined) ctx.prompt = tok(prompt);
    if (output !== undefined) ctx.output = tok(output);
    for (const k of ['batch', 'concurrency'] as const) if (typeof src[k] === 'number') ctx[k] = src[k];
    if (typeof src.source === 'string') ctx.source = src.source;
    if (src.load === 'open' || src.load === 'closed') ctx.load = src.load;
  }
  if (xName === 'batch' || xName === 'concurrency') ctx[xName] = x;
  if (row.prompt) ctx.prompt = row.prompt;
  if (row.output) ctx.output = row.output;
  if (row.batch !== undefined) ctx.batch = row.batch;
  if (row.concurrency !== undefined) ctx.concurrency = row.concurrency;
  return ctx;
}

/** Physics findings on one measured number, re-pathed onto the row. */
function checkMeasured(
  key: string | undefined,
  val: Val,
  context: Record<string, unknown>,
  at: CellPath,
  nb: NotebookContext,
  setup: Setup | undefined,
  cellIndex: number,
  label: string,
): Finding[] {
  if (!key || !setup) return [];
  const cell = { record: 'compare', ...context, [key]: toQuantity(val) };
  return runChecks({ kind: 'record', cell, facts: recordFacts(cell), setup, notebook: nb, cellIndex })
    .filter((f) => f.path[0] === key)
    .map(({ quickFix: _q, ...f }) => ({ ...f, path: at, message: `${label}: ${f.message}` }));
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
): Evaluated {
  const tolAll = cell.tolerance?.value ?? DEFAULT_TOLERANCE;
  const out: Evaluated = { rows: [], findings: [], curves: [] };
  // A record referenced anywhere in the cell lends its context (prompt, batch …) to literal rows.
  const recordCtx = new Map<string, Record<string, unknown>>();
  const lookup = (v: Row['predicted'], row: Row, side: 'predicted' | 'measured', i: number): Resolved | undefined => {
    const xk = Array.isArray(row.x) ? row.x[side === 'predicted' ? 0 : 1] : row.x;
    try {
      const r = resolveSide(v, nb, xk);
      if (r.scalar?.cell?.kind === 'record' && r.scalar.parent)
        recordCtx.set(r.scalar.cell.name ?? '', r.scalar.parent);
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
  const shared = recordCtx.size === 1 ? [...recordCtx.values()][0] : undefined;
  cell.rows.forEach((row, i) => {
    const [p, m] = resolved[i];
    if (!p || !m) return;
    const tol = row.tolerance?.value ?? tolAll;
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
    if (p.scalar && m.scalar) {
      const mv = m.scalar.val;
      const pv = p.scalar.val;
      // Literal bare numbers take the other side's unit.
      const mvv = adopt(mv, pv);
      const pvv = adopt(pv, mv);
      const key = checkKeyFor(row.quantity, m.scalar.key || undefined, mvv);
      const ctx = contextOf(row, m.scalar.parent, shared);
      const fs = checkMeasured(key, mvv, ctx, at, nb, setup, cellIndex, `${row.quantity} (measured)`);
      out.findings.push(...fs);
      const fromCell =
        m.scalar.cell?.findings.filter(
          (f) => f.path[0] === stripSuffix(m.scalar!.key) || f.path[0] === m.scalar!.key,
        ) ?? [];
      out.rows.push({
        quantity: row.quantity,
        predicted: fmtVal(pvv),
        measured: fmtVal(mvv),
        ...verdictOf(pvv, mvv),
        cause: tags([...fs, ...fromCell]),
        tolerance: tol,
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
        const key = checkKeyFor(row.quantity, m.key, mv);
        const fs = checkMeasured(
          key,
          mv,
          contextOf(row, mp.item, shared, xName, mp.x),
          at,
          nb,
          setup,
          cellIndex,
          `${row.quantity} at ${xName} ${mp.x} (measured)`,
        );
        out.findings.push(...fs);
        out.rows.push({
          quantity: `${row.quantity} @ ${xName} ${mp.x}`,
          predicted: fmtVal(pp.val),
          measured: fmtVal(mv),
          ...verdictOf(pp.val, mv),
          cause: tags(fs),
          tolerance: tol,
          x: mp.x,
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
    const msg = `rows[${i}]: one side is a single number and the other a curve; use [0] to pick one element, or [*] on both sides`;
    if (strict) throw new CellError(msg, ['rows', i], 'compare-shape');
    out.findings.push(finding('error', 'compare-shape', msg, ['rows', i]));
  });
  return out;
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
    'compare: NAME — predicted against measured (literal quantities or CELL.path references): ratio, ✅/❌ within a tolerance, likely cause',
  schema,
  analyze(cell, ctx: AnalyzeContext) {
    return evaluate(cell, ctx.notebook, ctx.setup, ctx.cellIndex, false).findings;
  },
  async run(cell, ctx) {
    const ev = evaluate(cell, ctx.notebook, ctx.setup, ctx.cellIndex, true);
    const tol = cell.tolerance?.value ?? DEFAULT_TOLERANCE;
    const pass = ev.rows.filter((r) => r.ok).length;
    const fail = ev.rows.filter((r) => r.ok === false).length;
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
      ],
      ev.rows,
      `ratio = measured / predicted; ✅ within ±${short(tol * 100)}%${ev.rows.some((r) => r.tolerance !== tol) ? " (or the row's own tolerance)" : ''}; cause from the physics checks on the measured number`,
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
