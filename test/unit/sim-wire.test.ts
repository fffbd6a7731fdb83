/**
 * What the simulator puts on the wire when it writes a step's chunks straight to the sockets
 * (framed by the clock as HTTP/1.1 chunks, not through res.write): the same bytes node:http's
 * res.write and res.end give for the same payloads; a pipelined request (whose response waits for
 * the socket) and an HTTP/1.0 client (no chunked encoding) still get whole responses; and the
 * per-step record the perf script reads (onStepWritten) has one lateness per chunk written and one
 * inter-token error per chunk after a stream's first. No timing is asserted.
 */
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import { after, before, test } from 'node:test';
import { startSimServer, type SimServer } from '../../src/core/sim/server';

type Step = Parameters<NonNullable<NonNullable<Parameters<typeof startSimServer>[0]>['onStepWritten']>>[0];
let sim: SimServer;
let steps: { chunks: number; gaps: number; dueMs: number; startMs: number; firstMs: number; endMs: number }[] = [];

before(async () => {
  sim = await startSimServer({
    speed: 50,
    // Multi-byte text in every chunk: a chunk's size is its bytes, not its characters.
    servedModelName: 'qwen3-8b-ünïcødé-模型',
    onStepWritten: (s: Step) =>
      steps.push({
        chunks: s.chunkLateMs.length,
        gaps: s.itlErrorMs.length,
        dueMs: s.dueMs,
        startMs: s.startMs,
        firstMs: s.firstMs,
        endMs: s.endMs,
      }),
  });
});
after(async () => {
  await sim.close();
});

/** Raw bytes from one TCP connection: `request` is written as is; resolves once `done(bytes)` holds or the peer closes. */
function rawExchange(port: number, request: string, done: (b: Buffer) => boolean): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const s = net.connect(port, '127.0.0.1', () => s.write(request));
    const finish = () => {
      s.destroy();
      resolve(Buffer.concat(parts));
    };
    s.on('data', (d: Buffer) => {
      parts.push(d);
      if (done(Buffer.concat(parts))) finish();
    });
    s.on('end', finish);
    s.on('error', reject);
  });
}

function postText(path: string, body: unknown, version = '1.1'): string {
  const data = JSON.stringify(body);
  return `POST ${path} HTTP/${version}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(data)}\r\n\r\n${data}`;
}

/** A chunked body parsed strictly: each chunk's payload, and the bytes after the terminating 0-chunk. */
function parseChunked(body: Buffer): { chunks: Buffer[]; rest: Buffer } {
  const chunks: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', i);
    assert.ok(eol > i, `a chunk-size line at byte ${i}`);
    const size = parseInt(body.subarray(i, eol).toString('latin1'), 16);
    assert.ok(Number.isInteger(size), `chunk size ${body.subarray(i, eol).toString('latin1')}`);
    i = eol + 2;
    if (size === 0) {
      assert.equal(body.subarray(i, i + 2).toString('latin1'), '\r\n', 'the last chunk ends the body');
      return { chunks, rest: body.subarray(i + 2) };
    }
    chunks.push(body.subarray(i, i + size));
    assert.equal(body.subarray(i + size, i + size + 2).toString('latin1'), '\r\n', 'a chunk ends with CRLF');
    i += size + 2;
  }
}

function split(response: Buffer): { head: string; body: Buffer } {
  const at = response.indexOf('\r\n\r\n');
  assert.ok(at > 0, 'response headers');
  return { head: response.subarray(0, at).toString('latin1'), body: response.subarray(at + 4) };
}

/** How many complete chunked responses `b` holds (each ends with the 0-chunk). */
const terminators = (b: Buffer) => b.toString('latin1').split('\r\n0\r\n\r\n').length - 1;

/** The body node:http writes for these payloads with res.write each and res.end(). */
async function referenceBody(payloads: Buffer[]): Promise<Buffer> {
  const ref = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    for (const p of payloads) res.write(p);
    res.end();
  });
  await new Promise<void>((r) => ref.listen(0, '127.0.0.1', () => r()));
  try {
    const port = (ref.address() as net.AddressInfo).port;
    const got = await rawExchange(port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n', (b) => terminators(b) === 1);
    return split(got).body;
  } finally {
    ref.close();
  }
}

test('a stream’s chunks on the wire are the bytes res.write would send: one chunk per step, sized in bytes', async () => {
  steps = [];
  const req = postText('/v1/completions', {
    prompt: [900, 901, 902],
    max_tokens: 6,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  });
  const got = await rawExchange(sim.port, req, (b) => terminators(b) === 1);
  const { head, body } = split(got);
  assert.match(head, /^HTTP\/1\.1 200 OK/);
  assert.match(head, /\r\nTransfer-Encoding: chunked/i);
  const { chunks, rest } = parseChunked(body);
  assert.equal(rest.length, 0);
  // Six steps, six chunks: the last holds the usage and [DONE] too.
  assert.equal(chunks.length, 6);
  for (const c of chunks) assert.match(c.toString('utf8'), /^data: \{.*\n\n$/s);
  assert.match(chunks[5].toString('utf8'), /"usage":\{"prompt_tokens":3,.*data: \[DONE\]\n\n$/s);
  assert.ok(chunks[0].length > chunks[0].toString('utf8').length, 'the chunks hold multi-byte text');
  assert.deepEqual(body, await referenceBody(chunks));
});

test('a pipelined request (its response waits for the socket) and an HTTP/1.0 client still get whole streams', async () => {
  const body = { prompt: 'pipe', max_tokens: 4, ignore_eos: true, stream: true };
  const two = postText('/v1/completions', body) + postText('/v1/completions', body);
  const got = await rawExchange(sim.port, two, (b) => terminators(b) === 2);
  const first = split(got);
  const a = parseChunked(first.body);
  const second = split(a.rest);
  const b = parseChunked(second.body);
  for (const r of [a, b]) {
    assert.equal(r.chunks.length, 4, 'four steps: four chunks, the last with [DONE]');
    assert.match(r.chunks[3].toString('utf8'), /"finish_reason":"length".*\n\ndata: \[DONE\]\n\n$/s);
  }
  assert.equal(b.rest.length, 0);

  // HTTP/1.0 has no chunked encoding: the body is the SSE text itself, ended by closing the connection.
  const old = await rawExchange(sim.port, postText('/v1/completions', body, '1.0'), () => false);
  const r = split(old);
  assert.doesNotMatch(r.head, /transfer-encoding/i);
  const text = r.body.toString('utf8');
  assert.equal(text.match(/^data: /gm)?.length, 5);
  assert.ok(text.endsWith('data: [DONE]\n\n'));
});

test('the step record has a lateness per chunk written and an inter-token error per chunk after each stream’s first', async () => {
  steps = [];
  const body = JSON.stringify({ prompt: 'rec', max_tokens: 5, ignore_eos: true, stream: true });
  const one = () =>
    fetch(`${sim.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
      (r) => r.text(),
    );
  const texts = await Promise.all([one(), one()]);
  for (const t of texts) assert.match(t, /data: \[DONE\]/);
  // Five tokens each, the last step's chunk with [DONE]: five writes per stream, four after its first.
  assert.equal(
    steps.reduce((a, s) => a + s.chunks, 0),
    10,
  );
  assert.equal(
    steps.reduce((a, s) => a + s.gaps, 0),
    8,
  );
  for (const s of steps) assert.ok(s.startMs <= s.firstMs && s.firstMs <= s.endMs, JSON.stringify(s));
  // /metrics counts one lateness per step.
  const m = /^inflab:sim_steps_total\{[^}]*\} (\d+)/m.exec(sim.metricsText());
  assert.ok(m && Number(m[1]) >= steps.length);
});
