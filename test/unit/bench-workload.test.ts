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
