import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { createNotebookContext, restoreResult, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellOutput } from '../../src/core/engine/types';
import {
  canonicalFactName,
  canonicalStat,
  cellOffers,
  factName,
  factOfName,
  factSchema,
  factsOf,
  FACTS_VERSION,
  offerWords,
  parseFactArgs,
  parseMetricKey,
  pickFacts,
  statQuantile,
  type Fact,
  type FactValue,
} from '../../src/core/facts';
import { parseNotebook } from '../../src/core/notebook/format';
import { SimEndpoints } from '../../src/core/sim/endpoints';

const root = path.resolve(import.meta.dirname, '../..');
const SETUP = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b';

describe('stats are data, parsed in one place', () => {
  test('every spelling of a stat has one canonical name', () => {
    assert.equal(canonicalStat('median'), 'p50');
    assert.equal(canonicalStat('p99_9'), 'p99.9');
    assert.equal(canonicalStat('P95'), 'p95');
    assert.equal(canonicalStat('avg'), 'mean');
    assert.equal(canonicalStat('p100'), undefined);
    assert.equal(canonicalStat('fast'), undefined);
    assert.equal(statQuantile('p99.9'), 99.9);
  });
  test('a key names a metric and a stat: ttft (the mean), ttft_p95, tpot_p99.9, e2e_median', () => {
    assert.deepEqual(parseMetricKey('ttft'), { metric: 'ttft', stat: 'mean' });
    assert.deepEqual(parseMetricKey('ttft_p95'), { metric: 'ttft', stat: 'p95' });
    assert.deepEqual(parseMetricKey('tpot_p99.9'), { metric: 'tpot', stat: 'p99.9' });
    assert.deepEqual(parseMetricKey('e2e_median'), { metric: 'e2e', stat: 'p50' });
    assert.equal(parseMetricKey('ttft_fast'), undefined);
    assert.equal(parseMetricKey('prompt'), undefined);
  });
});

describe('every kind states facts that validate', () => {
  test('predict kinds and a record: facts with their units, saved under the facts mime', async () => {
    const nb = createNotebookContext(root);
    await runCell(SETUP, 0, nb);
    const cells = [
      'predict: floors\nname: floors\nprompt: 1000 tokens',
      'predict: decode-roofline\nname: roof\ncontext: 1k tokens\nbatch: [1, 64]',
      'predict: kv-pool\nname: pool\nmax_model_len: 40960',
      'predict: roofline\nname: ridge',
      'record: r\nprompt: 1000 tokens\nttft_p95: 60 ms\nbatch: 1',
    ];
    const results = [];
    for (let i = 0; i < cells.length; i++) results.push(await runCell(cells[i], i + 1, nb));
    for (const r of results) {
      assert.ok(r.ok, r.error?.message);
      assert.ok(r.facts.length > 0, `${r.kind} states facts`);
      for (const f of r.facts) assert.ok(factSchema.safeParse(f).success, JSON.stringify(f));
      const saved = r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.facts);
      assert.deepEqual(saved?.data, { version: FACTS_VERSION, facts: r.facts });
    }
    const [floors, roof, pool, , record] = results;
    // docs/physics.md: 2 · 8.19 B params · 1,000 tokens / 312 TFLOP/s = 52.5 ms.
    const prefill = factsOf(floors.facts, 'floor').find((f) => f.metric === 'prefill')!;
    assert.ok(Math.abs(prefill.ms - 52.5) < 0.05, String(prefill.ms));
    assert.equal(prefill.prompt_tokens, 1000);
    assert.deepEqual(
      factsOf(roof.facts, 'curve').map((c) => [c.x, c.y, c.points.length]),
      [
        ['batch', 'output_throughput', 2],
        ['batch', 'per_user_throughput', 2],
      ],
    );
    // docs/physics.md: the vLLM V1 pool on this card at 0.9 is 410,240 tokens.
    assert.equal(factsOf(pool.facts, 'kv-pool')[0].tokens, 410_240);
    const p95 = factsOf(record.facts, 'latency')[0];
    assert.deepEqual(
      { metric: p95.metric, stat: p95.stat, ms: p95.ms, at: p95.at, point: p95.point },
      { metric: 'ttft', stat: 'p95', ms: 60, at: ['ttft_p95'], point: { batch: 1 } },
    );
    assert.equal(factName(p95), 'ttft.p95');
  });

  test('a bench sweep states every latency stat per point, Little’s law, and the curve of a serving prediction', async () => {
    const sims = new SimEndpoints(50);
    try {
      const nb = createNotebookContext(root, { simEndpoint: (s) => sims.url(s) });
      await runCell(`${SETUP}\nendpoint: sim`, 0, nb);
      const bench = await runCell(
        'bench: sweep\ninput: 200\noutput: 8\nconcurrency: [1, 4]\nrequests: 8\npercentiles: [50, 95]',
        1,
        nb,
      );
      assert.ok(bench.ok, bench.error?.message);
      const ttft = factsOf(bench.facts, 'latency').filter((f) => f.metric === 'ttft');
      assert.deepEqual(
        [...new Set(ttft.map((f) => f.stat))].sort(),
        ['mean', 'p50', 'p95'],
        'the stats the cell asked for, and the mean',
      );
      assert.deepEqual(
        ttft.filter((f) => f.stat === 'p95').map((f) => [f.point?.concurrency, f.at]),
        [
          [1, ['concurrency', 0]],
          [4, ['concurrency', 1]],
        ],
      );
      assert.equal(factsOf(bench.facts, 'little').length, 2);
      const serving = await runCell(
        'predict: serving\ninput: 200 tokens\noutput: 8 tokens\nconcurrency: [1, 4]\nrequests: 8',
        2,
        nb,
      );
      assert.ok(serving.ok, serving.error?.message);
      const curve = factsOf(serving.facts, 'curve')[0];
      assert.equal(curve.label, 'predict: serving');
      assert.deepEqual(
        curve.points.map((p) => p.x),
        [1, 4],
      );
    } finally {
      await sims.close();
    }
  });
});

describe('facts saved in a notebook are validated when it is reopened', () => {
  const floorsSrc = 'predict: floors\nname: floors\nprompt: 1000 tokens';

  test('a round trip through the saved outputs gives the same facts', async () => {
    const nb = createNotebookContext(root);
    await runCell(SETUP, 0, nb);
    const r = await runCell(floorsSrc, 1, nb);
    const saved: CellOutput[] = JSON.parse(JSON.stringify(r.outputs));
    const nb2 = createNotebookContext(root);
    restoreResult(SETUP, 0, [], nb2);
    const back = restoreResult(floorsSrc, 1, saved, nb2);
    assert.deepEqual(back?.facts, r.facts);
    assert.deepEqual(back?.findings, []);
  });

  test('a fact that no longer validates is dropped with a finding; the others stay; nothing throws', () => {
    const nb = createNotebookContext(root);
    restoreResult(SETUP, 0, [], nb);
    const good = { kind: 'weights', bytes: 16.38e9 };
    const outputs: CellOutput[] = [
      {
        items: [
          {
            mime: MIME.facts,
            data: {
              version: FACTS_VERSION,
              facts: [good, { kind: 'latency', metric: 'ttft', stat: 'fast', ms: 3 }, 7],
            },
          },
        ],
      },
    ];
    const r = restoreResult(floorsSrc, 1, outputs, nb);
    assert.deepEqual(r?.facts, [good]);
    assert.deepEqual(
      r?.findings.map((f) => f.code),
      ['fact-dropped', 'fact-dropped'],
    );
    assert.match(r!.findings[0].message, /Saved fact 2 \(latency\).*stat/);
  });

  test('facts of an unknown version are set aside with a finding saying to re-run', () => {
    const nb = createNotebookContext(root);
    restoreResult(SETUP, 0, [], nb);
    const r = restoreResult(floorsSrc, 1, [{ items: [{ mime: MIME.facts, data: { version: 99, facts: [] } }] }], nb);
    assert.deepEqual(r?.facts, []);
    assert.equal(r?.findings[0].code, 'facts-unreadable');
    assert.match(r!.findings[0].message, /version 99/);
  });
});

describe('a notebook saved before facts existed', () => {
  // Written by `inflab run examples/day4.inflab` before this change: values only, no facts item.
  const fixture = path.join(root, 'test/fixtures/notebooks/day4-before-facts.executed.inflab');

  test('opens: each cell’s facts are read from its saved values, once', () => {
    const file = parseNotebook(fs.readFileSync(fixture, 'utf8'));
    assert.ok(!file.cells.some((c) => c.outputs?.some((o) => o.items.some((i) => i.mime === MIME.facts))));
    const nb = createNotebookContext(path.join(root, 'examples'));
    const restored = new Map<string, ReturnType<typeof restoreResult>>();
    file.cells.forEach((c, i) => {
      if (c.kind !== 'code') return;
      const r = restoreResult(c.source, i, c.outputs ?? [], nb);
      if (r) restored.set(r.name ?? r.kind, r);
    });
    const sweep = restored.get('sweep')!;
    assert.deepEqual(sweep.findings, []);
    assert.deepEqual(
      [
        ...new Set(
          factsOf(sweep.facts, 'latency')
            .filter((f) => f.metric === 'ttft')
            .map((f) => f.point?.concurrency),
        ),
      ],
      [1, 4, 16],
    );
    assert.ok(factsOf(sweep.facts, 'little').length === 3);
    assert.ok(Math.abs(factsOf(restored.get('floors')!.facts, 'floor')[0].ms - 52.5) < 0.05);
    assert.equal(factsOf(restored.get('pool')!.facts, 'kv-pool')[0].tokens, 410_240);
    assert.equal(factsOf(restored.get('day4')!.facts, 'latency')[0].ms, 23);
  });

  test('and its verdict re-runs against the restored cells with the saved result', async () => {
    const file = parseNotebook(fs.readFileSync(fixture, 'utf8'));
    const nb = createNotebookContext(path.join(root, 'examples'));
    const last = file.cells.length - 1;
    file.cells.forEach((c, i) => {
      if (c.kind === 'code' && i < last) restoreResult(c.source, i, c.outputs ?? [], nb);
    });
    const savedValues = file.cells[last].outputs!.flatMap((o) => o.items).find((i) => i.mime === MIME.values)!.data as {
      rows: Record<string, unknown>[];
    };
    const r = await runCell(file.cells[last].source, last, nb);
    assert.ok(r.ok, r.error?.message);
    // The rows now also say whether each prediction was in ink: none is, in a notebook saved before ink existed.
    const notInked = { state: 'not-inked', words: 'not inked' };
    assert.deepEqual(r.values, { ...savedValues, rows: savedValues.rows.map((row) => ({ ...row, ink: notInked })) });
  });
});

describe('the bench plot draws the prediction in force', () => {
  /** The series the throughput plot draws, and its title. */
  async function throughputPlot(cells: string[]) {
    const sims = new SimEndpoints(50);
    try {
      const nb = createNotebookContext(root, { simEndpoint: (s) => sims.url(s) });
      await runCell(`${SETUP}\nendpoint: sim`, 0, nb);
      for (let i = 0; i < cells.length; i++) assert.ok((await runCell(cells[i], i + 1, nb)).ok, cells[i]);
      const bench = await runCell(
        'bench: sweep\ninput: 200\noutput: 8\nconcurrency: [1, 4]\nrequests: 8',
        cells.length + 1,
        nb,
      );
      assert.ok(bench.ok, bench.error?.message);
      const spec = bench.outputs
        .flatMap((o) => o.items)
        .find((i) => i.mime === MIME.vegaLite6 && /Output throughput/.test(JSON.stringify(i.data)))!.data as {
        title: string;
        layer: { data: { values: { x: number; series: string; tok_s: number }[] } }[];
      };
      return { title: spec.title, series: spec.layer.map((l) => l.data.values) };
    } finally {
      await sims.close();
    }
  }
  const roofline = 'predict: decode-roofline\nname: roof\ncontext: 1k tokens\nbatch: [1, 2, 4, 8]';
  const serving =
    'predict: serving\nname: serve\ninput: 200 tokens\noutput: 8 tokens\nconcurrency: [1, 4]\nrequests: 8';

  test('after a serving prediction: the serving curve, even with a roofline above it', async () => {
    const { title, series } = await throughputPlot([roofline, serving]);
    const predicted = series[1];
    assert.match(predicted[0].series, /predicted serving — predict: serving "serve"/);
    assert.deepEqual(
      predicted.map((p) => p.x),
      [1, 4],
      "the serving cell's concurrencies, not the roofline's batches",
    );
    assert.match(title, /against the serving prediction/);
  });

  test('with only a roofline above: the roofline, and the plot says so', async () => {
    const { title, series } = await throughputPlot([roofline]);
    assert.match(series[1][0].series, /decode roofline \(no serving prediction above\)/);
    assert.match(title, /decode roofline only/);
  });
});

describe("Little's law is checked in one place", () => {
  test('one point 55% off gives exactly one finding', async () => {
    const { summarizeRecords } = await import('../../src/core/bench/metrics');
    const { benchValues } = await import('../../src/core/bench/report');
    const { benchFacts } = await import('../../src/core/kinds/benchFacts');
    const { runChecks } = await import('../../src/core/checks');
    const { applySetupOverrides } = await import('../../src/core/kinds/setup');
    // 40 requests of 100 ms each over 4 s: λ·W = 10 req/s × 0.1 s = 1 in flight; the client saw 1 / 1.55.
    const records = Array.from({ length: 40 }, (_, i) => ({
      id: i,
      scheduledMs: i * 100,
      sentMs: i * 100,
      chunkMs: [i * 100 + 50, i * 100 + 100],
      endMs: i * 100 + 100,
      promptTokens: 10,
      outputTokens: 2,
      ok: true,
    }));
    const observedInFlight = 1 / 1.55;
    const metrics = summarizeRecords(records, { durationMs: 4000, observedInFlight });
    assert.ok(Math.abs(metrics.little.error! - 0.55) < 1e-9);
    const lag = { mean_ms: 0, p50_ms: 0, p99_ms: 0, max_ms: 0 };
    const result = {
      endpoint: 'http://127.0.0.1:1',
      model: 'm',
      metricsAvailable: false,
      notes: [],
      runId: 'r',
      thread: 'main' as const,
      points: [
        {
          index: 0,
          loop: 'closed' as const,
          concurrency: 1,
          seed: 1,
          metrics,
          contaminated: false,
          durationMs: 4000,
          t0EpochMs: 0,
          observedInFlight,
          maxInFlight: 1,
          loopLag: lag,
          warmup: { requests: 0, promptTokens: 0, outputTokens: 0, unknown: 0 },
          cancelled: false,
        },
      ],
    };
    const spec = {
      loop: 'closed' as const,
      input: 10,
      output: 2,
      seed: { mode: 'per-point' as const, base: 1 },
      percentiles: [90, 99],
    };
    const cell = { bench: 'sweep', concurrency: [1], seed: 'per-point' };
    const setup = applySetupOverrides(undefined, { gpu: 'a100-sxm4-80gb', model: 'qwen3-8b' }, root, 'lab', true).setup;
    // What a bench cell's run gives the engine (its facts; it makes no findings), and what the engine adds (the checks).
    const findings = runChecks({
      kind: 'bench: sweep',
      cell,
      facts: benchFacts(benchValues(result, spec), cell),
      setup,
      notebook: createNotebookContext(root),
      cellIndex: 1,
    }).filter((f) => /little/i.test(f.code + f.message));
    assert.equal(findings.length, 1, JSON.stringify(findings));
    assert.equal(findings[0].code, 'littles-law-closure');
    assert.deepEqual(findings[0].path, ['concurrency', 0]);
  });
});

describe('references name facts: what a cell offers, and what a name picks', () => {
  const at = (concurrency: number, ms: number): Fact => ({
    kind: 'latency',
    metric: 'ttft',
    stat: 'p95',
    ms,
    point: { loop: 'closed', concurrency },
    at: ['concurrency', concurrency],
  });
  const facts: Fact[] = [
    at(1, 20),
    at(4, 40),
    { kind: 'kv-pool', tokens: 410_240 },
    {
      kind: 'curve',
      x: 'batch',
      y: 'output_throughput',
      unit: 'tok/s',
      points: [
        { x: 1, y: 120 },
        { x: 8, y: 900 },
      ],
      label: 'r',
    },
  ];

  test('every spelling of a name is one name; a bare latency metric is its mean', () => {
    assert.equal(canonicalFactName('TTFT p95'), 'ttft.p95');
    assert.equal(canonicalFactName('ttft_p99_9'), 'ttft.p99.9');
    assert.equal(canonicalFactName('ttft.median'), 'ttft.p50');
    assert.equal(canonicalFactName('ttft'), 'ttft.mean');
    assert.equal(canonicalFactName('KV_pool'), 'kv_pool');
    assert.deepEqual(parseFactArgs('ttft.p95 @ c=16'), { name: 'ttft.p95', point: { axis: 'concurrency', x: 16 } });
    assert.throws(() => parseFactArgs('ttft.p95 @ users=16'), /pick a point as "@ concurrency=16"/);
  });

  test('cellOffers: one line per name, with its unit and the points it stands at', () => {
    assert.deepEqual(cellOffers('sweep', facts).map(offerWords), [
      'sweep.fact(ttft.p95) (ms, a curve over concurrency 1, 4)',
      'sweep.fact(kv_pool) (tokens)',
      'sweep.fact(curve.output_throughput) (tok/s, a curve over batch 1, 8)',
    ]);
  });

  test('pickFacts: a name gives every point, @ one of them; a curve fact gives its points', () => {
    assert.deepEqual(
      pickFacts(facts, 'ttft.p95').map((p) => [p.x, p.value.base]),
      [
        [1, 0.02],
        [4, 0.04],
      ],
    );
    assert.deepEqual(
      pickFacts(facts, 'ttft.p95', { axis: 'concurrency', x: 4 }).map((p) => p.value.base),
      [0.04],
    );
    assert.deepEqual(
      pickFacts(facts, 'curve.output_throughput', { axis: 'batch', x: 8 }).map((p) => p.value),
      [{ base: 900, dim: 'token_rate', unit: 'tok/s' }],
    );
  });

  test('factOfName is the inverse of factName for a named number', () => {
    const cases: [string, FactValue][] = [
      ['ttft.p95', { base: 0.023, dim: 'time' }],
      ['tpot.mean', { base: 0.01, dim: 'time' }],
      ['per_user', { base: 88.4, dim: 'token_rate' }],
      ['output_throughput', { base: 2530, dim: 'token_rate' }],
      ['goodput', { base: 3, dim: 'request_rate' }],
      ['kv_pool', { base: 410_240, dim: 'tokens' }],
      ['available_kv', { base: 56.34 * 2 ** 30, dim: 'bytes' }],
      ['prompt_tokens', { base: 1000, dim: 'tokens' }],
      ['prefix_hits', { base: 0.4, dim: 'ratio' }],
    ];
    for (const [name, v] of cases) {
      const f = factOfName(name, v)!;
      assert.ok(f && factSchema.safeParse(f).success, name);
      assert.equal(factName(f), name);
    }
    assert.equal(factOfName('ttft.p95', { base: 1, dim: 'tokens' }), undefined, 'a TTFT is a time');
    assert.equal(factOfName('time to first token', { base: 1, dim: 'time' }), undefined, 'prose names nothing');
  });
});
