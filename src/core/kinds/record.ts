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
import { z } from 'zod';
import { bounds, short, time } from '../checks/common';
import { tableOutput } from '../engine/outputs';
import { quantity } from '../engine/schema';
import type { KindModule, Setup } from '../engine/types';
import { dimName, fmtBytes, fmtNum, GiB, type Quantity } from '../units';

const t = () => quantity('time', { positive: true }).optional();
const timeKeys = {} as Record<string, ReturnType<typeof t>>;
for (const k of ['ttft', 'tpot', 'itl', 'e2e'])
  for (const p of ['', '_p50', '_p90', '_p99']) timeKeys[`${k}${p}`] = t();

const offOrNumber = z.union([z.number(), z.null(), z.literal(false), z.enum(['none', 'off'])]);

const schema = z
  .object({
    record: z.union([z.string(), z.number()]).transform(String),
    ...(timeKeys as Record<`${'ttft' | 'tpot' | 'itl' | 'e2e'}${'' | '_p50' | '_p90' | '_p99'}`, ReturnType<typeof t>>),
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
  })
  .strict();

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
  const base = key.replace(/_p\d\d$/, '');
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

export const recordKind: KindModule<Cell> = {
  key: 'record',
  summary:
    'record: NAME — numbers measured elsewhere (ttft, tpot, throughput, kv_pool …), typed with units and checked against physics',
  schema,
  // The physics rules read record cells statically (checks/, kind "record"): no analyze of its own.
  async run(cell, ctx) {
    const values: Record<string, unknown> = {};
    const rows: { key: string; value: string; physics: string }[] = [];
    for (const [key, v] of Object.entries(cell)) {
      if (key === 'record' || v === undefined) continue;
      if (isQty(v)) {
        for (const [name, n] of recordValue(key, v)) values[name] = n;
        rows.push({ key, value: shown(v), physics: physicsNote(key, cell as Record<string, unknown>, ctx.setup) });
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
    return { values, outputs: [table] };
  },
};
