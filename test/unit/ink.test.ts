/**
 * Predictions in ink (issue 16 item 9): a cell whose metadata asks for ink is frozen at its first
 * run (outputs, time, inputs' hash, in the cell's metadata); a later run through `inflab run` on a
 * real file keeps that original and adds a revision.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { parseNotebook, serializeNotebook, type NbCell, type Notebook } from '../../src/core/notebook/format';
import { factsOf } from '../../src/core/facts';
import { inkAfterRun, inkStatus, inputsHash, type Ink } from '../../src/core/notebook/ink';
import { runNotebook } from '../../src/core/notebook/runNotebook';
import { SimEndpoints } from '../../src/core/sim/endpoints';
import { buildCli, ROOT, runInflabSync } from '../support/cli';

before(buildCli);

/** The built CLI in `dir` (the simulated endpoint sped up for the cells that bench). */
const cliArgs = (dir: string, ...args: string[]) => runInflabSync(args, { cwd: dir, env: { INFLAB_SIM_SPEED: '50' } });

const run = (file: string) => cliArgs(path.dirname(file), 'run', file, '--in-place');

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

// ---- inking without editing JSON: `inflab ink`, and what compare rows and bench verdicts say ----

const SETUP_CELL = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';
const PREDICTION = 'predict: decode-roofline\nname: roof\ncontext: 1k tokens\nbatch: [1, 64]\n';

test('inflab ink NOTEBOOK --cell NAME inks that prediction in the file; inflab run then keeps it as the original and adds a revision', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-ink-cli-'));
  const file = path.join(dir, 'lab.inflab');
  // The record's outputs stand in for a measurement made earlier: inflab ink must not run it or drop them.
  const saved = [{ items: [{ mime: 'text/plain', data: 'measured on Tuesday' }] }];
  const nb: Notebook = {
    cells: [
      code(SETUP_CELL),
      { ...code('record: tuesday\nttft: 60 ms\nprompt: 1000 tokens\n'), outputs: saved },
      code(PREDICTION),
    ],
  };
  fs.writeFileSync(file, serializeNotebook(nb));

  const a = cliArgs(dir, 'ink', 'lab.inflab', '--cell', 'roof');
  assert.equal(a.status, 0, a.stderr);
  assert.match(a.stdout, /cell \[2\] in ink since .*; wrote lab\.inflab/);
  const inked = parseNotebook(fs.readFileSync(file, 'utf8'));
  const ink = inked.cells[2].metadata!.ink as Ink;
  assert.equal(ink.original.inputs_hash, inputsHash(PREDICTION));
  assert.deepEqual(ink.revisions, []);
  assert.match(JSON.stringify(ink.original.outputs), /Decode roofline/);
  assert.deepEqual(inked.cells[1].outputs, saved, 'the cell above keeps its outputs: only the prediction ran');
  assert.equal(inked.cells[1].lastRun, undefined);

  // Asked again: already in ink, nothing changed.
  const before = fs.readFileSync(file, 'utf8');
  const again = cliArgs(dir, 'ink', 'lab.inflab', '--cell', '2');
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /is in ink since .*nothing was changed/);
  assert.equal(fs.readFileSync(file, 'utf8'), before);

  const r = cliArgs(dir, 'run', 'lab.inflab', '--in-place', '--quiet');
  assert.equal(r.status, 0, r.stderr);
  const rerun = parseNotebook(fs.readFileSync(file, 'utf8')).cells[2];
  const ink2 = rerun.metadata!.ink as Ink;
  assert.deepEqual(ink2.original, ink.original, 'the original survives the re-run');
  assert.equal(ink2.revisions.length, 1);
  assert.equal(ink2.revisions[0].inputs_changed, false);
  assert.match(String(rerun.outputs![0].items[0].data), /Revision 1 of a prediction in ink since/);
});

test('inflab ink refuses what is not a prediction, a cell that does not exist and a failing prediction, and leaves the file byte for byte', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-ink-cli-'));
  const file = path.join(dir, 'lab.inflab');
  const nb: Notebook = {
    cells: [
      code(SETUP_CELL),
      code('record: tuesday\nttft: 60 ms\nprompt: 1000 tokens\n'),
      code(PREDICTION),
      code('predict: floors\nname: broken\nprompt: lots\n'),
    ],
  };
  const text = serializeNotebook(nb);
  fs.writeFileSync(file, text);
  const record = cliArgs(dir, 'ink', 'lab.inflab', '--cell', '1');
  assert.equal(record.status, 2);
  assert.match(record.stderr, /only a prediction \(a "predict: …" cell\) can be inked; this cell is "record: …"/);
  const missing = cliArgs(dir, 'ink', 'lab.inflab', '--cell', 'rof');
  assert.equal(missing.status, 2);
  assert.match(
    missing.stderr,
    /no cell is named "rof"; named cells: "lab" \[0\], "tuesday" \[1\], "roof" \[2\], "broken" \[3\]/,
  );
  const past = cliArgs(dir, 'ink', 'lab.inflab', '--cell', '9');
  assert.equal(past.status, 2);
  assert.match(past.stderr, /there is no cell 9: the notebook has 4 cells/);
  const noCell = cliArgs(dir, 'ink', 'lab.inflab');
  assert.equal(noCell.status, 2);
  assert.match(noCell.stderr, /--cell N\|NAME/);
  const failing = cliArgs(dir, 'ink', 'lab.inflab', '--cell', 'broken');
  assert.equal(failing.status, 1);
  assert.match(failing.stderr, /cell \[3\] failed, so nothing was inked and the notebook was not changed/);
  assert.equal(fs.readFileSync(file, 'utf8'), text);
});

test('inkStatus: before, after, revised after, inked with no measurement time, not inked', () => {
  const t = (s: string) => Date.parse(`2026-12-02T${s}Z`);
  const mark = { inkedAt: t('01:00:00'), revisions: [] };
  assert.equal(inkStatus(mark, t('02:00:00')).state, 'before');
  assert.equal(inkStatus(mark, t('00:30:00')).state, 'after');
  assert.equal(inkStatus(undefined, t('02:00:00')).words, 'not inked');
  assert.equal(inkStatus(mark, undefined).state, 'inked');
  // The numbers compared are the last run's: a revision with other inputs after the measurement is said.
  const revised = { inkedAt: t('01:00:00'), revisions: [{ at: t('03:00:00'), inputsChanged: true }] };
  assert.equal(inkStatus(revised, t('02:00:00')).state, 'revised-after');
  const same = { inkedAt: t('01:00:00'), revisions: [{ at: t('03:00:00'), inputsChanged: false }] };
  assert.deepEqual(
    [inkStatus(same, t('02:00:00')).state, inkStatus(same, t('02:00:00')).words],
    ['before', 'inked before measurement (re-run after it, same inputs)'],
  );
  // Revisions before the measurement leave it "before".
  const early = { inkedAt: t('01:00:00'), revisions: [{ at: t('01:30:00'), inputsChanged: true }] };
  assert.equal(inkStatus(early, t('02:00:00')).state, 'before');
});

test('a compare row and the bench verdict say whether each prediction was inked before the measurement ran', async () => {
  const sims = new SimEndpoints(50);
  try {
    const serving = (name: string) =>
      `predict: serving\nname: ${name}\ninput: 64\noutput: 8\nconcurrency: [1, 2]\nrequests: 4\n`;
    const nb: Notebook = {
      cells: [
        code(`${SETUP_CELL}endpoint: sim\n`),
        code(serving('plain')),
        code(serving('inked'), { ink: true }),
        code('bench: sweep\nname: sweep\ninput: 64\noutput: 8\nconcurrency: [1, 2]\nrequests: 4\n'),
        // Written down after the sweep ran: in ink, but after the measurement.
        code(serving('late'), { ink: true }),
        code(
          [
            'compare: ink',
            'rows:',
            '  - {quantity: plain, predicted: "plain.fact(output_throughput)", measured: "sweep.fact(output_throughput)"}',
            '  - {quantity: inked, predicted: "inked.fact(output_throughput @ concurrency=2)", measured: "sweep.fact(output_throughput @ concurrency=2)"}',
            '  - {quantity: late, predicted: "late.fact(output_throughput @ concurrency=1)", measured: "sweep.fact(output_throughput @ concurrency=1)"}',
            '  - {quantity: typed, predicted: 10 tok/s, measured: "sweep.fact(output_throughput @ concurrency=1)"}',
          ].join('\n'),
        ),
      ],
    };
    const run = await runNotebook(nb, os.tmpdir(), { simEndpoint: (s) => sims.url(s) });
    for (const r of run.results) assert.ok(r.result.ok, `${r.result.kind}: ${r.result.error?.message}`);
    const byName = new Map(run.results.map((r) => [r.result.name, r.result]));

    // The bench states when each point began; the ink of "inked" is older than its first point.
    const sweep = byName.get('sweep')!;
    const began = factsOf(sweep.facts, 'measured-at');
    assert.deepEqual(
      began.map((f) => f.point?.concurrency),
      [1, 2],
    );
    const inkedAt = Date.parse((run.notebook.cells[2].metadata!.ink as Ink).original.inked_at);
    assert.ok(began.every((f) => f.epoch_ms > inkedAt));

    const rows = byName.get('ink')!.values.rows as { quantity: string; ink: { state: string; words: string } }[];
    const state = (q: string) => rows.filter((r) => r.quantity.startsWith(q)).map((r) => r.ink.words);
    assert.deepEqual(state('plain'), ['not inked', 'not inked']);
    assert.deepEqual(state('inked'), ['inked before measurement']);
    assert.deepEqual(state('late'), ['inked after measurement']);
    assert.deepEqual(state('typed'), ['not inked']);
    const table = byName
      .get('ink')!
      .outputs.flatMap((o) => o.items)
      .find((i) => i.mime === 'text/plain')!.data as string;
    assert.match(table, /cause\s+ink\n/);
    assert.match(table, /inked before measurement/);

    // The bench's own verdict is against the latest serving prediction above it ("inked"), and says so.
    const v = sweep.values.verdict as { against: { cell: string; ink: { state: string; inked_at: string } } };
    assert.equal(v.against.cell, 'inked');
    assert.equal(v.against.ink.state, 'before');
    assert.equal(v.against.ink.inked_at, new Date(inkedAt).toISOString());
    const title = sweep.outputs
      .flatMap((o) => o.items)
      .map((i) => String(i.data))
      .find((d) => d.startsWith('Measured against predicted'));
    assert.match(
      title ?? '',
      /^Measured against predicted — predict: serving "inked" \(cell 3\), inked before measurement/,
    );
  } finally {
    await sims.close();
  }
});

test('the VS Code command "InfLab: Ink this prediction" is in the manifest, on the cell toolbar, and registered', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const cmd = pkg.contributes.commands.find((c: { command: string }) => c.command === 'inflab.inkCell');
  assert.deepEqual([cmd?.category, cmd?.title], ['InfLab', 'Ink this prediction']);
  assert.ok(
    pkg.contributes.menus['notebook/cell/title'].some(
      (m: { command: string; when: string }) => m.command === 'inflab.inkCell' && /notebookType == inflab/.test(m.when),
    ),
  );
  // Every command the manifest declares is registered by the extension host (the shim stands in until then).
  const host = fs.readFileSync(path.join(ROOT, 'src/vscode/extension.ts'), 'utf8');
  for (const c of pkg.contributes.commands as { command: string }[])
    assert.ok(host.includes(`registerCommand('${c.command}'`), `${c.command} is registered in src/vscode/extension.ts`);
});
