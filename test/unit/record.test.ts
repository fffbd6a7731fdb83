/** `record` cells: typed numbers with units, exposed as values, checked before and after running. */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';

const SETUP = 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';

async function run(cells: string[]) {
  const nb = createNotebookContext(os.tmpdir());
  const results = [];
  for (let i = 0; i < cells.length; i++) results.push(await runCell(cells[i], i, nb));
  return { nb, results };
}

const plain = (r: { outputs: { items: { mime: string; data: unknown }[] }[] }) =>
  r.outputs
    .flatMap((o) => o.items)
    .filter((i) => i.mime === MIME.plain)
    .map((i) => String(i.data))
    .join('\n');

test('the ttft warning stands on the ttft line before running and after', async () => {
  const rec = 'record: day4\nprompt: 1000 tokens\nttft: 23 ms\n';
  const before = analyzeCells([SETUP, rec], os.tmpdir())[1];
  assert.deepEqual(
    before.map((f) => [f.severity, f.code, f.path]),
    [['warning', 'ttft-below-prefill-floor', ['ttft']]],
  );
  const { results } = await run([SETUP, rec]);
  const r = results[1];
  assert.equal(r.ok, true);
  assert.equal(r.kind, 'record');
  assert.equal(r.name, 'day4', 'a record is named by its first line');
  assert.deepEqual(
    r.findings.map((f) => [f.code, f.path]),
    [['ttft-below-prefill-floor', ['ttft']]],
  );
  assert.deepEqual(r.values, { prompt_tokens: 1000, ttft_ms: 23 });
  const text = plain(r);
  assert.match(text, /ttft\s+23 ms\s+≥ 52\.5 ms prefill floor/);
  assert.ok(
    r.outputs.some((o) => o.items.some((i) => i.mime === MIME.findings)),
    'a findings section in the output',
  );
});

test('values carry their unit in the name; throughput in req/s and tok/s are told apart', async () => {
  const rec = [
    'record: sweep point',
    'throughput: 3.2 req/s',
    'output_throughput: 3,100 tok/s',
    'per_user: 88.4 tok/s',
    'tpot_p99: 45 ms',
    'e2e: 20 s',
    'kv_pool: 410,240 tokens',
    'available_kv: 56.34 GiB',
    'prefix_cache_hit_rate: 0%',
    'concurrency: 64',
    'source: client',
    'notes: warm server',
  ].join('\n');
  const { results } = await run([SETUP, rec]);
  const v = results[1].values;
  assert.equal(v.throughput_req_s, 3.2);
  assert.equal(v.output_throughput_tok_s, 3100);
  assert.equal(v.per_user_tok_s, 88.4);
  assert.equal(v.tpot_p99_ms, 45);
  assert.equal(v.e2e_ms, 20000);
  assert.equal(v.kv_pool_tokens, 410240);
  assert.equal(v.available_kv_gib, 56.34);
  assert.equal(v.available_kv_bytes, 56.34 * 2 ** 30);
  assert.equal(v.prefix_cache_hit_rate, 0);
  assert.equal(v.concurrency, 64);
  assert.equal(v.source, 'client');
  assert.equal(v.notes, 'warm server');
  assert.deepEqual(results[1].findings, []);
});

test('a number without a unit, a unit of the wrong kind and a misspelt key each say what to write', () => {
  const [, a] = analyzeCells([SETUP, 'record: r\nttft: 23\n'], os.tmpdir());
  assert.equal(a[0].severity, 'error');
  assert.deepEqual(a[0].path, ['ttft']);
  assert.match(a[0].message, /needs a unit.*23 ms/);
  const [, b] = analyzeCells([SETUP, 'record: r\nttft: 23 tok/s\n'], os.tmpdir());
  assert.deepEqual(b[0].path, ['ttft']);
  assert.match(b[0].message, /a time is needed here/);
  const [, c] = analyzeCells([SETUP, 'record: r\nttfb: 23 ms\n'], os.tmpdir());
  assert.deepEqual(c[0].path, ['ttfb']);
  assert.match(c[0].message, /did you mean "ttft"/);
});

test('without a setup a record still runs and says how to get the physics checks', async () => {
  const { results } = await run(['record: alone\nprompt: 1000 tokens\nttft: 23 ms\n']);
  assert.equal(results[0].ok, true);
  assert.deepEqual(results[0].findings, []);
  assert.match(plain(results[0]), /add one \(gpu, model\)/);
});

test('inline setup keys override the setup for the record alone (an h100 prefills 1,000 tokens in 16.6 ms)', () => {
  const fs = analyzeCells([SETUP, 'record: r\ngpu: h100-sxm\nprompt: 1000 tokens\nttft: 23 ms\n'], os.tmpdir())[1];
  assert.deepEqual(fs, []);
});
