/**
 * Quick fixes for every finding with a mechanical fix — rename an unknown key, write a bare number
 * with a unit, quote a reference holding [0] inside {…}, use the catalog id meant — each applied
 * with applyQuickFix, and the finding gone afterwards. "Did you mean" ranks an id that extends what
 * was typed (h100 → h100-sxm) above one a letter away (h200).
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { analyzeCells } from '../../src/core/engine/engine';
import { suggestions } from '../../src/core/engine/schema';
import { GPUS } from '../../src/core/catalog';
import { applyQuickFix } from '../../src/core/quickFix';

const SETUP = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';
const DIR = os.tmpdir();

/** The one finding with a quick fix in `src` (after SETUP), the fixed text, and what is left. */
function fixOne(src: string, code: string) {
  const f = analyzeCells([SETUP, src], DIR)[1].find((x) => x.code === code && x.quickFix);
  assert.ok(f, `a ${code} finding with a quick fix in ${JSON.stringify(src)}`);
  const fixed = applyQuickFix(src, f.quickFix!);
  return { f, fixed, after: analyzeCells([SETUP, fixed], DIR)[1] };
}

test('an unknown key is renamed to the key meant, keeping its value and comment', () => {
  const { f, fixed, after } = fixOne(
    'bench: sweep\ninput: 200 tokens\noutput: 16 tokens\nconcurency: [1, 2]   # points\n',
    'unknown-key',
  );
  assert.equal(f.quickFix!.title, 'Rename "concurency" to "concurrency"');
  assert.equal(fixed, 'bench: sweep\ninput: 200 tokens\noutput: 16 tokens\nconcurrency: [1, 2]   # points\n');
  assert.deepEqual(after, []);
});

test('a bare number that needs a unit gets the unit (seconds for a timeout)', () => {
  const r = fixOne('record: run\nprompt: 1000 tokens\nttft: 80\n', 'schema');
  assert.equal(r.fixed, 'record: run\nprompt: 1000 tokens\nttft: 80 ms\n');
  assert.deepEqual(r.after, []);
  const t = fixOne('bench: sweep\ninput: 200 tokens\noutput: 16 tokens\nconcurrency: [1]\ntimeout: 30\n', 'schema');
  assert.match(t.fixed, /^timeout: 30 s$/m);
  assert.deepEqual(t.after, []);
});

test('an unquoted reference with [0] inside {…}: one finding instead of a cascade, and the quote fixes it', () => {
  const src =
    'compare: v\nrows:\n  - {quantity: decode, predicted: roofline.rows[0].per_user_tok_s, measured: 88 tok/s}\n';
  const fs = analyzeCells([SETUP, src], DIR)[1];
  assert.deepEqual(
    fs.map((x) => x.code),
    ['unquoted-reference'],
  );
  const { fixed, after } = fixOne(src, 'unquoted-reference');
  assert.ok(fixed.includes('predicted: "roofline.rows[0].per_user_tok_s", measured'), fixed);
  assert.ok(!after.some((x) => x.code === 'unquoted-reference' || x.code === 'yaml-syntax'), JSON.stringify(after));
});

test('h100 suggests h100-sxm and h100-pcie before h200, and the quick fix writes h100-sxm', () => {
  const ids = GPUS.map((g) => g.id);
  assert.deepEqual(suggestions('h100', ids, 3).slice(0, 2), ['h100-sxm', 'h100-pcie']);
  assert.equal(suggestions('h100', ids, 3)[2], 'h200');
  const src = 'predict: floors\ngpu: h100\nprompt: 1000 tokens\n';
  const { f, fixed, after } = fixOne(src, 'unknown-gpu');
  assert.match(f.message, /did you mean "h100-sxm" or "h100-pcie"/);
  assert.equal(fixed, 'predict: floors\ngpu: h100-sxm\nprompt: 1000 tokens\n');
  assert.ok(!after.some((x) => x.code === 'unknown-gpu'));
});

test('a key that extends a known one (nvcc_version) suggests it; a typo still does (contxt)', () => {
  assert.deepEqual(suggestions('contxt', ['context', 'input', 'output']), ['context']);
  assert.deepEqual(suggestions('nvcc_version', ['nvcc', 'ninja']), ['nvcc']);
  assert.deepEqual(suggestions('zz', ['context']), []);
});
