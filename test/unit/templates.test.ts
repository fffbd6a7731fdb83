/**
 * Every day template runs clean through `inflab run` against the simulated endpoint: each code cell
 * succeeds, and no finding is an error. (Warnings may stand: the Day 4 trap is there to show one.)
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { MIME } from '../../src/core/engine/outputs';
import type { Finding } from '../../src/core/findings';
import { parseNotebook } from '../../src/core/notebook/format';
import { TEMPLATES } from '../../src/core/templates';
import { buildCli, ROOT, runInflab } from '../support/cli';

before(buildCli);

test('every template in examples/ runs clean through inflab run', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-templates-'));
  for (const t of TEMPLATES) {
    assert.ok(fs.existsSync(path.join(ROOT, 'examples', t.file)), `${t.file} exists`);
    for (const n of t.needs) assert.ok(fs.existsSync(path.join(ROOT, 'examples', n)), `${t.file} needs ${n}`);
  }
  // All at once: each runs its own simulated endpoint.
  const runs = await Promise.all(
    TEMPLATES.map((t) =>
      runInflab(['run', path.join(ROOT, 'examples', t.file), '--out', path.join(dir, t.file)], {
        killAfterMs: 600_000,
      }),
    ),
  );
  TEMPLATES.forEach((t, i) => {
    assert.equal(runs[i].code, 0, `${t.file}: inflab run exited ${runs[i].code}\n${runs[i].printed}`);
    const nb = parseNotebook(fs.readFileSync(path.join(dir, t.file), 'utf8'));
    const code = nb.cells.filter((c) => c.kind === 'code');
    assert.ok(code.length >= 4, `${t.file} has cells`);
    assert.ok(
      nb.cells.some((c) => c.kind === 'markdown' && c.source.length > 80),
      `${t.file} teaches in markdown`,
    );
    for (const c of code) {
      assert.equal(c.lastRun?.success, true, `${t.file}: cell "${c.source.split('\n')[0]}" failed\n${runs[i].printed}`);
      const findings = (c.outputs ?? []).flatMap((o) => o.items).find((it) => it.mime === MIME.findings)?.data as
        Finding[] | undefined;
      const errors = (findings ?? []).filter((f) => f.severity === 'error');
      assert.deepEqual(errors, [], `${t.file}: error findings in "${c.source.split('\n')[0]}"`);
    }
  });
});
