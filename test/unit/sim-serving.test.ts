/**
 * `predict: serving` as a well-behaved cell: a sweep too large to simulate is refused up front with
 * what to write instead; a long one yields to the event loop, reports progress and stops on cancel.
 * (No timed assertions: what is checked is that the loop was served and the cancel honoured.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { ProgressUpdate } from '../../src/core/engine/types';
import { SERVING_LIMITS, workLimitMessage } from '../../src/core/kinds/predictServing';

async function notebook() {
  const ctx = createNotebookContext(process.cwd(), {});
  assert.ok((await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 0, ctx)).ok);
  return ctx;
}

test('requests: 100000000 is refused before running, at requests, saying what to write instead', async () => {
  const ctx = await notebook();
  const r = await runCell(
    'predict: serving\ninput: 1000\noutput: 1000\nconcurrency: [1, 8]\nrequests: 100000000\n',
    1,
    ctx,
  );
  assert.equal(r.ok, false);
  const f = r.findings.find((x) => x.severity === 'error' && x.path[0] === 'requests');
  assert.ok(f, JSON.stringify(r.findings));
  assert.match(f.message, /write requests: 160,000 or fewer/);
  assert.deepEqual(r.error?.path, ['requests']);
});

test('the whole sweep is capped too: points × requests × (input + output)', async () => {
  const ctx = await notebook();
  const points = Array.from({ length: 40 }, (_, i) => i + 1).join(', ');
  const r = await runCell(
    `predict: serving\ninput: 1000\noutput: 1000\nconcurrency: [${points}]\nrequests: 10000\n`,
    1,
    ctx,
  );
  assert.equal(r.ok, false);
  const f = r.findings.find((x) => x.path[0] === 'requests');
  assert.ok(f);
  assert.match(f.message, /40 points × 10,000 requests/);
  assert.match(f.message, /write requests: 8,000 or fewer, or split the points over several cells/);
  // Within the limits: no message.
  assert.equal(workLimitMessage(200, 8, 1000, 1000), undefined);
  // A real trace's scale: 100,000 requests of 2k/1k (300 M tokens) in one point.
  assert.equal(workLimitMessage(100_000, 1, 2048, 1024), undefined);
  assert.equal(workLimitMessage(SERVING_LIMITS.tokensPerPoint / 2000, 1, 1000, 1000), undefined);
  assert.ok(workLimitMessage(SERVING_LIMITS.tokensPerPoint / 2000 + 1, 1, 1000, 1000));
});

test('a long prediction yields to the event loop, reports progress, and stops on cancel', async () => {
  const ctx = await notebook();
  const ac = new AbortController();
  const updates: ProgressUpdate[] = [];
  let ticks = 0;
  let resolved = false;
  const iv = setInterval(() => {
    if (!resolved) ticks++;
  }, 1);
  const pending = runCell(
    'predict: serving\ninput: 1000\noutput: 1000\nconcurrency: [1, 2, 4, 8]\nrequests: 1000\n',
    1,
    ctx,
    {
      signal: ac.signal,
      onProgress: (u) => {
        updates.push(u);
        // Cancel once the simulation has visibly got somewhere (a fraction past zero).
        if ((u.fraction ?? 0) > 0) ac.abort();
      },
    },
  );
  const r = await pending;
  resolved = true;
  clearInterval(iv);
  assert.equal(r.ok, false, 'cancelled, not finished');
  assert.equal(r.error?.code, 'cancelled');
  assert.ok(
    updates.length >= 1 && updates.every((u) => typeof u.fraction === 'number' && u.fraction >= 0 && u.fraction < 1),
    JSON.stringify(updates),
  );
  assert.ok(ticks > 0, 'timers ran while the cell was simulating');
});

test('a prediction that runs to the end reports increasing progress up to 1', async () => {
  const ctx = await notebook();
  const fractions: number[] = [];
  const r = await runCell('predict: serving\ninput: 500\noutput: 200\nconcurrency: [1, 16]\nrequests: 40\n', 1, ctx, {
    onProgress: (u) => fractions.push(u.fraction ?? NaN),
  });
  assert.ok(r.ok, JSON.stringify(r.error));
  assert.ok(fractions.length >= 2);
  for (let i = 1; i < fractions.length; i++) assert.ok(fractions[i] >= fractions[i - 1], fractions.join(', '));
  assert.equal(fractions.at(-1), 1);
});
