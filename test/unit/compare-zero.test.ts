/** `compare` rows whose predicted side is 0: 0 against 0 agrees (✅, ratio 1); 0 against anything else fails (❌). */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';

test('compare: 0 ms against 0 ms is ✅ with ratio 1; 0 ms against 2 ms is ❌', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const r = await runCell(
    [
      'compare: zero',
      'rows:',
      '  - {quantity: queueing, predicted: 0 ms, measured: 0 ms}',
      '  - {quantity: queueing, predicted: 0 ms, measured: 0 s}',
      '  - {quantity: queueing, predicted: 0 ms, measured: 2 ms}',
    ].join('\n'),
    0,
    nb,
  );
  const rows = r.values.rows as { ratio?: number; ok?: boolean; verdict: string }[];
  assert.equal(rows[0].verdict, '✅', JSON.stringify(rows[0]));
  assert.equal(rows[0].ok, true);
  assert.equal(rows[0].ratio, 1);
  assert.equal(rows[1].verdict, '✅', '0 s is 0 ms');
  assert.equal(rows[2].verdict, '❌');
  assert.equal(r.values.passed, 2);
  assert.equal(r.values.failed, 1);
});
