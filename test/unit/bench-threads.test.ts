/**
 * A closed-loop point split across load threads (shards.ts) against a scripted server: every
 * request is recorded once, under the id its X-Request-Id carries, with the server's chunk count,
 * on one clock (sent before first chunk before end, all within the point), and the prompts are the
 * ones the same point draws on one thread.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runSweep } from '../../src/core/bench';
import { fromColumnar } from '../../src/core/bench/records';
import { loadThreads } from '../../src/core/bench/shards';
import { startScriptedServer } from '../support/scriptedServer';

test('load threads: auto count is 1 for few streams, one per 125 streams up to 8 and two per core, never above the concurrency, and an explicit count wins', () => {
  assert.equal(loadThreads(1, undefined, 16), 1);
  assert.equal(loadThreads(8, undefined, 16), 1);
  assert.equal(loadThreads(125, undefined, 16), 1);
  assert.equal(loadThreads(250, undefined, 16), 2);
  assert.equal(loadThreads(500, undefined, 16), 4);
  assert.equal(loadThreads(1000, undefined, 16), 8);
  assert.equal(loadThreads(100_000, undefined, 16), 8);
  // Two cores: at most four threads (more only outnumber a local server for the CPU).
  assert.equal(loadThreads(500, undefined, 2), 4);
  assert.equal(loadThreads(1000, undefined, 2), 4);
  assert.equal(loadThreads(1000, undefined, 1), 2);
  assert.equal(loadThreads(3, 8), 3);
  assert.equal(loadThreads(1000, 2), 2);
  assert.equal(loadThreads(1000, 6, 2), 6);
});

test('a point on two load threads: every request once, matched to the server by X-Request-Id, same prompts as one thread', async () => {
  const s = await startScriptedServer({ ttftMs: 20, itlMs: 5 });
  try {
    const opts = {
      endpoint: s.url,
      vocab: 151936,
      input: 16,
      output: 8,
      concurrency: [6],
      requests: 18,
      warmup: 4,
      seed: { mode: 'fixed' as const, value: 7 },
    };
    const two = await runSweep({ ...opts, threads: 2, runId: 'two' });
    await runSweep({ ...opts, threads: 1, runId: 'one' }); // only its prompts, as the server saw them, are compared below
    const p = two.points[0];
    assert.equal(p.metrics.completed, 18);
    const recs = fromColumnar(p.records!);
    assert.deepEqual(
      recs.map((r) => r.id),
      Array.from({ length: 18 }, (_, i) => i),
    );
    for (const r of recs) {
      const srv = s.requests.find((q) => q.requestId === `inflab-two-p0-r${r.id}`);
      assert.ok(srv, `the server saw request ${r.id}`);
      assert.equal(r.chunkMs.length, srv!.chunkEpochMs.length);
      assert.ok(
        r.sentMs >= -1 &&
          r.sentMs < r.chunkMs[0] &&
          r.chunkMs[r.chunkMs.length - 1] <= r.endMs &&
          r.endMs <= p.durationMs + 0.001,
        `request ${r.id} times out of order: ${JSON.stringify(r)}`,
      );
    }
    const warm = s.requests
      .filter((q) => q.requestId?.startsWith('inflab-two-p0-w'))
      .map((q) => q.requestId)
      .sort();
    assert.deepEqual(warm, ['inflab-two-p0-w0', 'inflab-two-p0-w1', 'inflab-two-p0-w2', 'inflab-two-p0-w3']);
    const prompts = (run: string) =>
      s.requests
        .filter((q) => q.requestId?.startsWith(`inflab-${run}-p0-r`))
        .sort((a, b) => Number(a.requestId!.split('-r')[1]) - Number(b.requestId!.split('-r')[1]))
        .map((q) => JSON.stringify(q.prompt));
    assert.deepEqual(prompts('two'), prompts('one'));
    assert.ok(p.observedInFlight > 0 && p.maxInFlight <= 6, `in flight ${p.observedInFlight} / max ${p.maxInFlight}`);
  } finally {
    await s.close();
  }
});
