/**
 * Notebook files on disk (the 100 MB notebook is in format-huge.test.ts): a save that fails leaves the original bytes intact (atomic write); `inflab run` never truncates its input and
 * refuses a corrupt notebook with the message, exit 1 and the file byte-identical.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { writeFileAtomic } from '../../src/core/notebook/atomicWrite';
import { parseNotebook, serializeNotebook, type Notebook } from '../../src/core/notebook/format';
import { inflabArgv, runInflab, spawnText } from '../support/cli';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-files-'));
after(() => fs.rmSync(TMP, { recursive: true, force: true }));
const isRoot = process.getuid?.() === 0;

let n = 0;
const freshDir = () => {
  const d = path.join(TMP, `t${++n}`);
  fs.mkdirSync(d);
  return d;
};
const leftovers = (dir: string) => fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'));

/** The real CLI, from source (no build step needed): `inflab ARGS`. */
const inflab = (args: string[]) => runInflab(args, { source: true });
/** The same, with a file-size limit (RLIMIT_FSIZE, in KiB): every write past it fails with EFBIG. */
const inflabLimited = (kib: number, args: string[]) =>
  spawnText('bash', [
    '-c',
    `ulimit -f ${kib} && exec "$0" "$@"`,
    process.execPath,
    ...inflabArgv(args, { source: true }),
  ]);

// ---------------------------------------------------------------- atomic write

test('writeFileAtomic replaces the file, keeps its permission bits and a symlink, leaves no temp file', () => {
  const d = freshDir();
  const f = path.join(d, 'nb.inflab');
  fs.writeFileSync(f, 'old', { mode: 0o600 });
  fs.chmodSync(f, 0o600);
  writeFileAtomic(f, 'new contents');
  assert.equal(fs.readFileSync(f, 'utf8'), 'new contents');
  assert.equal(fs.statSync(f).mode & 0o777, 0o600);
  const link = path.join(d, 'link.inflab');
  fs.symlinkSync(f, link);
  writeFileAtomic(link, new TextEncoder().encode('via link'));
  assert.ok(fs.lstatSync(link).isSymbolicLink(), 'the link is still a link');
  assert.equal(fs.readFileSync(f, 'utf8'), 'via link');
  writeFileAtomic(path.join(d, 'fresh.inflab'), '');
  assert.equal(fs.readFileSync(path.join(d, 'fresh.inflab'), 'utf8'), '');
  assert.deepStrictEqual(leftovers(d), []);
});

test('a write that fails part-way (file size limit: EFBIG) leaves the original bytes intact', async () => {
  const d = freshDir();
  const f = path.join(d, 'nb.inflab');
  const original = serializeNotebook({
    cells: [{ kind: 'code', language: 'inflab', source: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b' }],
  });
  fs.writeFileSync(f, original);
  const script = path.join(d, 'child.ts');
  fs.writeFileSync(
    script,
    `import { writeFileAtomic } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'src/core/notebook/atomicWrite.ts')).href)};\n` +
      `try { writeFileAtomic(${JSON.stringify(f)}, 'y'.repeat(4 << 20)); console.log('WROTE'); }\n` +
      `catch (e) { console.log('CODE=' + e.code); console.log('MESSAGE=' + e.message); }\n`,
  );
  const r = await spawnText('bash', ['-c', `ulimit -f 256 && exec "$0" --import tsx "$1"`, process.execPath, script]);
  assert.match(r.stdout, /CODE=EFBIG/, r.stdout + r.stderr);
  assert.match(r.stdout, /MESSAGE=could not save .*nb\.inflab: EFBIG.*the file on disk was left as it was/);
  assert.equal(fs.readFileSync(f, 'utf8'), original, 'original bytes intact');
  assert.deepStrictEqual(leftovers(d), [], 'the partial temp file was removed');
});

test('a save whose directory was replaced by a file fails and touches nothing', () => {
  const d = freshDir();
  const dir = path.join(d, 'lab');
  fs.mkdirSync(dir);
  const f = path.join(dir, 'nb.inflab');
  fs.writeFileSync(f, 'original');
  // The folder is moved away and a file takes its name while the notebook is open.
  fs.renameSync(dir, path.join(d, 'lab-moved'));
  fs.writeFileSync(dir, 'a file, not a folder');
  assert.throws(
    () => writeFileAtomic(f, 'new'),
    (e: NodeJS.ErrnoException) => e.code === 'ENOTDIR' && /the file on disk was left as it was/.test(e.message),
  );
  assert.equal(fs.readFileSync(path.join(d, 'lab-moved', 'nb.inflab'), 'utf8'), 'original');
  assert.equal(fs.readFileSync(dir, 'utf8'), 'a file, not a folder');
  assert.deepStrictEqual(leftovers(d), []);
});

test('a rename that fails (the target is a folder) removes the temp file', () => {
  const d = freshDir();
  const target = path.join(d, 'nb.inflab');
  fs.mkdirSync(target);
  fs.writeFileSync(path.join(target, 'inside'), 'kept');
  assert.throws(
    () => writeFileAtomic(target, 'new'),
    (e: NodeJS.ErrnoException) => e.code === 'EISDIR' || e.code === 'ENOTEMPTY' || e.code === 'EEXIST',
  );
  assert.equal(fs.readFileSync(path.join(target, 'inside'), 'utf8'), 'kept');
  assert.deepStrictEqual(leftovers(d), [], 'no temp file left beside it');
});

test(
  'a read-only folder: the save fails and the original stays',
  { skip: isRoot && 'root ignores folder permissions (covered by the EFBIG and ENOTDIR cases)' },
  () => {
    const d = freshDir();
    const f = path.join(d, 'nb.inflab');
    fs.writeFileSync(f, 'original');
    fs.chmodSync(d, 0o555);
    try {
      assert.throws(
        () => writeFileAtomic(f, 'new'),
        (e: NodeJS.ErrnoException) => e.code === 'EACCES',
      );
      assert.equal(fs.readFileSync(f, 'utf8'), 'original');
    } finally {
      fs.chmodSync(d, 0o755);
    }
  },
);

// ---------------------------------------------------------------- the CLI

const NB: Notebook = {
  metadata: { title: 'day 4' },
  cells: [
    { kind: 'markdown', language: 'markdown', source: '# Day 4\r\n\r\nnotes with CRLF and ünïcödé ✅\n' },
    { kind: 'code', language: 'inflab', source: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n' },
    {
      kind: 'code',
      language: 'inflab',
      source: '# the roofline, before measuring\npredict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 8]\n\n',
    },
    { kind: 'code', language: 'python', source: 'print("not ours")' },
  ],
};

test('inflab run NB --out OUT leaves NB byte-identical and OUT holds every cell as written', async () => {
  const d = freshDir();
  const nbFile = path.join(d, 'day4.inflab');
  const input = serializeNotebook(NB);
  fs.writeFileSync(nbFile, input);
  const out = path.join(d, 'out', 'day4.executed.inflab');
  const r = await inflab(['run', nbFile, '--out', out]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(fs.readFileSync(nbFile, 'utf8'), input, 'input untouched');
  const executed = parseNotebook(fs.readFileSync(out, 'utf8'));
  assert.deepStrictEqual(
    executed.cells.map((c) => [c.kind, c.language, c.source]),
    NB.cells.map((c) => [c.kind, c.language, c.source]),
  );
  assert.deepStrictEqual(executed.metadata, NB.metadata);
  assert.ok(executed.cells[2].outputs?.length, 'the predict cell has outputs');
  assert.equal(executed.cells[2].lastRun?.success, true);
  assert.equal(executed.cells[3].outputs, undefined, 'a cell in another language is left alone');
  assert.deepStrictEqual(leftovers(d), []);
  assert.deepStrictEqual(leftovers(path.dirname(out)), []);

  // In place: the sources stay, the outputs arrive; running again gives the same cells.
  const r2 = await inflab(['run', nbFile, '--in-place']);
  assert.equal(r2.code, 0, r2.stdout + r2.stderr);
  const inPlace = parseNotebook(fs.readFileSync(nbFile, 'utf8'));
  assert.deepStrictEqual(
    inPlace.cells.map((c) => c.source),
    NB.cells.map((c) => c.source),
  );
  assert.ok(inPlace.cells[2].outputs?.length);
});

const corrupt: [string, (good: string) => string, RegExp][] = [
  [
    'truncated',
    (g) => g.slice(0, Math.floor(g.length * 0.6)),
    /Not valid JSON at line \d+, column \d+: the file ends in the middle of the JSON\. The file ends early: it looks truncated/,
  ],
  [
    'a stray comma',
    (g) => g.replace('"cells": [', '"cells": [,'),
    /Not valid JSON at line 6, column 13: expected a value/,
  ],
  [
    'a wrong shape',
    (g) => g.replace('"source": [\n        "setup: lab",', '"source": "setup: lab", "x": ['),
    /Not a valid \.inflab notebook: at cells\[1\]\.source \(line \d+\)/,
  ],
  [
    'a future version',
    (g) => g.replace('"inflab": 1', '"inflab": 7'),
    /format version 7, newer than this InfLab understands/,
  ],
  ['binary garbage', () => '\u0000\u0001\u0002PK\u0003\u0004', /Not valid JSON at line 1, column 1/],
];

/** runCommand in this process (what `inflab run` calls), with what it prints captured. */
async function runInProcess(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { runCommand } = await import('../../src/cli/commands/run');
  const out: string[] = [];
  const err: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (...a: unknown[]) => void out.push(a.join(' '));
  console.error = (...a: unknown[]) => void err.push(a.join(' '));
  try {
    const code = await runCommand(args);
    return { code, stdout: out.join('\n'), stderr: err.join('\n') };
  } finally {
    console.log = log;
    console.error = error;
  }
}

test('inflab run on a corrupt notebook: exit 1, the message, the file byte-identical, nothing written', async () => {
  // Five kinds of damage, each run in place and with --out; the first also through the real CLI process.
  for (const [k, [what, breakIt, message]] of corrupt.entries()) {
    for (const mode of k === 0
      ? ['process', 'process --out', 'in-process', 'in-process --out']
      : ['in-process', 'in-process --out']) {
      const d = freshDir();
      const nbFile = path.join(d, 'broken.inflab');
      const bytes = Buffer.from(breakIt(serializeNotebook(NB)), 'utf8');
      fs.writeFileSync(nbFile, bytes);
      const mtime = fs.statSync(nbFile).mtimeMs;
      const args = mode.endsWith('--out')
        ? ['run', nbFile, '--out', path.join(d, 'out.inflab')]
        : ['run', nbFile, '--in-place'];
      const r = mode.startsWith('process') ? await inflab(args) : await runInProcess(args.slice(1));
      const ctx = `${what} (${mode}): ${r.stdout}${r.stderr}`;
      assert.equal(r.code, 1, ctx);
      assert.match(r.stderr, message, ctx);
      assert.match(r.stderr, /The file was not changed\./, ctx);
      assert.doesNotMatch(r.stderr, /\n\s+at /, `a message, not a stack trace (${ctx})`);
      assert.ok(fs.readFileSync(nbFile).equals(bytes), `byte-identical (${ctx})`);
      assert.equal(fs.statSync(nbFile).mtimeMs, mtime, ctx);
      assert.deepStrictEqual(fs.readdirSync(d), ['broken.inflab'], `nothing else written (${ctx})`);
    }
  }
});

test('inflab run whose save fails (file size limit) exits 1 and leaves the notebook byte-identical', async () => {
  const d = freshDir();
  const nbFile = path.join(d, 'day4.inflab');
  const input = serializeNotebook(NB);
  fs.writeFileSync(nbFile, input);
  // The executed notebook (plots, tables) is far larger than 16 KiB; the input is well under it.
  const r = await inflabLimited(16, ['run', nbFile, '--in-place']);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /could not save .*day4\.inflab: EFBIG.*the file on disk was left as it was/);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
  assert.equal(fs.readFileSync(nbFile, 'utf8'), input);
  assert.deepStrictEqual(fs.readdirSync(d), ['day4.inflab'], 'no temp file left');
});

test('inflab run --out into a path under a file exits 1 and leaves the notebook byte-identical', async () => {
  const d = freshDir();
  const nbFile = path.join(d, 'day4.inflab');
  const input = serializeNotebook(NB);
  fs.writeFileSync(nbFile, input);
  fs.writeFileSync(path.join(d, 'not-a-dir'), 'x');
  const r = await inflab(['run', nbFile, '--out', path.join(d, 'not-a-dir', 'out.inflab')]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /ENOTDIR|EEXIST/);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'a message, not a stack trace');
  assert.equal(fs.readFileSync(nbFile, 'utf8'), input);
  assert.equal(fs.readFileSync(path.join(d, 'not-a-dir'), 'utf8'), 'x');
});

test('inflab run in place: edits saved while the cells ran are not overwritten; the result goes beside them', async () => {
  const http = await import('node:http');
  // A bench endpoint that holds its first answer until the notebook has been edited on disk.
  let started!: () => void;
  const firstRequest = new Promise<void>((r) => (started = r));
  let release!: () => void;
  const edited = new Promise<void>((r) => (release = r));
  const server = http.createServer(async (req, res) => {
    started();
    await edited;
    res.writeHead(503, { 'content-type': 'application/json' });
    res.end('{"error": {"message": "down for maintenance"}}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const port = (server.address() as import('node:net').AddressInfo).port;
    const d = freshDir();
    const nbFile = path.join(d, 'day5.inflab');
    const nb: Notebook = {
      cells: [
        {
          kind: 'code',
          language: 'inflab',
          source: `setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: http://127.0.0.1:${port}\n`,
        },
        {
          kind: 'code',
          language: 'inflab',
          source: 'bench: sweep\ninput: 16 tokens\noutput: 8 tokens\nconcurrency: [1]\nrequests: 1\nscrape: false\n',
        },
      ],
    };
    fs.writeFileSync(nbFile, serializeNotebook(nb));
    const running = inflab(['run', nbFile, '--in-place']);
    await firstRequest;
    const mine = serializeNotebook({
      cells: [...nb.cells, { kind: 'markdown', language: 'markdown', source: 'notes typed while the sweep ran' }],
    });
    fs.writeFileSync(nbFile, mine);
    release();
    const r = await running;
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /day5\.inflab changed on disk while its cells ran, so it was not overwritten; the executed notebook is in .*day5\.executed\.inflab/,
    );
    assert.equal(fs.readFileSync(nbFile, 'utf8'), mine, 'the edit is kept, byte for byte');
    const executed = parseNotebook(fs.readFileSync(path.join(d, 'day5.executed.inflab'), 'utf8'));
    assert.equal(executed.cells.length, 2);
    assert.ok(executed.cells[1].outputs?.length, 'the bench cell ran and its outputs were kept');
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
