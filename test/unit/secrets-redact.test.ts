/**
 * redact(): what the bench applies to every text a server sent before it is stored or shown. The key
 * must go whole, in part (any piece the planted-key search looks for), case-changed, URL-escaped and
 * base64-encoded at any alignment; ordinary text must come through unchanged.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { redact, redactCut, redactDeep, REDACT_PIECE } from '../../src/core/bench/client';
import { KEY, leaks, SECRET } from '../support/plantedKey';

test('the whole key, a piece of it, and the key with its case changed are removed', () => {
  assert.equal(redact(`model-${KEY}`, KEY), 'model-[redacted]');
  assert.equal(
    redact(`Incorrect API key provided: sk-****${SECRET.slice(4, 20)}****`, KEY),
    'Incorrect API key provided: sk-****[redacted]****',
  );
  assert.equal(redact(`upper ${KEY.toUpperCase()} end`, KEY), 'upper [redacted] end');
  // Two separate pieces are two redactions; the text between them stays.
  assert.equal(redact(`${SECRET.slice(0, 10)} and ${SECRET.slice(20)}`, KEY), '[redacted] and [redacted]');
  // A piece shorter than REDACT_PIECE is not distinctive and is left.
  const short = SECRET.slice(3, 3 + REDACT_PIECE - 1);
  assert.equal(redact(`id ${short}.`, KEY), `id ${short}.`);
});

test('base64 of the key at every byte alignment (an echoed header, Basic auth) is removed', () => {
  for (const prefix of ['', 'x', 'xy', 'Bearer ', 'Authorization: Bearer ', 'user:']) {
    const b64 = Buffer.from(`${prefix}${KEY}`).toString('base64');
    const out = redact(`echo ${b64} done`, KEY);
    assert.deepStrictEqual(leaks(`base64 after "${prefix}"`, out), []);
    assert.ok(out.endsWith(' done') && out.includes('[redacted]'), out);
  }
});

test('the key echoed in hex, spelled out with separators, reversed, or \\u-escaped is removed', () => {
  const hex = Buffer.from(KEY).toString('hex');
  const rev = [...KEY].reverse().join('');
  const forms: Record<string, string> = {
    hex,
    'HEX, bytes spaced': hex.toUpperCase().replace(/../g, '$& ').trim(),
    '\\x per byte': hex.replace(/../g, '\\x$&'),
    '0x per byte, commas': hex.replace(/../g, '0x$&').replace(/(?<=.)0x/g, ', 0x'),
    'characters spaced': [...KEY].join(' '),
    'characters dotted, upper case': [...KEY.toUpperCase()].join('.'),
    reversed: rev,
    'reversed, spaced': [...rev].join(' '),
    'reversed hex': Buffer.from(rev).toString('hex'),
    '\\u-escaped': [...KEY].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join(''),
  };
  for (const [name, echo] of Object.entries(forms)) {
    const out = redact(`{"error":"invalid key ${echo} (401)"}`, KEY);
    const m = /^\{"error":"invalid key (.*)\[redacted\](.*) \(401\)"\}$/.exec(out);
    assert.ok(m, `${name}: ${out}`);
    // A separator and a few characters of an escape may stay at either end of the echo.
    assert.ok(m[1].length <= 5 && m[2].length <= 5, `${name}: ${out}`);
  }
});

test('property: the key spelled out with any separators between its characters is removed', () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom(' ', '-', ':', '.', ', ', '_', '|', '\n'), {
        minLength: KEY.length,
        maxLength: KEY.length,
      }),
      (seps) => {
        const echo = [...KEY].map((c, i) => c + seps[i]).join('');
        const out = redact(`<<${echo}>>`, KEY);
        return !/[0-9a-f]{4}/i.test(
          out
            .replace('[redacted]', '')
            .replace(/[^0-9a-z]/gi, '')
            .slice(2),
        );
      },
    ),
    { numRuns: 200 },
  );
});

test('a URL- or JSON-escaped key is removed; a short key only whole', () => {
  const odd = 'k3y/with+odd"chars=and-more';
  assert.equal(redact(`q=${encodeURIComponent(odd)}&x=1`, odd), 'q=[redacted]&x=1');
  assert.equal(redact(JSON.stringify({ k: odd }), odd), '{"k":"[redacted]"}');
  assert.equal(redact('the key is EMPTY, EMPTYISH', 'EMPTY'), 'the key is [redacted], [redacted]ISH');
  assert.equal(
    redact('abcdefgh', 'abc'),
    'abcdefgh',
    'keys under 4 characters are not redacted (they would eat ordinary text)',
  );
});

test('bearer tokens and Authorization values are removed without a key', () => {
  assert.equal(
    redact('sent Authorization: Bearer abc.def-123 to the server'),
    'sent Authorization: [redacted] to the server',
  );
  assert.equal(redact('{"authorization":"Bearer xyz12345"}'), '{"authorization":"[redacted]"}');
  assert.equal(redact('header bearer tok_ABCDEFG end'), 'header Bearer [redacted] end');
});

test('ordinary text comes through unchanged', () => {
  const texts = [
    'HTTP 500: {"error":{"message":"upstream failed","type":"server_error"}}',
    'the stream closed after 3 chunks without usage or [DONE]',
    'model qwen3-8b, max_model_len 32768',
    '',
  ];
  for (const t of texts) assert.equal(redact(t, KEY), t);
});

test('redactCut: a key straddling the cut leaves no piece behind', () => {
  for (let at = 80; at < 130; at++) {
    const text = `${'x'.repeat(at)}${KEY} tail`;
    const out = redactCut(text, 120, KEY);
    assert.ok(out.length <= 120);
    assert.deepStrictEqual(leaks(`key at ${at}`, out), []);
  }
});

test('redactDeep: strings anywhere in a result are redacted, numbers and shapes kept', () => {
  const v = {
    model: `m-${KEY}`,
    notes: [`a ${KEY}`, 'b'],
    points: [{ records: { chunk_ms: [1, 2.5, 3], error_message: [null, `HTTP 401: ${KEY}`] }, n: 3 }],
    ok: true,
  };
  const out = redactDeep(v, KEY);
  assert.deepStrictEqual(out, {
    model: 'm-[redacted]',
    notes: ['a [redacted]', 'b'],
    points: [{ records: { chunk_ms: [1, 2.5, 3], error_message: [null, 'HTTP 401: [redacted]'] }, n: 3 }],
    ok: true,
  });
});

test('property: any text holding the key, a 12-character piece of it or its base64 holds none of them after redact()', () => {
  const keyArb = fc
    .tuple(fc.constantFrom('sk-', 'sk-proj-', 'tok_', ''), fc.stringMatching(/^[A-Za-z0-9_-]{16,48}$/))
    .map(([p, s]) => p + s);
  fc.assert(
    fc.property(
      keyArb,
      fc.string({ maxLength: 40 }),
      fc.string({ maxLength: 40 }),
      fc.nat(),
      fc.constantFrom('whole', 'piece', 'base64', 'upper'),
      (key, before, after, cut, form) => {
        const secret = key.replace(/^(sk-proj-|sk-|tok_)/, '');
        const start = cut % Math.max(1, secret.length - 11);
        const planted =
          form === 'whole'
            ? key
            : form === 'piece'
              ? secret.slice(start, start + 12)
              : form === 'upper'
                ? key.toUpperCase()
                : Buffer.from(`${before}${key}`).toString('base64');
        const out = redact(`${before}${planted}${after}`, key);
        const needles = [key, ...Array.from({ length: secret.length - 11 }, (_, i) => secret.slice(i, i + 12))];
        for (const n of needles) if (out.toLowerCase().includes(n.toLowerCase())) return false;
        return !out.includes(Buffer.from(key).toString('base64').slice(4, -4));
      },
    ),
    { numRuns: 300 },
  );
});
