/**
 * Predictions in ink (issue 16 item 9): a cell whose metadata asks for ink is frozen at its first
 * run (outputs, time, inputs' hash, in the cell's metadata); a later run through `inflab run` on a
 * real file keeps that original and adds a revision.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { parseNotebook, serializeNotebook, type NbCell, type Notebook } from '../../src/core/notebook/format';
import { inkAfterRun, inputsHash, type Ink } from '../../src/core/notebook/ink';

const root = path.resolve(import.meta.dirname, '../..');
const cli = path.join(root, 'dist/cli.js');

before(() => {
  const b = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: root, encoding: 'utf8' });
  assert.equal(b.status, 0, b.stderr);
});

const run = (file: string) =>
  spawnSync(process.execPath, [cli, 'run', file, '--in-place'], {
    cwd: path.dirname(file),
    encoding: 'utf8',
    env: { ...process.env, INFLAB_API_KEY: '' },
  });

const code = (source: string, metadata?: Record<string, unknown>): NbCell => ({
  kind: 'code',
  language: 'inflab',
  source,
  ...(metadata ? { metadata } : {}),
});

test('an inked prediction survives a re-run through inflab run as its original plus a revision', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-ink-'));
  const file = path.join(dir, 'day3.inflab');
  const first = 'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n';
  const nb: Notebook = {
    cells: [code('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n'), code(first, { ink: true })],
  };
  fs.writeFileSync(file, serializeNotebook(nb));

  const a = run(file);
  assert.equal(a.status, 0, a.stderr);
  const afterFirst = parseNotebook(fs.readFileSync(file, 'utf8')).cells[1];
  const ink = afterFirst.metadata!.ink as Ink;
  assert.equal(ink.original.inputs_hash, inputsHash(first));
  assert.ok(Number.isFinite(Date.parse(ink.original.inked_at)));
  assert.deepEqual(ink.revisions, []);
  // The frozen outputs are the run's outputs (after the note saying they are in ink).
  assert.match(String(afterFirst.outputs![0].items[0].data), /In ink since/);
  assert.deepEqual(ink.original.outputs, afterFirst.outputs!.slice(1));
  assert.match(JSON.stringify(ink.original.outputs), /Decode roofline/);

  // Later: the prediction is edited and run again.
  const edited = parseNotebook(fs.readFileSync(file, 'utf8'));
  edited.cells[1] = {
    ...edited.cells[1],
    source: 'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 8, 128]\n',
  };
  fs.writeFileSync(file, serializeNotebook(edited));
  const b = run(file);
  assert.equal(b.status, 0, b.stderr);
  const afterSecond = parseNotebook(fs.readFileSync(file, 'utf8')).cells[1];
  const ink2 = afterSecond.metadata!.ink as Ink;
  assert.deepEqual(ink2.original, ink.original, 'the original is kept byte for byte');
  assert.equal(ink2.revisions.length, 1);
  assert.equal(ink2.revisions[0].inputs_changed, true);
  assert.equal(ink2.revisions[0].inputs_hash, inputsHash(edited.cells[1].source));
  assert.match(String(afterSecond.outputs![0].items[0].data), /Revision 1 of a prediction in ink since/);
  // The cell shows the new run (batch 128), the original still holds batch 64 only.
  assert.match(JSON.stringify(afterSecond.outputs), /128/);
  assert.doesNotMatch(JSON.stringify(ink2.original.outputs), /"batch":128/);
});

test('an ink record that is not one is left as it is, with a note saying what to do', () => {
  const cell = code('predict: floors\nprompt: 1000 tokens\n', { ink: { original: 'tampered' } });
  const out = inkAfterRun(cell, [{ items: [{ mime: 'text/plain', data: 'x' }] }], Date.UTC(2026, 11, 1));
  assert.deepEqual(out.metadata, cell.metadata);
  assert.match(String(out.outputs![0].items[0].data), /not an ink record.*"ink": true/);
});
