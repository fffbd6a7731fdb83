/**
 * An audit from a `/metrics` snapshot: the same facts the log gives, from vLLM's counters and
 * gauges (stated as a metrics-snapshot fact, audit/facts.ts; the check rules make the findings). One snapshot holds lifetime totals, so hit rates here are since the server started;
 * a per-point rate needs two snapshots (the bench cell takes them around each point).
 */
import { getGlobalDispatcher } from 'undici';
import { GET_CAPS, getText } from '../bench/client';
import { parsePrometheusText, pick, snapshotOf } from '../bench/prometheus';
import { redactUrl } from '../urls';

export interface MetricsFacts {
  url: string;
  pool_tokens?: number;
  block_size?: number;
  gpu_blocks?: number;
  prefix_hits?: number;
  prefix_queries?: number;
  /** Lifetime hits / queries, percent. */
  prefix_hit_pct?: number;
  prefix_metric?: string;
  preemptions?: number;
  running?: number;
  waiting?: number;
  kv_usage_pct?: number;
  prompt_tokens?: number;
  generation_tokens?: number;
  requests_success?: number;
  samples: number;
  bad_lines: number;
}

export function metricsFactsFromText(text: string, url: string): MetricsFacts {
  const { families, bad } = parsePrometheusText(text);
  const snap = snapshotOf(text);
  const f: MetricsFacts = { url, samples: families.reduce((a, x) => a + x.samples.length, 0), bad_lines: bad };
  const cfg = families.find((x) => x.name === 'vllm:cache_config_info')?.samples[0];
  if (cfg) {
    const blocks = Number(cfg.labels.num_gpu_blocks);
    const bs = Number(cfg.labels.block_size);
    if (Number.isFinite(blocks) && Number.isFinite(bs)) {
      f.gpu_blocks = blocks;
      f.block_size = bs;
      f.pool_tokens = blocks * bs;
    }
  }
  const h = pick(snap, 'prefixHits');
  const q = pick(snap, 'prefixQueries');
  if (h && q) {
    f.prefix_hits = h.value;
    f.prefix_queries = q.value;
    f.prefix_metric = `${h.name} / ${q.name}`;
    if (q.value > 0) f.prefix_hit_pct = (100 * h.value) / q.value;
  } else {
    const g = pick(snap, 'prefixHitRateGauge');
    if (g) {
      f.prefix_hit_pct = g.value <= 1 ? g.value * 100 : g.value;
      f.prefix_metric = g.name;
    }
  }
  const v = (k: Parameters<typeof pick>[1]) => pick(snap, k)?.value;
  f.preemptions = v('preemptions');
  f.running = v('running');
  f.waiting = v('waiting');
  const kv = v('kvUsage');
  if (kv !== undefined) f.kv_usage_pct = kv <= 1.0001 ? kv * 100 : kv;
  f.prompt_tokens = v('promptTokens');
  f.generation_tokens = v('generationTokens');
  f.requests_success = snap.get('vllm:request_success_total');
  return f;
}

/**
 * GET a /metrics URL through the bench's capped getText: at most 10 s for the whole answer and
 * GET_CAPS['/metrics'] bytes (an endless body is cut off, saying which cap it hit).
 */
export async function fetchMetrics(url: string, signal?: AbortSignal): Promise<string> {
  const u = new URL(url);
  const res = await getText(
    getGlobalDispatcher(),
    u.origin,
    `${u.pathname}${u.search}`,
    undefined,
    10_000,
    GET_CAPS['/metrics'],
    undefined,
    signal,
  );
  if (res.status !== 200) throw new Error(`GET ${redactUrl(url)} answered ${res.status}: ${res.body.slice(0, 120)}`);
  return res.body;
}
