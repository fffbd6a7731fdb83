/**
 * The simulator's real-time loop on a thread of its own (clock: 'worker', src/core/sim/clock.ts in
 * clockWorker.ts) keeps handing steps over while the HTTP thread is busy, and the responses are
 * the same bytes as when the loop runs on the HTTP thread (the default). No timing is asserted: only which thread
 * did the work while the other was blocked, and what was sent.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { test } from 'node:test';
import { inThreadClock, wallMs, type ClockAdd, type FromClock } from '../../src/core/sim/clock';
import { clockScript, defaultSimSetup, startSimServer, workerClock } from '../../src/core/sim/server';

type Step = { dueMs: number; clockMs: number; endMs: number; tokens: number };

/** Stream a completion; `onFirst` runs (synchronously) when the first chunk arrives. */
function streamCompletion(url: string, body: unknown, onFirst?: () => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(
      `${url}/v1/completions`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
      (res) => {
        let text = '';
        let first = true;
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
          if (first && onFirst) onFirst();
          first = false;
        });
        res.on('end', () => resolve(text));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** Blocks this thread for `ms` and returns the window it was blocked (performance.now()). */
function block(ms: number): [number, number] {
  const a = performance.now();
  while (performance.now() - a < ms) {
    // busy: the event loop cannot run
  }
  return [a, performance.now()];
}

async function handedOverWhileBlocked(clock: 'worker' | 'here') {
  const steps: Step[] = [];
  const sim = await startSimServer({ speed: 1, clock, onStepWritten: (s) => steps.push(s) });
  try {
    assert.equal(sim.clock, clock);
    let window: [number, number] = [0, 0];
    const text = await streamCompletion(
      sim.url,
      { prompt: 'the clock', max_tokens: 120, ignore_eos: true, stream: true },
      () => (window = block(400)),
    );
    assert.match(text, /data: \[DONE\]/);
    const during = steps.filter((s) => s.clockMs > window[0] && s.clockMs < window[1]);
    return { during: during.length, steps };
  } finally {
    await sim.close();
  }
}

test('the clock thread hands steps over while the HTTP thread is blocked; on the HTTP thread it cannot', async () => {
  const worker = await handedOverWhileBlocked('worker');
  assert.ok(worker.during >= 1, `steps handed over while the HTTP thread was blocked: ${worker.during}`);
  // Every step's tokens were still written (once the HTTP thread ran again), each after its due time.
  assert.equal(
    worker.steps.reduce((a, s) => a + s.tokens, 0),
    120,
  );
  for (const s of worker.steps) assert.ok(s.clockMs >= s.dueMs && s.endMs >= s.clockMs, JSON.stringify(s));
  const here = await handedOverWhileBlocked('here');
  assert.equal(here.during, 0);
});

test('the same requests give the same bytes whichever thread runs the loop (ids and times aside)', async () => {
  const bodies = [
    { prompt: 'same bytes', max_tokens: 9, ignore_eos: true, stream: true, stream_options: { include_usage: true } },
    { prompt: [11, 12, 13, 14], max_tokens: 5, ignore_eos: true },
  ];
  const run = async (clock: 'worker' | 'here') => {
    const sim = await startSimServer({ speed: 50, clock });
    try {
      const out: string[] = [];
      for (const b of bodies) out.push(await streamCompletion(sim.url, b));
      return out.map((t) => t.replace(/"id":"cmpl-[0-9a-f]+"/g, '"id":"ID"').replace(/"created":\d+/g, '"created":0'));
    } finally {
      await sim.close();
    }
  };
  const w = await run('worker');
  const h = await run('here');
  assert.deepEqual(w, h);
  assert.match(w[0], /"usage":\{"prompt_tokens":/);
  assert.match(w[1], /^\{"id":"ID","object":"text_completion"/);
});

/** A request for the clock directly (what the HTTP side sends it). */
function addMessage(rid: number): ClockAdd {
  return {
    type: 'add',
    rid,
    id: `cmpl-${rid}`,
    kind: 'completion',
    stream: true,
    includeUsage: false,
    continuous: false,
    createdAt: 0,
    prompt: Uint32Array.from([1, 2, 3, 4]),
    maxTokens: 3,
    minTokens: 0,
    ignoreEos: true,
    arrival: wallMs(),
  };
}

/**
 * Keeps this thread from taking another turn of its event loop (as a burst of requests handled in
 * one turn does) while it calls `poll` and runs microtasks, until a step has arrived.
 */
async function takesStepWithoutATurn(poll: () => void, got: FromClock[]): Promise<void> {
  let turned = false;
  setImmediate(() => (turned = true));
  const until = performance.now() + 10_000;
  while (!got.some((m) => m.type === 'step') && performance.now() < until) {
    poll();
    for (let i = 0; i < 5; i++) await Promise.resolve();
  }
  assert.equal(turned, false);
  assert.ok(got.some((m) => m.type === 'step'));
}

test('between requests the HTTP side takes a step that fell due without waiting for its event loop’s turn (both clocks)', async () => {
  const init = { setup: defaultSimSetup(), speed: 1, modelName: 'm', t0: wallMs() };
  const here: FromClock[] = [];
  const h = inThreadClock(init, (m) => here.push(m));
  try {
    h.onMessage(addMessage(1));
    await takesStepWithoutATurn(() => h.poll(), here);
  } finally {
    h.close();
  }
  const script = clockScript();
  assert.ok(script);
  const worker: FromClock[] = [];
  const link = await workerClock(script, init, (m) => worker.push(m));
  try {
    link.send(addMessage(1));
    await takesStepWithoutATurn(() => link.poll(), worker);
  } finally {
    await link.close();
  }
});
