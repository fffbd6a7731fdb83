/**
 * Tables as HTML: a column of short cells (a point, a number with its unit, a verdict) stays on one
 * line while a column of sentences wraps, so a prose column does not squeeze the others to their
 * longest word; key/value tables read prose values from the left and keep short values on the
 * right; the Markdown export still reads each column's alignment from the HTML.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { factsOutput, MIME, tableOutput } from '../../src/core/engine/outputs';
import { exportMarkdown } from '../../src/core/export';

const htmlOf = (o: { items: { mime: string; data: unknown }[] }) =>
  o.items.find((i) => i.mime === MIME.html)!.data as string;

/** The style attribute of every <td> in each row, as [row][column]. */
const cellStyles = (html: string) =>
  [...html.matchAll(/<tr>([\s\S]*?)<\/tr>/g)]
    .slice(1)
    .map((r) => [...r[1].matchAll(/<td style="([^"]*)">/g)].map((m) => m[1]));

const VERDICT = tableOutput(
  'Measured against predicted',
  [
    { key: 'point', label: 'point' },
    { key: 'quantity', label: 'quantity' },
    { key: 'ratio', label: 'ratio', align: 'right', fmt: (v: number) => `${v.toFixed(2)}×` },
    { key: 'verdict', label: 'verdict' },
    { key: 'cause', label: 'cause' },
  ],
  [
    {
      point: 'c=1',
      quantity: 'output tok/s',
      ratio: 0.82,
      verdict: '❌ outside',
      cause: 'client-bound: event-loop lag p99 22.3 ms; simulator late: 7.0% of its steps > 10 ms late',
    },
    { point: 'c=16', quantity: 'TTFT median', ratio: 1, verdict: '✅ within', cause: '' },
  ],
);

test('a table with a prose column: the short columns keep each cell on one line, the prose column wraps', () => {
  const rows = cellStyles(htmlOf(VERDICT));
  assert.equal(rows.length, 2);
  for (const styles of rows) {
    assert.deepEqual(
      styles.slice(0, 4).map((s) => s.includes('white-space:nowrap')),
      [true, true, true, true],
    );
    assert.ok(!styles[4].includes('nowrap'), `the cause column may wrap: ${styles[4]}`);
    assert.match(styles[2], /^text-align:right/);
    assert.match(styles[4], /^text-align:left/);
  }
  const head = /<thead>([\s\S]*?)<\/thead>/.exec(htmlOf(VERDICT))![1];
  assert.match(head, /<th style="text-align:left;white-space:nowrap">quantity<\/th>/);
  assert.match(head, /<th style="text-align:left">cause<\/th>/);
});

test('key/value tables: a sentence among the values puts the value column on the left; short values stay right', () => {
  const prose = htmlOf(
    factsOutput('Roofs', [
      ['decode step floor (batch 1) = W / BW', '8.03 ms'],
      ['knee', 'none: the bandwidth asymptote is below the compute roof, so decode never turns compute-bound'],
    ]),
  );
  assert.deepEqual(
    cellStyles(prose).map((r) => r[1].split(';')[0]),
    ['text-align:left', 'text-align:left'],
  );
  const short = htmlOf(
    factsOutput('Roofs', [
      ['bandwidth', '2,039 GB/s'],
      ['peak used', '312 TFLOP/s (bf16, dense)'],
    ]),
  );
  assert.deepEqual(
    cellStyles(short).map((r) => r[1].split(';')[0]),
    ['text-align:right', 'text-align:right'],
  );
});

test('the Markdown export reads each column alignment from the table HTML', () => {
  const { markdown } = exportMarkdown({
    cells: [{ kind: 'code', language: 'inflab', source: 'compare: v\n', outputs: [VERDICT] }],
  });
  assert.match(
    markdown,
    /\| point \| quantity \| ratio \| verdict \| cause \|\n\| :--- \| :--- \| ---: \| :--- \| :--- \|/,
  );
  assert.match(markdown, /\| c=1 \| output tok\/s \| 0\.82× \| ❌ outside \| client-bound/);
});
