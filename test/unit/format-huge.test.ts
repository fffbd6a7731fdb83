/**
 * A huge notebook: 100 MB of outputs (bench records and long text) serializes, saves, parses and
 * round-trips byte for byte, through the core and through the editor's path (items as bytes); a
 * copy cut in half is refused with the line where it ends. Timings are logged, not asserted.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { writeFileAtomic } from '../../src/core/notebook/atomicWrite';
import {
  NotebookFormatError,
  parseNotebook,
  parseNotebookBytes,
  serializeNotebook,
  serializeNotebookBytes,
  type Notebook,
} from '../../src/core/notebook/format';

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-huge-'));
after(() => fs.rmSync(TMP, { recursive: true, force: true }));
const freshDir = () => TMP;
const leftovers = (dir: string) => fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'));

test('a notebook with 100 MB of outputs parses and serializes (timings logged)', () => {
  let x = 1;
  const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
  const per = 12_000;
  const cells: Notebook['cells'] = [{ kind: 'markdown', language: 'markdown', source: '# a long day of sweeps' }];
  for (let c = 0; c < 40; c++) {
    cells.push({
      kind: 'code',
      language: 'inflab',
      source: `bench: sweep\ninput: 1000 tokens\noutput: 1000 tokens\nconcurrency: ${c + 1}`,
      lastRun: { executionOrder: c + 1, success: true, startTime: 1.7e12 + c, endTime: 1.7e12 + c + 3600_000 },
      outputs: [
        {
          items: [
            { mime: 'text/plain', data: 'x'.repeat(1_500_000) + '\n' + 'é'.repeat(250_000) },
            {
              mime: 'application/vnd.inflab.records+json',
              data: {
                ttft: Array.from({ length: per }, rnd),
                itl: Array.from({ length: per }, () => Math.round(rnd() * 1e6) / 1e3),
                ok: Array.from({ length: per }, (_, i) => i % 7 !== 0),
                error: Array.from({ length: per }, (_, i) => (i % 7 ? null : 'timeout')),
              },
            },
          ],
        },
      ],
    });
  }
  const nb: Notebook = { cells };
  let t = performance.now();
  const text = serializeNotebook(nb);
  const tSer = performance.now() - t;
  const bytes = Buffer.byteLength(text);
  assert.ok(bytes > 90e6, `about 100 MB (${(bytes / 1e6).toFixed(1)} MB)`);
  const file = path.join(freshDir(), 'huge.inflab');
  t = performance.now();
  writeFileAtomic(file, text);
  const tWrite = performance.now() - t;
  t = performance.now();
  const back = parseNotebook(fs.readFileSync(file, 'utf8'));
  const tParse = performance.now() - t;
  assert.equal(back.cells.length, 41);
  assert.deepStrictEqual(back.cells[40].outputs![0].items[1].data, nb.cells[40].outputs![0].items[1].data);
  assert.equal(back.cells[40].outputs![0].items[0].data, nb.cells[40].outputs![0].items[0].data);
  t = performance.now();
  const again = serializeNotebook(back);
  const tSer2 = performance.now() - t;
  assert.ok(again === text, 'byte-identical after a round trip');
  // The editor's path: items stay bytes; an unchanged notebook saves to the same bytes.
  t = performance.now();
  const opened = parseNotebookBytes(fs.readFileSync(file));
  const tOpen = performance.now() - t;
  assert.equal(opened.cells.length, 41);
  assert.deepStrictEqual(
    JSON.parse(new TextDecoder().decode(opened.cells[40].outputs![0].items[1].bytes)),
    nb.cells[40].outputs![0].items[1].data,
  );
  t = performance.now();
  const saved = serializeNotebookBytes(opened);
  const tSave = performance.now() - t;
  assert.ok(
    Buffer.from(saved.buffer, saved.byteOffset, saved.byteLength).equals(fs.readFileSync(file)),
    'the editor saves it byte-identical',
  );
  // A huge file cut in half (an interrupted copy) is refused, with the line where it ends.
  const half = text.slice(0, Math.floor(text.length / 2));
  t = performance.now();
  assert.throws(
    () => parseNotebook(half),
    (e: unknown) =>
      e instanceof NotebookFormatError && e.line === half.split('\n').length && /truncated/.test(e.message),
  );
  const tCut = performance.now() - t;
  const heap = process.memoryUsage();
  console.log(
    `huge notebook: ${(bytes / 1e6).toFixed(1)} MB; serialize ${tSer.toFixed(0)} ms, atomic write ${tWrite.toFixed(0)} ms, parse ${tParse.toFixed(0)} ms, ` +
      `re-serialize ${tSer2.toFixed(0)} ms, editor open ${tOpen.toFixed(0)} ms, editor save ${tSave.toFixed(0)} ms, refuse the truncated half ${tCut.toFixed(0)} ms; rss ${(heap.rss / 1e6).toFixed(0)} MB`,
  );
  assert.deepStrictEqual(leftovers(path.dirname(file)), []);
});
