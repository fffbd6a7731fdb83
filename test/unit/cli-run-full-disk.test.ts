/**
 * `inflab run --in-place` on a full disk: the save fails with ENOSPC, and the notebook on disk is
 * left byte for byte as it was (no half-written file, no temp file beside it), with a message
 * rather than a stack trace. The full disk is injected (test/support/enospc.mjs: every write into
 * the folder fails after its first 4,096 bytes, as a full disk leaves a partial block), and, where
 * mounting is permitted, a real 64 KiB tmpfs.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { serializeNotebook, type Notebook } from '../../src/core/notebook/format';
import { runInflab } from '../support/cli';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-full-disk-'));
after(() => fs.rmSync(TMP, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = path.join(TMP, `t${++n}`);
  fs.mkdirSync(d);
  return d;
};

/** Notes worth keeping and two predictions whose outputs make the executed notebook far larger than 4 KiB. */
const NB: Notebook = {
  metadata: { title: 'day 2' },
  cells: [
    { kind: 'markdown', language: 'markdown', source: '# Day 2\nnotes that must not be lost\n' + 'x'.repeat(2_000) },
    {
      kind: 'code',
      language: 'inflab',
      source: 'predict: decode-roofline\ngpu: h100-sxm\nmodel: qwen3-8b\ncontext: 1k tokens',
    },
    { kind: 'code', language: 'inflab', source: 'predict: kv-pool\ngpu: h100-sxm\nmodel: qwen3-8b' },
  ],
};

const inflab = (args: string[], env: Record<string, string> = {}, preload: string[] = []) =>
  runInflab(args, { source: true, env, node: preload });

test('inflab run --in-place on a full disk (injected ENOSPC) leaves the notebook byte-identical, with a message', async () => {
  const d = freshDir();
  const file = path.join(d, 'day2.inflab');
  const before = serializeNotebook(NB);
  fs.writeFileSync(file, before);
  const r = await inflab(['run', file, '--in-place'], { INFLAB_TEST_ENOSPC_DIR: d }, [
    '--import',
    path.join(ROOT, 'test/support/enospc.mjs'),
  ]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /could not save .*day2\.inflab: ENOSPC.*the file on disk was left as it was/);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
  assert.equal(fs.readFileSync(file, 'utf8'), before, 'the notebook on disk is unchanged');
  assert.deepEqual(fs.readdirSync(d), ['day2.inflab'], 'no temp file left');
});

test('the same run with room to write saves the executed notebook (the injection is what failed it)', async () => {
  const d = freshDir();
  const file = path.join(d, 'day2.inflab');
  fs.writeFileSync(file, serializeNotebook(NB));
  const r = await inflab(['run', file, '--in-place', '--quiet']);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const saved = fs.readFileSync(file, 'utf8');
  assert.ok(saved.length > 4096, `the executed notebook (${saved.length} bytes) is larger than the injected 4 KiB`);
  assert.match(saved, /notes that must not be lost/);
});

test('inflab run --in-place on a real full disk (a 64 KiB tmpfs) leaves the notebook byte-identical', async (t) => {
  const d = freshDir();
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', d], { encoding: 'utf8' });
  if (mounted.status !== 0) {
    t.skip(`mounting a tmpfs is not permitted here (${(mounted.stderr || mounted.error?.message || '').trim()})`);
    return;
  }
  try {
    const file = path.join(d, 'day2.inflab');
    // The notebook takes most of the disk: its executed copy cannot be written beside it.
    const big: Notebook = {
      ...NB,
      cells: [{ kind: 'markdown', language: 'markdown', source: 'y'.repeat(40 * 1024) }, ...NB.cells.slice(1)],
    };
    const before = serializeNotebook(big);
    fs.writeFileSync(file, before);
    const r = await inflab(['run', file, '--in-place']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /could not save .*day2\.inflab: ENOSPC/);
    assert.equal(fs.readFileSync(file, 'utf8'), before);
    assert.deepEqual(fs.readdirSync(d), ['day2.inflab'], 'no temp file left');
  } finally {
    spawnSync('umount', [d]);
  }
});
