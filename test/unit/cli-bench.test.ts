/**
 * `inflab bench` is a bench cell built from its flags: the flags are the cell's keys (--help lists
 * them from the schema), a bad value gets the cell schema's own message and sends nothing, keys the
 * old hand-made mapping could not set (top_p, top_k, percentiles, slo) reach the run, progress
 * has no \r off a terminal, and --json is checked before the run and written atomically.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { analyzeCells } from '../../src/core/engine/engine';
import { keysOfKind } from '../../src/core/complete';
import { benchSweepKind } from '../../src/core/kinds/bench';
import { buildCli, ROOT, runInflab } from '../support/cli';
import { startScriptedServer, type ScriptedServer } from '../support/scriptedServer';

let server: ScriptedServer;

before(async () => {
  buildCli();
  server = await startScriptedServer({ ttftMs: 5, itlMs: 1, model: 'qwen3-8b' });
});
after(() => server.close());
// The CLI runs as a child process (runInflab, not spawnSync): the scripted server in this one keeps answering while it runs.

const real = () => ['--endpoint', server.url, '--gpu', 'a100-sxm4-80gb', '--model', 'qwen3-8b'];
const small = ['--input', '16', '--output', '4', '--scrape', 'false'];
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-bench-cli-'));

test('bench --help exits 0 and lists every key of the bench cell, from its schema', async () => {
  const r = await runInflab(['bench', '--help']);
  assert.equal(r.code, 0, r.stderr);
  const keys = keysOfKind(benchSweepKind).filter((k) => !['name', 'setup'].includes(k.key));
  assert.ok(keys.length > 15);
  for (const k of keys) assert.match(r.stdout, new RegExp(`--${k.key.replace(/_/g, '-')} `), k.key);
  for (const f of ['--endpoint', '--gpu', '--model', '--json', '--stop-above']) assert.ok(r.stdout.includes(f), f);
});

/** [flag, value, the same key and value in a cell] — the nonsense the old CLI accepted. */
const BAD: [string, string, string][] = [
  ['--rate', '1e-7', 'rate: 1e-7'],
  ['--burstiness', '0', 'burstiness: 0'],
  ['--burstiness', 'abc', 'burstiness: abc'],
  ['--concurrency', '1.5', 'concurrency: 1.5'],
  ['--concurrency', '1e9', 'concurrency: 1e9'],
  ['--timeout', '0', 'timeout: 0'],
  ['--timeout', 'abc', 'timeout: abc'],
  ['--timeout', '1e12 s', 'timeout: 1e12 s'],
  ['--stop-above', 'abc', 'on_failure: {stop_above: abc}'],
  ['--top-p', '2', 'top_p: 2'],
];

test('bad values: exit 2 with the cell schema message, before any request; a cell with the same value gets the same error', async () => {
  const before = server.requests.length;
  for (const [flag, value, yaml] of BAD) {
    const cellKey = yaml.split(':')[0];
    const base = { concurrency: 'concurrency: 1', rate: '' } as Record<string, string>;
    const cell = ['bench: sweep', 'input: 16', 'output: 4', cellKey === 'concurrency' ? '' : base.concurrency, yaml]
      .filter(Boolean)
      .join('\n');
    const [, fs] = analyzeCells(['setup: s\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', cell], ROOT);
    const err = fs.find((f) => f.severity === 'error' && f.path[0] === cellKey);
    assert.ok(err, `the cell refuses ${yaml}: ${JSON.stringify(fs)}`);
    const args = ['bench', ...real(), ...small, flag, value];
    if (flag !== '--concurrency') args.push('--concurrency', '1');
    const r = await runInflab(args);
    assert.equal(r.code, 2, `${flag} ${value}: ${r.stdout}${r.stderr}`);
    const msg = err.message.replace(new RegExp(`^${cellKey}: `), '').replace(/^stop_above: /, '');
    assert.ok(r.stderr.includes(`${flag}: ${msg}`), `${flag} ${value}:\n${r.stderr}\nwanted: ${msg}`);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
  assert.equal(server.requests.length, before, 'no request was sent');
});

test('an endpoint without a scheme, --duration with --requests, and a real endpoint without --model are usage errors', async () => {
  const noScheme = await runInflab([
    'bench',
    '--endpoint',
    '127.0.0.1:8000',
    '--gpu',
    'h100-sxm',
    '--model',
    'qwen3-8b',
    ...small,
    '--concurrency',
    '1',
  ]);
  assert.equal(noScheme.code, 2);
  assert.match(
    noScheme.stderr,
    /--endpoint: endpoint "127\.0\.0\.1:8000" has no scheme: write "http:\/\/127\.0\.0\.1:8000"/,
  );
  const both = await runInflab([
    'bench',
    ...real(),
    ...small,
    '--concurrency',
    '1',
    '--duration',
    '10 s',
    '--requests',
    '5',
  ]);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /--duration: Give "requests:" or "duration:" per point, not both/);
  const noModel = await runInflab(['bench', '--endpoint', server.url, ...small, '--concurrency', '1']);
  assert.equal(noModel.code, 2);
  assert.match(noModel.stderr, /give --gpu ID and --model ID/);
});

test('top_p, top_k, percentiles and an SLO from flags reach the run; progress off a terminal has no \\r', async () => {
  const d = tmp();
  const json = path.join(d, 'run.json');
  const first = server.requests.length;
  const r = await runInflab([
    'bench',
    ...real(),
    ...small,
    '--concurrency',
    '1,2',
    '--requests',
    '4',
    '--top-p',
    '0.8',
    '--top-k',
    '20',
    '--percentiles',
    '50,95',
    '--slo',
    'ttft_fast: 10 s',
    '--json',
    json,
  ]);
  // An SLO key is METRIC_STAT: the schema says so, with what to write.
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /"ttft_fast" is not an SLO: write METRIC_STAT/);
  const ok = await runInflab([
    'bench',
    ...real(),
    ...small,
    '--concurrency',
    '1,2',
    '--requests',
    '4',
    '--top-p',
    '0.8',
    '--top-k',
    '20',
    '--percentiles',
    '50,95,99',
    '--slo',
    'ttft_p95: 10 s, tpot_p99: 5 s',
    '--json',
    json,
  ]);
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  const sent = server.requests.slice(first).filter((q) => q.path.includes('completions'));
  assert.ok(sent.length >= 8, `${sent.length} requests`);
  for (const q of sent) {
    assert.equal(q.body.top_p, 0.8);
    assert.equal(q.body.top_k, 20);
  }
  const out = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.equal(out.vllm.length, 2);
  assert.ok('p95_ttft_ms' in out.vllm[0], Object.keys(out.vllm[0]).join(' '));
  assert.equal(out.vllm[0].metric_percentiles, '50,95,99');
  // vLLM --save-result per-request arrays, so the file can be re-analysed (or imported) by anyone's tools.
  assert.equal(out.vllm[1].ttfts.length, 4);
  assert.equal(out.vllm[1].itls.length, 4);
  assert.deepEqual(out.vllm[1].errors, ['', '', '', '']);
  assert.ok(
    out.vllm[1].ttfts.every((t: number) => t > 0 && t < 10),
    'ttfts in seconds',
  );
  // The cell's typed facts ride along: a p95 TTFT among them, from percentiles: [50, 95, 99].
  assert.ok(
    out.facts.some((f: { kind: string; metric?: string; stat?: string }) => f.metric === 'ttft' && f.stat === 'p95'),
    JSON.stringify(out.facts.slice(0, 5)),
  );
  assert.equal(out.inflab.points[0].slo_met, true);
  assert.ok(!ok.stderr.includes('\r'), 'no carriage return when stderr is not a terminal');
  assert.match(ok.stderr, /1 of 2 points done\n/);
});

test('--json into a missing folder: exit 2 before any request, the folder named', async () => {
  const before = server.requests.length;
  const missing = path.join(tmp(), 'no', 'such', 'run.json');
  const r = await runInflab(['bench', ...real(), ...small, '--concurrency', '1', '--json', missing]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /the folder .*such does not exist: create it first/);
  assert.equal(server.requests.length, before, 'nothing was sent');
});

test('--json on a full disk (injected ENOSPC) leaves the previous file byte-identical, with a message', async () => {
  const d = tmp();
  const json = path.join(d, 'run.json');
  const previous = JSON.stringify({ inflab: { note: 'yesterday' }, pad: 'x'.repeat(10_000) }) + '\n';
  fs.writeFileSync(json, previous);
  const r = await runInflab(['bench', ...real(), ...small, '--concurrency', '1', '--requests', '2', '--json', json], {
    node: ['--import', path.join(ROOT, 'test/support/enospc.mjs')],
    env: { INFLAB_TEST_ENOSPC_DIR: d },
  });
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /could not save .*run\.json: ENOSPC.*the file on disk was left as it was/);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
  assert.equal(fs.readFileSync(json, 'utf8'), previous);
  assert.deepEqual(fs.readdirSync(d), ['run.json'], 'no temp file left');
});

test('--json on a real full disk (a 64 KiB tmpfs) leaves the previous file byte-identical', async (t) => {
  const d = tmp();
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', d], { encoding: 'utf8' });
  if (mounted.status !== 0) {
    t.skip(`mounting a tmpfs is not permitted here (${(mounted.stderr || mounted.error?.message || '').trim()})`);
    return;
  }
  try {
    const json = path.join(d, 'run.json');
    // The previous result takes most of the disk: the new one (several KiB) cannot fit beside it.
    const previous = JSON.stringify({ pad: 'y'.repeat(56 * 1024) }) + '\n';
    fs.writeFileSync(json, previous);
    const r = await runInflab([
      'bench',
      ...real(),
      ...small,
      '--concurrency',
      '1,2',
      '--requests',
      '4',
      '--json',
      json,
    ]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /could not save .*run\.json: ENOSPC/);
    assert.equal(fs.readFileSync(json, 'utf8'), previous);
    assert.deepEqual(fs.readdirSync(d), ['run.json'], 'no temp file left');
  } finally {
    spawnSync('umount', [d]);
  }
});
