/**
 * `record: NAME` — numbers measured elsewhere (a vLLM benchmark, a log, a colleague's run), typed
 * with units and checked like any other: the physics rules run on them as they are typed.
 *
 *   record: day4 validation run
 *   prompt: 1000 tokens
 *   ttft: 23 ms          # → below the 52.5 ms compute floor: prefix-cache hit?
 *
 * Values (for later cells, e.g. `compare`): each key with its unit in the name — ttft_ms,
 * tpot_p99_ms, step_ms, rtt_ms, per_user_tok_s, throughput_tok_s or throughput_req_s,
 * output_throughput_tok_s, request_throughput_req_s, rate_req_s, capacity_req_s, prompt_tokens,
 * output_tokens, kv_pool_tokens, available_kv_bytes and available_kv_gib, prefix_cache_hit_rate
 * (fraction), batch, concurrency, requests, and the text keys as written.
 */
import { costFacts, dollarsPerMtok, fmtDollarsPerMtok, priceWords, setupPricePerHour } from '../cost';
import { z } from 'zod';
import { bounds, short, time } from '../checks/common';
import { tableOutput } from '../engine/outputs';
import { quantity, withMetricKeys } from '../engine/schema';
import type { KindModule, Setup } from '../engine/types';
import { parseMetricKey, type Fact, type Point } from '../facts';
import { dimName, fmtBytes, fmtNum, GiB, type Quantity } from '../units';

const timeQ = quantity('time', { positive: true });
const t = () => timeQ.optional();

const offOrNumber = z.union([z.number(), z.null(), z.literal(false), z.enum(['none', 'off'])]);

// Besides these keys, any latency metric with a stat (ttft_p95, tpot_p99.9, e2e_median) is a time.
const schema = withMetricKeys(
  {
    record: z.union([z.string(), z.number()]).transform(String),
    /** Means; the other stats are written metric_stat: ttft_p95. */
    ttft: t(),
    tpot: t(),
    itl: t(),
    e2e: t(),
    /** One decode step of the engine (all running sequences advance one token). */
    step: t(),
    /** Network round trip from the client to the endpoint. */
    rtt: t(),
    /** tok/s (aggregate) or req/s. */
    throughput: quantity(['token_rate', 'request_rate'], { positive: true }).optional(),
    output_throughput: quantity('token_rate', { positive: true }).optional(),
    total_throughput: quantity('token_rate', { positive: true }).optional(),
    request_throughput: quantity('request_rate', { positive: true }).optional(),
    /** Decode rate of one stream, tok/s. */
    per_user: quantity('token_rate', { positive: true }).optional(),
    batch: z.number().positive().optional(),
    /** Closed loop: requests kept in flight. */
    concurrency: z.number().positive().optional(),
    /** Open loop: offered arrival rate. */
    rate: quantity('request_rate', { bare: 'req/s', positive: true }).optional(),
    load: z.enum(['closed', 'open']).optional(),
    prompt: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    output: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    requests: z.number().int().positive().optional(),
    /** "GPU KV cache size: N tokens" */
    kv_pool: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    /** "Available KV cache memory: X GiB" */
    available_kv: quantity('bytes', { positive: true }).optional(),
    /** A rate claimed as what the server sustains. */
    capacity: quantity('request_rate', { bare: 'req/s', positive: true }).optional(),
    prefix_cache_hit_rate: quantity('ratio', { min: 0 }).optional(),
    /** Where the numbers came from: "client", "vllm bench serve", "log" (a heartbeat) … */
    source: z.string().optional(),
    /** Sampler the server selected, e.g. "flashinfer". */
    sampler: z.string().optional(),
    top_p: offOrNumber.optional(),
    top_k: offOrNumber.optional(),
    /** Whether the requests carried a request-level seed. */
    request_seed: z.union([z.boolean(), z.number()]).optional(),
    notes: z.string().optional(),
  },
  timeQ,
);

type Cell = z.output<typeof schema>;

const isQty = (x: unknown): x is Quantity => typeof x === 'object' && x !== null && 'dims' in x && 'value' in x;

/** The value name a key's number is exposed under, and the number in that unit. */
function recordValue(key: string, q: Quantity): [string, number][] {
  switch (dimName(q)) {
    case 'time':
      return [[`${key}_ms`, q.value * 1e3]];
    case 'token_rate':
      return [[`${key}_tok_s`, q.value]];
    case 'request_rate':
      return [[`${key}_req_s`, q.value]];
    case 'tokens':
      return [[`${key}_tokens`, q.value]];
    case 'bytes':
      return [
        [`${key}_bytes`, q.value],
        [`${key}_gib`, q.value / GiB],
      ];
    default:
      return [[key, q.value]];
  }
}

function shown(q: Quantity): string {
  const d = dimName(q);
  if (d === 'time') return time(q.value);
  if (d === 'bytes') return fmtBytes(q.value);
  if (d === 'ratio') return `${short(q.value * 100)}%`;
  if (d === 'tokens') return `${fmtNum(q.value, 0)} tokens`;
  return `${short(q.value)} ${d === 'request_rate' ? 'req/s' : 'tok/s'}`;
}

/** What physics says about a key, for the table's last column. */
function physicsNote(key: string, cell: Record<string, unknown>, setup: Setup | undefined): string {
  if (!setup) return '';
  const b = bounds(setup);
  const base = parseMetricKey(key)?.metric ?? key;
  const prompt = isQty(cell.prompt) ? cell.prompt.value : undefined;
  const thr = cell.throughput;
  switch (base) {
    case 'ttft':
      return prompt
        ? `≥ ${time(b.prefillFloor(prompt))} prefill floor (2·params·tokens/peak)`
        : 'add "prompt:" for the prefill floor';
    case 'tpot':
    case 'step':
      return `≥ ${time(b.decodeFloor)} decode step floor (weights / bandwidth)`;
    case 'per_user':
      return `≤ ${short(b.ceiling)} tok/s ceiling (bandwidth / weights)`;
    case 'throughput':
      if (isQty(thr) && thr.dims.request) return '';
    // falls through
    case 'output_throughput':
    case 'total_throughput':
      return `≤ ${short(b.computeRoof)} tok/s compute roof (peak / 2·params)`;
    case 'kv_pool':
      return `physics pool ${short(b.pool.pool_tokens)} tokens`;
    case 'available_kv':
      return `physics ${short(b.pool.available_kv_gib)} GiB`;
    default:
      return '';
  }
}

const REQUEST_RATES = {
  request_throughput: 'completed',
  rate: 'offered',
  capacity: 'capacity',
} as const;
const TOKEN_RATES = { output_throughput: 'output', total_throughput: 'total', per_user: 'per_user' } as const;

/**
 * What a record states: one fact per typed number, each at its own key (the path a finding stands
 * on), at the record's point (batch, concurrency, rate, loop) and with its `source:`.
 */
/** The keys of a record that are token rates of the whole server (a cost per token reads from them). */
const TOKEN_RATE_KEYS = new Set(['throughput', 'output_throughput', 'total_throughput']);

export function recordFacts(cell: Record<string, unknown>): Fact[] {
  const n = (k: string) => (isQty(cell[k]) ? (cell[k] as Quantity).value : undefined);
  const num = (k: string) => (typeof cell[k] === 'number' ? (cell[k] as number) : undefined);
  const point: Point = {};
  if (num('batch') !== undefined) point.batch = num('batch');
  if (num('concurrency') !== undefined) point.concurrency = num('concurrency');
  if (n('rate') !== undefined) point.req_s = n('rate');
  const load = cell.load;
  point.loop =
    load === 'closed' || load === 'open'
      ? load
      : point.concurrency !== undefined && point.req_s === undefined
        ? 'closed'
        : point.req_s !== undefined
          ? 'open'
          : undefined;
  if (point.loop === undefined) delete point.loop;
  const base = {
    ...(Object.keys(point).length ? { point } : {}),
    ...(typeof cell.source === 'string' ? { source: cell.source } : {}),
  };
  const out: Fact[] = [];
  for (const [key, raw] of Object.entries(cell)) {
    if (!isQty(raw)) continue;
    const v = raw.value;
    const at = [key];
    const common = { ...base, ...(raw.unit ? { written_in: raw.unit } : {}) };
    const metric = parseMetricKey(key);
    const d = dimName(raw);
    if (metric && d === 'time') out.push({ kind: 'latency', ...metric, ms: v * 1e3, at, ...common });
    else if (key === 'throughput')
      out.push(
        d === 'request_rate'
          ? { kind: 'request-rate', metric: 'completed', req_s: v, at, ...common }
          : { kind: 'throughput', metric: 'aggregate', tok_s: v, at, ...common },
      );
    else if (key in TOKEN_RATES)
      out.push({ kind: 'throughput', metric: TOKEN_RATES[key as keyof typeof TOKEN_RATES], tok_s: v, at, ...common });
    else if (key in REQUEST_RATES)
      out.push({
        kind: 'request-rate',
        metric: REQUEST_RATES[key as keyof typeof REQUEST_RATES],
        req_s: v,
        at,
        ...common,
      });
    else if (key === 'prompt' || key === 'output') out.push({ kind: 'tokens', metric: key, tokens: v, at, ...common });
    else if (key === 'kv_pool') out.push({ kind: 'kv-pool', tokens: v, at, ...common });
    else if (key === 'available_kv') out.push({ kind: 'kv-pool', available_bytes: v, at, ...common });
    else if (key === 'prefix_cache_hit_rate') out.push({ kind: 'prefix-hits', rate: v, at, ...common });
  }
  const sampled = ['sampler', 'top_p', 'top_k', 'request_seed'].filter((k) => cell[k] !== undefined);
  if (sampled.length) {
    const knob = (x: unknown) => (x === undefined ? {} : x);
    out.push({
      kind: 'sampling',
      ...(typeof cell.sampler === 'string' ? { sampler: cell.sampler } : {}),
      ...(cell.top_p !== undefined ? { top_p: knob(cell.top_p) as number | string | boolean | null } : {}),
      ...(cell.top_k !== undefined ? { top_k: knob(cell.top_k) as number | string | boolean | null } : {}),
      ...(cell.request_seed !== undefined ? { request_seed: cell.request_seed as number | boolean } : {}),
      at: [sampled[0]],
      ...base,
    });
  }
  return out;
}

export const recordKind: KindModule<Cell> = {
  key: 'record',
  summary:
    'record: NAME — numbers measured elsewhere (ttft, tpot, throughput, kv_pool …), typed with units and checked against physics',
  schema,
  // The physics rules read a record's facts as it is typed: no analyze of its own.
  statedFacts: (cell) => recordFacts(cell),
  // A record's facts come from its keys, so a notebook saved before facts existed restates them from the cell.
  migrate: (_values, cell) => recordFacts(cell),
  async run(cell, ctx) {
    const perHour = ctx.setup ? setupPricePerHour(ctx.setup) : undefined;
    const values: Record<string, unknown> = {};
    const rows: { key: string; value: string; physics: string }[] = [];
    for (const [key, v] of Object.entries(cell)) {
      if (key === 'record' || v === undefined) continue;
      if (isQty(v)) {
        for (const [name, n] of recordValue(key, v)) values[name] = n;
        const priced =
          perHour !== undefined && TOKEN_RATE_KEYS.has(key) && dimName(v) === 'token_rate'
            ? ` (${fmtDollarsPerMtok(dollarsPerMtok(perHour, v.value))} at ${priceWords(ctx.setup!)})`
            : '';
        rows.push({
          key,
          value: `${shown(v)}${priced}`,
          physics: physicsNote(key, cell as Record<string, unknown>, ctx.setup),
        });
      } else {
        values[key] = v;
        rows.push({ key, value: v === null ? 'none' : String(v), physics: '' });
      }
    }
    const setup = ctx.setup;
    const table = tableOutput(
      `record ${cell.record}${setup ? ` — ${setup.model.name} ${setup.weights} on ${setup.gpu.id}` : ''}`,
      [
        { key: 'key', label: 'quantity', align: 'left' },
        { key: 'value', label: 'measured', align: 'right' },
        { key: 'physics', label: 'physics', align: 'left' },
      ],
      rows,
      setup ? undefined : 'No setup above: add one (gpu, model) to check these numbers against physics.',
    );
    const facts = recordFacts(cell);
    // A priced setup: each token rate typed in also states what a token cost at it.
    if (perHour !== undefined)
      for (const f of [...facts])
        if (f.kind === 'throughput' && f.metric !== 'per_user')
          facts.push(
            ...costFacts(
              {
                usd_per_hour: perHour,
                [f.metric === 'total' ? 'usd_per_mtok_total' : 'usd_per_mtok_output']: dollarsPerMtok(perHour, f.tok_s),
              },
              { point: f.point, at: f.at, source: f.source },
            ),
          );
    return { values, facts, outputs: [table] };
  },
};
