/**
 * Secrets, in process: the key comes from services.getApiKey (as the extension's SecretStorage
 * hands it over). Bench cells run against the misbehaving servers of test/support/plantedKey.ts;
 * the results, their error messages and findings, every progress update (what a host would send to
 * its renderer) and the saved notebook are searched for the key. Authorization never appears
 * unredacted.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult, ProgressUpdate } from '../../src/core/engine/types';
import { KINDS } from '../../src/core/kinds';
import { serializeNotebook } from '../../src/core/notebook/format';
import { benchNotebook, KEY, leaks, startTargets, type Targets } from '../support/plantedKey';

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-secrets-inproc-'));
const hasBench = KINDS.some((k) => k.key === 'bench');

let t: Targets;
before(async () => {
  t = await startTargets();
});
after(async () => {
  await t.close();
  fs.rmSync(TMP, { recursive: true, force: true });
});

test('in process (services.getApiKey): results, findings, progress updates and the saved notebook hold no key', { skip: !hasBench && 'no bench kind is registered yet' }, async () => {
  const asked: string[] = [];
  const progress: ProgressUpdate[] = [];
  const services = {
    async getApiKey(endpoint: string) {
      asked.push(endpoint);
      return KEY;
    },
  };
  const nb = benchNotebook(t);
  const ctx = createNotebookContext(TMP, services);
  const results: CellResult[] = [];
  const cells = nb.cells.map((c) => ({ ...c }));
  for (const [i, c] of cells.entries()) {
    if (c.kind !== 'code') continue;
    const r = await runCell(c.source, i, ctx, { onProgress: (u) => progress.push(u) });
    results.push(r);
    cells[i] = { ...c, outputs: r.outputs.map((o) => ({ items: o.items })), lastRun: { success: r.ok } };
  }
  assert.equal(asked.length, 5, `getApiKey was asked once per bench cell (${asked.length})`);
  for (const s of Object.values(t.servers)) assert.ok(s.sawKey > 0, 'the key reached the server');
  const benchResults = results.filter((r) => r.kind.startsWith('bench'));
  assert.equal(benchResults.length, 5);
  const saved = serializeNotebook({ cells });
  const found = [
    ...leaks('results', JSON.stringify(results)),
    ...leaks('error messages', results.map((r) => r.error?.message ?? '').join('\n')),
    ...leaks('progress updates', JSON.stringify(progress)),
    ...leaks('saved notebook', saved),
  ];
  assert.deepStrictEqual(found, [], `the key leaked:\n${found.join('\n')}`);
  // Requests are shown only with the Authorization header redacted.
  assert.doesNotMatch(saved + JSON.stringify(progress), /Bearer (?!\[redacted\])[A-Za-z0-9._~+/-]{8,}/, 'an unredacted bearer token');
  // The failures were recorded (so there was something to leak): error kinds from the servers.
  const text = JSON.stringify(results);
  for (const kind of ['401', '500', '429']) assert.ok(text.includes(kind), `the ${kind} failure is in the results`);
});
