import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DTYPE_BYTES, findGpu, findModel, GPUS, MODELS } from '../../src/core/catalog';
import { hfConfigSchema, modelFromHfConfig } from '../../src/core/catalog/hfConfig';
import { readNeeds } from '../../src/core/engine/files';
import { nodeFiles } from '../../src/core/host/files';
import { applySetupOverrides, setupNeeds } from '../../src/core/kinds/setup';
import { kvBytesPerToken, weightsBytes } from '../../src/core/physics';

const here = path.dirname(fileURLToPath(import.meta.url));
const T = 1e12;
const GiB = 2 ** 30;

/** Hugging Face config.json files of three public models, kept beside the tests. */
function fixture(name: string): string {
  return path.resolve(here, '../fixtures/configs', `${name}.config.json`);
}

function importConfig(name: string) {
  const cfg = hfConfigSchema.parse(JSON.parse(fs.readFileSync(fixture(name), 'utf8')));
  return modelFromHfConfig(cfg, name, name);
}

test('docs/physics.md hardware table, exactly', () => {
  const rows: [string, number, number | undefined, number, number][] = [
    ['a100-sxm4-80gb', 312, undefined, 2039, 80 * GiB],
    ['a100-pcie-80gb', 312, undefined, 1935, 80 * GiB],
    ['h100-sxm', 989, 1979, 3350, 80 * GiB],
    ['h200', 989, 1979, 4800, 141e9],
    ['l40s', 362, 733, 864, 48e9],
  ];
  for (const [id, bf16, fp8, bw, mem] of rows) {
    const g = findGpu(id);
    assert.ok(g, id);
    assert.equal(g.peak.bf16, bf16 * T, id);
    assert.equal(g.peak.fp16, bf16 * T, id);
    assert.equal(g.peak.fp8, fp8 === undefined ? undefined : fp8 * T, id);
    assert.equal(g.bandwidth, bw * 1e9, id);
    assert.equal(g.memory, mem, id);
  }
});

test('every catalog GPU has a source, bandwidth, memory and a bf16 peak; ids are unique', () => {
  for (const id of ['h100-pcie', 'a10g', 'l4', 'rtx-4090', 'mi300x', 'b200']) assert.ok(findGpu(id), id);
  assert.equal(new Set(GPUS.map((g) => g.id)).size, GPUS.length);
  for (const g of GPUS) {
    assert.ok(g.source.length > 10, g.id);
    assert.ok(g.bandwidth > 1e11 && g.memory > 1e10, g.id);
    assert.ok(g.peak.bf16 && g.peak.bf16 > 1e13, g.id);
    // fp8 and int8 never slower than bf16 where present (dense peaks, one convention).
    for (const d of ['fp8', 'int8'] as const) if (g.peak[d]) assert.ok(g.peak[d]! >= g.peak.bf16!, `${g.id} ${d}`);
  }
  assert.equal(findGpu('A100-SXM4-80GB')?.id, 'a100-sxm4-80gb');
});

test('parameter counts computed from the fixtures match the published counts exactly', () => {
  const q8 = importConfig('Qwen3-8B');
  assert.equal(q8.params.total, 8_190_735_360);
  assert.equal(q8.params.active, 8_190_735_360);
  // 6.95 B non-embedding (embedding and lm_head untied).
  assert.equal(Math.round((q8.params.total - q8.params.embedding - q8.params.lmHead) / 1e7) / 100, 6.95);
  const moe = importConfig('Qwen3-30B-A3B');
  assert.equal(moe.params.total, 30_532_122_624);
  assert.equal(moe.params.active, 3_353_032_704);
  assert.deepEqual(moe.moe, {
    experts: 128,
    expertsPerToken: 8,
    expertIntermediate: 768,
    sharedIntermediate: undefined,
  });
  const llama = importConfig('Llama-3.1-8B');
  assert.equal(llama.params.total, 8_030_261_248);
  assert.equal(llama.headDim, 128); // from hidden / heads: the config has no head_dim
});

test('catalog models equal their config.json imports', () => {
  for (const [id, file] of [
    ['qwen3-8b', 'Qwen3-8B'],
    ['qwen3-30b-a3b', 'Qwen3-30B-A3B'],
    ['llama-3.1-8b', 'Llama-3.1-8B'],
  ]) {
    const c = findModel(id)!;
    const f = importConfig(file);
    for (const k of [
      'layers',
      'hidden',
      'heads',
      'kvHeads',
      'headDim',
      'intermediate',
      'vocab',
      'tiedEmbeddings',
      'maxPosition',
    ] as const)
      assert.equal(c[k], f[k], `${id}.${k}`);
    assert.deepEqual(c.params, f.params, id);
    assert.deepEqual(c.moe, f.moe, id);
  }
});

test('the other catalog models: well-known totals', () => {
  const expect: Record<string, [number, number]> = {
    'llama-3.1-70b': [70_553_706_496, 70_553_706_496],
    'mistral-7b': [7_248_023_552, 7_248_023_552],
    'qwen3-32b': [32_762_123_264, 32_762_123_264],
    'mixtral-8x7b': [46_702_792_704, 12_879_925_248],
  };
  for (const [id, [total, active]] of Object.entries(expect)) {
    const m = findModel(id);
    assert.ok(m, id);
    assert.equal(m.params.total, total, id);
    assert.equal(m.params.active, active, id);
  }
  assert.equal(MODELS.length, new Set(MODELS.map((m) => m.id)).size);
});

test('Qwen3-8B bf16: 147,456 B of KV per token; 16.38 GB = 15.26 GiB of weights', () => {
  const m = findModel('qwen3-8b')!;
  assert.equal(kvBytesPerToken(m, 'bf16'), 147_456);
  assert.equal(kvBytesPerToken(m, 'fp8'), 73_728);
  assert.equal(weightsBytes(m, 'bf16'), 16_381_470_720);
  assert.equal((weightsBytes(m, 'bf16') / 1e9).toFixed(2), '16.38');
  assert.equal((weightsBytes(m, 'bf16') / GiB).toFixed(2), '15.26');
  assert.equal(weightsBytes(m, 'fp8'), 8_190_735_360);
  assert.equal(weightsBytes(m, 'int4'), 4_095_367_680);
  assert.deepEqual(DTYPE_BYTES, { bf16: 2, fp16: 2, fp8: 1, int8: 1, int4: 0.5 });
});

test('model: {config: ./path} imports relative to the notebook (read through the host) and gives the catalog numbers', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-cfg-'));
  try {
    fs.mkdirSync(path.join(dir, 'Qwen3-8B'));
    fs.copyFileSync(fixture('Qwen3-8B'), path.join(dir, 'Qwen3-8B', 'config.json'));
    const keys = { gpu: 'a100-sxm4-80gb', model: { config: './Qwen3-8B/config.json' } };
    const files = new Map();
    await readNeeds(setupNeeds(keys, dir), files, nodeFiles(), { purpose: 'analysis', notebookDir: dir });
    const r = applySetupOverrides(undefined, keys, dir, 'lab', true, files);
    assert.deepEqual(r.findings, []);
    const cat = findModel('qwen3-8b')!;
    assert.deepEqual(r.setup!.model.params, cat.params);
    assert.equal(r.setup!.model.id, 'Qwen3-8B');
    assert.equal(kvBytesPerToken(r.setup!.model, 'bf16'), 147_456);
    // A missing file is an error on model.config that says what to write.
    const badKeys = { gpu: 'a100-sxm4-80gb', model: { config: './nope/config.json' } };
    await readNeeds(setupNeeds(badKeys, dir), files, nodeFiles(), { purpose: 'analysis', notebookDir: dir });
    const bad = applySetupOverrides(undefined, badKeys, dir, 'lab', true, files);
    assert.equal(bad.setup, undefined);
    assert.deepEqual(bad.findings[0].path, ['model', 'config']);
    assert.match(bad.findings[0].fix ?? '', /config\.json relative to the notebook/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a custom GPU, and a catalog GPU with one field overridden', () => {
  const custom = applySetupOverrides(
    undefined,
    { gpu: { bandwidth: '2039 GB/s', bf16: '312 TFLOPS', memory: '80 GiB' }, model: 'qwen3-8b' },
    os.tmpdir(),
    'c',
    true,
  );
  assert.deepEqual(custom.findings, []);
  assert.equal(custom.setup!.gpu.bandwidth, 2039e9);
  assert.equal(custom.setup!.gpu.peak.fp16, 312e12);
  assert.equal(custom.setup!.gpu.memory, 80 * GiB);
  const one = applySetupOverrides(
    undefined,
    { gpu: { base: 'h100-sxm', bandwidth: '3.0 TB/s' }, model: 'qwen3-8b' },
    os.tmpdir(),
    'o',
    true,
  );
  assert.deepEqual(one.findings, []);
  assert.equal(one.setup!.gpu.bandwidth, 3e12);
  assert.equal(one.setup!.gpu.peak.fp8, 1979e12);
  assert.equal(one.setup!.gpu.memory, 80 * GiB);
  assert.match(one.setup!.gpu.source, /overridden/);
  const missing = applySetupOverrides(
    undefined,
    { gpu: { bf16: '312 TFLOPS' }, model: 'qwen3-8b' },
    os.tmpdir(),
    'm',
    true,
  );
  assert.ok(missing.findings.some((f) => /needs "bandwidth"/.test(f.message)));
  const unitless = applySetupOverrides(
    undefined,
    { gpu: { base: 'a100-sxm4-80gb', memory: 80 }, model: 'qwen3-8b' },
    os.tmpdir(),
    'u',
    true,
  );
  assert.ok(
    unitless.findings.some(
      (f) => f.severity === 'error' && f.path.join('.') === 'gpu.memory' && /needs a unit/.test(f.message),
    ),
  );
});

test('an "80GB" card written as 80 GB is a warning with the GiB fix', () => {
  const r = applySetupOverrides(
    undefined,
    { gpu: { base: 'a100-sxm4-80gb', memory: '80 GB' }, model: 'qwen3-8b' },
    os.tmpdir(),
    'slip',
    true,
  );
  assert.equal(r.setup!.gpu.memory, 80e9);
  const w = r.findings.find((f) => f.code === 'gb-gib-card-memory');
  assert.ok(w, 'warning');
  assert.equal(w.severity, 'warning');
  assert.deepEqual(w.path, ['gpu', 'memory']);
  assert.match(w.message, /74\.51 GiB/);
  assert.equal(w.quickFix?.edit.value, '80 GiB');
  // Written in GiB: no warning.
  const ok = applySetupOverrides(
    undefined,
    { gpu: { base: 'a100-sxm4-80gb', memory: '80 GiB' }, model: 'qwen3-8b' },
    os.tmpdir(),
    'ok',
    true,
  );
  assert.ok(!ok.findings.some((f) => f.code === 'gb-gib-card-memory'));
});
