import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findGpu, findModel } from '../../src/core/catalog';
import type { Setup } from '../../src/core/engine/types';
import { hoverAt, setupAt } from '../../src/core/hover';

const S: Setup = {
  name: 'day4',
  gpu: findGpu('a100-sxm4-80gb')!,
  model: findModel('qwen3-8b')!,
  weights: 'bf16',
  kvCache: 'bf16',
};

/** Hover at the first occurrence of `needle` in `source` (offset `k` characters into it). */
function hover(source: string, needle: string, setup?: Setup, k = 1): string | undefined {
  const i = source.indexOf(needle);
  assert.ok(i >= 0, needle);
  const before = source.slice(0, i + k).split('\n');
  return hoverAt(source, before.length - 1, before[before.length - 1].length, setup);
}

test('a bandwidth: other units, and the ms one pass over the weights takes', () => {
  const h = hover('setup: lab\ngpu: {base: a100-sxm4-80gb, bandwidth: 2039 GB/s}\nmodel: qwen3-8b\n', '2039 GB/s')!;
  assert.match(h, /\*\*gpu\.bandwidth\*\*/);
  assert.match(h, /= 1,899 GiB\/s/);
  assert.match(h, /= 2\.04 TB\/s/);
  assert.match(h, /one pass over the weights \(16\.38 GB \(15\.26 GiB\)\) takes \*\*8\.03 ms\*\*/);
  assert.match(h, /per-user ceiling of 124\.5 tok\/s/);
  assert.match(h, /153 FLOP\/byte/);
});

test('a card memory written in GB: both units, the GiB warning, KV tokens that fit', () => {
  const h = hover('predict: kv-pool\ngpu: {base: a100-sxm4-80gb, memory: 80 GB}\n', '80 GB', S)!;
  assert.match(h, /= 80\.00 GB {2}\n= 74\.51 GiB/);
  assert.match(h, /an "80GB" card holds 80 GiB = 85\.90 GB/);
  assert.match(h, /Write `80 GiB`/);
  assert.match(h, /holds \*\*542,534 tokens\*\* of KV cache at 147,456 B\/token/);
  assert.match(h, /a vLLM KV pool of 374,240 tokens/);
  const g = hover('predict: kv-pool\ngpu: {base: a100-sxm4-80gb, memory: 80 GiB}\n', '80 GiB', S)!;
  assert.doesNotMatch(g, /Write `80 GiB`/);
  assert.match(g, /a vLLM KV pool of 410,240 tokens/);
});

test('a token count: its KV bytes and the prefill floor', () => {
  const h = hover('predict: floors\nprompt: 1k tokens\n', '1k', S)!;
  assert.match(h, /= 1,000 tokens/);
  assert.match(h, /KV cache: 147\.46 MB \(140\.63 MiB\)/);
  assert.match(h, /prefill floor: \*\*52\.5 ms\*\* \(2·params·N\/peak\); stricter count 45\.5 ms/);
  assert.match(h, /KV pool \(410,240 tokens\) holds 410 sequences/);
  // A bare number under a token key is tokens.
  const bare = hover('predict: decode-roofline\ncontext: 1000\n', '1000', S)!;
  assert.match(bare, /52\.5 ms/);
});

test('a time: against the decode step floor and the prefill floor of the cell prompt', () => {
  const h = hover('record: day4\nprompt: 1000 tokens\nttft: 23 ms\n', '23 ms', S)!;
  assert.match(h, /= 23,000 µs/);
  assert.match(h, /2\.86× the decode step floor \(8\.03 ms\)/);
  assert.match(h, /at most \*\*438 tokens\*\*/);
  assert.match(h, /below the 52\.5 ms prefill floor of a 1,000-token prompt/);
});

test('a token rate, a compute peak, a batch, a fraction', () => {
  const rate = hover('record: x\nthroughput: 88.4 tok/s\n', '88.4', S)!;
  assert.match(rate, /11\.31 ms per token/);
  assert.match(rate, /71\.0% of the 124\.5 tok\/s ceiling/);
  const peak = hover('setup: x\ngpu: {base: a100-sxm4-80gb, bf16: 312 TFLOPS}\nmodel: qwen3-8b\n', '312')!;
  assert.match(peak, /prefill of 1,000 tokens: 52\.5 ms/);
  assert.match(peak, /19,046 tok\/s/);
  const batch = hover('predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n', '64', S)!;
  assert.match(batch, /\*\*batch\.1\*\*: 64 concurrent sequences/);
  assert.match(batch, /\*\*5,054 tok\/s\*\* aggregate \(bandwidth-bound\)/);
  const util = hover('predict: kv-pool\ngpu_memory_utilization: 0.9\n', '0.9', S)!;
  assert.match(util, /= 90\.00%/);
  assert.match(util, /budget 77\.31 GB \(72\.00 GiB\)/);
  assert.match(util, /KV pool 410,240 tokens/);
});

test('without a setup: only the units; on no quantity: nothing', () => {
  const h = hover('record: x\nttft: 23 ms\n', '23', undefined)!;
  assert.match(h, /= 23,000 µs/);
  assert.doesNotMatch(h, /For /);
  assert.equal(hover('predict: floors\nname: hello\n', 'hello', S), undefined);
  assert.equal(hoverAt('predict: [unclosed\n', 0, 3, S), undefined);
  assert.equal(hoverAt('predict: floors\n', 5, 0, S), undefined);
});

test('setupAt: the setup in force for a cell, with its own overrides', () => {
  const cells = [
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n',
    'setup: h\ngpu: h100-sxm\nmodel: qwen3-8b\n',
    'predict: floors\nsetup: a\n',
    'predict: floors\nweights: fp8\n',
  ];
  assert.equal(setupAt(cells, 2, '.')?.gpu.id, 'a100-sxm4-80gb');
  const inline = setupAt(cells, 3, '.')!;
  assert.equal(inline.gpu.id, 'h100-sxm');
  assert.equal(inline.weights, 'fp8');
  assert.equal(setupAt(cells, 0, '.')?.gpu.id, 'a100-sxm4-80gb'); // a setup cell's own
  assert.equal(setupAt(['predict: floors\n'], 0, '.'), undefined);
  const h = hoverAt('predict: floors\nprompt: 1k tokens\n', 1, 10, setupAt(cells, 2, '.'))!;
  assert.match(h, /52\.5 ms/);
});

test('a decode step or TPOT is set against the decode floor, never the prefill floor; a TTFT against both', () => {
  const cell = 'record: r\nprompt: 1000 tokens\nstep: 11.3 ms\ntpot: 11 ms\nttft: 23 ms\n';
  const step = hover(cell, '11.3 ms', S)!;
  assert.match(step, /× the decode step floor \(8\.03 ms\)/);
  assert.doesNotMatch(step, /prefill floor/, 'a decode step is not a prefill');
  assert.doesNotMatch(hover(cell, '11 ms', S)!, /prefill floor/);
  assert.match(hover(cell, '23 ms', S)!, /below the 52\.5 ms prefill floor of a 1,000-token prompt/);
});
