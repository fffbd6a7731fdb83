/**
 * Cell-language fuzzing: the example cells (examples/*.yaml, examples/*.inflab and the design's
 * cell sketches) mutated at random — characters inserted and deleted, lines duplicated (duplicate
 * keys) and swapped, keys renamed, values replaced by huge numbers, wrong types, random unicode,
 * deep nesting, alias bombs and tabs — never make prepareCell, analyzeCells or runCell throw. Every
 * finding has a non-empty message; every error has a path (or a YAML offset) that rangeOfPath maps
 * to a place inside the cell; a failed run has an error message; a result's outputs save into a
 * notebook that reads back.
 *
 * runCell is fuzzed only on kinds that do no network I/O and take bounded time: bench cells are
 * skipped (they drive an endpoint), as are audit cells naming a URL or a path outside the notebook's
 * folder, and `predict: serving` (its simulation time grows with `requests`, which a mutation can
 * make huge).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { applyQuickFix } from '../../src/core/quickFix';
import { splitDocuments } from '../../src/cli/commands/eval';
import { analyzeCells, createNotebookContext, prepareCell, runCell } from '../../src/core/engine/engine';
import type { CellResult, NotebookContext } from '../../src/core/engine/types';
import type { Finding } from '../../src/core/findings';
import {
  offsetOf,
  parseCell,
  pathAt,
  positionAt,
  rangeOfPath,
  type SourceRange,
} from '../../src/core/notebook/cellSource';
import { parseNotebook, serializeNotebook } from '../../src/core/notebook/format';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-fuzz-'));
after(() => fs.rmSync(DIR, { recursive: true, force: true }));

// ---------------------------------------------------------------- the corpus

/** The design's cell sketches (the cell language's contract). */
const SKETCHES = [
  'setup: day4                      # notebook-scoped; later cells use it by name or by default\ngpu: a100-sxm4-80gb              # catalog id, or {bandwidth: 2039 GB/s, bf16: 312 TFLOPS, memory: 80 GiB}\nmodel: qwen3-8b                  # catalog id, or {config: ./Qwen3-8B/config.json}\nweights: bf16\nkv_cache: bf16\nendpoint: sim                    # or http://host:8000 ; the API key lives in SecretStorage\n',
  'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 2, 4, 8, 16, 32, 64, 128]\n',
  'bench: sweep\ninput: 1000 tokens\noutput: 1000 tokens\nconcurrency: [1, 2, 4, 8, 16, 32, 64, 128]\nrequests: 200                    # per point\nseed: per-point                  # a fixed seed across points is the prefix-cache trap\nslo: {ttft_p99: 500 ms, tpot_p99: 50 ms}\n',
  'audit: logs/day4-vllm.log\n',
  'record: day4 validation run\nprompt: 1000 tokens\nttft: 23 ms                      # → diagnostic: below the 52.5 ms compute floor; prefix-cache hit?\n',
  'setup: custom\ngpu:\n  bandwidth: 2039 GB/s\n  bf16: 312 TFLOPS\n  memory: 80 GiB\nmodel: qwen3-8b\n',
  'predict: decode-roofline\ngpu: h100-sxm5-80gb\nsetup: day4\nname: inline\ncontext: 2k tokens\nbatch: 8\n',
];

function corpus(): string[] {
  const cells = [...SKETCHES];
  const ex = path.join(ROOT, 'examples');
  for (const f of fs.existsSync(ex) ? fs.readdirSync(ex).sort() : []) {
    if (!/\.(yaml|inflab)$/.test(f) || !fs.statSync(path.join(ex, f)).isFile()) continue;
    const text = fs.readFileSync(path.join(ex, f), 'utf8');
    if (f.endsWith('.yaml')) cells.push(...splitDocuments(text));
    else if (f.endsWith('.inflab')) {
      try {
        cells.push(
          ...parseNotebook(text)
            .cells.filter((c) => c.kind === 'code' && c.language === 'inflab')
            .map((c) => c.source),
        );
      } catch {
        // an example being edited right now: the other cells are enough
      }
    }
  }
  return [...new Set(cells.filter((c) => c.trim()))];
}
const CORPUS = corpus();
const SETUP = 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nweights: bf16\nkv_cache: bf16\nendpoint: sim\n';

// ---------------------------------------------------------------- mutations

const ODD_VALUES = [
  '1e308',
  '1e400',
  '1e400 tokens',
  '1.8e308 GB',
  '99999999999999999999999',
  '-1',
  '0',
  '-0',
  '0.0000001',
  '2.5',
  '1_000',
  '0x1F',
  '0o17',
  '.nan',
  '.inf',
  '-.inf',
  '~',
  'null',
  '""',
  "''",
  '[]',
  '{}',
  '[1, 2, [3]]',
  '{a: 1, b: [2]}',
  'true',
  'yes',
  'no',
  'off',
  '1k tokens',
  '80 GiB',
  '2039 GB/s',
  '23 ms',
  '50%',
  '1,000',
  '1,00,0 tokens',
  'per-point',
  'sim',
  'http://127.0.0.1:1/',
  'http://',
  'ftp://x',
  '!!binary aGVsbG8=',
  '!!str 5',
  '!!int "x"',
  '!!float abc',
  '!!map [1]',
  '!!seq {a: 1}',
  '!custom 1',
  '!!js/function "x"',
  '&anchor 1',
  '*anchor',
  '*nothing',
  '|\n  block text\n  more',
  '>-\n  folded',
  '\n  - 1\n  - 2',
  '\n  nested: {deep: [1, {x: 2}]}',
  '"\\u0000\\x00"',
  '"unterminated',
  "'it''s'",
  '? complex key\n: value',
  '𝟙𝟘𝟘 tokens',
  '١٠٠٠ tokens',
  'ＧＢ',
  '💥',
  '\u202e',
  '\uFEFF1',
  '%YAML 1.2',
  '---',
  '...',
  '#',
  '- - -',
  ':',
  '{',
  ']',
  '@x',
  '`x`',
];
const ODD_KEYS = [
  'batch',
  'context',
  'input',
  'output',
  'concurrency',
  'rate',
  'requests',
  'seed',
  'name',
  'setup',
  'gpu',
  'model',
  'weights',
  'kv_cache',
  'endpoint',
  'ttft',
  'slo',
  'rows',
  'x',
  '',
  '"quoted key"',
  '? ',
  '<<',
  '__proto__',
  'constructor',
  'toString',
  '- item',
  '1',
  'null',
  'true',
  '🚀',
  'k\tey',
  'a b',
];
const SPECIAL_CHARS = [
  ':',
  '-',
  '[',
  ']',
  '{',
  '}',
  ',',
  '&',
  '*',
  '!',
  '|',
  '>',
  '#',
  '"',
  "'",
  '%',
  '@',
  '`',
  '?',
  '\t',
  '\n',
  '\r\n',
  '\r',
  ' ',
  '  ',
  '\\',
  '\u0000',
  '\u00a0',
  '\uFEFF',
  '\u2028',
  '\ud800',
  'é',
  '𝟙',
  '…',
];

type Mutation = (src: string) => string;
const frac = fc.double({ min: 0, max: 0.999999, noNaN: true });
const at = (s: string, f: number) => Math.floor(f * (s.length + 1));
const lineAt = (s: string, f: number) => {
  const ls = s.split('\n');
  return { ls, i: Math.floor(f * ls.length) };
};
const keyValue = /^(\s*)([^:#\s][^:#]*?)\s*:(?:\s|$)(.*)$/;

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  // insert characters
  fc
    .tuple(
      frac,
      fc.oneof(
        fc.constantFrom(...SPECIAL_CHARS),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 4 }),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 3 }),
      ),
    )
    .map(
      ([f, ch]) =>
        (s: string) =>
          s.slice(0, at(s, f)) + ch + s.slice(at(s, f)),
    ),
  // delete characters
  fc.tuple(frac, fc.integer({ min: 1, max: 6 })).map(
    ([f, n]) =>
      (s: string) =>
        s.slice(0, at(s, f)) + s.slice(at(s, f) + n),
  ),
  // duplicate a line (duplicate keys), or swap two lines
  frac.map((f) => (s: string) => {
    const { ls, i } = lineAt(s, f);
    ls.splice(i, 0, ls[i] ?? '');
    return ls.join('\n');
  }),
  fc.tuple(frac, frac).map(([f, g]) => (s: string) => {
    const { ls, i } = lineAt(s, f);
    const j = Math.floor(g * ls.length);
    [ls[i], ls[j]] = [ls[j], ls[i]];
    return ls.join('\n');
  }),
  // replace a value with something odd
  fc
    .tuple(
      frac,
      fc.oneof(
        fc.constantFrom(...ODD_VALUES),
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        fc.double().map(String),
        fc.bigInt().map(String),
      ),
    )
    .map(([f, v]) => (s: string) => {
      const { ls, i } = lineAt(s, f);
      const m = keyValue.exec(ls[i] ?? '');
      if (m) ls[i] = `${m[1]}${m[2]}: ${v}`;
      else ls.push(`${ODD_KEYS[0]}: ${v}`);
      return ls.join('\n');
    }),
  // rename a key (including the kind key) or add an odd key
  fc
    .tuple(frac, fc.oneof(fc.constantFrom(...ODD_KEYS), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 })))
    .map(([f, k]) => (s: string) => {
      const { ls, i } = lineAt(s, f);
      const m = keyValue.exec(ls[i] ?? '');
      if (m) ls[i] = `${m[1]}${k}: ${m[3]}`;
      else ls.splice(i, 0, `${k}: 1`);
      return ls.join('\n');
    }),
  fc.tuple(frac, fc.constantFrom(...ODD_KEYS), fc.constantFrom(...ODD_VALUES)).map(([f, k, v]) => (s: string) => {
    const { ls, i } = lineAt(s, f);
    ls.splice(Math.max(1, i), 0, `${k}: ${v}`);
    return ls.join('\n');
  }),
  // change the kind's variant
  fc
    .oneof(
      fc.constantFrom(
        'decode-roofline',
        'floors',
        'kv-pool',
        'roofline',
        'serving',
        'sweep',
        'rate',
        'verdict',
        '',
        '[]',
        '{}',
        'null',
        '1',
      ),
      fc.string({ maxLength: 10 }),
    )
    .map((v) => (s: string) => s.replace(/^(predict|bench|setup|record|audit|compare):[^\n#]*/m, `$1: ${v}`)),
  // tabs for indentation
  frac.map((f) => (s: string) => {
    const { ls, i } = lineAt(s, f);
    ls[i] = (ls[i] ?? '').replace(/^ */, '\t');
    return ls.join('\n');
  }),
  // deep nesting, flow or block
  fc.tuple(frac, fc.integer({ min: 10, max: 150 }), fc.boolean()).map(([f, depth, flow]) => (s: string) => {
    const { ls, i } = lineAt(s, f);
    const m = keyValue.exec(ls[i] ?? '');
    const key = m ? m[2] : 'batch';
    const nested = flow
      ? '['.repeat(depth) + '1' + ']'.repeat(depth)
      : '\n' + Array.from({ length: depth }, (_, d) => `${'  '.repeat(d + 1)}k${d}:`).join('\n') + ' 1';
    ls[i] = `${m ? m[1] : ''}${key}: ${nested}`;
    return ls.join('\n');
  }),
  // an alias bomb (billion laughs) hung off a key
  fc
    .tuple(fc.integer({ min: 2, max: 9 }), fc.constantFrom('batch', 'context', 'x', 'slo', 'gpu'))
    .map(([levels, key]) => (s: string) => {
      const defs = ['l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
      for (let l = 1; l < levels; l++)
        defs.push(
          `l${l}: &l${l} [${Array(9)
            .fill(`*l${l - 1}`)
            .join(', ')}]`,
        );
      return `${s.replace(/\n*$/, '')}\n${defs.join('\n')}\n${key}: *l${levels - 1}\n`;
    }),
  // random text of every kind, rarely
  fc.string({ unit: 'binary', maxLength: 80 }).map((t) => () => t),
);

/** A cell that stays well-formed, with one of its numbers made extreme (physics at the edges). */
const extreme = fc
  .tuple(
    fc.constantFrom(...CORPUS),
    fc.nat(),
    fc.constantFrom('1e300', '1e-300', '1e15', '9007199254740991', '1e17', '0.5', '1', '0', '0.001', '3'),
  )
  .map(([seed, k, v]) => {
    const nums = [...seed.matchAll(/(?<![\w.])\d[\d,_]*(?:\.\d+)?/g)].filter(
      (m) => seed.lastIndexOf('\n', m.index) !== -1,
    );
    if (!nums.length) return seed;
    const m = nums[k % nums.length];
    return seed.slice(0, m.index) + v + seed.slice(m.index! + m[0].length);
  });

const mutatedOf = (seeds: string[], max = 4) =>
  fc
    .tuple(fc.constantFrom(...seeds), fc.array(mutation, { minLength: 1, maxLength: max }))
    .map(([seed, ms]) => ms.reduce((s, m) => m(s), seed));
const mutated = mutatedOf(CORPUS);

// ---------------------------------------------------------------- checks

function lineCount(src: string): number {
  return src.split(/\r\n|\r|\n/).length;
}

function checkRange(src: string, r: SourceRange, what: string): void {
  const lines = src.split(/\r\n|\r|\n/);
  for (const p of [r.start, r.end]) {
    assert.ok(
      Number.isInteger(p.line) && p.line >= 0 && p.line < lineCount(src),
      `${what}: line ${p.line} inside the cell's ${lineCount(src)} lines`,
    );
    assert.ok(
      Number.isInteger(p.character) && p.character >= 0 && p.character <= (lines[p.line]?.length ?? 0) + 1,
      `${what}: column ${p.character} inside line ${p.line}`,
    );
  }
  assert.ok(
    r.start.line < r.end.line || (r.start.line === r.end.line && r.start.character <= r.end.character),
    `${what}: range starts before it ends`,
  );
}

function checkFindings(src: string, findings: Finding[], where: string): void {
  assert.ok(Array.isArray(findings));
  const parsed = parseCell(src);
  for (const f of findings) {
    const what = `${where}: [${f.code}] ${f.message}`;
    assert.ok(['error', 'warning', 'info'].includes(f.severity), what);
    assert.ok(typeof f.code === 'string' && f.code.length > 0, what);
    assert.ok(
      typeof f.message === 'string' && f.message.trim().length > 0,
      `${where}: a non-empty message (${f.code})`,
    );
    assert.ok(Array.isArray(f.path), `${what}: has a path`);
    for (const seg of f.path)
      assert.ok(typeof seg === 'string' || typeof seg === 'number', `${what}: path segments are keys or indices`);
    const offset = f.offset;
    if (offset) {
      assert.ok(offset[0] >= 0 && offset[0] <= src.length, `${what}: offset inside the cell`);
    }
    if (f.severity === 'error') checkRange(src, rangeOfPath(parsed, f.path, offset), what);
  }
}

function checkResult(src: string, r: CellResult): void {
  assert.equal(typeof r.ok, 'boolean');
  checkFindings(src, r.findings, 'runCell');
  if (!r.ok) {
    assert.ok(r.error, 'a failed run has an error');
    assert.ok(r.error!.message.trim().length > 0, 'the error has a message');
    assert.ok(Array.isArray(r.error!.path));
    checkRange(src, rangeOfPath(parseCell(src), r.error!.path), `runCell error ${r.error!.message}`);
  }
  // What a run produced saves into a notebook that reads back.
  const text = serializeNotebook({
    cells: [{ kind: 'code', language: 'inflab', source: src, outputs: r.outputs.map((o) => ({ items: o.items })) }],
  });
  const back = parseNotebook(text);
  assert.equal(back.cells[0].source, src);
}

/** Kinds that do no network I/O and finish in bounded time (see the header). */
function offline(src: string): boolean {
  const p = parseCell(src);
  if (p.kindKey === 'bench') return false;
  if (p.kindKey === 'predict' && String(p.kindValue) === 'serving') return false;
  if (p.kindKey === 'audit') {
    const v = String(p.kindValue ?? '');
    if (/^[a-z][a-z0-9+.-]*:/i.test(v.trim()) || v.includes('..') || path.isAbsolute(v.trim()) || v.includes('*'))
      return false;
  }
  return true; // setup keys naming an endpoint do no I/O by themselves
}

function setupContext(): NotebookContext {
  const nb = createNotebookContext(DIR);
  prepareCell(SETUP, 0, nb);
  return nb;
}

// ---------------------------------------------------------------- properties

test(`the corpus: ${CORPUS.length} cells from the examples and the design, all readable`, () => {
  assert.ok(CORPUS.length >= 10, `enough seeds (${CORPUS.length})`);
  const findings = analyzeCells([SETUP, ...CORPUS], DIR);
  findings.forEach((fs, i) => checkFindings(i === 0 ? SETUP : CORPUS[i - 1], fs, `corpus cell ${i}`));
});

test('prepareCell on mutated cells never throws; every error maps inside the cell with a message', () => {
  fc.assert(
    fc.property(mutated, (src) => {
      const nb = setupContext();
      const p = prepareCell(src, 1, nb);
      checkFindings(src, p.findings, 'prepareCell');
    }),
    { numRuns: 1000, interruptAfterTimeLimit: 6_000 },
  );
});

test('analyzeCells on notebooks of mutated cells never throws; every error maps inside its cell', () => {
  fc.assert(
    fc.property(fc.array(mutated, { minLength: 1, maxLength: 4 }), fc.boolean(), (cells, withSetup) => {
      const sources = withSetup ? [SETUP, ...cells] : cells;
      const all = analyzeCells(sources, DIR);
      assert.equal(all.length, sources.length);
      all.forEach((fs, i) => checkFindings(sources[i], fs, `analyzeCells cell ${i}`));
    }),
    { numRuns: 250, interruptAfterTimeLimit: 6_000 },
  );
});

test('runCell on mutated offline cells never throws; a failure is an error result with a message', async () => {
  let ran = 0;
  let okRuns = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.oneof({ weight: 2, arbitrary: mutated }, { weight: 1, arbitrary: extreme }).filter(offline),
      async (src) => {
        const nb = createNotebookContext(DIR);
        await runCell(SETUP, 0, nb);
        const r = await runCell(src, 1, nb);
        ran++;
        if (r.ok) okRuns++;
        checkResult(src, r);
      },
    ),
    { numRuns: 120, interruptAfterTimeLimit: 6_000 },
  );
  console.log(`runCell fuzz: ${ran} mutated cells run, ${okRuns} ran to completion, ${ran - okRuns} error results`);
  assert.ok(ran > 10, 'enough runs');
});

test('targeted: nesting, alias bombs, duplicate keys, tabs and huge numbers give findings, not exceptions', async () => {
  const cases = [
    'predict: decode-roofline\nbatch: ' + '['.repeat(5000) + '1' + ']'.repeat(5000),
    'predict: decode-roofline\ncontext: 1k tokens\nbatch:\n' +
      Array.from({ length: 2000 }, (_, d) => `${'  '.repeat(d + 1)}k${d}:`).join('\n') +
      ' 1',
    'predict: decode-roofline\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\nbatch: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]',
    'predict: decode-roofline\ncontext: 1k tokens\ncontext: 2k tokens\nbatch: [1]',
    'predict: decode-roofline\n\tcontext: 1k tokens\nbatch: [1]',
    'predict: decode-roofline\ncontext: 1e308 tokens\nbatch: [1e308]',
    'predict: decode-roofline\ncontext: 1e400 tokens\nbatch: [99999999999999999999999]',
    'predict: floors\nprompt: 1e300 tokens',
    'predict: kv-pool\nmax_model_len: 1e308',
    'record: x\nttft: -0 ms\nprompt: .nan',
    'setup: x\ngpu: {bandwidth: 1e308 TB/s, bf16: 1e308 PFLOPS, memory: 1e308 TiB}\nmodel: qwen3-8b',
    'setup: x\ngpu: {bandwidth: 5e-324 B/s, bf16: 5e-324 FLOP/s, memory: 1 B}\nmodel: qwen3-8b',
    '__proto__: 1\nconstructor: 2',
    'predict: __proto__',
    'predict: constructor',
    'toString: x',
    '- a\n- b',
    'just text',
    '',
    '---\n---\n',
    '%YAML 1.2\n---\npredict: floors\nprompt: 1k tokens',
    '? [a, b]\n: c',
    '!!binary aGVsbG8=',
    'predict: decode-roofline\nbatch: !!js/function "() => 1"',
    'predict: decode-roofline\nname: ' + 'x'.repeat(100_000) + '\ncontext: 1k tokens\nbatch: [1]',
  ];
  for (const src of cases) {
    const nb = setupContext();
    const p = prepareCell(src, 1, nb);
    checkFindings(src, p.findings, `prepareCell ${JSON.stringify(src.slice(0, 60))}`);
    const a = analyzeCells([SETUP, src], DIR);
    checkFindings(src, a[1], `analyzeCells ${JSON.stringify(src.slice(0, 60))}`);
    const run = createNotebookContext(DIR);
    await runCell(SETUP, 0, run);
    checkResult(src, await runCell(src, 1, run));
  }
  // Duplicate keys are an error on the second one, not a silent last-wins.
  const dup = prepareCell(
    'predict: decode-roofline\ncontext: 1k tokens\ncontext: 2k tokens\nbatch: [1]',
    1,
    setupContext(),
  );
  const e = dup.findings.find((f) => f.severity === 'error');
  assert.ok(e, 'duplicate key reported');
  assert.match(e!.message, /unique|duplicate/i);
  const r = rangeOfPath(
    parseCell('predict: decode-roofline\ncontext: 1k tokens\ncontext: 2k tokens\nbatch: [1]'),
    e!.path,
    e!.offset,
  );
  assert.equal(r.start.line, 2, 'on the second "context" line');
});

test('positions: offsetOf and positionAt agree on every place of any text (LF, CRLF, lone CR); pathAt never throws', () => {
  fc.assert(
    fc.property(
      fc.oneof(
        mutated,
        fc
          .array(fc.constantFrom('a', ' ', ':', '\n', '\r\n', '\r', 'é', '𝟙'), { maxLength: 40 })
          .map((x) => x.join('')),
      ),
      (src) => {
        const lines = src.split(/\r\n|\r|\n/);
        for (let line = 0; line < lines.length; line++) {
          for (let character = 0; character <= lines[line].length; character++) {
            const off = offsetOf(src, { line, character });
            assert.deepStrictEqual(positionAt(src, off), { line, character }, `line ${line} char ${character}`);
          }
        }
        const parsed = parseCell(src);
        for (let o = 0; o <= src.length; o += Math.max(1, Math.floor(src.length / 20)))
          pathAt(parsed, positionAt(src, o));
      },
    ),
    { numRuns: 300, interruptAfterTimeLimit: 4_000 },
  );
});

/** Cells whose findings carry quick fixes, in flow and block style, with comments in the way. */
const WITH_QUICK_FIXES = [
  'setup: s\ngpu: {bandwidth: 2039 GB/s, bf16: 312 TFLOPS, memory: 80 GB}\nmodel: qwen3-8b\n',
  'setup: s\ngpu:\n  bandwidth: 2039 GB/s\n  bf16: 312 TFLOPS\n  memory: 80 GB   # as the data sheet says\nmodel: qwen3-8b\n',
  'setup: s\r\ngpu:\r\n  bandwidth: 2039 GB/s\r\n  bf16: 312 TFLOPS\r\n  memory: "80 GB"\r\nmodel: qwen3-8b\r\n',
  'predict: kv-pool\ngpu: {bandwidth: 2039 GB/s, bf16: 312 TFLOPS, memory: 80 GB}\nmodel: qwen3-8b\n',
  'predict: serving\ninput: 1000 tokens\noutput: 100 tokens\nconcurrency: [1, 2]\nrequests: 10\nseed: 42\n',
  'bench: sweep\ninput: 1000 tokens\noutput: 100 tokens\nconcurrency: [1, 2]\nseed: 42   # one prompt set for every point\n',
  'bench: sweep\ninput: 1000 tokens\noutput: 100 tokens\nconcurrency:\n  - 1\n  - 8\nseed: 7\nslo: {ttft_p99: 500 ms}\n',
];

test('quick fixes on mutated cells apply cleanly: the edited cell still parses as YAML', () => {
  let applied = 0;
  fc.assert(
    fc.property(
      fc.oneof(mutated, extreme, fc.constantFrom(...CORPUS, ...WITH_QUICK_FIXES), mutatedOf(WITH_QUICK_FIXES, 2)),
      (src) => {
        const [, fs] = analyzeCells([SETUP, src], DIR);
        for (const f of fs) {
          if (!f.quickFix) continue;
          const edited = applyQuickFix(src, f.quickFix);
          applied++;
          const p = parseCell(edited);
          assert.deepStrictEqual(
            p.errors.filter((e) => e.code === 'yaml-syntax'),
            [],
            `quick fix "${f.quickFix.title}" on ${JSON.stringify(src)} gave ${JSON.stringify(edited)}`,
          );
          // And it fixes what it says: the same finding is gone.
          const [, after] = analyzeCells([SETUP, edited], DIR);
          assert.ok(
            !after.some((g) => g.code === f.code && g.path.join('.') === f.path.join('.')),
            `quick fix "${f.quickFix.title}" left [${f.code}] in ${JSON.stringify(edited)}`,
          );
        }
      },
    ),
    { numRuns: 400, interruptAfterTimeLimit: 5_000 },
  );
  console.log(`quick fixes applied: ${applied}`);
});
