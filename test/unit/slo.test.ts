/**
 * SLOs are data: a `METRIC_STAT` key for any stat (ttft_p95, tpot_p99.9, e2e_median) bounds that
 * stat of the point's distribution (slo_met) and each request's own latency (goodput), and the
 * percentile it needs is computed whatever percentiles the cell asked for.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import { summarizeRecords, type RequestRecord } from '../../src/core/bench/metrics';
import { parseSloKey, sloOf } from '../../src/core/facts/stat';
import { startScriptedServer } from '../support/scriptedServer';

/** 100 requests, one every 10 ms, whose TTFTs are 1, 2 … 100 ms (one chunk each). */
const records: RequestRecord[] = Array.from({ length: 100 }, (_, i) => ({
  id: i,
  scheduledMs: i * 10,
  sentMs: i * 10,
  chunkMs: [i * 10 + i + 1],
  endMs: i * 10 + i + 1.5,
  promptTokens: 10,
  outputTokens: 1,
  ok: true,
}));

test('an SLO key names a metric and any stat', () => {
  assert.deepEqual(parseSloKey('ttft_p95'), { metric: 'ttft', stat: 'p95' });
  assert.deepEqual(parseSloKey('tpot_p99.9'), { metric: 'tpot', stat: 'p99.9' });
  assert.deepEqual(parseSloKey('e2e_median'), { metric: 'e2e', stat: 'p50' });
  assert.equal(parseSloKey('itl_p99'), undefined, 'goodput bounds per-request latencies (vLLM: ttft, tpot, e2el)');
  assert.throws(() => sloOf({ ttft_fast: 1 }), /not an SLO key/);
});

test('ttft_p95 decides slo_met on the p95 (not the p99) and goodput counts the requests within it', () => {
  // p95 of 1..100 (linear interpolation) = 95.05 ms; p99 = 99.01 ms.
  const within = summarizeRecords(records, { percentiles: [50, 95], slo: sloOf({ ttft_p95: 96 }) });
  assert.ok(Math.abs(within.ttft_ms.p.p95 - 95.05) < 1e-9);
  assert.equal(within.slo_met, true, 'the p95 is within 96 ms although the p99 is not');
  assert.equal(within.good_requests, 96);
  assert.ok(Math.abs(within.goodput! - 96 / within.duration_s) < 1e-9);
  const onP99 = summarizeRecords(records, { percentiles: [50, 95], slo: sloOf({ ttft_p99: 96 }) });
  assert.equal(onP99.slo_met, false);
  assert.ok(Math.abs(onP99.ttft_ms.p.p99 - 99.01) < 1e-9, 'the p99 is computed for its SLO');
  const tight = summarizeRecords(records, { percentiles: [50], slo: sloOf({ ttft_p95: 90 }) });
  assert.equal(tight.slo_met, false);
  assert.equal(tight.good_requests, 90);
  assert.ok(Number.isFinite(tight.ttft_ms.p.p95), 'a percentile the cell did not ask for, computed for the SLO');
  // Two limits: a request is good when it meets both; the point when both stats do.
  const both = summarizeRecords(records, { slo: sloOf({ ttft_p50: 60, ttft_p95: 96 }) });
  assert.equal(both.good_requests, 60);
  assert.equal(both.slo_met, true);
  const mean = summarizeRecords(records, { slo: sloOf({ ttft: 50 }) });
  assert.equal(mean.slo_met, false, 'the mean, 50.5 ms, is above 50 ms');
});

const plain = (r: { outputs: { items: { mime: string; data: unknown }[] }[] }) =>
  r.outputs.map((o) => String(o.items.find((i) => i.mime === MIME.plain)?.data ?? '')).join('\n');

test('a bench cell: percentiles [50, 95] gives the p95 in the table, and slo: {ttft_p95} decides slo_met and goodput', async () => {
  const s = await startScriptedServer({ ttftMs: 10, itlMs: 2 });
  try {
    const nb = createNotebookContext('.', {});
    await runCell(`setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${s.url}`, 0, nb);
    const bench = (slo: string) =>
      `bench: sweep\ninput: 64\noutput: 4\nconcurrency: [1]\nrequests: 6\nscrape: false\npercentiles: [50, 95]\nslo: {ttft_p95: ${slo}}`;
    const loose = await runCell(bench('10 s'), 1, nb);
    assert.ok(loose.ok, loose.error?.message);
    assert.match(plain(loose), /Latencies in ms as median \/ p95/);
    const pt = (loose.values.points as { slo_met: boolean; goodput: number; request_throughput: number }[])[0];
    assert.equal(pt.slo_met, true);
    assert.equal(pt.goodput, pt.request_throughput, 'every request within 10 s');
    const strict = await runCell(bench('1 ms'), 2, nb);
    assert.ok(strict.ok, strict.error?.message);
    const st = (strict.values.points as { slo_met: boolean; goodput: number }[])[0];
    assert.equal(st.slo_met, false);
    assert.equal(st.goodput, 0, 'no request has a TTFT within 1 ms of a 10 ms server');
    // The SLO line on the latency plot names its stat.
    const plots = strict.outputs.flatMap((o) => o.items).filter((i) => i.mime === MIME.vegaLite6);
    assert.ok(plots.some((p) => /SLO p95 1 ms/.test(JSON.stringify(p.data))));
  } finally {
    await s.close();
  }
});

test('a key that is no SLO is refused on its line, saying what to write', () => {
  const fs = analyzeCells(
    [
      'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b',
      'bench: sweep\ninput: 64\noutput: 4\nconcurrency: [1]\nslo: {ttft_fast: 200 ms, tpot_p95: 40 ms}',
    ],
    '.',
  )[1];
  const bad = fs.filter((f) => f.severity === 'error');
  assert.equal(bad.length, 1, JSON.stringify(fs));
  assert.deepEqual(bad[0].path, ['slo', 'ttft_fast']);
  assert.match(bad[0].message, /"ttft_fast" is not an SLO: write METRIC_STAT .* e\.g\. ttft_p95: 200 ms/);
});
