/**
 * What a bench run states, read from its values (the same function reads a notebook saved before
 * facts existed): per point, every latency stat it measured, throughputs, goodput, Little's law,
 * the prefix-cache hit rate and the request lengths; for the run, the RTT, the seeds and the
 * sampling knobs. Kept apart from bench/report.ts so that reading a saved notebook loads no client.
 */
import type { Fact, Point } from '../facts';
import { fin, latencyFacts } from '../facts/make';
import { LATENCY_METRICS, type LatencyMetric } from '../facts/stat';

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

export function benchFacts(values: Record<string, unknown>, cell: unknown): Fact[] {
  const c = isObj(cell) ? cell : {};
  const source = 'client';
  const out: Fact[] = [];
  const loop = values.mode === 'open' || values.mode === 'closed' ? values.mode : undefined;
  const points = (Array.isArray(values.points) ? values.points : []).filter(isObj);
  const cellTokens = (k: string) => (isObj(c[k]) ? fin(c[k].value) : fin(c[k]));
  const input = fin(values.input_tokens) ?? cellTokens('input');
  const output = fin(values.output_tokens) ?? cellTokens('output');
  points.forEach((p, i) => {
    const concurrency = fin(p.concurrency);
    const rate = fin(p.rate);
    const open = loop === 'open' || (loop === undefined && rate !== undefined && concurrency === undefined);
    const point: Point = {
      ...(loop ? { loop } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(rate !== undefined ? { req_s: rate } : {}),
    };
    const key = open ? 'rate' : 'concurrency';
    const at = [key, i];
    const common = { point, at, source };
    for (const m of LATENCY_METRICS as readonly LatencyMetric[]) out.push(...latencyFacts(m, p[`${m}_ms`], common));
    const put = (f: Fact | undefined) => f && out.push(f);
    const tok = (metric: 'output' | 'total', x: unknown) => {
      const v = fin(x);
      return v === undefined ? undefined : ({ kind: 'throughput', metric, tok_s: v, ...common } as Fact);
    };
    const req = (metric: 'completed' | 'goodput', x: unknown) => {
      const v = fin(x);
      return v === undefined ? undefined : ({ kind: 'request-rate', metric, req_s: v, ...common } as Fact);
    };
    put(tok('output', p.output_throughput));
    put(tok('total', p.total_token_throughput));
    put(req('completed', p.request_throughput));
    put(req('goodput', p.goodput));
    if (open && rate !== undefined) out.push({ kind: 'request-rate', metric: 'offered', req_s: rate, ...common });
    const little = isObj(p.little) ? p.little : {};
    const predicted = fin(little.lambda_w);
    const observed = fin(little.observed_in_flight);
    if (predicted !== undefined && observed !== undefined)
      out.push({ kind: 'little', predicted, observed, ...optional('requests', fin(p.completed)), ...common });
    const server = isObj(p.server) ? p.server : {};
    const hit = fin(server.prefix_hit_rate);
    if (hit !== undefined) out.push({ kind: 'prefix-hits', rate: hit, ...common, source: 'server /metrics' });
    else if (fin(p.cached_share) !== undefined)
      out.push({ kind: 'prefix-hits', rate: fin(p.cached_share)!, ...common, source: 'usage cached tokens' });
    if (input !== undefined) out.push({ kind: 'tokens', metric: 'prompt', tokens: input, ...common });
    if (output !== undefined) out.push({ kind: 'tokens', metric: 'output', tokens: output, ...common });
  });
  const rtt = isObj(values.rtt_ms) ? fin(values.rtt_ms.median) : undefined;
  if (rtt !== undefined) out.push({ kind: 'latency', metric: 'rtt', stat: 'p50', ms: rtt, source });
  out.push(...benchCellFacts(c));
  return out;
}

const optional = <K extends string>(k: K, v: number | undefined) => (v === undefined ? {} : { [k]: v });

const listLen = (v: unknown) => (Array.isArray(v) ? v.length : v === undefined || v === null ? 0 : 1);

/**
 * What a bench (or serving) cell's own keys state before it runs: how its prompts are seeded over
 * how many points, and the sampling knobs its requests carry.
 */
export function benchCellFacts(cell: unknown): Fact[] {
  const c = isObj(cell) ? cell : {};
  const out: Fact[] = [];
  const points = listLen(c.concurrency) + listLen(c.rate);
  const caching = typeof c.prefix_caching === 'boolean' ? { prefix_caching: c.prefix_caching } : {};
  if (typeof c.seed === 'number')
    out.push({ kind: 'seed', mode: 'fixed', value: c.seed, points, ...caching, at: ['seed'] });
  else if (c.seed === 'per-point') out.push({ kind: 'seed', mode: 'per-point', points, ...caching, at: ['seed'] });
  const knob = (k: string) => {
    const v = c[k];
    return typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean' || v === null ? v : undefined;
  };
  if (knob('top_p') !== undefined || knob('top_k') !== undefined)
    out.push({
      kind: 'sampling',
      ...(knob('top_p') !== undefined ? { top_p: knob('top_p') } : {}),
      ...(knob('top_k') !== undefined ? { top_k: knob('top_k') } : {}),
      ...(knob('request_seed') !== undefined ? { request_seed: knob('request_seed') } : {}),
      at: ['top_p' in c ? 'top_p' : 'top_k'],
      source: 'bench requests',
    });
  return out;
}
