/**
 * The bench cell end to end (engine → kind → worker → scripted server or the simulator): outputs
 * grow point by point, the summary/plots/records/values come out, the fixed-seed prefix-cache trap
 * shows in the /metrics hit rate and the contamination mark, and cancel keeps finished points.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellResult, Services } from '../../src/core/engine/types';
import { startScriptedServer } from '../support/scriptedServer';

const plain = (r: CellResult) =>
  r.outputs.map((o) => String(o.items.find((i) => i.mime === MIME.plain)?.data ?? '')).join('\n');
const setupCell = (endpoint: string) => `setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${endpoint}`;

test('a sweep cell grows its outputs point by point and ends with table, plots, records and vLLM names', async () => {
  const s = await startScriptedServer({ ttftMs: 10, itlMs: 2, metrics: 'current', prefixCache: true });
  try {
    const nb = createNotebookContext('.', {});
    await runCell(setupCell(s.url), 0, nb);
    await runCell('predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 2, 4]', 1, nb);
    const grown: string[] = [];
    const r = await runCell(
      'bench: sweep\ninput: 64\noutput: 8\nconcurrency: [1, 2, 4]\nrequests: 8\nslo: {ttft_p99: 500 ms, tpot_p99: 50 ms}',
      2,
      nb,
      {
        onProgress: (u) => {
          if (u.outputs) grown.push(String(u.outputs[0].items.find((i) => i.mime === MIME.plain)!.data));
        },
      },
    );
    assert.ok(r.ok, r.error?.message);
    assert.equal(grown.length, 3);
    grown.forEach((g, i) => assert.match(g, new RegExp(`\\(${i + 1}/3 points\\)`)));
    const text = plain(r);
    assert.match(text, /TTFT = first chunk/);
    assert.match(text, /TPOT = \(E2E − TTFT\) \/ \(output_tokens − 1\)/);
    assert.match(text, /network RTT/);
    const items = r.outputs.flatMap((o) => o.items);
    const plots = items.filter((i) => i.mime === MIME.vegaLite6);
    assert.equal(plots.length, 3);
    assert.equal(items.filter((i) => i.mime === MIME.svg).length, 3);
    // The earlier decode-roofline prediction is overlaid on the throughput plot.
    assert.match(
      JSON.stringify(plots[0].data),
      /decode roofline \(no serving prediction above\) — predict: decode-roofline/,
    );
    // SLO lines on the latency plot.
    assert.match(JSON.stringify(plots[1].data), /SLO p99 500 ms/);
    const rec = items.find((i) => i.mime === MIME.records)!.data as any;
    assert.equal(rec.points.length, 3);
    assert.equal(rec.points[0].records.n, 8);
    const v = r.values as any;
    assert.equal(v.points.length, 3);
    assert.equal(v.thread, 'worker');
    assert.equal(v.points[2].concurrency, 4);
    assert.equal(v.points[0].completed, 8);
    assert.ok(v.points[0].goodput > 0);
    assert.equal(v.points[0].server.prefix_hit_rate, 0);
    assert.equal(v.vllm[1].max_concurrency, 2);
    for (const k of [
      'mean_ttft_ms',
      'median_ttft_ms',
      'p99_itl_ms',
      'output_throughput',
      'request_throughput',
      'total_token_throughput',
      'completed',
      'duration',
    ])
      assert.ok(k in v.vllm[0], k);
    assert.ok(!r.findings.some((f) => f.code === 'prefix-cache-contaminated'));
  } finally {
    await s.close();
  }
});

test('the fixed-seed trap: warned as written, then shown by the /metrics hit rate and the contamination mark', async () => {
  const s = await startScriptedServer({ ttftMs: 10, itlMs: 2, metrics: 'current', prefixCache: true });
  try {
    const cell = 'bench: sweep\ninput: 256\noutput: 4\nconcurrency: [1, 2, 4]\nrequests: 6\nseed: 1234';
    const analyzed = analyzeCells([setupCell(s.url), cell], '.');
    const warn = analyzed[1].find((f) => f.code === 'fixed-seed-prefix-cache');
    assert.ok(warn);
    assert.deepEqual(warn!.path, ['seed']);
    assert.equal(warn!.quickFix?.edit.value, 'per-point');
    const nb = createNotebookContext('.', {});
    await runCell(setupCell(s.url), 0, nb);
    const r = await runCell(cell, 1, nb);
    assert.ok(r.ok, r.error?.message);
    const v = r.values as any;
    assert.equal(v.points[0].server.prefix_hit_rate, 0);
    assert.ok(v.points[1].server.prefix_hit_rate > 0.9 && v.points[2].server.prefix_hit_rate > 0.9);
    assert.deepEqual(
      v.points.map((p: any) => p.contaminated),
      [false, true, true],
    );
    const marks = r.findings.filter((f) => f.code === 'prefix-cache-contaminated');
    assert.deepEqual(
      marks.map((f) => f.path),
      [
        ['concurrency', 1],
        ['concurrency', 2],
      ],
    );
    assert.match(plain(r), /⚠/);
  } finally {
    await s.close();
  }
});

test('the fixed-seed trap against the simulated endpoint with prefix caching on', async () => {
  const { startSimServer } = await import('../../src/core/sim/server');
  let sim: { url: string; close(): Promise<void> } | undefined;
  const services: Services = {
    async simEndpoint(setup) {
      sim ??= await startSimServer({ setup, speed: 50 });
      return sim.url;
    },
  };
  try {
    const nb = createNotebookContext('.', services);
    await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim\nprefix_caching: true', 0, nb);
    const fixed = await runCell(
      'bench: sweep\ninput: 1000\noutput: 8\nconcurrency: [1, 2]\nrequests: 4\nseed: 7',
      1,
      nb,
    );
    assert.ok(fixed.ok, fixed.error?.message);
    const v = fixed.values as any;
    assert.ok(v.server_metrics, 'the simulator serves /metrics');
    assert.ok(v.points[0].server.prefix_hit_rate < 0.1, `point 0 hit rate ${v.points[0].server.prefix_hit_rate}`);
    assert.ok(v.points[1].server.prefix_hit_rate > 0.9, `point 1 hit rate ${v.points[1].server.prefix_hit_rate}`);
    assert.deepEqual(
      v.points.map((p: any) => p.contaminated),
      [false, true],
    );
    assert.ok(
      fixed.findings.some((f) => f.code === 'prefix-cache-contaminated' && f.path.join('.') === 'concurrency.1'),
    );
    // Per-point seeds on the same server: clean.
    const clean = await runCell('bench: sweep\ninput: 1000\noutput: 4\nconcurrency: [1, 2]\nrequests: 2', 2, nb);
    const cv = clean.values as any;
    assert.ok(cv.points.every((p: any) => !p.contaminated && p.server.prefix_hit_rate < 0.1));
  } finally {
    await sim?.close();
  }
});

test('cancel keeps the finished points in the cell’s outputs', async () => {
  const s = await startScriptedServer({ ttftMs: 10, itlMs: 5 });
  try {
    const nb = createNotebookContext('.', {});
    await runCell(setupCell(s.url), 0, nb);
    const ac = new AbortController();
    const r = await runCell('bench: sweep\ninput: 32\noutput: 10\nconcurrency: [1, 2, 4, 8]\nrequests: 6', 1, nb, {
      signal: ac.signal,
      onProgress: (u) => {
        if (u.outputs) ac.abort();
      },
    });
    const v = r.values as any;
    assert.ok(v.points.length >= 1 && v.points.length < 4);
    assert.equal(v.stopped.reason, 'cancelled');
    assert.ok(r.findings.some((f) => f.code === 'bench-cancelled'));
  } finally {
    await s.close();
  }
});

test('schema messages say what to write', () => {
  const [, a] = analyzeCells([setupCell('http://127.0.0.1:9'), 'bench: sweep\ninput: 100\noutput: 100'], '.');
  assert.match(a.map((f) => f.message).join('\n'), /concurrency: \[1, 2, 4, 8\]/);
  const [, b] = analyzeCells(
    [setupCell('http://127.0.0.1:9'), 'bench: sweep\ninput: 100\noutput: 100\nrate: [1, 2]\nconcurrency: [1, 2]'],
    '.',
  );
  assert.match(b.map((f) => f.message).join('\n'), /one cap on requests in flight/);
  const [, c] = analyzeCells(
    [
      setupCell('http://127.0.0.1:9'),
      'bench: sweep\ninput: 100\noutput: 100\nconcurrency: 4\non_failure: {stop_above: 50%}\ntop_k: -1',
    ],
    '.',
  );
  assert.ok(c.some((f) => f.code === 'sampler-native-path' && f.path[0] === 'top_k'));
  assert.ok(!c.some((f) => f.severity === 'error'));
  // The rate's bounds, written when a value fails (not when the schema is built).
  const [, d] = analyzeCells(
    [setupCell('http://127.0.0.1:9'), 'bench: sweep\ninput: 100\noutput: 100\nrate: [200000]'],
    '.',
  );
  assert.match(
    d.map((f) => f.message).join('\n'),
    /must be between 0\.001 req\/s \(one request every 1000 s\) and 100,000 req\/s/,
  );
});
