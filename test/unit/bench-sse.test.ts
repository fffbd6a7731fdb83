/**
 * The client's SSE scanning on bytes: streams cut at arbitrary byte offsets (inside "data:", inside
 * a multi-byte character, between "\n" and "\n"), CRLF line endings, comments and other fields,
 * events whose data spans several lines. The count of content chunks and the usage the client reads
 * are compared with an independent parse of the same bytes (eventsource-parser).
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import fc from 'fast-check';
import { createAgent, isPlainChunk, sendRequest, type ClientConfig } from '../../src/core/bench/client';

/** The stream to send and where to cut it, posted to the server as the request body's `script`. */
interface Script {
  stream: string;
  cuts: number[];
}

let server: http.Server;
let url = '';
const agent = createAgent(4);

before(async () => {
  server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (c) => body.push(c));
    req.on('end', async () => {
      const { script } = JSON.parse(Buffer.concat(body).toString()) as { script: Script };
      const bytes = Buffer.from(script.stream);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let at = 0;
      for (const c of [...script.cuts.filter((x) => x > 0 && x < bytes.length).sort((a, b) => a - b), bytes.length]) {
        if (c <= at) continue;
        res.write(bytes.subarray(at, c));
        at = c;
        // Let each piece leave as its own write.
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await agent.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const cfg = (script: Script): ClientConfig => ({
  baseUrl: url,
  api: 'completions',
  model: 'm',
  idleTimeoutMs: 5000,
  requestTimeoutMs: 10_000,
  doneGraceMs: 200,
  topP: 0.95,
  topK: 50,
  temperature: 1,
  extraBody: { script },
});

async function run(script: Script) {
  return sendRequest(agent, cfg(script), { prompt: [1, 2, 3], outputTokens: 4 });
}

/** What an independent SSE parser makes of the same bytes: content chunks, usage, [DONE]. */
function reference(stream: string) {
  let chunks = 0;
  let completion: number | undefined;
  let done = false;
  const p = createParser({
    onEvent(e) {
      if (e.data === '[DONE]') return void (done = true);
      const o = JSON.parse(e.data);
      if (Array.isArray(o.choices) && o.choices.length) chunks++;
      if (o.usage) completion = o.usage.completion_tokens;
    },
  });
  p.feed(stream);
  return { chunks, completion, done };
}

const ev = (o: unknown, eol = '\n') => `data: ${JSON.stringify(o)}${eol}${eol}`;
const content = (text: string, extra: Record<string, unknown> = {}) => ({
  id: 'c',
  object: 'text_completion',
  choices: [{ index: 0, text, finish_reason: null }],
  usage: null,
  ...extra,
});

function stream(texts: string[], eol = '\n'): string {
  return (
    texts.map((t) => ev(content(t), eol)).join('') +
    ev({ id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: texts.length } }, eol) +
    `data: [DONE]${eol}${eol}`
  );
}

test('content chunks are counted on the bytes; anything else is parsed', () => {
  const b = (s: string) => Buffer.from(s);
  const plain = JSON.stringify(content(' hi'));
  assert.equal(isPlainChunk(b(plain), 0, plain.length), true);
  const withUsage = JSON.stringify(content(' hi', { usage: { prompt_tokens: 1, completion_tokens: 1 } }));
  assert.equal(isPlainChunk(b(withUsage), 0, withUsage.length), false, 'a chunk carrying usage is parsed');
  const err = JSON.stringify({ error: { message: 'x' }, choices: [{ index: 0 }] });
  assert.equal(isPlainChunk(b(err), 0, err.length), false, 'a chunk carrying an error is parsed');
  const empty = JSON.stringify({ choices: [], usage: null });
  assert.equal(isPlainChunk(b(empty), 0, empty.length), false, 'no choice: parsed');
  const quoted = JSON.stringify(content('the word "error" and "usage":{ in text'));
  assert.equal(isPlainChunk(b(quoted), 0, quoted.length), true, 'escaped quotes inside the text are not keys');
  assert.equal(isPlainChunk(b(`xx${plain}yy`), 2, plain.length + 2), true, 'a range inside a larger buffer');
  assert.equal(isPlainChunk(b('[1,2]'), 0, 5), false);
});

test('LF and CRLF streams, comments and other fields, multi-line data, [DONE]', async () => {
  const cases: [string, string][] = [
    ['LF', stream(['a', 'b', 'c', 'd'])],
    ['CRLF', stream(['a', 'b', 'c', 'd'], '\r\n')],
    [
      'comments and fields',
      `: keep-alive\n\nevent: message\nid: 1\nretry: 10\n${ev(content('a'))}${stream(['b', 'c', 'd'])}`,
    ],
    ['multi-line data', `data: {"choices":\ndata: [{"index":0,"text":"a"}]}\n\n${stream(['b', 'c', 'd'])}`],
    [
      'usage inside a content chunk',
      ev(content('a')) + ev(content('b', { usage: { prompt_tokens: 3, completion_tokens: 2 } })) + 'data: [DONE]\n\n',
    ],
  ];
  for (const [name, s] of cases) {
    const r = await run({ stream: s, cuts: [] });
    const ref = reference(s);
    assert.equal(r.ok, true, `${name}: ${r.errorKind} ${r.errorMessage}`);
    assert.equal(r.errorKind, undefined, `${name}: ${r.errorMessage}`);
    assert.equal(r.chunkAt.length, ref.chunks, `${name}: content chunks`);
    assert.equal(r.outputTokens, ref.completion, `${name}: usage`);
  }
});

test('property: a stream cut at any byte offsets reads the same as the whole (chunk count, usage, order of times)', async () => {
  const texts = ['α', 'ü ', '日本', '"error"', 'plain', 'a\nb', '😀'];
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.constantFrom(...texts), { minLength: 1, maxLength: 6 }),
      fc.boolean(),
      fc.array(fc.nat(), { maxLength: 12 }),
      async (ts, crlf, cutSeeds) => {
        const s = stream(ts, crlf ? '\r\n' : '\n');
        const len = Buffer.byteLength(s);
        const r = await run({ stream: s, cuts: cutSeeds.map((c) => c % len) });
        const ref = reference(s);
        if (!r.ok || r.errorKind) return false;
        if (r.chunkAt.length !== ref.chunks || r.outputTokens !== ref.completion) return false;
        for (let i = 1; i < r.chunkAt.length; i++) if (r.chunkAt[i] < r.chunkAt[i - 1]) return false;
        return true;
      },
    ),
    { numRuns: 60, seed: 20261129 },
  );
});

test('a line that is not SSE fails the request as malformed-sse, even when cut across reads', async () => {
  const s = `${ev(content('a'))}this is not sse\n\n${stream(['b'])}`;
  for (const cuts of [[], [Buffer.byteLength(ev(content('a'))) + 4]]) {
    const r = await run({ stream: s, cuts });
    assert.equal(r.errorKind, 'malformed-sse', `${r.errorKind} ${r.errorMessage}`);
    assert.match(r.errorMessage ?? '', /not an SSE line: this is not sse/);
  }
});

test('chunks that arrive together are reported: the share of gaps under 0.1 ms, and a finding', async () => {
  const { startScriptedServer } = await import('../support/scriptedServer');
  const { runSweep } = await import('../../src/core/bench');
  const { benchValues } = await import('../../src/core/bench/report');
  const { sweepFindings } = await import('../support/benchFindings');
  const s = await startScriptedServer({ ttftMs: 5, itlMs: 4, fault: () => ({ kind: 'pairs' }) });
  try {
    const r = await runSweep(
      {
        endpoint: s.url,
        vocab: 1000,
        input: 8,
        output: 16,
        concurrency: [1],
        requests: 4,
        rttProbes: 1,
        scrape: false,
      },
      { worker: 'off' },
    );
    const spec = {
      loop: 'closed' as const,
      input: 8,
      output: 16,
      requests: 4,
      seed: { mode: 'per-point' as const, base: 1 },
      percentiles: [99],
    };
    // 16 chunks in 8 writes: 8 of the 15 gaps in each request are inside a write.
    const share = (benchValues(r, spec).points as { itl_read_together_share: number }[])[0].itl_read_together_share;
    assert.ok(share >= 0.5, `share of gaps under 0.1 ms: ${share}`);
    const f = sweepFindings(r, spec).find((x) => x.code === 'client-read-bursts');
    assert.ok(f, 'a client-read-bursts finding');
    assert.match(f.message, /c=1: \d+(\.\d)?% of the gaps between chunks are under 0.1 ms/);
  } finally {
    await s.close();
  }
});
