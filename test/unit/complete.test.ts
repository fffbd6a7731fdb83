/**
 * Completions and key docs, read from the kinds' schemas and the catalog: kinds at a cell's first
 * line, the keys of `bench: sweep` with their docs and defaults, catalog ids after `gpu:`, dtypes,
 * units after a number, nested keys, setup names, and references from the facts and values saved above.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { GPUS, MODELS } from '../../src/core/catalog';
import { completionsAt, keyHoverAt, keysOfKind, valuePaths } from '../../src/core/complete';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import { kindId } from '../../src/core/engine/types';
import { cellOffers } from '../../src/core/facts';
import { KINDS } from '../../src/core/kinds';

const labels = (
  src: string,
  line: number,
  ch: number,
  above = [] as { source: string; values?: Record<string, unknown> }[],
) => completionsAt(src, line, ch, above).map((i) => i.label);

test('at a cell\'s first line: every registered kind; after "predict: " its variants', () => {
  assert.deepEqual(labels('', 0, 0), KINDS.map(kindId));
  assert.ok(labels('', 0, 0).includes('audit: environment'));
  assert.deepEqual(
    labels('predict: ', 0, 9),
    KINDS.filter((k) => k.key === 'predict').map((k) => k.variant),
  );
  // Below a comment the first content line is still the kind line.
  assert.ok(labels('# day 4\nbe', 1, 2).includes('bench: sweep'));
});

test('keys of bench: sweep: every schema key not yet written, with its doc, units and default', () => {
  const src = 'bench: sweep\ninput: 200 tokens\n\n';
  const items = completionsAt(src, 2, 0);
  const keys = items.map((i) => i.label);
  for (const k of [
    'output',
    'concurrency',
    'warmup',
    'api',
    'burstiness',
    'percentiles',
    'timeout',
    'base_seed',
    'temperature',
    'slo',
    'gpu',
    'endpoint',
  ])
    assert.ok(keys.includes(k), `${k} offered among ${keys}`);
  assert.ok(!keys.includes('input'), 'a key already written is not offered again');
  const warmup = items.find((i) => i.label === 'warmup')!;
  assert.match(warmup.detail!, /whole number \(default 0\)/);
  assert.match(warmup.documentation!, /discarded before each point/);
  const timeout = items.find((i) => i.label === 'timeout')!;
  assert.match(timeout.documentation!, /Units: s, ms/);
  assert.equal(items.find((i) => i.label === 'api')!.detail, 'one of completions, chat (default "completions")');
  // A key added to the schema shows up with no other change: the list is the schema's shape.
  const sweep = KINDS.find((k) => kindId(k) === 'bench: sweep')!;
  assert.ok(keysOfKind(sweep).some((d) => d.key === 'records' && d.default === true));
});

test('after gpu: and model: the catalog ids, with the numbers that matter', () => {
  const gpu = completionsAt('setup: lab\ngpu: ', 1, 5);
  assert.deepEqual(
    gpu.map((i) => i.label),
    GPUS.map((g) => g.id),
  );
  assert.match(gpu.find((i) => i.label === 'a100-sxm4-80gb')!.detail!, /2,039 GB\/s, 80 GiB, 312 TFLOPS bf16/);
  assert.deepEqual(
    labels('predict: floors\nmodel: ', 1, 7),
    MODELS.map((m) => m.id),
  );
});

test('dtypes, enum values, units after a number, nested keys inside slo', () => {
  assert.deepEqual(labels('setup: lab\nkv_cache: ', 1, 10), ['bf16', 'fp16', 'fp8', 'int8', 'int4']);
  assert.deepEqual(labels('bench: sweep\napi: ', 1, 5), ['completions', 'chat']);
  assert.ok(labels('record: r\nttft: 23 ', 1, 9).includes('ms'));
  assert.ok(labels('bench: sweep\nslo: {ttft_p99: 500 ', 1, 20).includes('ms'));
  assert.deepEqual(labels('bench: sweep\nslo:\n  ', 2, 2), ['ttft_p99', 'tpot_p99', 'e2e_p99']);
});

test('setup names above after setup:, and reference paths of named cells after predicted:/measured:', () => {
  const above = [
    { source: 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n' },
    {
      source: 'predict: decode-roofline\nname: roofline\nbatch: [1]\ncontext: 1k tokens\n',
      values: { rows: [{ batch: 1, per_user_tok_s: 88 }], decode_step_floor_ms: 8 },
    },
    { source: 'record: day4 validation run\nstep: 11.3 ms\n', values: { step_ms: 11.3 } },
  ];
  assert.deepEqual(labels('record: r\nsetup: ', 1, 7, above), ['day4']);
  const src = 'compare: v\nrows:\n  - {quantity: q, predicted: ';
  const items = completionsAt(src, 2, src.split('\n')[2].length, above);
  const refs = items.map((i) => i.label);
  assert.ok(refs.includes('roofline.rows[0].per_user_tok_s'), refs.join());
  assert.ok(refs.includes('roofline.rows[*]'));
  assert.ok(refs.includes('day4 validation run.step_ms'));
  // Inside {…} a path with [ ] is inserted quoted, so the YAML parses.
  assert.equal(
    items.find((i) => i.label === 'roofline.rows[0].per_user_tok_s')!.insertText,
    '"roofline.rows[0].per_user_tok_s"',
  );
  assert.deepEqual(valuePaths({ points: [{ ttft_ms: { median: 1 } }] }), [
    'points',
    'points[0]',
    'points[*]',
    'points[0].ttft_ms',
    'points[0].ttft_ms.median',
  ]);
});

test('a hover on a key gives its doc from the schema; on the kind line, the kind', () => {
  assert.match(keyHoverAt('bench: sweep\nburstiness: 0.5\n', 1, 3)!, /Gamma shape/);
  assert.match(keyHoverAt('bench: sweep\nslo: {ttft_p99: 500 ms}\n', 1, 8)!, /ttft_p99/);
  assert.match(keyHoverAt('audit: environment\n', 0, 2)!, /nvidia-smi/);
  assert.equal(keyHoverAt('bench: sweep\nwarmup: 2\n', 1, 9), undefined, 'not on a key');
});

test('after predicted:/measured: the facts each cell above saved, as cellOffers lists them, before value paths', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const sources = [
    'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n',
    'predict: decode-roofline\nname: roofline\ncontext: 1k tokens\nbatch: [1, 8]\n',
    'record: cold\nprompt: 1000 tokens\nbatch: 1\nttft_p95: 23 ms\n',
  ];
  const above = [];
  for (let i = 0; i < sources.length; i++) {
    const r = await runCell(sources[i], i, nb);
    above.push({ source: sources[i], values: r.values, facts: r.facts });
  }
  const src = 'compare: v\nrows:\n  - {quantity: q, predicted: ';
  const items = completionsAt(src, 2, src.split('\n')[2].length, above);
  const byLabel = new Map(items.map((i) => [i.label, i]));
  assert.equal(byLabel.get('cold.fact(ttft.p95)')?.detail, 'ms, at batch 1');
  assert.equal(byLabel.get('roofline.fact(curve.output_throughput)')?.detail, 'tok/s, a curve over batch 1, 8');
  const expected = [
    ...cellOffers('roofline', above[1].facts).map((o) => o.ref),
    ...cellOffers('cold', above[2].facts).map((o) => o.ref),
  ];
  const facts = items.filter((i) => i.label.includes('.fact('));
  assert.deepEqual(
    facts.map((i) => i.label),
    expected,
  );
  // Facts sort before the value paths.
  const sorted = [...items].sort((a, b) => (a.sortText ?? a.label).localeCompare(b.sortText ?? b.label));
  assert.ok(sorted[0].label.includes('.fact('), sorted[0].label);
  assert.ok(items.some((i) => i.label === 'cold.ttft_p95_ms'));
});
