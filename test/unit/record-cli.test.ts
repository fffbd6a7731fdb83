/**
 * The CLI on the record/compare example: `inflab eval FILE --json` prints the TTFT finding with its
 * path into the record cell, and the compare cell's verdict rows with their causes.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { buildCli, ROOT, runInflabSync } from '../support/cli';

before(buildCli);

function evalJson(file: string) {
  const r = runInflabSync(['eval', file, '--json']);
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as {
    kind: string;
    name: string | null;
    values: Record<string, any>;
    findings: {
      severity: string;
      code: string;
      message: string;
      path: (string | number)[];
      related?: { cellIndex?: number }[];
    }[];
  }[];
}

test('eval --json: a100/qwen3-8b setup, record day4 with prompt 1000 tokens and ttft 23 ms → the finding at ["ttft"]', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-record-'));
  const f = path.join(dir, 'day4.yaml');
  fs.writeFileSync(
    f,
    'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n---\nrecord: day4\nprompt: 1000 tokens\nttft: 23 ms\n',
  );
  const out = evalJson(f);
  assert.equal(out.length, 2);
  assert.equal(out[1].kind, 'record');
  assert.equal(out[1].name, 'day4');
  assert.deepEqual(out[1].values, { prompt_tokens: 1000, ttft_ms: 23 });
  const [finding] = out[1].findings;
  assert.equal(out[1].findings.length, 1);
  assert.equal(finding.code, 'ttft-below-prefill-floor');
  assert.equal(finding.severity, 'warning');
  assert.deepEqual(finding.path, ['ttft']);
  assert.match(finding.message, /below the 52\.5 ms compute floor \(2·params·tokens\/peak\)/);
  assert.equal(finding.related?.[0].cellIndex, 0);
});

test('eval --json on examples/record-compare.yaml: the record finding, and the compare verdicts with causes', () => {
  const out = evalJson(path.join(ROOT, 'examples/record-compare.yaml'));
  const rec = out.find((c) => c.kind === 'record' && c.name === 'day4')!;
  assert.deepEqual(
    rec.findings.map((f) => [f.code, f.path]),
    [['ttft-below-prefill-floor', ['ttft']]],
  );
  for (const c of out.filter((x) => x.kind === 'record' && x.name !== 'day4'))
    assert.deepEqual(c.findings, [], `${c.name} is clean`);
  const cmp = out.find((c) => c.kind === 'compare')!;
  const rows = cmp.values.rows as { quantity: string; verdict: string; cause: string; ratio: number }[];
  const ttft = rows.find((r) => r.quantity === 'TTFT')!;
  assert.equal(ttft.verdict, '❌');
  assert.equal(ttft.cause, 'prefix-cache hit?');
  assert.ok(Math.abs(ttft.ratio - 23 / 52.5) < 1e-9);
  assert.equal(rows.find((r) => r.quantity === 'KV pool')!.verdict, '✅');
  assert.ok(rows.some((r) => r.quantity === 'aggregate tok/s @ batch 64'));
  assert.deepEqual(
    cmp.findings.map((f) => [f.code, f.path]),
    [['ttft-below-prefill-floor', ['rows', 2, 'measured']]],
  );
});
