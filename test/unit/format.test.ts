/**
 * The .inflab file format: property-based round trips of the serializer, and what happens to
 * truncated, corrupt, wrongly shaped and future-version files (a NotebookFormatError that says what
 * is wrong and where; never a partial notebook).
 *
 * Line endings: a cell source is split on "\n" only, so the "\r" of a CRLF line stays at the end of
 * its line in the file (written as "\r" inside the JSON string) and comes back byte for byte. A
 * source is never normalized: what the user typed is what is saved.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  FORMAT_VERSION,
  itemFromBytes,
  itemToBytes,
  NotebookFormatError,
  parseNotebook,
  parseNotebookBytes,
  serializeNotebook,
  serializeNotebookBytes,
  type NbCell,
  type Notebook,
} from '../../src/core/notebook/format';

// ---------------------------------------------------------------- arbitraries

/** Any character a person (or a paste) can put in a cell, line breaks of every style included. */
const sourceChar = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom('\n', '\r\n', '\r', '\t', ' ', '"', '\\', '\u2028', '\u0000', '\uFEFF') },
  { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)) }, // lone surrogates
);
const source = fc.array(sourceChar, { maxLength: 60 }).map((cs) => cs.join(''));

/** Realistic cell text too: lines, empty lines, trailing newlines, CRLF files. */
const linesSource = fc
  .tuple(
    fc.array(
      fc.string({ unit: 'grapheme', maxLength: 30 }).map((l) => l.replace(/[\r\n]/g, '')),
      { maxLength: 8 },
    ),
    fc.constantFrom('\n', '\r\n'),
    fc.nat(3),
  )
  .map(([lines, eol, trailing]) => lines.join(eol) + eol.repeat(trailing));

/** JSON without -0 (JSON has no negative zero: -0 is written as 0). */
const json = fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown);
const nonEmptyRecord = fc.dictionary(fc.string({ maxLength: 12 }), json, {
  minKeys: 1,
  maxKeys: 4,
  noNullPrototype: true,
});

const textMime = fc.constantFrom('text/plain', 'text/html', 'text/markdown', 'image/svg+xml', 'text/x-custom');
const jsonMime = fc.constantFrom(
  'application/json',
  'application/vnd.inflab.values+json',
  'application/vnd.inflab.records+json',
  'application/vnd.inflab.findings+json',
  'application/vnd.vegalite.v5+json',
);
const item = fc.oneof(
  fc.record(
    { mime: textMime, data: fc.oneof(source, linesSource, fc.string({ unit: 'binary', maxLength: 200 })) },
    { noNullPrototype: true },
  ),
  fc.record({ mime: jsonMime, data: json }, { noNullPrototype: true }),
);
const output = fc.record(
  { items: fc.array(item, { maxLength: 4 }), metadata: nonEmptyRecord },
  { requiredKeys: ['items'], noNullPrototype: true },
);
const finiteTime = fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0));
const lastRun = fc
  .record(
    { executionOrder: fc.integer(), success: fc.boolean(), startTime: finiteTime, endTime: finiteTime },
    { requiredKeys: [], noNullPrototype: true },
  )
  .filter((l) => Object.keys(l).length > 0);

const cell: fc.Arbitrary<NbCell> = fc.record(
  {
    kind: fc.constantFrom('code' as const, 'markdown' as const),
    language: fc.oneof(fc.constantFrom('inflab', 'markdown', 'yaml'), fc.string({ minLength: 1, maxLength: 10 })),
    source: fc.oneof(source, linesSource),
    metadata: nonEmptyRecord,
    lastRun,
    outputs: fc.array(output, { minLength: 1, maxLength: 3 }),
  },
  { requiredKeys: ['kind', 'language', 'source'], noNullPrototype: true },
);

/** Notebooks in canonical form: empty metadata/outputs/lastRun are absent (the serializer omits them). */
const notebook: fc.Arbitrary<Notebook> = fc.record(
  { metadata: nonEmptyRecord, cells: fc.array(cell, { maxLength: 6 }) },
  { requiredKeys: ['cells'], noNullPrototype: true },
);

const lines = (s: string) => s.split('\n');

// ---------------------------------------------------------------- round trips

test('serialize → parse → serialize is byte-identical, and parse(serialize(nb)) deep-equals nb', () => {
  fc.assert(
    fc.property(notebook, (nb) => {
      const text = serializeNotebook(nb);
      const back = parseNotebook(text);
      assert.deepStrictEqual(back, nb);
      assert.equal(serializeNotebook(back), text);
    }),
    { numRuns: 400 },
  );
});

test('CRLF and lone-CR sources round-trip byte for byte; the \\r stays on its line', () => {
  const nb: Notebook = {
    cells: [
      { kind: 'code', language: 'inflab', source: 'setup: lab\r\ngpu: h100\r\n\r\n' },
      { kind: 'markdown', language: 'markdown', source: 'a\rb\n' },
    ],
  };
  const text = serializeNotebook(nb);
  assert.match(text, /"setup: lab\\r",\n/);
  assert.deepStrictEqual(parseNotebook(text), nb);
  // A "\r" is never a line break of the file: the file itself has one line per source line.
  assert.ok(!text.includes('\r'), 'no raw CR in the file');
});

test('keys are written in a stable order whatever order the notebook was built in', () => {
  const reverseKeys = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(reverseKeys);
    if (v && typeof v === 'object') {
      const o: Record<string, unknown> = {};
      for (const k of Object.keys(v).reverse()) {
        if (k === '__proto__')
          Object.defineProperty(o, k, {
            value: reverseKeys((v as any)[k]),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        else o[k] = reverseKeys((v as any)[k]);
      }
      return o;
    }
    return v;
  };
  fc.assert(
    fc.property(notebook, (nb) => {
      const text = serializeNotebook(nb);
      assert.equal(serializeNotebook(reverseKeys(nb) as Notebook), text);
      // The file's own keys: inflab first, then metadata, then cells; a cell kind, language, source, …
      const file = JSON.parse(text);
      assert.deepStrictEqual(Object.keys(file), ['inflab', ...(nb.metadata ? ['metadata'] : []), 'cells']);
      for (const c of file.cells) {
        const order = ['kind', 'language', 'source', 'metadata', 'lastRun', 'outputs'].filter((k) => k in c);
        assert.deepStrictEqual(Object.keys(c), order);
      }
    }),
    { numRuns: 150 },
  );
});

test('a one-line edit of a cell source changes exactly one line of the file', () => {
  const withLines = notebook.filter((nb) => nb.cells.length > 0);
  fc.assert(
    fc.property(
      withLines,
      fc.nat(),
      fc.nat(),
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      (nb, ci, li, replacement) => {
        const c = nb.cells[ci % nb.cells.length];
        const srcLines = c.source.split('\n');
        const at = li % srcLines.length;
        const newLine = replacement.replace(/\n/g, '') + (srcLines[at] === replacement ? 'x' : '');
        fc.pre(newLine !== srcLines[at]);
        const edited = structuredClone(nb);
        const cc = edited.cells[ci % nb.cells.length];
        cc.source = srcLines.map((l, k) => (k === at ? newLine : l)).join('\n');
        const a = lines(serializeNotebook(nb));
        const b = lines(serializeNotebook(edited));
        assert.equal(b.length, a.length, 'same number of lines');
        const changed = a.flatMap((l, k) => (l === b[k] ? [] : [k]));
        assert.equal(changed.length, 1, `exactly one line differs (got ${changed.length})`);
      },
    ),
    { numRuns: 200 },
  );
});

/** What the format wrote before output data went on one line: everything pretty-printed. */
function oldLayout(text: string): string {
  return JSON.stringify(JSON.parse(text), null, 2) + '\n';
}

test("layout: structure pretty-printed, each output item's data one line of compact JSON; only whitespace differs from the old layout", () => {
  fc.assert(
    fc.property(notebook, (nb) => {
      const text = serializeNotebook(nb);
      const fileLines = lines(text);
      // Every data line is `"data": <one JSON value>` and nothing else of the file shares its line.
      const items = nb.cells.flatMap((c) => (c.outputs ?? []).flatMap((o) => o.items));
      const dataLines = fileLines.filter((l) => /^ {14}"data": /.test(l));
      assert.equal(dataLines.length, items.length, 'one line per item');
      dataLines.forEach((l, k) =>
        assert.deepStrictEqual(JSON.parse(l.slice('              "data": '.length)), items[k].data),
      );
      // The rest is the pretty-printed structure: re-indenting the file gives the old layout
      // exactly (same keys, same order, same values), so only whitespace inside data changed.
      const old = oldLayout(text);
      const oldNb = parseNotebook(old);
      assert.deepStrictEqual(oldNb, nb);
      // A file in the old layout opens and saves in the new one.
      assert.equal(serializeNotebook(oldNb), text);
      // Lines outside item data are what JSON.stringify(…, null, 2) writes for them.
      const structural = fileLines.filter((l) => !/^ {14}"data": /.test(l));
      const oldLines = new Set(lines(old));
      for (const l of structural) assert.ok(oldLines.has(l), `line ${JSON.stringify(l)} is as the old layout wrote it`);
    }),
    { numRuns: 300 },
  );
});

test('a notebook of large numeric arrays is about its compact JSON size on disk (< 1.2×)', () => {
  let x = 7;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const nb: Notebook = { cells: [] };
  for (let c = 0; c < 8; c++) {
    const n = 5000;
    nb.cells.push({
      kind: 'code',
      language: 'inflab',
      source: `bench: sweep\nconcurrency: [${c + 1}]`,
      lastRun: { executionOrder: c + 1, success: true, startTime: 1.7e12, endTime: 1.7e12 + 1000 },
      outputs: [
        {
          items: [
            { mime: 'text/plain', data: `point ${c}` },
            {
              mime: 'application/vnd.inflab.records+json',
              data: {
                format: 'inflab.records.v1',
                n,
                id: Array.from({ length: n }, (_, i) => i),
                sent: Array.from({ length: n }, () => Math.round(rnd() * 1e6) / 1e3),
                ok: Array.from({ length: n }, (_, i) => i % 9 !== 0),
                err: Array.from({ length: n }, (_, i) => (i % 9 ? null : 'timeout')),
              },
            },
            {
              mime: 'application/vnd.vegalite.v6+json',
              data: {
                mark: 'line',
                $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
                data: { values: Array.from({ length: 500 }, (_, i) => ({ y: rnd() * 100, x: i })) },
              },
            },
          ],
        },
      ],
    });
  }
  const text = serializeNotebook(nb);
  const compact = JSON.stringify(JSON.parse(text));
  const ratio = Buffer.byteLength(text) / Buffer.byteLength(compact);
  assert.ok(
    ratio < 1.2,
    `file ${Buffer.byteLength(text)} bytes vs compact JSON ${Buffer.byteLength(compact)}: ${ratio.toFixed(3)}×`,
  );
  assert.ok(
    lines(text).length < 40 * nb.cells.length,
    `${lines(text).length} lines for ${nb.cells.length} cells of 20,000 values each: the arrays are not one number per line`,
  );
  // The old layout was several times larger; it still opens, and saves as the new one.
  assert.ok(Buffer.byteLength(oldLayout(text)) > 3 * Buffer.byteLength(text));
  assert.equal(serializeNotebook(parseNotebook(oldLayout(text))), text);
  assert.deepStrictEqual(parseNotebook(text), parseNotebook(oldLayout(text)));
});

// ---------------------------------------------------------------- the editor's path (items as bytes)

const utf8 = (b: Uint8Array) => new TextDecoder().decode(b);
const isJson = (mime: string) => mime === 'application/json' || mime.endsWith('+json');
/** The same notebook with each output item mapped. */
function mapItems<A, B>(nb: Notebook<A>, f: (it: A) => B): Notebook<B> {
  const out: Notebook<B> = {
    cells: nb.cells.map((c) => ({ ...c, outputs: c.outputs?.map((o) => ({ ...o, items: o.items.map(f) })) })),
  };
  for (const c of out.cells) if (c.outputs === undefined) delete c.outputs;
  if (nb.metadata !== undefined) out.metadata = nb.metadata;
  return out;
}
/** The notebook the editor's bytes stand for (what itemFromBytes gives back). */
const fromEditor = (nb: Notebook<{ mime: string; bytes: Uint8Array }>): Notebook =>
  mapItems(nb, (it) => itemFromBytes(it.mime, it.bytes));
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

test('editor open/save (items as bytes) agrees with parseNotebook/serializeNotebook, in either layout, byte for byte', () => {
  fc.assert(
    fc.property(notebook, fc.boolean(), (anyNb, oldFile) => {
      // Text held as UTF-8 bytes has no lone surrogates (the editor holds U+FFFD there).
      const nb = mapItems(anyNb, (it) =>
        typeof it.data === 'string' && !isJson(it.mime)
          ? { ...it, data: it.data.replace(LONE_SURROGATE, '\ufffd') }
          : it,
      );
      const text = serializeNotebook(nb);
      const file = oldFile ? oldLayout(text) : text;
      const opened = parseNotebookBytes(new TextEncoder().encode(file));
      assert.deepStrictEqual(fromEditor(opened), nb);
      // Saved unchanged: the new layout, the same bytes as serializeNotebook writes.
      assert.equal(utf8(serializeNotebookBytes(opened)), text);
      // Items the editor made itself (itemToBytes, as the controller does) save the same way.
      assert.equal(
        utf8(serializeNotebookBytes(mapItems(nb, (it) => ({ mime: it.mime, bytes: itemToBytes(it) })))),
        text,
      );
    }),
    { numRuns: 300 },
  );
});

test('editor open of a broken file: the same NotebookFormatError as parseNotebook, never a partial notebook', () => {
  const breaks: ((t: string) => string)[] = [
    (t) => t.replace(/("data": \{"nested":)/, '$1{'), // a data line made invalid JSON
    (t) => t.replace('"data": {"nested"', '"data": {nested"'),
    (t) => t.replace(/"data": (.*)\n/, '"data": $1,\n'), // a trailing comma after a data line
    (t) => t.replace(/"data": (.*)\n/, '"data": $1, "extra": 1\n'),
    (t) => t.slice(0, Math.floor(t.length * 0.7)),
    (t) => t.replace('"inflab": 1', '"inflab": 2'),
    (t) => t.replace(/"mime": "text\/plain",/, '"mime": 5,'),
  ];
  for (const [k, brk] of breaks.entries()) {
    const text = brk(realistic);
    assert.notEqual(text, realistic, `break ${k} changed the file`);
    let want: NotebookFormatError | undefined;
    try {
      parseNotebook(text);
    } catch (e) {
      want = e as NotebookFormatError;
    }
    assert.ok(want instanceof NotebookFormatError, `break ${k} is refused by parseNotebook`);
    assert.throws(
      () => parseNotebookBytes(new TextEncoder().encode(text)),
      (e: unknown) => e instanceof NotebookFormatError && e.message === want!.message && e.line === want!.line,
      `break ${k}: ${want!.message}`,
    );
  }
});

test('editor open: "data" lines that are not output data (metadata, text, hand-written items, CRLF) are read as parseNotebook reads them', () => {
  const nb: Notebook = {
    metadata: JSON.parse('{"mime": "not an item", "data": {"x": [1, 2]}}'),
    cells: [
      {
        kind: 'code',
        language: 'inflab',
        source: '"mime": "text/plain",\n"data": 1',
        metadata: JSON.parse('{"a": {"b": {"mime": "x", "data": "meta"}}}'),
        outputs: [
          {
            items: [
              { mime: 'text/plain', data: '\n              "data": "inside a string"' },
              { mime: 'application/json', data: { data: 1, mime: 'x' } },
            ],
            metadata: { data: [1] },
          },
        ],
      },
    ],
  };
  const text = serializeNotebook(nb);
  // Hand-written variants: keys in another order, an item on one line, metadata in "mime, data" order.
  const variants = [
    text,
    oldLayout(text),
    text.replace(/\{\n\s+"mime": "text\/plain",\n\s+"data": ("[^\n]*")\n\s+\}/, '{"mime": "text/plain", "data": $1}'),
    text.replace(
      '"metadata": {\n    "data": {\n      "x": [\n        1,\n        2\n      ]\n    },\n    "mime": "not an item"\n  }',
      '"metadata": {\n    "mime": "not an item",\n    "data": {"x": [1, 2]}\n  }',
    ),
  ];
  variants.push(text.replace(/\n/g, '\r\n')); // a checkout that turned line endings into CRLF
  assert.notEqual(variants[2], text);
  assert.notEqual(variants[3], text);
  for (const v of variants) {
    const opened = parseNotebookBytes(new TextEncoder().encode(v));
    assert.deepStrictEqual(fromEditor(opened), parseNotebook(v));
    assert.deepStrictEqual(fromEditor(opened), nb);
    assert.equal(utf8(serializeNotebookBytes(opened)), text);
  }
});

test('editor save: a data line written by hand in another valid form is kept as written; the CLI path writes the canonical form', () => {
  const text = serializeNotebook({
    cells: [
      {
        kind: 'code',
        language: 'inflab',
        source: 'x: 1',
        outputs: [{ items: [{ mime: 'application/json', data: { a: 1, b: [1, 2] } }] }],
      },
    ],
  });
  const handEdited = text.replace('"data": {"a":1,"b":[1,2]}', '"data": { "b": [1, 2.50], "a": 1 }');
  assert.notEqual(handEdited, text);
  assert.equal(
    utf8(serializeNotebookBytes(parseNotebookBytes(new TextEncoder().encode(handEdited)))),
    handEdited,
    'open + save changes no byte',
  );
  assert.equal(
    serializeNotebook(parseNotebook(handEdited)),
    text.replace('[1,2]', '[1,2.5]').replace('{"a":1,"b"', '{"a":1,"b"'),
  );
  // New data, or bytes not known to be one line of JSON, are written in the canonical form.
  const opened = parseNotebookBytes(new TextEncoder().encode(handEdited));
  opened.cells[0].outputs![0].items[0].bytes = new TextEncoder().encode('{\n "z": 2,\n "y": [3,\n 4] }');
  assert.ok(utf8(serializeNotebookBytes(opened)).includes('\n              "data": {"y":[3,4],"z":2}\n'));
  opened.cells[0].outputs![0].items[0].bytes = new TextEncoder().encode('{not json');
  assert.ok(
    utf8(serializeNotebookBytes(opened)).includes('\n              "data": "{not json"\n'),
    'not JSON: kept as text',
  );
});

test('a "__proto__" key in output data or metadata is kept as data', () => {
  const data = JSON.parse('{"__proto__": {"polluted": 1}, "b": [1, {"__proto__": 2}]}');
  const nb: Notebook = {
    metadata: JSON.parse('{"__proto__": {"x": 1}}'),
    cells: [
      { kind: 'code', language: 'inflab', source: 'x: 1', outputs: [{ items: [{ mime: 'application/json', data }] }] },
    ],
  };
  const text = serializeNotebook(nb);
  assert.match(
    text,
    /\n  "metadata": \{\n    "__proto__": \{\n      "x": 1\n    \}\n  \},\n/,
    'metadata pretty-printed, the key kept',
  );
  assert.ok(
    text.includes('\n              "data": {"__proto__":{"polluted":1},"b":[1,{"__proto__":2}]}\n'),
    'output data on one line, the key kept',
  );
  const back = parseNotebook(text);
  assert.deepStrictEqual(back, nb);
  assert.equal(({} as any).polluted, undefined, 'no prototype pollution');
  assert.equal(serializeNotebook(back), text);
});

test('what JSON cannot hold is made explicit: the serializer never writes a file the parser rejects', () => {
  const odd = fc.record({
    cells: fc.array(
      fc.record({
        kind: fc.constantFrom('code' as const, 'markdown' as const),
        language: fc.constantFrom('inflab', ''),
        source: source,
        lastRun: fc.record(
          {
            executionOrder: fc.oneof(fc.integer(), fc.double()),
            startTime: fc.double(),
            endTime: fc.constantFrom(NaN, Infinity, -Infinity, 1),
          },
          { requiredKeys: [] },
        ),
        outputs: fc.array(
          fc.record({
            items: fc.array(
              fc.record({
                mime: fc.constantFrom('text/plain', 'application/json', ''),
                data: fc.oneof(
                  fc.constant(undefined),
                  fc.constant(NaN),
                  json,
                  fc.constant({ a: undefined, b: [undefined] }),
                ),
              }),
              { maxLength: 3 },
            ),
          }),
          { maxLength: 2 },
        ),
      }),
      { maxLength: 4 },
    ),
  });
  fc.assert(
    fc.property(odd, (nb) => {
      let text: string;
      try {
        text = serializeNotebook(nb as Notebook);
      } catch (e) {
        // Only for what cannot be saved at all (an empty language or mime): said, not written.
        assert.ok(e instanceof NotebookFormatError, String(e));
        assert.match(
          e.message,
          /Cannot save this notebook: at cells\[\d+\]\.(language|outputs\[\d+\]\.items\[\d+\]\.mime)/,
        );
        return;
      }
      const back = parseNotebook(text);
      assert.equal(back.cells.length, nb.cells.length);
      assert.equal(serializeNotebook(back), text);
      back.cells.forEach((c, i) => assert.equal(c.source, nb.cells[i].source));
    }),
    { numRuns: 300 },
  );
  // The two explicit rules, by example.
  const nb: Notebook = {
    cells: [
      {
        kind: 'code',
        language: 'inflab',
        source: '',
        lastRun: { executionOrder: 1, startTime: NaN, endTime: 5 },
        outputs: [{ items: [{ mime: 'application/json', data: undefined }] }],
      },
    ],
  };
  const back = parseNotebook(serializeNotebook(nb));
  assert.deepStrictEqual(back.cells[0].lastRun, { executionOrder: 1, endTime: 5 });
  assert.deepStrictEqual(back.cells[0].outputs, [{ items: [{ mime: 'application/json', data: null }] }]);
});

test('an empty file is a new, empty notebook; a UTF-8 byte-order mark is ignored', () => {
  assert.deepStrictEqual(parseNotebook(''), { cells: [] });
  assert.deepStrictEqual(parseNotebook(' \n\t\n'), { cells: [] });
  const nb: Notebook = { cells: [{ kind: 'code', language: 'inflab', source: 'a: 1' }] };
  assert.deepStrictEqual(parseNotebook('\uFEFF' + serializeNotebook(nb)), nb);
  assert.equal(serializeNotebook({ cells: [] }), `{\n  "inflab": ${FORMAT_VERSION},\n  "cells": []\n}\n`);
});

// ---------------------------------------------------------------- broken files

function expectFormatError(text: string): NotebookFormatError {
  let result: unknown;
  try {
    result = parseNotebook(text);
  } catch (e) {
    assert.ok(e instanceof NotebookFormatError, `expected NotebookFormatError, got ${e}`);
    assert.ok(e.message.length > 20);
    assert.match(e.message, /The file was not changed\./);
    return e;
  }
  assert.fail(`parsed a broken file into ${JSON.stringify(result).slice(0, 200)}`);
}

const realistic = serializeNotebook({
  metadata: { title: 'day 4' },
  cells: [
    { kind: 'markdown', language: 'markdown', source: '# Day 4\n\nDecode roofline, then a sweep.' },
    {
      kind: 'code',
      language: 'inflab',
      source: 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim\n',
      lastRun: { executionOrder: 1, success: true, startTime: 1700000000000, endTime: 1700000000123 },
    },
    {
      kind: 'code',
      language: 'inflab',
      source: 'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 2, 4]',
      outputs: [
        {
          items: [
            { mime: 'text/plain', data: 'batch  tok/s\n1  88.4\n2  176.1' },
            {
              mime: 'application/vnd.inflab.values+json',
              data: { tokS: [88.4, 176.1, -1.5e-7], ok: true, note: null, nested: { a: [{ b: 'c\\"' }] } },
            },
          ],
        },
      ],
    },
  ],
});

test('a file cut at any offset is refused with the line where it ends, and called truncated', () => {
  const nbs = fc
    .sample(
      notebook.filter((nb) => nb.cells.length > 0),
      { numRuns: 30, seed: 7 },
    )
    .map(serializeNotebook);
  fc.assert(
    fc.property(fc.constantFrom(realistic, ...nbs), fc.double({ min: 0, max: 1, noNaN: true }), (text, frac) => {
      // Cut anywhere after the first byte and before the closing brace (a cut after it is the whole notebook).
      const cut = 1 + Math.floor(frac * (text.length - 3));
      const prefix = text.slice(0, cut);
      const e = expectFormatError(prefix);
      const lastLine = prefix.split('\n').length;
      assert.equal(e.line, lastLine, `line of the end of the file (message: ${e.message})`);
      assert.match(
        e.message,
        new RegExp(
          `^Not valid JSON at line ${lastLine}, column \\d+: the file ends in the middle of the JSON\\. The file ends early: it looks truncated`,
        ),
      );
    }),
    { numRuns: 400 },
  );
  // Every single cut of the realistic notebook, exhaustively.
  for (let cut = 1; cut < realistic.length - 2; cut++) {
    const e = expectFormatError(realistic.slice(0, cut));
    assert.match(e.message, /truncated/, `cut at ${cut}: ${e.message}`);
  }
});

/** Line of a V8 "at position N" message, when it gives one. */
function v8Line(text: string): number | undefined {
  try {
    JSON.parse(text);
  } catch (e) {
    const m = /position (\d+)/.exec((e as Error).message);
    return m ? text.slice(0, Number(m[1])).split('\n').length : undefined;
  }
  return undefined;
}

test('corrupt JSON (random edits) is refused with a line, or parses into a whole notebook', () => {
  const edit = fc.tuple(
    fc.constantFrom('replace', 'insert', 'delete'),
    fc.double({ min: 0, max: 1, noNaN: true }),
    fc.constantFrom('{', '}', '[', ']', ',', ':', '"', '\\', 'x', '1', ' ', '\n', 'é', '\u0001', 'null'),
  );
  let refused = 0;
  fc.assert(
    fc.property(fc.array(edit, { minLength: 1, maxLength: 3 }), (edits) => {
      let text = realistic;
      for (const [op, f, ch] of edits) {
        const at = Math.floor(f * text.length);
        text =
          op === 'replace'
            ? text.slice(0, at) + ch + text.slice(at + 1)
            : op === 'insert'
              ? text.slice(0, at) + ch + text.slice(at)
              : text.slice(0, at) + text.slice(at + 1);
      }
      let nb: Notebook;
      try {
        nb = parseNotebook(text);
      } catch (e) {
        refused++;
        assert.ok(e instanceof NotebookFormatError, String(e));
        assert.match(e.message, /The file was not changed\./);
        if (/^Not valid JSON/.test(e.message)) {
          assert.ok(e.line! >= 1 && e.line! <= text.split('\n').length, e.message);
          assert.match(e.message, /^Not valid JSON at line \d+, column \d+: /);
          const v8 = v8Line(text);
          if (v8 !== undefined) assert.equal(e.line, v8, `same line as V8 says (${e.message})`);
        } else {
          assert.ok(Array.isArray(e.path), e.message);
        }
        return;
      }
      // It parsed (an edit inside a string): then it is a whole notebook that round-trips.
      assert.equal(nb.cells.length, 3);
      assert.deepStrictEqual(parseNotebook(serializeNotebook(nb)), nb);
    }),
    { numRuns: 500 },
  );
  assert.ok(refused > 100, `most random edits break the file (${refused})`);
});

test('specific corruptions name what is wrong and the line', () => {
  let e = expectFormatError(
    '{\n  "inflab": 1,\n  "cells": [\n    {"kind": "code",, "language": "inflab", "source": []}\n  ]\n}\n',
  );
  assert.equal(e.line, 4);
  assert.match(e.message, /line 4, column 21: expected a "quoted" property name, found ","/);
  e = expectFormatError(
    '{\n  "inflab": 1,\n  "cells": [\n    {"kind": "code", "language": "inflab", "source": ["a\nb"]}\n  ]\n}\n',
  );
  assert.equal(e.line, 4);
  assert.match(e.message, /raw control character/);
  e = expectFormatError('{"inflab": 1, "cells": []}\n{"inflab": 1, "cells": []}\n');
  assert.equal(e.line, 2);
  assert.match(e.message, /unexpected text after the end of the notebook/);
  e = expectFormatError('{"inflab": 1, "cells": [tru]}');
  assert.match(e.message, /expected a value/);
  e = expectFormatError('\u0000\u0000\u0000\u0000');
  assert.equal(e.line, 1);
  // Deeper nesting than any scanner's stack: still a NotebookFormatError.
  e = expectFormatError('['.repeat(200_000));
  assert.equal(e.line, 1);
});

/** A random wrong-shape mutation of a valid file object, and where it was made. */
const schemaBreak = fc.constantFrom(
  (f: any) => ((f.cells[1].source = 'setup: day4'), ['cells', 1, 'source']),
  (f: any) => ((f.cells[1].source[2] = 7), ['cells', 1, 'source', 2]),
  (f: any) => ((f.cells[2].kind = 'python'), ['cells', 2, 'kind']),
  (f: any) => (delete f.cells[0].language, ['cells', 0, 'language']),
  (f: any) => ((f.cells[2].outputs[0].items[1].mime = 3), ['cells', 2, 'outputs', 0, 'items', 1, 'mime']),
  (f: any) => (delete f.cells[2].outputs[0].items[0].data, ['cells', 2, 'outputs', 0, 'items', 0, 'data']),
  (f: any) => ((f.cells[1].lastRun.executionOrder = 'one'), ['cells', 1, 'lastRun', 'executionOrder']),
  (f: any) => ((f.cells[1].extra = true), ['cells', 1, 'extra']),
  (f: any) => ((f.cellz = f.cells), delete f.cells, ['cells']), // the missing key is reported first
  (f: any) => ((f.cells = {}), ['cells']),
  (f: any) => ((f.inflab = 'one'), ['inflab']),
  (f: any) => ((f.inflab = 0), ['inflab']),
  (f: any) => (delete f.inflab, ['inflab']),
  (f: any) => ((f.metadata = []), ['metadata']),
);

test('wrong schema: the error names the JSON path and the line that holds it', () => {
  fc.assert(
    fc.property(schemaBreak, fc.boolean(), (brk, pretty) => {
      const file = JSON.parse(realistic);
      const wantPath = brk(file) as (string | number)[];
      const text = pretty ? JSON.stringify(file, null, 2) : JSON.stringify(file);
      const e = expectFormatError(text);
      assert.match(e.message, /^Not a valid \.inflab notebook: at /);
      // The first problem zod reports may be the one we made or (for a removed key) the same path.
      assert.deepStrictEqual(e.path, wantPath, e.message);
      const shown = wantPath.map((p, k) => (typeof p === 'number' ? `[${p}]` : k ? `.${p}` : p)).join('');
      assert.ok(e.message.includes(`at ${shown} (line ${e.line})`), e.message);
      const last = wantPath[wantPath.length - 1];
      const lineText = text.split('\n')[e.line! - 1];
      if (pretty && typeof last === 'string' && !(file && lineText === undefined)) {
        // A missing key's line is its parent's; a present one's line holds the key.
        let parent: any = file;
        for (const seg of wantPath.slice(0, -1)) parent = parent?.[seg];
        const present = parent && typeof parent === 'object' && Object.prototype.hasOwnProperty.call(parent, last);
        if (present) assert.ok(lineText.includes(`"${last}"`), `line ${e.line} (${lineText}) holds "${last}"`);
      }
    }),
    { numRuns: 100 },
  );
});

test('a future format version is refused with the version and what to do', () => {
  fc.assert(
    fc.property(fc.integer({ min: FORMAT_VERSION + 1, max: 1_000_000 }), fc.boolean(), (v, extraFields) => {
      const text = JSON.stringify(
        {
          inflab: v,
          cells: extraFields ? [{ kind: 'code', language: 'inflab', source: ['x'], newThing: { a: 1 } }] : [],
          future: extraFields,
        },
        null,
        2,
      );
      const e = expectFormatError(text);
      assert.match(
        e.message,
        new RegExp(
          `format version ${v}, newer than this InfLab understands \\(version ${FORMAT_VERSION}\\)\\. Update the InfLab extension`,
        ),
      );
      assert.equal(e.line, 2);
    }),
    { numRuns: 50 },
  );
});

test('any text or JSON at all: a whole notebook or a NotebookFormatError, never another exception', () => {
  // Notebook-shaped JSON with random parts, so that most inputs get past JSON and into the schema.
  const anyValue = fc.jsonValue({ maxDepth: 3 });
  const shaped = fc.record(
    {
      inflab: fc.oneof(fc.constant(1), anyValue),
      metadata: anyValue,
      cells: fc.oneof(
        anyValue,
        fc.array(
          fc.record(
            {
              kind: fc.oneof(fc.constantFrom('code', 'markdown'), anyValue),
              language: fc.oneof(fc.constant('inflab'), anyValue),
              source: fc.oneof(fc.array(fc.string()), anyValue),
              metadata: anyValue,
              lastRun: fc.oneof(
                fc.record({ executionOrder: anyValue, success: anyValue }, { requiredKeys: [] }),
                anyValue,
              ),
              outputs: fc.oneof(
                fc.array(
                  fc.record(
                    {
                      items: fc.array(fc.record({ mime: anyValue, data: anyValue }, { requiredKeys: [] })),
                      metadata: anyValue,
                    },
                    { requiredKeys: [] },
                  ),
                ),
                anyValue,
              ),
              __proto__: anyValue,
            },
            { requiredKeys: [] },
          ),
          { maxLength: 3 },
        ),
      ),
      extra: anyValue,
    },
    { requiredKeys: [] },
  );
  const text = fc.oneof(
    shaped.map((v) => JSON.stringify(v, null, 2)),
    anyValue.map((v) => JSON.stringify(v)),
    fc.string({ unit: 'binary', maxLength: 200 }),
  );
  let accepted = 0;
  fc.assert(
    fc.property(text, (t) => {
      let nb: Notebook;
      try {
        nb = parseNotebook(t);
      } catch (e) {
        assert.ok(e instanceof NotebookFormatError, `${e} for ${t.slice(0, 200)}`);
        assert.ok(
          e.line === undefined || (e.line >= 1 && e.line <= t.split('\n').length),
          `line ${e.line} inside the file`,
        );
        return;
      }
      accepted++;
      // Saved again, it reads back to the same bytes (empty metadata, outputs or lastRun are left out).
      const again = serializeNotebook(nb);
      assert.equal(serializeNotebook(parseNotebook(again)), again);
      assert.deepStrictEqual(
        parseNotebook(again).cells.map((c) => c.source),
        nb.cells.map((c) => c.source),
      );
    }),
    { numRuns: 1500 },
  );
  assert.ok(accepted > 10, `some random notebooks are valid (${accepted})`);
});

test('a schema error under an escaped property name is placed on its line', () => {
  const text =
    '{\n  "inflab": 1,\n  "ce\\u006cls": [\n    {"kind": "code", "language": "inflab",\n     "source": 5}\n  ]\n}\n';
  assert.throws(
    () => parseNotebook(text),
    (e: unknown) =>
      e instanceof NotebookFormatError && e.line === 5 && /at cells\[0\]\.source \(line 5\)/.test(e.message),
  );
});

test('output items to bytes and back (what the editor holds): text stays text, JSON stays JSON', () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.record({ mime: textMime, data: fc.string({ unit: 'binary', maxLength: 100 }) }),
        fc.record({ mime: jsonMime, data: json }),
      ),
      (it) => {
        const back = itemFromBytes(it.mime, itemToBytes(it));
        assert.deepStrictEqual(back, { mime: it.mime, data: it.data });
      },
    ),
    { numRuns: 500 },
  );
  // JSON mime whose bytes are not JSON: kept as the text, not dropped.
  assert.deepStrictEqual(itemFromBytes('application/json', new TextEncoder().encode('{broken')), {
    mime: 'application/json',
    data: '{broken',
  });
});
