/**
 * The simulated vLLM endpoint over real HTTP on 127.0.0.1: SSE parsed by eventsource-parser,
 * /metrics by parse-prometheus-text-format, vLLM-format logs, OpenAI-style 400s, malformed input,
 * 1,000 concurrent connections, and `inflab sim` as a process.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { startSimServer, type SimServer } from '../../src/core/sim/server';

const SPEED = 20;
let sim: SimServer;
const lines: string[] = [];

before(async () => {
  sim = await startSimServer({
    port: 0,
    speed: SPEED,
    log: (l) => lines.push(l),
    statsIntervalS: 0.2,
    engine: { maxModelLen: 4096 },
  });
});
after(async () => {
  await sim.close();
});

function post(
  url: string,
  body: unknown,
  raw = false,
): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const data = raw ? String(body) : JSON.stringify(body);
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, text, headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}
function get(url: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      })
      .on('error', reject);
  });
}
function sse(text: string): string[] {
  const out: string[] = [];
  const p = createParser({ onEvent: (e) => out.push(e.data) });
  p.feed(text);
  return out;
}

test('streams /v1/completions as vLLM does: one chunk per token, finish_reason on the last, then usage, then [DONE]', async () => {
  const prompt = Array.from({ length: 100 }, (_, i) => 1000 + i);
  const t0 = performance.now();
  const r = await post(`${sim.url}/v1/completions`, {
    model: sim.model,
    prompt,
    max_tokens: 20,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
    top_p: 0.9,
    top_k: 50,
  });
  const wallMs = performance.now() - t0;
  assert.equal(r.status, 200);
  assert.match(String(r.headers['content-type']), /^text\/event-stream/);
  const events = sse(r.text);
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1).map((d) => JSON.parse(d));
  const withChoice = chunks.filter((c) => c.choices.length);
  assert.equal(withChoice.length, 20);
  for (const c of withChoice) {
    assert.equal(c.object, 'text_completion');
    assert.match(c.id, /^cmpl-/);
    assert.equal(c.model, sim.model);
    assert.equal(typeof c.choices[0].text, 'string');
    assert.equal(c.usage, null);
  }
  assert.deepEqual(
    withChoice.slice(0, -1).map((c) => c.choices[0].finish_reason),
    Array(19).fill(null),
  );
  assert.equal(withChoice.at(-1).choices[0].finish_reason, 'length');
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.prompt_tokens, 100);
  assert.equal(usage.usage.completion_tokens, 20);
  assert.equal(usage.usage.total_tokens, 120);
  assert.equal(typeof usage.usage.prompt_tokens_details.cached_tokens, 'number');
  // Tokens leave at the simulated step ends: 20 steps of ≥ 11.3 ms each, divided by the speed factor.
  assert.ok(wallMs >= (20 * 11.3) / SPEED, `${wallMs} ms`);
  // The same prompt again is served from the prefix cache (every full block but the last token).
  const again = await post(`${sim.url}/v1/completions`, {
    prompt,
    max_tokens: 2,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  });
  const u2 = JSON.parse(sse(again.text).at(-2)!);
  assert.equal(u2.usage.prompt_tokens_details.cached_tokens, 96);
});

test('/v1/chat/completions streams a role chunk, content chunks and usage; non-streaming returns one object', async () => {
  const r = await post(`${sim.url}/v1/chat/completions`, {
    messages: [{ role: 'user', content: 'Hello there' }],
    max_tokens: 5,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  });
  const ev = sse(r.text);
  assert.equal(ev.at(-1), '[DONE]');
  const chunks = ev.slice(0, -1).map((d) => JSON.parse(d));
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const content = chunks.filter((c) => c.choices.length && c.choices[0].delta.content);
  assert.equal(content.length, 5);
  assert.equal(content.at(-1).choices[0].finish_reason, 'length');
  assert.equal(chunks.at(-1).usage.completion_tokens, 5);
  const plain = await post(`${sim.url}/v1/chat/completions`, {
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 3,
    ignore_eos: true,
  });
  const body = JSON.parse(plain.text);
  assert.equal(body.object, 'chat.completion');
  assert.equal(body.choices[0].message.role, 'assistant');
  assert.equal([...body.choices[0].message.content].length, 3);
  assert.equal(body.usage.completion_tokens, 3);
});

test('/v1/models names the model and max_model_len; /tokenize and /detokenize round-trip; /health', async () => {
  const m = JSON.parse((await get(`${sim.url}/v1/models`)).text);
  assert.equal(m.data[0].id, sim.model);
  assert.equal(m.data[0].max_model_len, 4096);
  const tok = JSON.parse((await post(`${sim.url}/tokenize`, { prompt: 'héllo wörld ✓' })).text);
  assert.equal(tok.count, 13);
  assert.equal(tok.max_model_len, 4096);
  const de = JSON.parse((await post(`${sim.url}/detokenize`, { tokens: tok.tokens })).text);
  assert.equal(de.prompt, 'héllo wörld ✓');
  assert.equal((await get(`${sim.url}/health`)).status, 200);
});

test('400s carry an OpenAI-style error object; the server stays up', async () => {
  const cases: [unknown, RegExp, boolean?][] = [
    [{ prompt: 'x'.repeat(4000), max_tokens: 200 }, /maximum context length is 4096 tokens/],
    [{ prompt: Array(5000).fill(7) }, /maximum context length/],
    ['{not json', /not valid JSON/, true],
    [[1, 2, 3], /JSON object/],
    [{ prompt: 42 }, /prompt/],
    [{ prompt: 'hi', max_tokens: -3 }, /max_tokens/],
    [{ prompt: 'hi', n: 2 }, /n = 1/],
    [{ prompt: [999999999] }, /out of vocabulary/],
  ];
  for (const [body, msg, raw] of cases) {
    const r = await post(`${sim.url}/v1/completions`, body, raw);
    assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 40)} → ${r.text}`);
    const e = JSON.parse(r.text).error;
    assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(e.code, 400);
    assert.equal(e.type, 'BadRequestError');
    assert.match(e.message, msg);
  }
  const chat = await post(`${sim.url}/v1/chat/completions`, { messages: 'hello' });
  assert.equal(chat.status, 400);
  const nf = await post(`${sim.url}/v1/completions`, { model: 'gpt-nope', prompt: 'hi' });
  assert.equal(nf.status, 404);
  assert.equal(JSON.parse(nf.text).error.type, 'NotFoundError');
  // Raw garbage on a socket: a 400, and the server keeps serving.
  const reply = await new Promise<string>((resolve, reject) => {
    const s = net.connect(sim.port, '127.0.0.1', () => s.write('GARBAGE \x00\x01 NOT HTTP\r\n\r\n'));
    let d = '';
    s.on('data', (c) => (d += c));
    s.on('close', () => resolve(d));
    s.on('error', reject);
  });
  assert.match(reply, /^HTTP\/1\.1 400/);
  assert.equal((await get(`${sim.url}/health`)).status, 200);
});

test('a 65 MB request body gets a 413 whose JSON error says the 64 MiB limit, not a reset; the server stays up', async () => {
  const body = Buffer.alloc(65 * 1024 * 1024, 0x61);
  /** POST the body with its Content-Length, or chunked in 1 MiB writes (no length up front). */
  const send = (chunked: boolean) =>
    new Promise<{ status: number; connection?: string; text: string }>((resolve, reject) => {
      const req = http.request(
        `${sim.url}/v1/completions`,
        {
          method: 'POST',
          agent: false,
          headers: chunked
            ? { 'content-type': 'application/json' }
            : { 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject); // a reset (ECONNRESET, EPIPE) fails the test here
      if (!chunked) return void req.end(body);
      let off = 0;
      const more = () => {
        while (off < body.length) {
          const ok = req.write(body.subarray(off, off + (1 << 20)));
          off += 1 << 20;
          if (!ok) return void req.once('drain', more);
        }
        req.end();
      };
      more();
    });
  for (const chunked of [false, true]) {
    const r = await send(chunked);
    assert.equal(r.status, 413, `${chunked ? 'chunked' : 'with Content-Length'}: ${r.text.slice(0, 200)}`);
    assert.equal(r.connection, 'close');
    const e = JSON.parse(r.text).error;
    assert.equal(e.code, 413);
    assert.match(
      e.message,
      /The request body is 68157440 bytes, over the simulator's limit of 67108864 bytes \(64 MiB\)/,
    );
    assert.match(e.message, /send a shorter prompt/);
  }
  // A body under the limit is read as usual (here: not JSON, so a 400).
  const under = await post(`${sim.url}/v1/completions`, 'a'.repeat(2 << 20), true);
  assert.equal(under.status, 400);
  assert.match(JSON.parse(under.text).error.message, /not valid JSON/);
  assert.equal((await get(`${sim.url}/health`)).status, 200);
});

test('/metrics parses as Prometheus text with vLLM names, and its counters match what was served', async () => {
  const prompt = Array.from({ length: 64 }, (_, i) => 3000 + i);
  for (let i = 0; i < 2; i++) await post(`${sim.url}/v1/completions`, { prompt, max_tokens: 2, ignore_eos: true });
  const before = sim.engine.counters.generationTokens;
  const r = await get(`${sim.url}/metrics`);
  assert.equal(r.status, 200);
  const fams = parsePrometheusTextFormat(r.text) as { name: string; type: string; metrics: any[] }[];
  const by = new Map(fams.map((f) => [f.name, f]));
  for (const n of [
    'vllm:prefix_cache_queries_total',
    'vllm:prefix_cache_hits_total',
    'vllm:num_preemptions_total',
    'vllm:num_requests_running',
    'vllm:num_requests_waiting',
    'vllm:kv_cache_usage_perc',
    'vllm:prompt_tokens_total',
    'vllm:generation_tokens_total',
    'vllm:time_to_first_token_seconds',
    'vllm:e2e_request_latency_seconds',
  ])
    assert.ok(by.has(n), n);
  const val = (n: string) => Number(by.get(n)!.metrics[0].value);
  assert.equal(by.get('vllm:generation_tokens_total')!.metrics[0].labels.model_name, sim.model);
  assert.equal(val('vllm:generation_tokens_total'), before);
  assert.ok(
    val('vllm:prefix_cache_hits_total') >= 48 &&
      val('vllm:prefix_cache_hits_total') <= val('vllm:prefix_cache_queries_total'),
  );
  const ttft = by.get('vllm:time_to_first_token_seconds')!;
  assert.equal(ttft.type, 'HISTOGRAM');
  // (This parser folds labelled histograms into their buckets: the +Inf bucket is the count.)
  const e2e = by.get('vllm:e2e_request_latency_seconds')!.metrics[0];
  assert.equal(Number(e2e.buckets['+Inf']), sim.engine.counters.finished);
  const b = ttft.metrics[0].buckets as Record<string, string>;
  const les = Object.keys(b)
    .filter((k) => k !== '+Inf')
    .map(Number);
  for (let i = 1; i < les.length; i++)
    assert.ok(
      Number(b[String(les[i])] ?? b[les[i].toFixed(1)]) >= Number(b[String(les[i - 1])] ?? b[les[i - 1].toFixed(1)]),
      'cumulative buckets',
    );
  assert.equal(Number(b['+Inf']), sim.engine.counters.finished);
});

test('stays up under 1,000 concurrent connections', async () => {
  const N = 1000;
  const results = await Promise.all(
    Array.from({ length: N }, (_, i) =>
      post(`${sim.url}/v1/completions`, { prompt: `request ${i}`, max_tokens: 2, ignore_eos: true }).catch((e) => ({
        status: 0,
        text: String(e),
        headers: {},
      })),
    ),
  );
  const ok = results.filter((r) => r.status === 200);
  assert.equal(ok.length, N, results.find((r) => r.status !== 200)?.text);
  assert.ok(ok.every((r) => JSON.parse(r.text).usage.completion_tokens === 2));
  assert.equal((await get(`${sim.url}/health`)).status, 200);
});

test('vLLM-format log: startup facts, access lines and the V1 stats line', async () => {
  await post(`${sim.url}/v1/completions`, { prompt: 'x'.repeat(500), max_tokens: 200, ignore_eos: true });
  await new Promise((r) => setTimeout(r, 300));
  const strip = (l: string) => l.replace(/\x1b\[[0-9;]*m/g, '');
  const L = lines.map(strip);
  const prefix = /^\((APIServer|EngineCore_DP0) pid=\d+\) (INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+\.py:\d+\] /;
  const find = (re: RegExp) => L.find((l) => re.test(l));
  const kv = find(/Available KV cache memory: ([\d.]+) GiB$/);
  assert.ok(kv && prefix.test(kv), kv);
  assert.match(kv!, /56\.34 GiB/);
  assert.match(find(/GPU KV cache size: /)!, /GPU KV cache size: 410,240 tokens$/);
  assert.match(find(/Maximum concurrency for/)!, /Maximum concurrency for 4,096 tokens per request: 100\.16x$/);
  assert.ok(find(/Using FlashInfer for top-p & top-k sampling\.$/));
  assert.ok(find(/Model loading took [\d.]+ GiB memory and [\d.]+ seconds$/));
  const access = L.filter((l) =>
    /INFO: {5}127\.0\.0\.1:\d+ - "POST \/v1\/completions HTTP\/1\.1" (200 OK|400 Bad Request)$/.test(l),
  );
  assert.ok(access.length >= 1);
  const stats = L.filter((l) =>
    /Engine 000: Avg prompt throughput: [\d.]+ tokens\/s, Avg generation throughput: [\d.]+ tokens\/s, Running: \d+ reqs, Waiting: \d+ reqs, Preemptions: \d+, GPU KV cache usage: [\d.]+%, Prefix cache hit rate: [\d.]+%$/.test(
      l,
    ),
  );
  assert.ok(stats.length >= 1, 'a stats line while busy');
  assert.ok(stats.every((l) => prefix.test(l)));
});

test('a log file and `inflab sim` as a process: prints "listening on http://127.0.0.1:PORT", serves, exits on SIGTERM', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-sim-'));
  const logFile = path.join(dir, 'vllm.log');
  const root = path.resolve(import.meta.dirname, '../..');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'sim',
      '--port',
      '0',
      '--speed',
      '100',
      '--log',
      logFile,
      '--no-prefix-caching',
      '--max-num-seqs',
      '64',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c) => {
        out += c;
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) resolve(m[1]);
      });
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
    });
    const r = await post(`${url}/v1/completions`, { prompt: 'abc', max_tokens: 3, ignore_eos: true });
    assert.equal(JSON.parse(r.text).usage.completion_tokens, 3);
    const code = await new Promise<number | null>((resolve) => {
      child.on('exit', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    assert.equal(code, 0);
    const log = fs.readFileSync(logFile, 'utf8');
    assert.match(log, /non-default args: \{.*'max_num_seqs': 64.*'enable_prefix_caching': False\}/);
    assert.match(log, /"POST \/v1\/completions HTTP\/1\.1" 200 OK/);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
});

test('tokens never leave before their step is due, and every step is reported to onStepWritten', async () => {
  const steps: { dueMs: number; startMs: number; endMs: number; tokens: number; stalled: boolean }[] = [];
  const s = await startSimServer({ port: 0, speed: 5, onStepWritten: (x) => steps.push(x) });
  try {
    const r = await post(`${s.url}/v1/completions`, { prompt: 'abc', max_tokens: 12, ignore_eos: true, stream: true });
    assert.equal(r.status, 200);
    assert.equal(sse(r.text).filter((d) => d !== '[DONE]' && JSON.parse(d).choices.length).length, 12);
    assert.equal(
      steps.reduce((a, x) => a + x.tokens, 0),
      12,
    );
    for (const x of steps) assert.ok(x.startMs >= x.dueMs && x.endMs >= x.startMs, JSON.stringify(x));
  } finally {
    await s.close();
  }
});
