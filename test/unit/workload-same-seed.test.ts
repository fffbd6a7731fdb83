/**
 * Same seed → same request set in the bench and in predict: serving. One cell's workload keys are
 * parsed by both kinds' schemas; the bench runs against a scripted server on 127.0.0.1 that keeps
 * every request body, predict: serving's point runs its LoadRun (the kind's own path: the same
 * loader, planner and seed) on a simulated engine whose admissions are recorded. The two lists of
 * prompt ids, max_tokens and send times must be equal.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { pointSeed } from '../../src/core/bench/prompts';
import type { ColumnarRecords } from '../../src/core/bench/records';
import { findGpu, findModel } from '../../src/core/catalog';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { Setup } from '../../src/core/engine/types';
import { nodeFiles } from '../../src/core/host/files';
import { benchSweepKind } from '../../src/core/kinds/bench';
import { servingKind } from '../../src/core/kinds/predictServing';
import { SimEngine } from '../../src/core/sim/engine';
import { LoadRun } from '../../src/core/sim/load';
import { tokenize } from '../../src/core/sim/tokenizer';
import { loadCellWorkload, plannerFor } from '../../src/core/workload/cell';
import { startScriptedServer } from '../support/scriptedServer';

const setup: Setup = {
  name: 'lab',
  gpu: findGpu('a100-sxm4-80gb')!,
  model: findModel('qwen3-8b')!,
  weights: 'bf16',
  kvCache: 'bf16',
  endpoint: 'sim',
};

interface Sent {
  ids: number[];
  maxTokens: number;
  /** ms after the point's start. */
  at: number;
}

const round = (x: number) => Math.round(x * 1000) / 1000;

/** predict: serving's point 0 of this cell: what its LoadRun hands the engine. */
async function servingRequests(workloadYaml: string, dir: string, loop: string): Promise<Sent[]> {
  const cell = servingKind.schema.parse(parseYaml(`predict: serving\nseed: 42\n${loop}\n${workloadYaml}`)) as any;
  const nb = createNotebookContext(dir, { ...nodeFiles() });
  const w = await loadCellWorkload(cell, nb);
  const engine = new SimEngine({ setup });
  const sent: Sent[] = [];
  const add = engine.add.bind(engine);
  engine.add = (r) => {
    sent.push({ ids: Array.from(r.prompt), maxTokens: r.maxTokens, at: round((r.arrival ?? 0) * 1000) });
    return add(r);
  };
  // As predict: serving's run() builds its point: the cell's fixed seed, the engine's vocabulary.
  const plan = plannerFor(w, cell.seed, engine.cfg.vocab)!;
  const closed = cell.concurrency !== undefined;
  const load = new LoadRun(engine, {
    input: 1,
    output: 1,
    requests: Number.isFinite(plan.size) ? plan.size : cell.requests,
    seed: cell.seed,
    plan,
    ...(closed ? { concurrency: cell.concurrency[0] } : { rate: 1 }),
  });
  while (!load.advance(10_000));
  return sent;
}

/** The bench cell with the same keys against the scripted server: what reached the server. */
async function benchRequests(workloadYaml: string, dir: string, loop: string, closed: boolean): Promise<Sent[]> {
  const srv = await startScriptedServer({ ttftMs: 1, itlMs: 0.2 });
  try {
    const nb = createNotebookContext(dir, { ...nodeFiles() });
    assert.ok((await runCell(`setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${srv.url}`, 0, nb)).ok);
    const text = `bench: sweep\nseed: 42\n${loop}\n${workloadYaml}`;
    assert.ok(benchSweepKind.schema.safeParse(parseYaml(text)).success, 'the bench schema takes the same keys');
    const r = await runCell(text, 1, nb);
    assert.ok(r.ok, r.error?.message);
    assert.equal((r.values as any).points[0].seed, pointSeed(42, 0, true));
    const rec = (r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.records)!.data as any).points[0]
      .records as ColumnarRecords;
    const bodies = srv.requests.filter((q) => q.path === '/v1/completions');
    // Request ids name each body's index in the point (…-r<i>).
    return bodies.map((q) => {
      const i = Number(/-r(\d+)$/.exec(q.requestId!)![1]);
      const p = q.body.prompt;
      return {
        ids: typeof p === 'string' ? tokenize(p, setup.model.vocab) : p,
        maxTokens: q.body.max_tokens,
        at: closed ? NaN : round(rec.scheduled[rec.id.indexOf(i)]),
        i,
      };
    });
  } finally {
    await srv.close();
  }
}

const key = (s: Sent) => `${s.ids.join(',')}|${s.maxTokens}`;

for (const [name, workload, loop, closed, ordered] of [
  [
    'length distributions and a shared prefix (closed loop)',
    'input: {mean: 300, range_ratio: 0.5}\noutput: {dist: normal, mean: 12, std: 4, min: 2, max: 30}\nshared_prefix: {length: 128, groups: 3, share: 50%}',
    'concurrency: [3]\nrequests: 12',
    true,
    true,
  ],
  [
    'a replayed trace (open loop, its own arrivals)',
    'input: 100\noutput: 8\ntrace: {file: trace.jsonl, speed: 4}',
    '',
    false,
    true,
  ],
  [
    'a rate schedule',
    'input: 64\noutput: 4\nrate_schedule: [{rate: 20 req/s, for: 0.3 s}, {ramp: [20 req/s, 50 req/s], for: 0.3 s}]',
    '',
    false,
    true,
  ],
  [
    'a dataset (text and token ids)',
    'input: 64\noutput: 8\ndataset: {file: data.jsonl}',
    'concurrency: [2]\nrequests: 12',
    true,
    true,
  ],
  [
    'multi-turn sessions (each stream one conversation)',
    'input: 40\noutput: 6\nsessions: {turns: 4, think_time: 10 ms}',
    'concurrency: [3]\nrequests: 12',
    true,
    false,
  ],
] as const)
  test(`same seed → same requests in the bench and predict: serving: ${name}`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-same-seed-'));
    try {
      const trace = [0, 40, 100, 180, 200, 320].map((t, i) => ({
        timestamp: 1000 + t,
        input_length: 600 + 37 * i,
        output_length: 3 + i,
        hash_ids: [1, 2 + (i % 2)],
      }));
      fs.writeFileSync(path.join(dir, 'trace.jsonl'), trace.map((r) => JSON.stringify(r)).join('\n'));
      fs.writeFileSync(
        path.join(dir, 'data.jsonl'),
        [
          { prompt: 'How do KV caches grow with context?', output_len: 7 },
          { prompt_token_ids: [5000, 5001, 5002, 5003], output_len: 3 },
          { prompt: 'Explain continuous batching.', output_len: 5 },
        ]
          .map((r) => JSON.stringify(r))
          .join('\n'),
      );
      const serving = await servingRequests(workload, dir, loop);
      const bench = await benchRequests(workload, dir, loop, closed);
      assert.ok(serving.length >= 6, `${serving.length} requests`);
      assert.equal(bench.length, serving.length);
      if (ordered) {
        // Request i of the bench is request i of predict: serving: ids, max_tokens, and (open loop) send time.
        const byIndex = [...bench].sort((a: any, b: any) => a.i - b.i);
        byIndex.forEach((b, i) => {
          assert.deepEqual(b.ids, serving[i].ids, `request ${i} ids`);
          assert.equal(b.maxTokens, serving[i].maxTokens, `request ${i} max_tokens`);
          if (!closed) assert.ok(Math.abs(b.at - serving[i].at) < 0.01, `request ${i} at ${b.at} vs ${serving[i].at}`);
        });
      } else {
        // Conversations interleave by timing; each conversation's turns are the same in both.
        assert.deepEqual(bench.map(key).sort(), serving.map(key).sort());
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
