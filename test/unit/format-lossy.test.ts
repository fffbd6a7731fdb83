/**
 * Notebook JSON that JSON.parse accepts but would read lossily is refused at open, with the line
 * and column and what to change, by the core parse (the CLI), the editor's parse (what the VS Code
 * serializer calls: parseNotebookBytes), `inflab run` and `inflab eval`; the file is never
 * rewritten. The cases: a key twice in one object (at any depth), bytes that are not UTF-8, a
 * number a double cannot hold exactly (beyond 2^53, beyond the largest double) and nesting deeper
 * than MAX_DEPTH (5,000 levels of metadata: refused before any cell runs, so nothing is lost at save).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { runInflab } from '../support/cli';
import {
  MAX_DEPTH,
  NotebookFormatError,
  parseNotebook,
  parseNotebookBytes,
  serializeNotebook,
  serializeNotebookBytes,
  type Notebook,
} from '../../src/core/notebook/format';

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-lossy-'));
after(() => fs.rmSync(TMP, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = path.join(TMP, `t${++n}`);
  fs.mkdirSync(d);
  return d;
};

const NB: Notebook = {
  metadata: { title: 'day 5' },
  cells: [
    { kind: 'markdown', language: 'markdown', source: '# Day 5\nnotes that must not be lost' },
    { kind: 'code', language: 'inflab', source: 'predict: decode-roofline\ngpu: h100-sxm5-80gb\nmodel: qwen3-8b' },
  ],
};
const GOOD = serializeNotebook(NB);

const deep = (levels: number) => `${'{"a": '.repeat(levels)}1${'}'.repeat(levels)}`;

/** Each case: what, the file's bytes, the message (with its line and column), the line. */
const cases: [string, Buffer, RegExp, number][] = [
  [
    'a duplicate "cells" key',
    Buffer.from(GOOD.replace(/\n}\n$/, ',\n  "cells": []\n}\n')),
    /line 25, column 3: the key "cells" appears twice in one object \(first at line 6\); a JSON reader keeps only the last, so the first would be silently lost\. Remove or rename one of them/,
    25,
  ],
  [
    'a duplicate "source" key',
    Buffer.from(
      GOOD.replace('"source": [\n        "# Day 5",', '"source": ["other"], "source": [\n        "# Day 5",'),
    ),
    /line 10, column 28: the key "source" appears twice in one object \(first at line 10\)/,
    10,
  ],
  [
    'a duplicate key deep in metadata',
    Buffer.from(GOOD.replace('"title": "day 5"', '"title": "day 5", "run": {"by": {"who": "a", "who": "b"}}')),
    /line 4, column 50: the key "who" appears twice in one object/,
    4,
  ],
  [
    'a duplicate key written with an escape',
    Buffer.from(GOOD.replace('"title": "day 5"', '"title": "day 5", "\\u0074itle": "x"')),
    /line 4, column 23: the key "title" appears twice/,
    4,
  ],
  [
    'a Latin-1 byte',
    Buffer.concat([
      Buffer.from(GOOD.slice(0, GOOD.indexOf('notes that') + 'notes that'.length)),
      Buffer.from([0xe9]),
      Buffer.from(GOOD.slice(GOOD.indexOf('notes that') + 'notes that'.length)),
    ]),
    /line 12, column 20: byte \d+ \(0xe9\) is not UTF-8 text; opened, it would become U\+FFFD and be saved so\. Convert the file to UTF-8/,
    12,
  ],
  [
    'an integer beyond 2^53',
    Buffer.from(GOOD.replace('"title": "day 5"', '"title": "day 5", "seed": 9007199254740993')),
    /line 4, column 31: the number 9007199254740993 has more digits than a JSON reader keeps: it would be saved as 9007199254740992 .*write it as a string \("9007199254740993"\)/,
    4,
  ],
  [
    'a number that overflows to Infinity',
    Buffer.from(GOOD.replace('"title": "day 5"', '"title": "day 5",\n    "limit": 1e400')),
    /line 5, column 14: the number 1e400 is beyond the largest number a JSON reader holds .*saved as null; write it as a string \("1e400"\)/,
    5,
  ],
  [
    '5,000 levels of metadata',
    Buffer.from(GOOD.replace('"title": "day 5"', `"title": "day 5",\n    "x": ${deep(5000)}`)),
    new RegExp(`line 5, column ${10 + 6 * (MAX_DEPTH - 2)}: the JSON nests more than ${MAX_DEPTH} levels deep here`),
    5,
  ],
];

test('what JSON.parse would read lossily is refused by both parses with the line, the column and what to change', () => {
  for (const [what, bytes, message, line] of cases) {
    let core: NotebookFormatError | undefined;
    try {
      parseNotebook(bytes);
    } catch (e) {
      core = e as NotebookFormatError;
    }
    assert.ok(core instanceof NotebookFormatError, `${what}: refused by parseNotebook (got ${core})`);
    assert.match(core.message, message, what);
    assert.match(core.message, /The file was not changed\./, what);
    assert.equal(core.line, line, what);
    // The editor's open (the VS Code serializer's deserializeNotebook calls it): the same refusal.
    assert.throws(
      () => parseNotebookBytes(new Uint8Array(bytes)),
      (e: unknown) => e instanceof NotebookFormatError && e.message === core.message && e.line === line,
      what,
    );
    // Text already decoded (the CLI's readArgFile decodes strictly first; here a string as is).
    if (what !== 'a Latin-1 byte')
      assert.throws(() => parseNotebook(bytes.toString('utf8')), { message: core.message }, what);
  }
});

test('a truncated file with a duplicate key before the cut is called truncated, by both parses', () => {
  const text = GOOD.replace('"title": "day 5"', '"title": "day 5", "title": "x"').slice(0, 200);
  for (const parse of [parseNotebook, parseNotebookBytes])
    assert.throws(() => parse(text), /The file ends early: it looks truncated/);
});

test('what a double holds exactly, the same key in different objects and nesting up to the limit open and save unchanged', () => {
  const meta = [
    '"big": 9007199254740992',
    '"f": 0.30000000000000004',
    '"neg": -1.7976931348623157e308',
    '"tiny": 5e-324',
    '"micro": 1e-7',
    '"same": {"a": 1, "b": {"a": 2}}',
    '"list": [{"a": 1}, {"a": 2}]',
    `"nest": ${deep(MAX_DEPTH - 2)}`,
  ].join(', ');
  const text = GOOD.replace('"title": "day 5"', `"title": "day 5", ${meta}`);
  const nb = parseNotebook(text);
  assert.equal((nb.metadata as Record<string, unknown>).big, 9007199254740992);
  assert.equal(serializeNotebook(parseNotebook(serializeNotebook(nb))), serializeNotebook(nb));
  const opened = parseNotebookBytes(new TextEncoder().encode(text));
  assert.deepStrictEqual(opened.metadata, nb.metadata);
  assert.ok(serializeNotebookBytes(opened).length > 0);
  // One level more than the limit is refused.
  assert.throws(
    () => parseNotebook(GOOD.replace('"title": "day 5"', `"title": "day 5", "nest": ${deep(MAX_DEPTH - 1)}`)),
    new RegExp(`nests more than ${MAX_DEPTH} levels`),
  );
});

// ---------------------------------------------------------------- the CLI

const run = (args: string[]) => runInflab(args, { source: true });

/** A CLI command in this process, with what it prints captured. */
async function inProcess(
  which: 'run' | 'eval',
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const command =
    which === 'run'
      ? (await import('../../src/cli/commands/run')).runCommand
      : (await import('../../src/cli/commands/eval')).evalCommand;
  const { UsageError } = await import('../../src/cli/usage');
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  console.error = (...a: unknown[]) => void err.push(a.join(' '));
  try {
    const code = await command(args);
    return { code, stdout: out.join('\n'), stderr: err.join('\n') };
  } catch (e) {
    // What main() does with a UsageError: the message and exit 2.
    if (e instanceof UsageError) return { code: 2, stdout: out.join('\n'), stderr: e.message };
    throw e;
  } finally {
    console.log = log;
    console.error = error;
  }
}

test('inflab run and inflab eval refuse each such file with the message; the file stays byte-identical and nothing runs or is written', async () => {
  for (const [k, [what, bytes, message]] of cases.entries()) {
    const modes = k === 0 ? ['process run', 'process eval', 'run', 'run --out', 'eval'] : ['run', 'run --out', 'eval'];
    for (const mode of modes) {
      const d = freshDir();
      const file = path.join(d, 'nb.inflab');
      fs.writeFileSync(file, bytes);
      const mtime = fs.statSync(file).mtimeMs;
      const isEval = mode.includes('eval');
      const args = isEval
        ? [file]
        : mode.endsWith('--out')
          ? [file, '--out', path.join(d, 'out.inflab')]
          : [file, '--in-place'];
      const r = mode.startsWith('process')
        ? await run([isEval ? 'eval' : 'run', ...args])
        : await inProcess(isEval ? 'eval' : 'run', args);
      const ctx = `${what} (${mode}): ${r.stdout}${r.stderr}`;
      assert.equal(r.code, isEval ? 2 : 1, ctx);
      assert.match(r.stderr, message, ctx);
      assert.match(r.stderr, /The file was not changed\./, ctx);
      assert.doesNotMatch(r.stderr, /\n\s+at /, `a message, not a stack trace (${ctx})`);
      assert.doesNotMatch(r.stdout, /# \[\d+\]/, `no cell ran (${ctx})`);
      assert.ok(fs.readFileSync(file).equals(bytes), `byte-identical (${ctx})`);
      assert.equal(fs.statSync(file).mtimeMs, mtime, ctx);
      assert.deepStrictEqual(fs.readdirSync(d), ['nb.inflab'], `nothing else written (${ctx})`);
    }
  }
});
