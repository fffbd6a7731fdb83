/**
 * An audit from a `/metrics` snapshot: the same facts the log gives, from vLLM's counters and
 * gauges. One snapshot holds lifetime totals, so hit rates here are since the server started;
 * a per-point rate needs two snapshots (the bench cell takes them around each point).
 */
import { getGlobalDispatcher } from 'undici';
import { GET_CAPS, getText } from '../bench/client';
import { parsePrometheusText, pick, snapshotOf } from '../bench/prometheus';
import type { Setup } from '../engine/types';
import { finding, type CellPath, type Finding } from '../findings';
import { kvPool } from '../physics/kvPool';
import { fmtNum } from '../units';
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

export function metricsFindings(
  f: MetricsFacts,
  setup: Setup | undefined,
  hitThresholdPct: number,
  at: CellPath,
): Finding[] {
  const out: Finding[] = [];
  if (f.pool_tokens !== undefined && setup) {
    const pred = kvPool(setup, {
      gpuMemoryUtilization:
        typeof setup.server?.gpu_memory_utilization === 'number' ? setup.server.gpu_memory_utilization : undefined,
    });
    const r = f.pool_tokens / pred.pool_tokens;
    const msg = `KV pool from vllm:cache_config_info (${fmtNum(f.gpu_blocks!, 0)} blocks × ${f.block_size} = ${fmtNum(f.pool_tokens, 0)} tokens) against the prediction's ${fmtNum(pred.pool_tokens, 0)} tokens: ratio ${fmtNum(r, 4)}.`;
    out.push(
      Math.abs(r - 1) <= 0.02
        ? finding('info', 'audit-kv-pool-matches', msg, at)
        : finding('warning', 'audit-kv-pool-mismatch', msg, at, {
            fix: 'set gpu_memory_utilization and kv_cache in the setup to what the server ran',
          }),
    );
  }
  if (f.prefix_hit_pct !== undefined && f.prefix_hit_pct > hitThresholdPct) {
    out.push(
      finding(
        'warning',
        'audit-prefix-cache-contamination',
        `Prefix-cache hit rate since the server started: ${fmtNum(f.prefix_hit_pct, 1)}% (${f.prefix_metric}). Measurements on this server were partly served from the cache.`,
        at,
        {
          fix: 'take a snapshot before and after each point and use Δhits/Δqueries per point (the bench cell does); use a fresh seed per point',
        },
      ),
    );
  }
  if (f.preemptions)
    out.push(
      finding(
        'warning',
        'audit-preemptions',
        `${fmtNum(f.preemptions, 0)} preemptions since the server started (vllm:num_preemptions_total).`,
        at,
      ),
    );
  if (f.kv_usage_pct !== undefined && f.kv_usage_pct >= 95 && (f.waiting ?? 0) > 0)
    out.push(
      finding(
        'warning',
        'audit-kv-cache-full',
        `KV cache at ${fmtNum(f.kv_usage_pct, 1)}% with ${f.waiting} requests waiting at the snapshot.`,
        at,
      ),
    );
  return out;
}
