/**
 * What a bench run states, read from its values (the same function reads a notebook saved before
 * facts existed): per point, every latency stat it measured, throughputs, goodput, Little's law,
 * the prefix-cache hit rate and the request lengths; for the run, the RTT, the seeds and the
 * sampling knobs. Kept apart from bench/report.ts so that reading a saved notebook loads no client.
 */
import { MAX_ERROR_MESSAGES, STOP_REASONS, type Fact, type FactOf, type Point } from '../facts';
import { costFacts } from '../cost';
import { fin, latencyFacts, statsOf } from '../facts/make';
import { LATENCY_METRICS, type LatencyMetric } from '../facts/stat';
import { ciFacts } from '../bench/meanKeys';
import { isObj } from '../values';

/** The cell keys a point's load comes from, most specific first (the first one the cell has). */
const OPEN_LOAD_KEYS = ['rate', 'rate_schedule', 'trace', 'capacity', 'bench'] as const;
const CLOSED_LOAD_KEYS = ['concurrency', 'sessions', 'capacity', 'bench'] as const;

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
    // The key that made the point, so its findings sit on that line: a rate or concurrency list
    // item (a repeated point at its load's place in the cell, not at its run's), else the schedule,
    // trace or capacity search that generated it.
    const key = (open ? OPEN_LOAD_KEYS : CLOSED_LOAD_KEYS).find((k) => k in c) ?? (open ? 'rate' : 'concurrency');
    const at = Array.isArray(c[key]) ? [key, fin(p.slot) ?? i] : [key];
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
    out.push(...costFacts(isObj(p.cost) ? p.cost : undefined, common));
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
    out.push(...pointQualityFacts(p, common));
    const started = typeof p.started_at === 'string' ? Date.parse(p.started_at) : NaN;
    if (Number.isFinite(started) && started >= 0) out.push({ kind: 'measured-at', epoch_ms: started, ...common });
    // What the server's engine did over the point (explain/causes.ts names gaps from it).
    const eng = (metric: FactOf<'engine'>['metric'], v: unknown, src = 'server /metrics') => {
      const x = fin(v);
      if (x !== undefined && x >= 0) out.push({ kind: 'engine', metric, value: x, ...common, source: src });
    };
    eng('preemptions', server.preemptions_delta);
    eng('waiting_peak', server.waiting_peak);
    eng('running_peak', server.running_peak);
    eng('kv_usage_peak', server.kv_usage_peak);
    const late = isObj(server.sim_lateness) ? server.sim_lateness : undefined;
    if (late && isObj(late.over_share)) eng('sim_late_share', late.over_share['10'], 'simulator /metrics');
  });
  if (Array.isArray(values.means)) out.push(...ciFacts(values.means, loop, loop === 'closed' ? 'concurrency' : 'rate'));
  // A probe that is not quoted (it exceeds a TTFT it should be inside) states no RTT for the rules to read.
  const unreliable = isObj(values.rtt_ms) && values.rtt_ms.reliable === false;
  const rtt = isObj(values.rtt_ms) && !unreliable ? fin(values.rtt_ms.median) : undefined;
  if (rtt !== undefined) out.push({ kind: 'latency', metric: 'rtt', stat: 'p50', ms: rtt, source });
  if (isObj(values.rtt_ms) && unreliable)
    out.push({
      kind: 'rtt-probe',
      reliable: false,
      ...str('reason', values.rtt_ms.unreliable_reason),
      ...optional('probes', fin(values.rtt_ms.n)),
      source,
    });
  const v = isObj(values.vocab) ? values.vocab : undefined;
  if (v && fin(v.size) !== undefined && (v.source === 'server' || v.source === 'setup'))
    out.push({
      kind: 'vocab',
      size: fin(v.size)!,
      from: v.source,
      ...optional('server_size', fin(v.server)),
      ...optional('setup_size', fin(v.setup)),
      source,
    });
  for (const text of Array.isArray(values.notes) ? values.notes : [])
    if (typeof text === 'string') out.push({ kind: 'note', text, source });
  const st = isObj(values.stopped) ? values.stopped : undefined;
  if (st && typeof st.message === 'string' && STOP_REASONS.includes(st.reason as never))
    out.push({
      kind: 'stopped',
      reason: st.reason as (typeof STOP_REASONS)[number],
      message: st.message,
      ...optional('after_point', fin(st.afterPoint)),
      at: st.reason === 'failure-policy' && c.on_failure !== undefined ? ['on_failure'] : [],
      source,
    });
  out.push(...benchCellFacts(c));
  return out;
}

const str = <K extends string>(k: K, v: unknown) => (typeof v === 'string' ? { [k]: v } : {});
const nums = (o: unknown): Record<string, number> =>
  Object.fromEntries(Object.entries(isObj(o) ? o : {}).filter((e): e is [string, number] => (fin(e[1]) ?? -1) >= 0));

/**
 * What a point's cross-checks measured (bench/crosscheck.ts), as facts the check rules read: how
 * its requests ended, the server's usage against the request, the server's counters against the
 * client's, the peak in flight, the client's lags, chunks read together, prefix-cache contamination.
 */
function pointQualityFacts(
  p: Record<string, unknown>,
  common: { point: Point; at: (string | number)[]; source: string },
): Fact[] {
  const out: Fact[] = [];
  const completed = fin(p.completed);
  const failed = fin(p.failed);
  if (completed !== undefined && failed !== undefined)
    out.push({
      kind: 'requests',
      sent: completed + failed,
      failed,
      ...optional('retried', fin(p.retried)),
      errors: nums(p.errors),
      ...str('first_error', p.first_error),
      ...str('first_retry_error', p.first_retry_error),
      ...(Array.isArray(p.error_messages)
        ? { messages: p.error_messages.filter((x): x is string => typeof x === 'string').slice(0, MAX_ERROR_MESSAGES) }
        : {}),
      ...common,
    });
  const u = isObj(p.usage) ? p.usage : undefined;
  if (
    u &&
    fin(u.with_usage) !== undefined &&
    fin(u.requested_input) !== undefined &&
    fin(u.requested_output) !== undefined
  )
    out.push({
      kind: 'usage',
      with_usage: fin(u.with_usage)!,
      prompt_tokens_requested: fin(u.requested_input)!,
      ...optional('prompt_tokens_mean', fin(u.prompt_tokens_mean)),
      output_tokens_requested: fin(u.requested_output)!,
      ...optional('output_tokens_mean', fin(u.completion_tokens_mean)),
      output_mismatched: fin(u.completion_mismatch) ?? 0,
      fewer_tokens_than_chunks: fin(u.fewer_tokens_than_chunks) ?? 0,
      ...optional('tokens_per_chunk', fin(u.tokens_per_chunk)),
      bad_usage: fin(u.bad_usage) ?? 0,
      ...common,
    });
  const sc = isObj(p.server_counters) ? p.server_counters : undefined;
  if (sc && typeof sc.server === 'string') {
    const count = (x: unknown) =>
      isObj(x) && fin(x.client) !== undefined && fin(x.server) !== undefined
        ? { client_tokens: fin(x.client)!, server_tokens: fin(x.server)! }
        : undefined;
    const prompt = count(sc.prompt);
    const generation = count(sc.generation);
    out.push({
      kind: 'server-counters',
      server: sc.server,
      prompt_counter: sc.prompt_counter === 'processed' ? 'processed' : 'all',
      ...(prompt ? { prompt } : {}),
      ...(generation ? { generation } : {}),
      unknown_requests: fin(sc.unknown_requests) ?? 0,
      ...common,
    });
  }
  const load = isObj(p.load) ? p.load : undefined;
  if (load && fin(load.peak_in_flight) !== undefined && fin(load.requests) !== undefined)
    out.push({
      kind: 'in-flight',
      peak: fin(load.peak_in_flight)!,
      requests: fin(load.requests)!,
      ...optional('concurrency', fin(load.concurrency)),
      ...common,
    });
  for (const { stat, ms } of statsOf(p.client_loop_lag_ms, true))
    out.push({ kind: 'client-lag', metric: 'event-loop', stat, ms, ...common });
  if (isObj(p.dispatch_lag_ms) && (fin(p.dispatch_lag_ms.n) ?? 0) > 0)
    for (const { stat, ms } of statsOf(p.dispatch_lag_ms))
      out.push({ kind: 'client-lag', metric: 'dispatch', stat, ms, ...common });
  const b = isObj(p.itl_read_together) ? p.itl_read_together : undefined;
  if (b && fin(b.share) !== undefined && fin(b.gaps) !== undefined && fin(b.under_ms) !== undefined)
    out.push({ kind: 'read-bursts', share: fin(b.share)!, gaps: fin(b.gaps)!, under_ms: fin(b.under_ms)!, ...common });
  if (p.contaminated === true && typeof p.contamination === 'string')
    out.push({ kind: 'contamination', reason: p.contamination, ...common });
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
