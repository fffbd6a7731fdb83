/**
 * Bench metrics on hand-built records (vLLM's definitions), the columnar record format, and the
 * hand-written Prometheus parser cross-checked against an independent one.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { sloOf } from '../../src/core/facts/stat';
import fc from 'fast-check';
import {
  distribution,
  percentile,
  requestLatencies,
  summarizeRecords,
  toVllmResult,
  type RequestRecord,
} from '../../src/core/bench/metrics';
import { evidence, parsePrometheusText, snapshotOf } from '../../src/core/bench/prometheus';
import { fromColumnar, toColumnar } from '../../src/core/bench/records';
import { interArrivals, pointSeed, promptSource } from '../../src/core/bench/prompts';

const require = createRequire(import.meta.url);
const parseIndependent: (text: string) => {
  name: string;
  type: string;
  metrics: {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }[];
}[] = require('parse-prometheus-text-format');

const rec = (
  id: number,
  sent: number,
  chunks: number[],
  out: number,
  extra: Partial<RequestRecord> = {},
): RequestRecord => ({
  id,
  scheduledMs: sent,
  sentMs: sent,
  chunkMs: chunks,
  endMs: chunks.length ? chunks[chunks.length - 1] + 0.5 : sent + 1,
  promptTokens: 100,
  outputTokens: out,
  ok: true,
  ...extra,
});

test('percentiles interpolate linearly like numpy', () => {
  // numpy.percentile([1, 2, 3, 4], 90) = 3.7; [1..10] p99 = 9.91; median of an even count is the mean of the middle two
  assert.equal(Math.round(percentile([4, 1, 3, 2], 90) * 1e9) / 1e9, 3.7);
  assert.equal(Math.round(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99) * 1e9) / 1e9, 9.91);
  const d = distribution([1, 2, 3, 4], [90, 99]);
  assert.equal(d.median, 2.5);
  assert.equal(d.mean, 2.5);
  assert.ok(Math.abs(d.std - Math.sqrt(1.25)) < 1e-12);
  assert.ok(Number.isNaN(distribution([]).mean));
});

test('TTFT, TPOT, ITL and E2E follow the vLLM definitions', () => {
  // Request 0: sent at 0, chunks at 50, 60, 70, 80 → TTFT 50, E2E 80, TPOT (80-50)/(4-1) = 10, ITLs 10,10,10
  // Request 1: sent at 100, chunks at 200, 220 → TTFT 100, E2E 120, TPOT 20/1 = 20, ITL 20
  const rs = [rec(0, 0, [50, 60, 70, 80], 4), rec(1, 100, [200, 220], 2)];
  const m = summarizeRecords(rs, { percentiles: [99], slo: sloOf({ ttft_p99: 60, tpot_p99: 50 }) });
  assert.equal(m.completed, 2);
  assert.equal(m.ttft_ms.mean, 75);
  assert.equal(m.tpot_ms.mean, 15);
  assert.deepEqual([m.itl_ms.n, m.itl_ms.median, m.itl_ms.max], [4, 10, 20]);
  assert.equal(m.e2e_ms.mean, 100);
  // Duration: 0 → last end 220.5 ms; output tokens 6; input 200.
  assert.ok(Math.abs(m.duration_s - 0.2205) < 1e-12);
  assert.ok(Math.abs(m.output_throughput - 6 / 0.2205) < 1e-9);
  assert.ok(Math.abs(m.total_token_throughput - 206 / 0.2205) < 1e-9);
  // Only request 0 meets TTFT ≤ 60 ms.
  assert.equal(m.good_requests, 1);
  assert.equal(m.slo_met, false);
  const v = toVllmResult(m);
  for (const k of [
    'mean_ttft_ms',
    'median_ttft_ms',
    'p99_ttft_ms',
    'mean_tpot_ms',
    'p99_itl_ms',
    'median_e2el_ms',
    'output_throughput',
    'request_throughput',
    'total_token_throughput',
    'completed',
    'duration',
    'request_goodput',
  ])
    assert.ok(k in v, `missing ${k}`);
  assert.equal(v.mean_ttft_ms, 75);
});

test('open loop latencies count from the scheduled send time', () => {
  const r = rec(0, 0, [50, 60], 2, { scheduledMs: 0, sentMs: 30 });
  assert.equal(requestLatencies(r, 'sent').ttft, 20);
  assert.equal(requestLatencies(r, 'scheduled').ttft, 50);
});

test('failures are counted, soft errors are not failures, Little closure uses the observed in-flight', () => {
  const rs = [
    rec(0, 0, [10, 20], 2),
    rec(1, 0, [], 0, { ok: false, errorKind: 'timeout', endMs: 30 }),
    rec(2, 0, [10, 20], 2, { errorKind: 'missing-usage' }),
  ];
  const m = summarizeRecords(rs, { observedInFlight: 2, durationMs: 40 });
  assert.deepEqual([m.completed, m.failed], [2, 1]);
  assert.equal(Math.round(m.failure_rate * 1000) / 1000, 0.333);
  assert.deepEqual(m.errors, { timeout: 1, 'missing-usage': 1 });
  // λ = 2 / 0.04 s = 50/s, W = 20 ms → λW = 1; observed 2 → error −50%.
  assert.ok(Math.abs(m.little.predicted_in_flight - 1) < 1e-12);
  assert.ok(Math.abs(m.little.error! + 0.5) < 1e-12);
});

test('columnar records round-trip to the microsecond', () => {
  const arb = fc.array(
    fc.record({
      sent: fc.double({ min: 0, max: 1e6, noNaN: true }),
      gaps: fc.array(fc.double({ min: 0, max: 1e4, noNaN: true }), { maxLength: 20 }),
      ok: fc.boolean(),
      kind: fc.constantFrom(undefined, 'timeout', 'reset', 'missing-usage'),
    }),
    { maxLength: 20 },
  );
  fc.assert(
    fc.property(arb, (xs) => {
      const rs: RequestRecord[] = xs.map((x, i) => {
        const chunks: number[] = [];
        let t = x.sent;
        for (const g of x.gaps) chunks.push((t += g));
        return {
          id: i,
          scheduledMs: x.sent,
          sentMs: x.sent,
          chunkMs: chunks,
          endMs: t + 1,
          ok: x.ok,
          ...(x.kind ? { errorKind: x.kind as any, errorMessage: 'm' } : {}),
        };
      });
      const back = fromColumnar(JSON.parse(JSON.stringify(toColumnar(rs))));
      assert.equal(back.length, rs.length);
      for (let i = 0; i < rs.length; i++) {
        assert.equal(back[i].chunkMs.length, rs[i].chunkMs.length);
        for (let j = 0; j < rs[i].chunkMs.length; j++)
          assert.ok(Math.abs(back[i].chunkMs[j] - rs[i].chunkMs[j]) <= 0.0005 + 1e-9 * rs[i].chunkMs[j]);
        assert.equal(back[i].errorKind, rs[i].errorKind);
      }
    }),
    { numRuns: 100 },
  );
});

test('per-point seeds give different prompts; a fixed seed gives the same; ids stay inside the vocabulary', () => {
  const a = promptSource(pointSeed(42, 0, false), 64, 151936).next() as number[];
  const b = promptSource(pointSeed(42, 1, false), 64, 151936).next() as number[];
  const c = promptSource(pointSeed(42, 1, true), 64, 151936).next() as number[];
  const d = promptSource(pointSeed(42, 5, true), 64, 151936).next() as number[];
  assert.equal(a.length, 64);
  assert.notDeepEqual(a, b);
  assert.deepEqual(c, d);
  assert.ok(a.every((x) => Number.isInteger(x) && x >= 0 && x < 151936));
});

test('Poisson and gamma inter-arrival times have the requested mean rate', () => {
  for (const burst of [1, 0.5, 4]) {
    const g = interArrivals(7, 10, 20000, burst);
    const mean = g.reduce((s, x) => s + x, 0) / g.length;
    assert.ok(Math.abs(mean - 0.1) / 0.1 < 0.03, `burstiness ${burst}: mean gap ${mean}`);
    // Coefficient of variation of a gamma with shape k is 1/√k.
    const sd = Math.sqrt(g.reduce((s, x) => s + (x - mean) ** 2, 0) / g.length);
    assert.ok(Math.abs(sd / mean - 1 / Math.sqrt(burst)) < 0.05, `burstiness ${burst}: cv ${sd / mean}`);
  }
});

const VLLM_TEXT = `# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 204800.0
vllm:prefix_cache_queries_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7e+09
# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 1024.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 32.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 30.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.42
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.05",model_name="Qwen/Qwen3-8B"} 3.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="Qwen/Qwen3-8B"} 10.0
vllm:time_to_first_token_seconds_count{model_name="Qwen/Qwen3-8B"} 10.0
vllm:time_to_first_token_seconds_sum{model_name="Qwen/Qwen3-8B"} 1.25
# HELP weird_label a label with an escaped quote and a newline
# TYPE weird_label gauge
weird_label{path="a\\"b\\nc",x="1"} -Inf
`;

test('the Prometheus parser agrees with an independent parser', () => {
  const ours = parsePrometheusText(VLLM_TEXT);
  assert.equal(ours.bad, 0);
  // Compare sample by sample: (name, labels, value), in order.
  const key = (name: string, labels: Record<string, string>, value: number) =>
    `${name}${JSON.stringify(Object.entries(labels).sort())} ${value}`;
  const num = (v: string | undefined) => (v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v));
  // The independent parser keeps only the buckets of a histogram (no labels, no _count/_sum), so
  // those are compared by bucket bound and value alone.
  const mine = ours.families
    .flatMap((f) =>
      f.samples.map((s) =>
        f.type === 'histogram'
          ? s.name.endsWith('_bucket')
            ? key(s.name, { le: s.labels.le }, s.value)
            : ''
          : key(s.name, s.labels, s.value),
      ),
    )
    .filter(Boolean)
    .sort();
  const theirs = parseIndependent(VLLM_TEXT)
    .flatMap((fam) =>
      fam.type === 'HISTOGRAM'
        ? fam.metrics.flatMap((m) =>
            Object.entries(m.buckets!).map(([le, v]) => key(`${fam.name}_bucket`, { le }, num(v))),
          )
        : fam.metrics.map((m) => key(fam.name, m.labels ?? {}, num(m.value))),
    )
    .sort();
  assert.deepEqual(mine, theirs);
  // Types and help come from the TYPE/HELP lines; counters' _total samples fold into their family.
  const q = ours.families.find((f) => f.name === 'vllm:prefix_cache_queries')!;
  assert.equal(q.type, 'counter');
  assert.deepEqual(
    q.samples.map((x) => x.name),
    ['vllm:prefix_cache_queries_total', 'vllm:prefix_cache_queries_created'],
  );
  assert.equal(ours.families.find((f) => f.name === 'weird_label')!.samples[0].labels.path, 'a"b\nc');
});

test('evidence: Δ hit rate, peaks summed over engines, and the old metric names', () => {
  const before = snapshotOf(VLLM_TEXT);
  const after = snapshotOf(VLLM_TEXT.replace('204800.0', '409600.0').replace('1024.0', '103424.0'));
  const ev = evidence(before, after);
  // Δhits / Δqueries = 102400 / 204800
  assert.equal(ev.prefix_hit_rate, 0.5);
  assert.equal(ev.running_peak, 62);
  assert.equal(ev.kv_usage_peak, 0.42);
  const old = (q: number, h: number) =>
    `# TYPE vllm:gpu_prefix_cache_queries counter\nvllm:gpu_prefix_cache_queries_total{model_name="m"} ${q}\n# TYPE vllm:gpu_prefix_cache_hits counter\nvllm:gpu_prefix_cache_hits_total{model_name="m"} ${h}\nvllm:num_preemptions_total{model_name="m"} ${h / 100}\n`;
  const ev2 = evidence(snapshotOf(old(1000, 0)), snapshotOf(old(2000, 900)));
  assert.equal(ev2.prefix_hit_rate, 0.9);
  assert.equal(ev2.preemptions_delta, 9);
  assert.match(ev2.prefix_metric!, /gpu_prefix_cache_hits/);
});
