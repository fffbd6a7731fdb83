/**
 * The workload definition: length distributions, shared prefixes and trace replay, deterministic in
 * the seed, and — run through the simulated engine in virtual time — a prefix-cache hit rate that
 * matches what the workload says, and arrivals that follow the trace's timestamps.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findGpu, findModel } from '../../src/core/catalog';
import type { Setup } from '../../src/core/engine/types';
import { nodeFiles } from '../../src/core/host/files';
import { SimEngine } from '../../src/core/sim/engine';
import { runLoad } from '../../src/core/sim/load';
import { parseLengths, parseTrace } from '../../src/core/workload/files';
import { expectedPrefixHitRate, RequestPlanner } from '../../src/core/workload/plan';
import { lengthSpec, sessionSpec, sharedPrefixSpec } from '../../src/core/workload/spec';

const setup: Setup = {
  name: 'w',
  gpu: findGpu('a100-sxm4-80gb')!,
  model: findModel('qwen3-8b')!,
  weights: 'bf16',
  kvCache: 'bf16',
  endpoint: 'sim',
};
const L = (x: unknown) => lengthSpec.parse(x);
const fixed = (n: number) => L(n);
const planner = (o: Partial<ConstructorParameters<typeof RequestPlanner>[0]>) =>
  new RequestPlanner({ input: fixed(100), output: fixed(10), seed: 7, vocab: 151_936, ...o });
const draw = (p: RequestPlanner, n: number) => Array.from({ length: n }, () => p.next());
const stats = (xs: number[]) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return { mean: m, std: Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / xs.length) };
};

test('a uniform range ratio draws lengths in [mean·(1−r), mean·(1+r)] as vLLM’s random dataset does', () => {
  const reqs = draw(planner({ input: L({ mean: 1000, range_ratio: 0.5 }) }), 4000);
  const ins = reqs.map((r) => r.prompt.length);
  assert.ok(Math.min(...ins) >= 500 && Math.max(...ins) <= 1500);
  assert.ok(Math.min(...ins) < 520 && Math.max(...ins) > 1480, 'the whole range is used');
  assert.ok(Math.abs(stats(ins).mean / 1000 - 1) < 0.02);
});

test('normal and lognormal lengths have the mean and spread asked for, clipped to their bounds', () => {
  const ln = draw(planner({ output: L({ dist: 'lognormal', mean: 300, std: 200 }) }), 20000).map((r) => r.output);
  const s = stats(ln);
  assert.ok(Math.abs(s.mean / 300 - 1) < 0.05, `mean ${s.mean}`);
  assert.ok(Math.abs(s.std / 200 - 1) < 0.1, `std ${s.std}`);
  const nm = draw(planner({ output: L({ dist: 'normal', mean: 100, std: 80, min: 20, max: 150 }) }), 5000).map(
    (r) => r.output,
  );
  assert.ok(Math.min(...nm) === 20 && Math.max(...nm) === 150);
});

test('observed lengths are drawn only from the file’s values; bad files name the entry', () => {
  const loaded = parseLengths('12\n40\n\n7\n', 'lens.txt');
  assert.deepEqual(loaded, [12, 40, 7]);
  const outs = draw(planner({ output: L({ file: 'lens.txt' }), loaded: { output: loaded } }), 300).map((r) => r.output);
  assert.deepEqual(
    [...new Set(outs)].sort((a, b) => a - b),
    [7, 12, 40],
  );
  assert.deepEqual(parseLengths('[3, 4]', 'x.json'), [3, 4]);
  assert.throws(() => parseLengths('3\n-1\n', 'bad.txt'), /bad.txt: entry 2 is not a positive whole number/);
});

test('the same seed gives the same requests; another seed other prompts', () => {
  const a = draw(planner({ input: L({ mean: 200, range_ratio: 0.3 }) }), 20);
  const b = draw(planner({ input: L({ mean: 200, range_ratio: 0.3 }) }), 20);
  const c = draw(planner({ input: L({ mean: 200, range_ratio: 0.3 }), seed: 8 }), 20);
  assert.deepEqual(
    a.map((r) => [...r.prompt]),
    b.map((r) => [...r.prompt]),
  );
  assert.notDeepEqual(
    a.map((r) => [...r.prompt]),
    c.map((r) => [...r.prompt]),
  );
});

test('a shared prefix: every prompt of a group starts with the same ids, groups differ, the rest is unique', () => {
  const sp = sharedPrefixSpec.parse({ length: 64, groups: 3 });
  const reqs = draw(planner({ sharedPrefix: sp }), 9);
  const head = (r: { prompt: Uint32Array }) => [...r.prompt.subarray(0, 64)].join(',');
  const tail = (r: { prompt: Uint32Array }) => [...r.prompt.subarray(64)].join(',');
  assert.equal(head(reqs[0]), head(reqs[3]));
  assert.equal(head(reqs[0]), head(reqs[6]));
  assert.notEqual(head(reqs[0]), head(reqs[1]));
  assert.equal(new Set(reqs.map(tail)).size, 9);
  const half = draw(planner({ sharedPrefix: sharedPrefixSpec.parse({ length: 64, groups: 2, share: '50%' }) }), 2000);
  const share = half.filter((r) => r.group !== undefined).length / half.length;
  assert.ok(Math.abs(share - 0.5) < 0.05, `share ${share}`);
});

test('in virtual time a shared-prefix workload hits the prefix cache at the rate the workload implies (±2 points)', () => {
  const sp = sharedPrefixSpec.parse({ length: 512, groups: 4 });
  const requests = 200;
  const e = new SimEngine({ setup });
  const res = runLoad(e, {
    input: 1024,
    output: 32,
    requests,
    concurrency: 8,
    seed: 1,
    plan: planner({ input: fixed(1024), output: fixed(32), sharedPrefix: sp }),
  });
  const rate = res.prefixHits / res.prefixQueries;
  const expected = expectedPrefixHitRate(sp, 1024, requests);
  assert.ok(expected > 0.45 && expected < 0.5, `expected ${expected}`);
  assert.ok(Math.abs(rate - expected) <= 0.02, `hit rate ${rate} vs ${expected}`);
  // Without the shared prefix the same load hits nothing.
  const none = runLoad(new SimEngine({ setup }), { input: 1024, output: 32, requests, concurrency: 8, seed: 1 });
  assert.equal(none.prefixHits, 0);
});

test('a replayed trace sends each request at its timestamp (÷ speed), and shared hash ids hit the cache', () => {
  const lines = [
    { timestamp: 0, input_length: 1024, output_length: 8, hash_ids: [1, 2] },
    { timestamp: 500, input_length: 1024, output_length: 8, hash_ids: [1, 3] },
    { timestamp: 1500, input_length: 700, output_length: 8, hash_ids: [1, 2] },
    { timestamp: 4000, input_length: 512, output_length: 8, hash_ids: [9] },
  ];
  const rows = parseTrace(lines.map((l) => JSON.stringify(l)).join('\n') + '\n', 'trace.jsonl');
  assert.equal(rows.length, 4);
  const plan = planner({ trace: { rows, speed: 2, blockSize: 512 } });
  const res = runLoad(new SimEngine({ setup }), { input: 800, output: 8, requests: 4, rate: 1, seed: 3, plan });
  const sent = res.records.map((r) => r.scheduledMs);
  assert.deepEqual(sent, [0, 250, 750, 2000]);
  assert.deepEqual(
    res.records.map((r) => r.promptTokens),
    [1024, 1024, 700, 512],
  );
  // Request 2 reuses block 1 (512 tokens), request 3 reuses blocks 1 and 2 (its first 700 tokens).
  assert.ok(res.prefixHits >= 512 + 688, `hits ${res.prefixHits}`);
  assert.throws(
    () =>
      parseTrace('{"timestamp": 5, "input_length": 3}\n{"timestamp": 1, "input_length": 3, "output_length": 1}', 't'),
    /t:1: output_length/,
  );
  assert.throws(() => parseTrace('not json', 't.jsonl'), /t.jsonl:1: not JSON/);
});

test('multi-turn sessions: each turn resends the conversation so far after the think time, and reuses it from the cache', () => {
  const sessions = sessionSpec.parse({ turns: 3, think_time: '1 s' });
  const plan = planner({ input: fixed(256), output: fixed(16), sessions });
  const res = runLoad(new SimEngine({ setup }), { input: 256, output: 16, requests: 6, concurrency: 2, seed: 5, plan });
  assert.equal(res.records.length, 6);
  const byStart = [...res.records].sort((a, b) => a.scheduledMs - b.scheduledMs);
  // Two conversations at once: turn lengths 256, 256 + 16 + 256, 528 + 16 + 256.
  assert.deepEqual(
    byStart.map((r) => r.promptTokens),
    [256, 256, 528, 528, 800, 800],
  );
  // A later turn leaves one think time after the end of the turn before it.
  const first = byStart[0];
  const second = byStart.find((r) => r.promptTokens === 528 && Math.abs(r.scheduledMs - first.endMs - 1000) < 1e-6);
  assert.ok(second, 'turn 2 starts 1 s after turn 1 ends');
  // Turns 2 and 3 find their earlier prompts in the prefix cache (256 and 528 tokens, whole blocks).
  assert.ok(res.prefixHits >= 2 * (256 + 528), `hits ${res.prefixHits}`);
});

test('predict: serving takes the same workload keys: a shared prefix shows as prefix hits, a trace file replays', async () => {
  const { createNotebookContext, runCell } = await import('../../src/core/engine/engine');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-workload-'));
  try {
    const rows = [0, 200, 400, 600].map((t, i) => ({
      timestamp: t,
      input_length: 1024,
      output_length: 16,
      hash_ids: [1, 10 + i],
    }));
    fs.writeFileSync(path.join(dir, 'trace.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n'));
    const nb = createNotebookContext(dir, { ...nodeFiles() });
    assert.ok((await runCell('setup: w\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', 0, nb)).ok);
    const sp = await runCell(
      'predict: serving\ninput: 1024\noutput: 32\nconcurrency: [8]\nrequests: 200\nshared_prefix: {length: 512, groups: 4}',
      1,
      nb,
    );
    assert.ok(sp.ok, sp.error?.message);
    const hit = (sp.values as any).points[0].prefix_hit_rate;
    const expected = expectedPrefixHitRate(sharedPrefixSpec.parse({ length: 512, groups: 4 }), 1024, 200);
    assert.ok(Math.abs(hit - expected) <= 0.02, `hit ${hit} vs ${expected}`);
    const tr = await runCell('predict: serving\ninput: 1024\noutput: 16\ntrace: {file: trace.jsonl}', 2, nb);
    assert.ok(tr.ok, tr.error?.message);
    const p = (tr.values as any).points[0];
    assert.equal(p.metrics.completed, 4);
    assert.ok(p.prefix_hit_rate > 0.3, `every request after the first reuses block 1: ${p.prefix_hit_rate}`);
    const dist = await runCell(
      'predict: serving\ninput: {mean: 800, range_ratio: 0.5}\noutput: {dist: lognormal, mean: 64, std: 32, max: 256}\nconcurrency: [4]\nrequests: 50',
      3,
      nb,
    );
    assert.ok(dist.ok, dist.error?.message);
    const missing = await runCell('predict: serving\ninput: 100\noutput: 10\ntrace: {file: nope.jsonl}', 4, nb);
    assert.equal(missing.ok, false);
    assert.match(missing.error!.message, /Cannot read "nope.jsonl"/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a rate schedule: arrivals follow each step and ramp (an inhomogeneous Poisson process)', async () => {
  const { rateScheduleSpec, scheduleArrivals, scheduleTotals } = await import('../../src/core/workload/schedule');
  const s = rateScheduleSpec.parse([
    { rate: '20 req/s', for: '50 s' },
    { ramp: ['20 req/s', '100 req/s'], for: '50 s' },
    { rate: 0, for: '10 s' },
  ]);
  const t = scheduleTotals(s);
  assert.equal(t.durationS, 110);
  assert.equal(t.expectedRequests, 20 * 50 + 60 * 50);
  const a = scheduleArrivals(s, 1);
  const inWin = (lo: number, hi: number) => a.filter((x) => x >= lo && x < hi).length;
  assert.ok(Math.abs(inWin(0, 50) / 1000 - 1) < 0.1, `step: ${inWin(0, 50)} of ~1000`);
  // The ramp's last fifth runs at ~92 req/s, its first fifth at ~28.
  assert.ok(Math.abs(inWin(90, 100) / 920 - 1) < 0.12, `ramp end: ${inWin(90, 100)} of ~920`);
  assert.ok(Math.abs(inWin(50, 60) / 280 - 1) < 0.2, `ramp start: ${inWin(50, 60)} of ~280`);
  assert.equal(inWin(100, 110), 0, 'a zero-rate step sends nothing');
  assert.deepEqual(scheduleArrivals(s, 1), a, 'deterministic in the seed');
  // The virtual-time load sends at the scheduled times.
  const arrivals = scheduleArrivals(rateScheduleSpec.parse([{ ramp: [1, 4], for: '20 s' }]), 2);
  const res = runLoad(new SimEngine({ setup }), {
    input: 128,
    output: 8,
    requests: arrivals.length,
    rate: 1,
    seed: 2,
    plan: planner({ input: fixed(128), output: fixed(8), arrivals }),
  });
  assert.deepEqual(
    res.records.map((r) => Math.round(r.scheduledMs)),
    arrivals.map((x) => Math.round(x * 1000)),
  );
});

test('capacity search: brackets by doubling, bisects to the stated precision, and reports every probe', async () => {
  const { searchCapacity } = await import('../../src/core/workload/schedule');
  const truth = 13.7; // loads up to this meet the SLO
  const seen: number[] = [];
  const r = await searchCapacity(
    async (x) => {
      seen.push(x);
      return x <= truth;
    },
    { start: 1, min: 0.1, max: 1000, precision: 0.05 },
  );
  assert.ok(r.converged);
  assert.ok(r.best! <= truth && r.failAt! > truth);
  assert.ok((r.failAt! - r.best!) / r.best! <= 0.05);
  assert.deepEqual(seen.slice(0, 5), [1, 2, 4, 8, 16]);
  assert.equal(r.probes.length, seen.length);
  const c = await searchCapacity(async (x) => x <= 37, { start: 64, min: 1, max: 512, precision: 0, integer: true });
  assert.equal(c.best, 37);
  assert.equal(c.failAt, 38);
  const none = await searchCapacity(async () => false, { start: 4, min: 1, max: 100, precision: 0.1 });
  assert.equal(none.best, undefined);
  assert.equal(none.converged, false);
});

test('dataset files: JSONL rows (text, token ids or lengths) and ShareGPT conversations become the requests', async () => {
  const { parseDataset } = await import('../../src/core/workload/files');
  const jsonl = [
    JSON.stringify({ prompt: 'hello world', output_len: 5 }),
    JSON.stringify({ prompt_token_ids: [200, 201, 202], output_len: 7 }),
    JSON.stringify({ input_len: 64, output_len: 9 }),
  ].join('\n');
  const rows = parseDataset(jsonl, 'd.jsonl', 151_936);
  assert.deepEqual(
    rows.map((r) => [r.input, r.output]),
    [
      [11, 5],
      [3, 7],
      [64, 9],
    ],
  );
  const p = planner({ dataset: rows });
  const reqs = draw(p, 4);
  assert.equal(reqs[0].text, 'hello world');
  assert.deepEqual([...reqs[1].prompt], [200, 201, 202]);
  assert.equal(reqs[2].prompt.length, 64);
  assert.equal(reqs[3].prompt.length, 11, 'rows wrap around');
  const share = JSON.stringify([
    {
      id: 'a',
      conversations: [
        { from: 'human', value: 'abcd' },
        { from: 'gpt', value: 'xyz!!!' },
      ],
    },
    { id: 'b', conversations: [{ from: 'gpt', value: 'no question' }] },
  ]);
  const sg = parseDataset(share, 'sg.json', 151_936);
  assert.deepEqual(
    sg.map((r) => [r.input, r.output]),
    [[4, 6]],
  );
  assert.throws(() => parseDataset('{"output_len": 3}', 'bad.jsonl', 100), /bad.jsonl:1: each row needs "prompt"/);
  // predict: serving runs a dataset from a file beside the notebook.
  const { createNotebookContext, runCell } = await import('../../src/core/engine/engine');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-dataset-'));
  try {
    fs.writeFileSync(path.join(dir, 'd.jsonl'), jsonl);
    const nb = createNotebookContext(dir, { ...nodeFiles() });
    await runCell('setup: w\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', 0, nb);
    const r = await runCell(
      'predict: serving\ninput: 30\noutput: 7\nconcurrency: [2]\nrequests: 6\ndataset: {file: d.jsonl}',
      1,
      nb,
    );
    assert.ok(r.ok, r.error?.message);
    assert.equal((r.values as any).points[0].metrics.completed, 6);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
