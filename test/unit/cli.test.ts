import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { parseNotebook, serializeNotebook } from '../../src/core/notebook/format';
import { buildCli, ROOT, runInflabSync } from '../support/cli';

before(buildCli);

test('eval --json prints one {kind, name, values, facts, findings} per YAML document', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-cli-'));
  const f = path.join(dir, 'cells.yaml');
  fs.writeFileSync(
    f,
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n---\npredict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n',
  );
  const r = runInflabSync(['eval', f, '--json']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.length, 2);
  assert.deepEqual(Object.keys(out[1]).sort(), ['facts', 'findings', 'kind', 'name', 'values']);
  assert.equal(out[1].kind, 'predict: decode-roofline');
  // docs/physics.md: 16.38 GB of bf16 weights / 2,039 GB/s = 8.03 ms.
  assert.ok(Math.abs(out[1].values.decode_step_floor_ms - 8.03) < 0.005);
  // The same number as a fact, its unit in its field name.
  const floor = out[1].facts.find((f: { kind: string; metric?: string }) => f.kind === 'floor');
  assert.equal(floor.metric, 'decode-step');
  assert.ok(Math.abs(floor.ms - 8.03) < 0.005);
});

test("eval --json prints an audit cell's facts beside its values: the pool with the line that printed it, the stats windows with their units", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-cli-'));
  fs.mkdirSync(path.join(dir, 'logs'));
  fs.copyFileSync(path.join(ROOT, 'test/fixtures/logs/vllm-logs-examples.log'), path.join(dir, 'logs', 'vllm.log'));
  const f = path.join(dir, 'cells.yaml');
  fs.writeFileSync(f, 'audit: logs/vllm.log\nplot: false\n');
  const r = runInflabSync(['eval', f, '--json']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const cell = Array.isArray(out) ? out[0] : out;
  assert.equal(cell.kind, 'audit');
  const of = (kind: string) => cell.facts.filter((x: { kind: string }) => x.kind === kind);
  // The fixture's fourth line is "GPU KV cache size: 410,240 tokens".
  assert.deepEqual(of('kv-pool')[0].log_lines, { tokens: 4, available_bytes: 3 });
  assert.equal(of('kv-pool')[0].tokens, cell.values.pool_tokens);
  const [w] = of('log-windows');
  assert.equal(w.line.length, cell.values.windows);
  assert.deepEqual(w.units, {
    t: 's',
    interval: 's',
    prompt: 'tok/s',
    generation: 'tok/s',
    kv_usage: '%',
    prefix_hit: '%',
  });
  assert.deepEqual(of('log')[0].files, [{ path: 'logs/vllm.log', first_line: 1, lines: cell.values.lines }]);
});

test('exit codes: 1 when a cell fails, 2 on a usage error', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-cli-'));
  const f = path.join(dir, 'bad.yaml');
  fs.writeFileSync(f, 'predict: decode-roofline\ncontext: 1k tokens\n');
  assert.equal(runInflabSync(['eval', f]).status, 1);
  assert.equal(runInflabSync(['frobnicate']).status, 2);
  assert.equal(runInflabSync(['run']).status, 2);
  assert.equal(runInflabSync(['eval', path.join(dir, 'missing.yaml')]).status, 2);
});

test('run executes a notebook and writes outputs; the input is untouched with --out', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-cli-'));
  const nbFile = path.join(dir, 'n.inflab');
  const original = serializeNotebook({
    cells: [
      { kind: 'markdown', language: 'markdown', source: '# Day 4' },
      { kind: 'code', language: 'inflab', source: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b' },
      { kind: 'code', language: 'inflab', source: 'predict: decode-roofline\ncontext: 1k tokens' },
    ],
  });
  fs.writeFileSync(nbFile, original);
  const out = path.join(dir, 'out', 'n.executed.inflab');
  const r = runInflabSync(['run', nbFile, '--out', out]);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.equal(fs.readFileSync(nbFile, 'utf8'), original);
  const executed = parseNotebook(fs.readFileSync(out, 'utf8'));
  const plotItems = executed.cells[2].outputs!.flatMap((o) => o.items.map((i) => i.mime));
  assert.ok(plotItems.includes('application/vnd.vegalite.v6+json'));
  assert.ok(plotItems.includes('image/svg+xml'));
  assert.equal(executed.cells[2].lastRun?.success, true);
  assert.equal(executed.cells[2].lastRun?.executionOrder, 2);
});
