import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { bundleExecArgv, startWorker } from '../../src/core/host/worker';

test('bundleExecArgv drops a TypeScript loader in every spelling and keeps every other flag', () => {
  assert.deepEqual(
    bundleExecArgv([
      '--import',
      'tsx',
      '--max-old-space-size=4096',
      '--require',
      '/x/node_modules/tsx/dist/preflight.cjs',
      '--import=file:///x/node_modules/tsx/dist/loader.mjs',
      '--loader',
      'tsx/esm',
      '--import',
      './telemetry.mjs',
      '-r',
      'source-map-support/register',
      '--enable-source-maps',
    ]),
    [
      '--max-old-space-size=4096',
      '--import',
      './telemetry.mjs',
      '-r',
      'source-map-support/register',
      '--enable-source-maps',
    ],
  );
  assert.deepEqual(bundleExecArgv([]), []);
});

test('a bundled worker starts under process-wide Node flags a worker may not be given (--max-old-space-size, --expose-gc)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-worker-'));
  try {
    const js = path.join(dir, 'w.cjs');
    fs.writeFileSync(js, "require('node:worker_threads').parentPort.postMessage('up');\n");
    const here = pathToFileURL(path.resolve('src/core/host/worker.ts')).href;
    const code = `import(${JSON.stringify(here)}).then(({ startWorker }) => { const w = startWorker(${JSON.stringify(js)}, {}); w.on('message', (m) => { console.log(m); w.terminate(); }); })`;
    // Under tsx (the loader is dropped, so the rest is given explicitly) and process-wide flags.
    const r = spawnSync(process.execPath, ['--max-old-space-size=512', '--expose-gc', '--import', 'tsx', '-e', code], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'up');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a bundled worker started from a tsx parent runs without tsx; a .ts one gets it registered', async () => {
  // This test file itself runs under `--import tsx`.
  assert.ok(
    process.execArgv.some((a) => /tsx/.test(a)),
    'the test runner is expected to run under tsx',
  );
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-worker-'));
  try {
    const js = path.join(dir, 'w.js');
    fs.writeFileSync(
      js,
      "const { parentPort, workerData } = require('node:worker_threads');\nparentPort.postMessage({ argv: process.execArgv, data: workerData });\n",
    );
    const w = startWorker(js, { n: 7 });
    const [m] = (await once(w, 'message')) as [{ argv: string[]; data: unknown }];
    assert.deepEqual(m.data, { n: 7 });
    assert.ok(!m.argv.some((a) => /tsx/.test(a)), `a bundle's thread inherited a loader: ${m.argv.join(' ')}`);
    await w.terminate();

    // As in the repo: an ES module package.
    fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
    const ts = path.join(dir, 'w.ts');
    fs.writeFileSync(
      ts,
      "import { parentPort, workerData } from 'node:worker_threads';\nconst n: number = (workerData as { n: number }).n;\nparentPort!.postMessage({ doubled: n * 2 });\n",
    );
    const w2 = startWorker(ts, { n: 21 });
    const [m2] = (await once(w2, 'message')) as [{ doubled: number }];
    assert.equal(m2.doubled, 42);
    await w2.terminate();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
