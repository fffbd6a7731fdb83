/**
 * Fuzzing quantities with units: parseQuantity never throws, every refusal has a message, and any
 * accepted quantity has a finite value in one of the dimensions asked for (a "1e400 tokens" is
 * refused, not turned into Infinity). The zod quantity() schema built on it never throws either,
 * and its failures become findings with a path and a message.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { z } from 'zod';
import { quantity, zodFindings } from '../../src/core/engine/schema';
import { DIMS, parseQuantity, sameDims, unitsOf, type DimName } from '../../src/core/units';

const DIM_NAMES = Object.keys(DIMS) as DimName[];
const ALL_UNITS = [...new Set(DIM_NAMES.flatMap(unitsOf))];
/** Spellings people write, right and wrong, plus every canonical unit. */
const spellings = [
  ...ALL_UNITS,
  'tok',
  'toks',
  'token',
  'tokens/s',
  'tps',
  'req',
  'reqs',
  'rps',
  'sec',
  'seconds',
  'msec',
  'us',
  'μs',
  'µs',
  'min',
  'hours',
  'percent',
  'TFLOPS',
  'tflops',
  'TFlops',
  'GFLOPS',
  'PFLOPS',
  'flop',
  'kB',
  'kb',
  'Gb',
  'gb',
  'GIB',
  'gib',
  'Mb/s',
  'mb/s',
  'TOPS',
  'tb',
  'G',
  'GiB/s',
  'GB / s',
  'tokens per second',
  'ms ms',
  'k',
  'K',
  'M',
  '%%',
  '/s',
  's/s',
  'B',
  'b',
  'x',
  'ё',
  '毫秒',
  '🚀',
  'constructor',
  'valueOf',
  'toString',
  '__proto__',
  'hasOwnProperty',
  'prototype',
];

const digits = (min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
const intPart = fc.oneof(
  digits(1, 4),
  digits(15, 40), // beyond double precision, and beyond 1e308 when long
  fc.tuple(digits(1, 3), fc.array(digits(3, 3), { minLength: 1, maxLength: 4 })).map(([a, r]) => [a, ...r].join(',')),
  fc.tuple(digits(1, 3), fc.array(digits(1, 4), { minLength: 1, maxLength: 3 })).map(([a, r]) => [a, ...r].join(',')), // bad grouping
  fc.tuple(digits(1, 3), digits(1, 5)).map(([a, b]) => `${a}_${b}`),
);
const numberText = fc
  .tuple(
    fc.constantFrom('', '', '+', '-', '--', '.'),
    intPart,
    fc.option(digits(0, 12).map((d) => `.${d}`)),
    fc.option(
      fc.tuple(
        fc.constantFrom('e', 'E'),
        fc.constantFrom('', '+', '-'),
        fc.oneof(digits(1, 2), fc.constantFrom('300', '307', '308', '309', '400', '1000', '99999')),
      ),
    ),
    fc.option(fc.tuple(fc.constantFrom('', ' ', '  '), fc.constantFrom('k', 'K', 'M', 'm', 'G'))),
  )
  .map(
    ([sign, i, frac, exp, suffix]) =>
      `${sign}${i}${frac ?? ''}${exp ? exp.join('') : ''}${suffix ? suffix.join('') : ''}`,
  );
const unitText = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...spellings) },
  { weight: 1, arbitrary: fc.constantFrom(...spellings).map((u) => u.toUpperCase()) },
  { weight: 1, arbitrary: fc.constantFrom(...spellings).map((u) => u.toLowerCase()) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
);
/** "number unit" in every spacing, plus garbage around it. */
const quantityText = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        fc.constantFrom('', ' ', '  ', '\t'),
        numberText,
        fc.constantFrom('', ' ', '  ', '\u00a0'),
        fc.option(unitText),
        fc.constantFrom('', ' ', '\n'),
      )
      .map(([a, n, sp, u, b]) => `${a}${n}${u === null ? '' : sp + u}${b}`),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      'NaN',
      'Infinity',
      '-Infinity',
      '.inf',
      '1e400',
      '1e308 TB',
      '1.8e308',
      '5e-324 s',
      '0x10 GB',
      '1/2 GB',
      '∞ tokens',
      '1k k',
      '1kM',
      '١٢٣ tokens',
      '１２ GB',
    ),
  },
);
const dimsArb = fc.uniqueArray(fc.constantFrom(...DIM_NAMES), { minLength: 1, maxLength: 3 });
const bareArb = fc.option(fc.constantFrom('tokens', 'req/s', 'requests', 's', 'ms', 'B', '%'));

function checkResult(r: ReturnType<typeof parseQuantity>, dims: DimName[], input: unknown): void {
  if (r.ok) {
    assert.ok(Number.isFinite(r.quantity.value), `accepted ${JSON.stringify(input)} as ${r.quantity.value}`);
    assert.ok(dims.includes(r.dim) || r.dim !== undefined, 'a known dimension');
    assert.ok(sameDims(r.quantity.dims, DIMS[r.dim]), 'dims match the dimension');
    assert.ok(typeof r.quantity.unit === 'string' && r.quantity.unit.length > 0);
  } else {
    assert.ok(typeof r.message === 'string' && r.message.trim().length > 0, `a message for ${JSON.stringify(input)}`);
  }
}

test('parseQuantity on random text: never throws; accepted values are finite, in a requested dimension', () => {
  fc.assert(
    fc.property(quantityText, dimsArb, bareArb, (text, dims, bare) => {
      const r = parseQuantity(text, { dims, bare: bare ?? undefined });
      checkResult(r, dims, text);
      if (r.ok && !bare) assert.ok(dims.includes(r.dim), `${text} accepted as ${r.dim}, not one of ${dims.join(', ')}`);
    }),
    { numRuns: 4000 },
  );
});

test('parseQuantity on numbers from YAML (NaN, ±Infinity, huge, tiny, -0): never throws; accepted values are finite', () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.double(),
        fc.constantFrom(NaN, Infinity, -Infinity, Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE, -0, 1e308),
      ),
      dimsArb,
      bareArb,
      (n, dims, bare) => {
        checkResult(parseQuantity(n, { dims, bare: bare ?? undefined }), dims, n);
      },
    ),
    { numRuns: 2000 },
  );
});

test('a unit spelled like an Object.prototype member is an unknown unit, not a crash', () => {
  for (const u of ['constructor', 'valueOf', 'toString', '__proto__', 'hasOwnProperty', 'isPrototypeOf']) {
    const r = parseQuantity(`1000 ${u}`, { dims: ['tokens'] });
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.message, /unknown unit/);
  }
});

test('values that overflow a double are refused with a message, not accepted as Infinity', () => {
  for (const [text, dims, bare] of [
    ['1e400 tokens', ['tokens'], undefined],
    ['1e308 GB', ['bytes'], undefined],
    ['1e308 TB/s', ['bandwidth'], undefined],
    ['9'.repeat(400), ['tokens'], 'tokens'],
    ['1.5e308 k', ['tokens'], 'tokens'],
    ['-1e400 ms', ['time'], undefined],
    ['1e306 h', ['time'], undefined],
  ] as [string, DimName[], string | undefined][]) {
    const r = parseQuantity(text, { dims, bare });
    assert.equal(r.ok, false, `${text} refused`);
    if (!r.ok) assert.match(r.message, /too large|finite/, r.message);
  }
  const n = parseQuantity(1e308, { dims: ['bytes'], bare: 'GB' as never });
  assert.ok(!n.ok || Number.isFinite(n.quantity.value));
});

test('the quantity() schema never throws and its failures become findings with a path and a message', () => {
  const schema = z
    .object({
      a: quantity('tokens', { bare: 'tokens', positive: true }),
      b: quantity(['time', 'tokens'], { min: 0 }).optional(),
      c: z.array(quantity('bandwidth')).optional(),
    })
    .strict();
  const value = fc.oneof(
    quantityText,
    fc.double(),
    fc.constantFrom(null, true, [], {}, '1k tokens'),
    fc.array(quantityText, { maxLength: 3 }),
  );
  fc.assert(
    fc.property(fc.record({ a: value, b: value, c: value, d: fc.option(value) }, { requiredKeys: [] }), (cell) => {
      const r = schema.safeParse(cell);
      if (r.success) {
        assert.ok(Number.isFinite(r.data.a.value) && r.data.a.value > 0);
        if (r.data.b) assert.ok(Number.isFinite(r.data.b.value) && r.data.b.value >= 0);
        for (const c of r.data.c ?? []) assert.ok(Number.isFinite(c.value));
        return;
      }
      const fs = zodFindings(r.error, schema);
      assert.ok(fs.length > 0);
      for (const f of fs) {
        assert.equal(f.severity, 'error');
        assert.ok(f.path.length > 0, `a path for ${f.message}`);
        assert.ok(['a', 'b', 'c', 'd'].includes(String(f.path[0])), `path into the cell: ${f.path.join('.')}`);
        assert.ok(f.message.trim().length > 0);
        assert.doesNotMatch(f.message, /^Invalid input$/, 'says what is wrong');
      }
    }),
    { numRuns: 1500 },
  );
});
