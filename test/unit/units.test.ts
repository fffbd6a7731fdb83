import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  add,
  describeDims,
  DIMS,
  div,
  fmtBytes,
  fmtIn,
  fmtQuantity,
  fmtTime,
  inUnit,
  mul,
  otherUnits,
  parseQuantity,
  q,
  qty,
  sameDims,
  sub,
  type DimName,
} from '../../src/core/units';

const GiB = 2 ** 30;

function parse(text: string | number, dims: DimName[], bare?: string) {
  const r = parseQuantity(text, { dims, bare });
  if (!r.ok) throw new Error(r.message);
  return r.quantity;
}

test('bytes: decimal and binary prefixes are different numbers', () => {
  assert.equal(parse('80 GB', ['bytes']).value, 80e9);
  assert.equal(parse('80 GiB', ['bytes']).value, 80 * GiB);
  assert.equal(parse('80GiB', ['bytes']).value, 80 * GiB);
  assert.equal(parse('1 TB', ['bytes']).value, 1e12);
  assert.equal(parse('1 TiB', ['bytes']).value, 2 ** 40);
  assert.equal(parse('512 KiB', ['bytes']).value, 512 * 1024);
  assert.equal(parse('3 MB', ['bytes']).value, 3e6);
  assert.equal(parse('147,456 B', ['bytes']).value, 147456);
  assert.equal(parse('16.38 GB', ['bytes']).unit, 'GB');
  assert.equal(parse('15.26 GiB', ['bytes']).unit, 'GiB');
});

test('bandwidth, compute, tokens, rates, times, percentages', () => {
  assert.equal(parse('2,039 GB/s', ['bandwidth']).value, 2039e9);
  assert.equal(parse('3.35 TB/s', ['bandwidth']).value, 3.35e12);
  assert.equal(parse('312 TFLOP/s', ['compute']).value, 312e12);
  assert.equal(parse('312 TFLOPS', ['compute']).value, 312e12);
  assert.equal(parse('624 TOPS', ['compute']).value, 624e12);
  assert.equal(parse('1k tokens', ['tokens']).value, 1000);
  assert.equal(parse('1.5k tokens', ['tokens']).value, 1500);
  assert.equal(parse('1,000 tokens', ['tokens']).value, 1000);
  assert.equal(parse('40_960 tokens', ['tokens']).value, 40960);
  assert.equal(parse('1000', ['tokens'], 'tokens').value, 1000);
  assert.equal(parse(1000, ['tokens'], 'tokens').value, 1000);
  assert.equal(parse('88.4 tok/s', ['token_rate']).value, 88.4);
  assert.equal(parse('4 req/s', ['request_rate']).value, 4);
  assert.equal(parse('23 ms', ['time']).value, 0.023);
  assert.equal(parse('500 µs', ['time']).value, 500e-6);
  assert.equal(parse('500 us', ['time']).value, 500e-6);
  assert.equal(parse('2 s', ['time']).value, 2);
  assert.equal(parse('90%', ['ratio']).value, 0.9);
  assert.equal(parse('153 FLOP/byte', ['intensity']).value, 153);
});

test('a missing unit is an error that names the unit to write', () => {
  const r = parseQuantity('80', { dims: ['bytes'] });
  assert.equal(r.ok, false);
  assert.match((r as { message: string }).message, /needs a unit/);
  assert.match((r as { message: string }).message, /80 GiB/);
  const n = parseQuantity(2039, { dims: ['bandwidth'] });
  assert.equal(n.ok, false);
  assert.match((n as { message: string }).message, /GB\/s/);
});

test('a unit of the wrong dimension says what is needed here', () => {
  const r = parseQuantity('80 GB', { dims: ['bandwidth'] });
  assert.equal(r.ok, false);
  assert.match((r as { message: string }).message, /a size in bytes, but a bandwidth is needed here/);
});

test('an unknown unit lists the known ones; an ambiguous byte case says GB or GiB', () => {
  const r = parseQuantity('5 parsecs', { dims: ['time'] });
  assert.equal(r.ok, false);
  assert.match((r as { message: string }).message, /use one of: .*ms/);
  for (const text of ['80 gb', '80 Gb', '80 gib']) {
    const a = parseQuantity(text, { dims: ['bytes'] });
    assert.equal(a.ok, false, text);
    assert.match((a as { message: string }).message, /"GB" \(10\^9 bytes\) or "GiB" \(2\^30 bytes\)/, text);
  }
  const bits = parseQuantity('80 Gb', { dims: ['bytes'] });
  assert.match((bits as { message: string }).message, /bits/);
});

test('arithmetic tracks dimensions: bytes / bandwidth is a time, FLOP/s / (B/s) an intensity', () => {
  const t = div(qty('16.38 GB', 'bytes'), qty('2,039 GB/s', 'bandwidth'));
  assert.ok(sameDims(t.dims, DIMS.time));
  assert.ok(Math.abs(t.value * 1e3 - 8.033) < 0.001);
  const ridge = div(qty('312 TFLOP/s', 'compute'), qty('2,039 GB/s', 'bandwidth'));
  assert.ok(sameDims(ridge.dims, DIMS.intensity));
  assert.equal(Math.round(ridge.value), 153);
  const kv = mul(qty('147,456 B', 'bytes'), 1000);
  assert.equal(kv.value, 147456000);
  const rate = div(q(1, 'tokens'), qty('8.03 ms', 'time'));
  assert.ok(sameDims(rate.dims, DIMS.token_rate));
  assert.equal(add(qty('1 GiB', 'bytes'), qty('1 GB', 'bytes')).value, GiB + 1e9);
  assert.equal(sub(qty('80 GiB', 'bytes'), qty('80 GB', 'bytes')).value, 80 * GiB - 80e9);
  assert.throws(() => add(qty('1 GB', 'bytes'), qty('1 ms', 'time')), /cannot add a size in bytes to a time/);
  assert.equal(describeDims(mul(qty('1 GB', 'bytes'), qty('1 ms', 'time')).dims), 'byte·s');
  assert.equal(inUnit(qty('80 GiB', 'bytes'), 'GB'), 85.89934592);
  assert.throws(() => inUnit(qty('80 GiB', 'bytes'), 'ms'), /cannot express/);
});

test('formatting always names GB or GiB, and gives both for sizes', () => {
  assert.equal(fmtBytes(16_381_470_720), '16.38 GB (15.26 GiB)');
  assert.equal(fmtBytes(80 * GiB), '85.90 GB (80.00 GiB)');
  assert.equal(fmtBytes(147456), '147,456 B (147.46 KB = 144.00 KiB)');
  assert.equal(fmtIn(56.34 * GiB, 'GiB'), '56.34 GiB');
  assert.equal(fmtIn(2039e9, 'GB/s', 0), '2,039 GB/s');
  assert.equal(fmtTime(0.00803), '8.03 ms');
  assert.equal(fmtTime(0.0525), '52.50 ms');
  assert.equal(fmtQuantity(qty('80 GB', 'bytes')), '80.00 GB (74.51 GiB)');
  assert.deepEqual(otherUnits(qty('80 GiB', 'bytes')).slice(0, 2), ['85.90 GB', '80.00 GiB']);
  assert.deepEqual(otherUnits(qty('2,039 GB/s', 'bandwidth')), ['2,039 GB/s', '1,899 GiB/s', '2.04 TB/s']);
});

test('property: a size written in any byte unit survives formatting in that unit', () => {
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'KiB', 'MiB', 'GiB', 'TiB'];
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 999_999 }), fc.constantFrom(...units), (n, unit) => {
      const v = parse(`${n} ${unit}`, ['bytes']);
      assert.equal(inUnit(v, unit), n);
      assert.equal(fmtIn(v.value, unit, 0), `${n.toLocaleString('en-US')} ${unit}`);
    }),
    { numRuns: 200 },
  );
});

test('property: GB and GiB of the same number never compare equal', () => {
  fc.assert(
    fc.property(fc.double({ min: 0.001, max: 1e6, noNaN: true }), (x) => {
      assert.notEqual(parse(`${x} GB`, ['bytes']).value, parse(`${x} GiB`, ['bytes']).value);
    }),
    { numRuns: 100 },
  );
});
