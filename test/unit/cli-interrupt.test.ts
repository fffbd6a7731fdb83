/**
 * Ctrl-C during `inflab run --in-place`, sent as a real SIGINT to a real child process: every cell
 * that did not run keeps its saved outputs byte for byte; a bench stopped part way keeps its
 * finished points, marked partial, or, with none finished, its previous outputs.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { parseNotebook, serializeNotebook, type Notebook } from '../../src/core/notebook/format';
import { buildCli, runInflab } from '../support/cli';

before(buildCli);

const saved = (text: string) => [{ items: [{ mime: 'text/plain', data: text }] }];
const ran = { executionOrder: 7, success: true, startTime: 1_700_000_000_000, endTime: 1_700_000_001_000 };

/** A notebook whose every code cell holds outputs from an earlier run. */
const NB: Notebook = {
  cells: [
    {
      kind: 'code',
      language: 'inflab',
      source: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim',
      outputs: saved('old setup'),
      lastRun: ran,
    },
    {
      kind: 'code',
      language: 'inflab',
      // Three points of 4 requests × 100 tokens on the real-time simulator: a few seconds each.
      source:
        'bench: sweep\ninput: 100 tokens\noutput: 100 tokens\nconcurrency: [1, 2, 4]\nrequests: 4\nscrape: false\nrecords: false',
      outputs: saved('yesterday: the measurement from the last run'),
      lastRun: ran,
    },
    {
      kind: 'code',
      language: 'inflab',
      source: 'predict: floors\nprompt: 1,000 tokens',
      outputs: saved('floors from an earlier run'),
      lastRun: ran,
    },
    { kind: 'markdown', language: 'markdown', source: '# notes' },
    {
      kind: 'code',
      language: 'inflab',
      source: 'record: seen\nttft: 60 ms',
      outputs: saved('a record'),
      lastRun: { ...ran, executionOrder: 8 },
    },
  ],
};

/** Run in place; send SIGINT once `when` matches what it has printed; resolve on exit. */
async function runAndInterrupt(file: string, when: RegExp): Promise<{ code: number | null; out: string }> {
  let sent = false;
  const r = await runInflab(['run', file, '--in-place'], {
    cwd: path.dirname(file),
    env: { INFLAB_SIM_SPEED: '' },
    killAfterMs: 90_000,
    onOutput: (printed, child) => {
      if (!sent && when.test(printed)) {
        sent = true;
        child.kill('SIGINT');
      }
    },
  });
  return { code: r.code, out: r.printed };
}

/** The file as written, with the cells that ran put back as they were: equal to the input byte for byte? */
function restOfFile(text: string, ranCells: number[]): string {
  const nb = parseNotebook(text);
  for (const i of ranCells) nb.cells[i] = NB.cells[i];
  return serializeNotebook(nb);
}

test('Ctrl-C after a bench point finished: the point is kept, marked partial; the cells after it are byte-identical', async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-sigint-'));
  const file = path.join(d, 'day.inflab');
  const input = serializeNotebook(NB);
  fs.writeFileSync(file, input);
  const r = await runAndInterrupt(file, /\[1\] 1 of 3 points done/);
  assert.equal(r.code, 130, r.out);
  const text = fs.readFileSync(file, 'utf8');
  const nb = parseNotebook(text);
  const bench = nb.cells[1];
  assert.equal(bench.lastRun?.success, false, 'an interrupted bench is not a success');
  assert.ok(bench.outputs!.length > 1);
  assert.ok(
    bench.outputs!.every((o) => o.metadata?.partial === true),
    'every output is marked partial',
  );
  assert.match(String(bench.outputs![0].items[0].data), /^Interrupted: partial — the 1 point below finished/);
  const values = bench.outputs!.flatMap((o) => o.items).find((i) => i.mime === 'application/vnd.inflab.values+json');
  const v = values!.data as { points: unknown[]; stopped: { reason: string } };
  assert.equal(v.points.length, 1);
  assert.equal(v.stopped.reason, 'cancelled');
  assert.equal(restOfFile(text, [0, 1]), input, 'every cell that did not run is byte-identical');
});

test('Ctrl-C before a bench point finished: the bench keeps its previous outputs, every later cell too', async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-sigint-'));
  const file = path.join(d, 'day.inflab');
  const input = serializeNotebook(NB);
  fs.writeFileSync(file, input);
  // The setup cell's report is printed when it is done: the bench has just started.
  const r = await runAndInterrupt(file, /# \[0\] setup \(lab\): ok/);
  assert.equal(r.code, 130, r.out);
  const text = fs.readFileSync(file, 'utf8');
  assert.deepEqual(parseNotebook(text).cells[1], NB.cells[1]);
  assert.equal(restOfFile(text, [0]), input, 'everything but the setup cell that ran is byte-identical');
});
