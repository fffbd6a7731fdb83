/**
 * Measurements, normalized: every rule reads numbers in base units (seconds, tok/s, req/s, tokens,
 * bytes) from one shape, whatever cell they came from, with the path in the cell each one stands at.
 *
 * Where the numbers come from:
 *
 * - `record` cells: the typed keys themselves (ttft, tpot, itl, e2e and their _p50/_p90/_p99, step,
 *   rtt, throughput [tok/s or req/s], output_throughput, total_throughput, request_throughput,
 *   per_user, batch, concurrency, rate, load, prompt, output, kv_pool, available_kv, capacity,
 *   prefix_cache_hit_rate, source, sampler, top_p, top_k, request_seed). Each finding's path is the
 *   key that holds the number. The same numbers are read statically and after a run.
 *
 * - `bench` results (values after a run). Read per point from `values.points` (or `values.rows`);
 *   each name below is tried in order, ours first, then vLLM's `--save-result` names:
 *     concurrency | max_concurrency          closed-loop in-flight target
 *     rate | request_rate                    open-loop offered rate, req/s
 *     mode                                   "closed" | "open" (else: concurrency and no rate → closed)
 *     ttft_ms_mean | ttft_mean_ms | mean_ttft_ms | ttft_ms.mean      (likewise median/p50, p90, p99;
 *     tpot_…, itl_…, e2e_… (vLLM: e2el)                                 all in milliseconds)
 *     request_throughput (req/s), output_throughput (tok/s), total_token_throughput | total_throughput (tok/s)
 *     input_tokens | prompt_tokens (per request) | total_input_tokens / completed;  cell `input:` otherwise
 *     output_tokens | total_output_tokens / completed;                              cell `output:` otherwise
 *     rtt_ms (point, else values.rtt_ms; a number or {median})   network round trip to the endpoint
 *     little_law | littles_law | little      a ratio λW/L, or {observed | observed_in_flight | mean_in_flight,
 *                                            predicted | predicted_in_flight | lambda_w, ratio | error (= ratio − 1)}
 *     prefix_cache_hit_rate | prefix_hit_rate  fraction (a value above 1 is read as percent)
 *   A point may nest these under `metrics` (metrics.ttft_ms.median, metrics.ttft_ms.p.p99) and
 *   `evidence` or `server` (server.prefix_hit_rate), as the bench engine's results do; rtt may also
 *   be values.rtt.median_ms.
 *   and for the run: values.request_params | values.sampling_params {top_p, top_k, seed}.
 *   A point's findings stand on its element of the cell's `concurrency:` (or `rate:`) list.
 *
 * - `audit` results: pool_tokens | kv_pool_tokens | gpu_kv_cache_tokens, available_kv_gib |
 *   available_kv_bytes, and sampler | sampler_backend (also under values.facts).
 */
import type { Setup } from '../engine/types';
import type { CellPath } from '../findings';
import { GiB, type Quantity } from '../units';
import type { CheckInput } from './types';

export type MKey =
  | 'ttft'
  | 'ttft_p50'
  | 'ttft_p90'
  | 'ttft_p99'
  | 'tpot'
  | 'tpot_p50'
  | 'tpot_p90'
  | 'tpot_p99'
  | 'itl'
  | 'itl_p50'
  | 'itl_p90'
  | 'itl_p99'
  | 'e2e'
  | 'e2e_p50'
  | 'e2e_p90'
  | 'e2e_p99'
  | 'step'
  | 'rtt'
  | 'per_user'
  /** token rate, tok/s (record `throughput:` written in tok/s) */
  | 'throughput'
  | 'output_throughput'
  | 'total_throughput'
  /** req/s (record `throughput:` written in req/s, or `request_throughput:`) */
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
  | 'little_ratio';

export interface Measurement {
  origin: 'record' | 'bench' | 'audit';
  /** Appended to messages: "" for a record, " at concurrency 64" for a bench point. */
  label: string;
  /** Where a finding about this measurement stands when the number has no key of its own. */
  at: CellPath;
  v: Partial<Record<MKey, number>>;
  paths: Partial<Record<MKey, CellPath>>;
  /** The quantities as typed (record cells), for messages and quick fixes. */
  written: Partial<Record<MKey, Quantity>>;
  source?: string;
  load?: 'closed' | 'open';
  sampler?: string;
  sampling?: { top_p?: unknown; top_k?: unknown; seed?: unknown; present: boolean };
}

export function pathOf(m: Measurement, k: MKey): CellPath {
  return m.paths[k] ?? m.at;
}

/** Time keys of a record and their percentiles; all in seconds. */
export const TIME_KEYS = ['ttft', 'tpot', 'itl', 'e2e'] as const;
export const PCTS = ['', '_p50', '_p90', '_p99'] as const;

/** A plain object (not null, not an array). */
export const isObj = (x: unknown): x is Record<string, any> => typeof x === 'object' && x !== null && !Array.isArray(x);
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

/** Record cell → measurement (paths are the keys). */
export function fromRecord(cell: Record<string, unknown>): Measurement {
  const m: Measurement = { origin: 'record', label: '', at: ['record'], v: {}, paths: {}, written: {} };
  const put = (k: MKey, key: string) => {
    const raw = cell[key];
    const v = num(raw);
    if (v === undefined) return;
    m.v[k] = v;
    m.paths[k] = [key];
    if (isQty(raw)) m.written[k] = raw;
  };
  for (const t of TIME_KEYS) for (const p of PCTS) put(`${t}${p}` as MKey, `${t}${p}`);
  for (const k of [
    'step',
    'rtt',
    'per_user',
    'output_throughput',
    'total_throughput',
    'request_throughput',
    'batch',
    'concurrency',
    'rate',
    'prompt',
    'output',
    'kv_pool',
    'available_kv',
    'capacity',
    'prefix_cache_hit_rate',
  ] as const)
    put(k, k);
  const thr = cell.throughput;
  if (isQty(thr)) put(thr.dims.request ? 'request_throughput' : 'throughput', 'throughput');
  if (typeof cell.source === 'string') m.source = cell.source;
  if (cell.load === 'closed' || cell.load === 'open') m.load = cell.load;
  else if (m.v.concurrency !== undefined && m.v.rate === undefined) m.load = 'closed';
  else if (m.v.rate !== undefined) m.load = 'open';
  if (typeof cell.sampler === 'string') m.sampler = cell.sampler;
  m.sampling = {
    top_p: cell.top_p,
    top_k: cell.top_k,
    seed: cell.request_seed,
    present: 'top_p' in cell || 'top_k' in cell,
  };
  return m;
}

const STAT_NAMES: Record<string, string[]> = { '': ['mean'], _p50: ['median', 'p50'], _p90: ['p90'], _p99: ['p99'] };

function benchStat(p: Record<string, unknown>, metric: string, pct: string): number | undefined {
  const vllm = metric === 'e2e' ? 'e2el' : metric;
  const names: string[] = [];
  for (const s of STAT_NAMES[pct])
    names.push(
      `${metric}_ms_${s}`,
      `${metric}_${s}_ms`,
      `${s}_${vllm}_ms`,
      `${metric}_ms.${s}`,
      `${metric}_ms.p.${s}`,
      `${metric}.${s}_ms`,
    );
  const ms = pickNum(p, names);
  return ms === undefined ? undefined : ms / 1e3;
}

/** The cell's list under `key` (zod output of oneOrMany is an array). */
function listOf(cell: unknown, key: string): unknown[] | undefined {
  if (!isObj(cell)) return undefined;
  const v = cell[key];
  return Array.isArray(v) ? v : v === undefined ? undefined : [v];
}

/** One measurement per bench point, from the run's values. */
export function fromBench(values: Record<string, unknown>, cell: unknown): Measurement[] {
  const points = (Array.isArray(values.points) ? values.points : Array.isArray(values.rows) ? values.rows : []).filter(
    isObj,
  );
  const c = isObj(cell) ? cell : {};
  const concList = listOf(cell, 'concurrency')?.map(num);
  const rateList = (listOf(cell, 'rate') ?? listOf(cell, 'request_rate'))?.map(num);
  const rateKey = 'rate' in c ? 'rate' : 'request_rate';
  const cellInput = num(c.input) ?? num(c.prompt);
  const cellOutput = num(c.output);
  const req = [values.request_params, values.sampling_params].find(isObj);
  return points.map((raw, i) => {
    // The bench engine nests its metrics (metrics.ttft_ms.median, metrics.little, evidence.prefix_hit_rate).
    const p: Record<string, unknown> = {
      ...(isObj(raw.evidence) ? raw.evidence : {}),
      ...(isObj(raw.server) ? raw.server : {}),
      ...(isObj(raw.metrics) ? raw.metrics : {}),
      ...raw,
    };
    const m: Measurement = { origin: 'bench', label: '', at: [], v: {}, paths: {}, written: {} };
    for (const t of TIME_KEYS)
      for (const pct of PCTS) {
        const v = benchStat(p, t, pct);
        if (v !== undefined) m.v[`${t}${pct}` as MKey] = v;
      }
    const conc = pickNum(p, ['concurrency', 'max_concurrency']);
    const rate = pickNum(p, ['rate', 'request_rate']);
    if (conc !== undefined) m.v.concurrency = conc;
    if (rate !== undefined) m.v.rate = rate;
    const set = (k: MKey, v: number | undefined) => v !== undefined && (m.v[k] = v);
    set('request_throughput', pickNum(p, ['request_throughput']));
    set('output_throughput', pickNum(p, ['output_throughput']));
    set('total_throughput', pickNum(p, ['total_token_throughput', 'total_throughput']));
    const completed = pickNum(p, ['completed']);
    const perReq = (tot: number | undefined) => (tot !== undefined && completed ? tot / completed : undefined);
    set(
      'prompt',
      pickNum(p, ['input_tokens', 'prompt_tokens']) ?? perReq(pickNum(p, ['total_input_tokens'])) ?? cellInput,
    );
    set('output', pickNum(p, ['output_tokens']) ?? perReq(pickNum(p, ['total_output_tokens'])) ?? cellOutput);
    const rtt =
      pickNum(p, ['rtt_ms', 'rtt_ms.median', 'rtt.median_ms']) ??
      pickNum(values, ['rtt_ms', 'rtt_ms.median', 'rtt.median_ms']);
    set('rtt', rtt === undefined ? undefined : rtt / 1e3);
    let hit = pickNum(p, ['prefix_cache_hit_rate', 'prefix_hit_rate']);
    if (hit !== undefined && hit > 1) hit /= 100;
    set('prefix_cache_hit_rate', hit);
    const little = p.little_law ?? p.littles_law ?? p.little;
    if (typeof little === 'number') m.v.little_ratio = little;
    else if (isObj(little)) {
      set(
        'little_observed',
        pickNum(little, ['observed', 'observed_in_flight', 'l_observed', 'mean_in_flight', 'in_flight']),
      );
      set('little_predicted', pickNum(little, ['predicted', 'predicted_in_flight', 'lambda_w', 'l_predicted']));
      const err = pickNum(little, ['error']);
      set('little_ratio', pickNum(little, ['ratio']) ?? (err !== undefined ? 1 + err : undefined));
    }
    const mode = p.mode ?? values.mode;
    m.load =
      mode === 'open' || mode === 'closed'
        ? mode
        : rate !== undefined && conc === undefined
          ? 'open'
          : conc !== undefined
            ? 'closed'
            : undefined;
    // The point's line: its element of the cell's concurrency (or rate) list.
    if (conc !== undefined && concList) {
      const j = concList.indexOf(conc);
      m.at = ['concurrency', j >= 0 ? j : Math.min(i, concList.length - 1)];
      m.label = ` at concurrency ${conc}`;
    } else if (rate !== undefined && rateList) {
      const j = rateList.indexOf(rate);
      m.at = [rateKey, j >= 0 ? j : Math.min(i, rateList.length - 1)];
      m.label = ` at rate ${rate} req/s`;
    } else m.label = points.length > 1 ? ` at point ${i + 1}` : '';
    if (req) m.sampling = { top_p: req.top_p, top_k: req.top_k, seed: req.seed, present: true };
    return m;
  });
}

/** Audit results → one measurement (the server's own startup facts). */
export function fromAudit(values: Record<string, unknown>): Measurement {
  const m: Measurement = { origin: 'audit', label: ' (from the log)', at: [], v: {}, paths: {}, written: {} };
  const src = isObj(values.facts) ? { ...values.facts, ...values } : values;
  const pool = pickNum(src, ['pool_tokens', 'kv_pool_tokens', 'gpu_kv_cache_tokens', 'kv_cache_tokens']);
  if (pool !== undefined) m.v.kv_pool = pool;
  const gib = pickNum(src, ['available_kv_gib', 'available_kv_memory_gib']);
  const bytes = pickNum(src, ['available_kv_bytes']) ?? (gib !== undefined ? gib * GiB : undefined);
  if (bytes !== undefined) m.v.available_kv = bytes;
  const s = samplerOf(src);
  if (s) m.sampler = s;
  return m;
}

export function samplerOf(values: unknown): string | undefined {
  if (!isObj(values)) return undefined;
  for (const o of [values, values.facts]) {
    if (!isObj(o)) continue;
    const s = o.sampler ?? o.sampler_backend;
    if (typeof s === 'string') return s;
  }
  return undefined;
}

/** The measurements a cell offers its rules, by kind; [] for kinds that measure nothing. */
export function measurementsOf(input: CheckInput): Measurement[] {
  const k = input.kind;
  if (k === 'record') return isObj(input.cell) ? [fromRecord(input.cell)] : [];
  if (!input.values) return [];
  if (k === 'bench' || k.startsWith('bench:')) return fromBench(input.values, input.cell);
  if (k === 'audit' || k.startsWith('audit:')) return [fromAudit(input.values)];
  return [];
}

/** A setup knob that may be a number or a parsed Quantity. */
export function serverKnob(setup: Setup | undefined, key: string): number | undefined {
  return num(setup?.server?.[key]);
}
