/**
 * The live bench runs the workload plan (workload/plan.ts) that predict: serving runs in virtual
 * time: against the simulated endpoint over real HTTP on 127.0.0.1, each workload key sends the
 * requests the plan says — lengths from a distribution, shared prefixes the server's prefix cache
 * counts in its /metrics delta, a trace replayed at its timestamps with the dispatch lag reported.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { pointSeed } from '../../src/core/bench/prompts';
import type { ColumnarRecords } from '../../src/core/bench/records';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellResult, NotebookContext, Services } from '../../src/core/engine/types';
import { nodeFiles } from '../../src/core/host/files';
import { startSimServer } from '../../src/core/sim/server';
import { expectedPrefixHitRate, RequestPlanner } from '../../src/core/workload/plan';
import { lengthSpec, sharedPrefixSpec } from '../../src/core/workload/spec';

const VOCAB = 151_936; // qwen3-8b, the setup's model (the simulator reports no other)

/** A notebook in a fresh folder whose bench cells run against one simulated endpoint (speed 50). */
async function simNotebook(): Promise<{ nb: NotebookContext; dir: string; close(): Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-bench-workload-'));
  let sim: Awaited<ReturnType<typeof startSimServer>> | undefined;
  const services: Services = {
    ...nodeFiles(),
    async simEndpoint(setup) {
      sim ??= await startSimServer({ setup, speed: 50 });
      return sim.url;
    },
  };
  const nb = createNotebookContext(dir, services);
  const s = await runCell(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim\nprefix_caching: true',
    0,
    nb,
  );
  assert.ok(s.ok, s.error?.message);
  return {
    nb,
    dir,
    async close() {
      await sim?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

const recordsOf = (r: CellResult, point = 0): ColumnarRecords =>
  (r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.records)!.data as any).points[point].records;

test('a shared-prefix bench on sim: the /metrics delta shows the hit rate the configured share implies (±2 points)', async () => {
  const s = await simNotebook();
  try {
    const requests = 200;
    // share 100%: every request carries its group's prefix.
    const all = await runCell(
      `bench: sweep\ninput: 1024\noutput: 8\nconcurrency: [8]\nrequests: ${requests}\nbase_seed: 3\nshared_prefix: {length: 512, groups: 4}`,
      1,
      s.nb,
    );
    assert.ok(all.ok, all.error?.message);
    const p = (all.values as any).points[0];
    assert.equal(p.completed, requests);
    const want = expectedPrefixHitRate(sharedPrefixSpec.parse({ length: 512, groups: 4 }), 1024, requests);
    assert.ok(Math.abs(p.server.prefix_hit_rate - want) <= 0.02, `hit rate ${p.server.prefix_hit_rate} vs ${want}`);
    // A workload that shares prefixes on purpose is not marked as contaminated by its own hits.
    assert.equal(p.contaminated, false);
    assert.ok(!all.findings.some((f) => f.code === 'prefix-cache-contaminated'));

    // share 50%: the plan of this seed carries the prefix on the requests it drew; the server counts them.
    const half = await runCell(
      `bench: sweep\ninput: 1024\noutput: 8\nconcurrency: [8]\nrequests: ${requests}\nbase_seed: 3\nshared_prefix: {length: 512, groups: 4, share: 50%}`,
      2,
      s.nb,
    );
    assert.ok(half.ok, half.error?.message);
    const h = (half.values as any).points[0];
    const sp = sharedPrefixSpec.parse({ length: 512, groups: 4, share: '50%' });
    const plan = new RequestPlanner({
      input: lengthSpec.parse(1024),
      output: lengthSpec.parse(8),
      seed: pointSeed(3, 0, false),
      vocab: VOCAB,
      sharedPrefix: sp,
    });
    const groups = Array.from({ length: requests }, () => plan.next().group).filter((g) => g !== undefined);
    const drawn = ((groups.length - new Set(groups).size) * 512) / (requests * 1024);
    assert.ok(Math.abs(h.server.prefix_hit_rate - drawn) <= 0.02, `hit rate ${h.server.prefix_hit_rate} vs ${drawn}`);
    const configured = expectedPrefixHitRate(sp, 1024, requests);
    assert.ok(
      Math.abs(drawn - configured) < 0.05,
      `the seed's draw ${drawn} is near the configured share ${configured}`,
    );
    assert.ok(h.server.prefix_hit_rate < p.server.prefix_hit_rate - 0.15, 'half the share, about half the hits');
  } finally {
    await s.close();
  }
});

test('a replayed trace on sim: each request leaves at its timestamp ÷ speed, the dispatch lag is reported, hash ids hit', async () => {
  const s = await simNotebook();
  try {
    const rows = [
      { timestamp: 1000, input_length: 1024, output_length: 8, hash_ids: [1, 2] },
      { timestamp: 1500, input_length: 1024, output_length: 4, hash_ids: [1, 3] },
      { timestamp: 2500, input_length: 700, output_length: 8, hash_ids: [1, 2] },
      { timestamp: 5000, input_length: 512, output_length: 6, hash_ids: [9] },
    ];
    fs.writeFileSync(path.join(s.dir, 'trace.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const r = await runCell('bench: sweep\ninput: 800\noutput: 8\ntrace: {file: trace.jsonl, speed: 2}', 1, s.nb);
    assert.ok(r.ok, r.error?.message);
    const v = r.values as any;
    assert.equal(v.points.length, 1);
    const p = v.points[0];
    assert.equal(p.completed, 4, 'every row of the trace, by default');
    const rec = recordsOf(r);
    // Scheduled at (timestamp − first) / speed, in the simulated endpoint's time.
    rec.scheduled.forEach((t, i) => assert.ok(Math.abs(t - [0, 250, 750, 2000][i]) < 0.5, `request ${i} at ${t} ms`));
    assert.deepEqual(rec.requested_output, [8, 4, 8, 6]);
    assert.deepEqual(rec.prompt_tokens, [1024, 1024, 700, 512]);
    // How late each request really left is reported (the client's dispatch lag).
    assert.ok(
      p.dispatch_lag_ms && p.dispatch_lag_ms.n === 4 && p.dispatch_lag_ms.p99 >= 0,
      JSON.stringify(p.dispatch_lag_ms),
    );
    rec.sent.forEach((t, i) => assert.ok(t >= rec.scheduled[i] - 0.01, 'never sent before its time'));
    // Rows 2 and 3 reuse block 1 (and row 3 block 2): the simulator's prefix cache counts them.
    assert.ok(p.server.prefix_hit_rate > 0.3, `hit rate ${p.server.prefix_hit_rate}`);
    assert.equal(p.contaminated, false);
    // The point is labelled with the rate the trace offers: 3 gaps in 2 s.
    assert.ok(Math.abs(p.rate - 1.5) < 1e-9, `rate ${p.rate}`);
    // Its facts (and so its findings' diagnostics) sit on the trace line, not on a rate list it has not.
    const pointFacts = r.facts.filter((f) => 'point' in f && f.point);
    assert.ok(pointFacts.length > 0);
    for (const f of pointFacts) assert.deepEqual((f as { at?: unknown }).at, ['trace'], f.kind);
  } finally {
    await s.close();
  }
});

test('length distributions on sim: each request asks for its own drawn lengths, and the server’s usage matches them', async () => {
  const s = await simNotebook();
  try {
    const r = await runCell(
      'bench: sweep\ninput: {mean: 400, range_ratio: 0.5}\noutput: {dist: lognormal, mean: 16, std: 8, min: 2, max: 64}\nconcurrency: [4]\nrequests: 40\nbase_seed: 11',
      1,
      s.nb,
    );
    assert.ok(r.ok, r.error?.message);
    const rec = recordsOf(r);
    const plan = new RequestPlanner({
      input: lengthSpec.parse({ mean: 400, range_ratio: 0.5 }),
      output: lengthSpec.parse({ dist: 'lognormal', mean: 16, std: 8, min: 2, max: 64 }),
      seed: pointSeed(11, 0, false),
      vocab: VOCAB,
    });
    const planned = Array.from({ length: 40 }, () => plan.next());
    // The records are in request order: request i has the plan's i-th lengths.
    assert.deepEqual(
      rec.requested_input,
      planned.map((q) => q.prompt.length),
    );
    assert.deepEqual(
      rec.requested_output,
      planned.map((q) => q.output),
    );
    assert.deepEqual(rec.prompt_tokens, rec.requested_input);
    assert.deepEqual(rec.output_tokens, rec.requested_output);
    assert.ok(new Set(rec.requested_input).size > 20, 'lengths vary');
    const u = (r.values as any).points[0].usage;
    assert.equal(u.completion_mismatch, 0);
    assert.equal(u.prompt_drift, 0);
    assert.match(
      String(r.outputs[0].items.find((i) => i.mime === MIME.plain)?.data ?? ''),
      /mean \d+ in \/ \d+ out tokens/,
    );
  } finally {
    await s.close();
  }
});

const datasetLines = [
  { prompt: 'Summarise the history of the printing press in two sentences.', output_len: 12 },
  { prompt: 'Write a haiku about GPUs.', output_len: 6 },
  { prompt_token_ids: [1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008], output_len: 5 },
  { prompt: 'List three uses of a prefix cache in serving large language models.', output_len: 9 },
];

test('a dataset on sim: text rows are sent as text, counted by the server’s /tokenize, and the drift is reported', async () => {
  const s = await simNotebook();
  try {
    fs.writeFileSync(path.join(s.dir, 'data.jsonl'), datasetLines.map((l) => JSON.stringify(l)).join('\n'));
    const r = await runCell(
      'bench: sweep\ninput: 64\noutput: 8\nconcurrency: [2]\nrequests: 8\ndataset: {file: data.jsonl}',
      1,
      s.nb,
    );
    assert.ok(r.ok, r.error?.message);
    const v = r.values as any;
    // The simulator counts one token a character, as the dataset's own count does: no drift.
    assert.equal(v.tokenize.rows, 3);
    assert.equal(v.tokenize.drift, 0);
    assert.match(v.notes.join('\n'), /counted by the server's \/tokenize \(3 rows\).*drift \+0\.0%/);
    const rec = recordsOf(r);
    const lens = datasetLines.map((l) => (l.prompt ? [...l.prompt].length : l.prompt_token_ids!.length));
    assert.deepEqual(rec.requested_input, [...lens, ...lens]);
    assert.deepEqual(rec.prompt_tokens, [...lens, ...lens]);
    assert.deepEqual(rec.output_tokens, [12, 6, 5, 9, 12, 6, 5, 9]);
    assert.equal(v.points[0].usage.prompt_drift, 0);
  } finally {
    await s.close();
  }
});

test('a dataset against a server whose tokenizer differs: /tokenize counts (vLLM’s shape) set the lengths, drift reported', async () => {
  const { startScriptedServer } = await import('../support/scriptedServer');
  const srv = await startScriptedServer({ ttftMs: 2, itlMs: 1 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-bench-dataset-'));
  try {
    fs.writeFileSync(path.join(dir, 'data.jsonl'), datasetLines.map((l) => JSON.stringify(l)).join('\n'));
    const nb = createNotebookContext(dir, { ...nodeFiles() });
    assert.ok((await runCell(`setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${srv.url}`, 0, nb)).ok);
    const r = await runCell(
      'bench: sweep\ninput: 64\noutput: 8\nconcurrency: [1]\nrequests: 4\ndataset: {file: data.jsonl}',
      1,
      nb,
    );
    assert.ok(r.ok, r.error?.message);
    // vLLM's TokenizeCompletionRequest: {model, prompt}.
    assert.equal(srv.tokenizeCalls.length, 3);
    assert.deepEqual(Object.keys(srv.tokenizeCalls[0]).sort(), ['model', 'prompt']);
    const v = r.values as any;
    // This server counts words (+ BOS), the dataset counted characters: far fewer tokens.
    const words = (t: string) => t.split(/\s+/).length + 1;
    const texts = datasetLines.filter((l) => l.prompt).map((l) => l.prompt!);
    const want = texts.reduce((a, t) => a + words(t), 0) / 3;
    assert.ok(Math.abs(v.tokenize.server_mean - want) < 1e-9);
    assert.ok(v.tokenize.drift < -0.7, `drift ${v.tokenize.drift}`);
    // The prompts went as text, and each request expected the server's count of it.
    assert.equal(srv.requests[0].body.prompt, datasetLines[0].prompt);
    assert.deepEqual(recordsOf(r).requested_input, [words(texts[0]), words(texts[1]), 8, words(texts[2])]);
    assert.equal(v.points[0].usage.prompt_drift, 0);
  } finally {
    await srv.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('multi-turn sessions on sim: each turn resends the conversation after the think time; the cache holds the earlier turns', async () => {
  const s = await simNotebook();
  try {
    const r = await runCell(
      'bench: sweep\ninput: 256\noutput: 16\nconcurrency: [2]\nrequests: 6\nsessions: {turns: 3, think_time: 1 s}',
      1,
      s.nb,
    );
    assert.ok(r.ok, r.error?.message);
    const rec = recordsOf(r);
    // Two conversations: 256, then 256 + 16 + 256, then 528 + 16 + 256 tokens.
    assert.deepEqual(
      [...rec.prompt_tokens].sort((a, b) => a! - b!),
      [256, 256, 528, 528, 800, 800],
    );
    // A later turn leaves no sooner than one think time (1 s, simulated) after a turn before it ended.
    const byLen = (n: number) => rec.prompt_tokens.flatMap((t, i) => (t === n ? [i] : []));
    for (const [prev, next] of [
      [256, 528],
      [528, 800],
    ])
      for (const i of byLen(next))
        assert.ok(
          byLen(prev).some((k) => rec.scheduled[i] >= rec.end[k] + 950),
          `a ${next}-token turn at ${rec.scheduled[i]} ms, ${prev}-token turns ended at ${byLen(prev).map((k) => rec.end[k])}`,
        );
    const p = (r.values as any).points[0];
    assert.ok(p.server.prefix_hit_rate > 0.4, `hit rate ${p.server.prefix_hit_rate}`);
    assert.equal(p.contaminated, false);
  } finally {
    await s.close();
  }
});

test('a rate schedule on sim: one open-loop point sent at the schedule’s arrivals for this seed', async () => {
  const { rateScheduleSpec, scheduleArrivals } = await import('../../src/core/workload/schedule');
  const s = await simNotebook();
  try {
    const r = await runCell(
      'bench: sweep\ninput: 128\noutput: 4\nbase_seed: 5\nrate_schedule: [{rate: 20 req/s, for: 1 s}, {ramp: [20 req/s, 60 req/s], for: 1 s}]',
      1,
      s.nb,
    );
    assert.ok(r.ok, r.error?.message);
    const arrivals = scheduleArrivals(
      rateScheduleSpec.parse([
        { rate: '20 req/s', for: '1 s' },
        { ramp: ['20 req/s', '60 req/s'], for: '1 s' },
      ]),
      pointSeed(5, 0, false),
    );
    const rec = recordsOf(r);
    assert.equal(rec.n, arrivals.length);
    rec.scheduled.forEach((t, i) => assert.ok(Math.abs(t - arrivals[i] * 1000) < 0.5, `request ${i}: ${t}`));
    const p = (r.values as any).points[0];
    assert.ok(Math.abs(p.rate - 30) < 1e-9, 'labelled with the mean offered rate');
    assert.ok(p.dispatch_lag_ms.n === arrivals.length);
  } finally {
    await s.close();
  }
});
