/**
 * Secrets, CLI side: a planted API key (INFLAB_API_KEY) reaches the endpoint in the Authorization
 * header and nowhere else. `inflab run` executes bench cells against servers on 127.0.0.1 that fail
 * in every way that could carry the key back (test/support/plantedKey.ts: a closed port, a 401 and a
 * 500 whose bodies echo the key and the request headers with the key cut across the 500th
 * character, a 429, a stream whose text, a malformed chunk and /metrics labels carry it), and
 * `inflab bench --json` runs against some of them; then every byte written is searched: the executed
 * notebook, stdout and stderr, the --json files, and every file left in the folder. A leak of the
 * whole key, of any 12 characters of its secret part, or of its base64 form fails the test.
 * (secrets-inprocess.test.ts does the same through services.getApiKey and progress updates.)
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseNotebook, serializeNotebook } from '../../src/core/notebook/format';
import { benchNotebook, KEY, leaks, startTargets, walk, type Targets } from '../support/plantedKey';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-secrets-'));
const TSX = import.meta.resolve('tsx');

let t: Targets;
before(async () => {
  t = await startTargets();
});
after(async () => {
  await t.close();
  fs.rmSync(TMP, { recursive: true, force: true });
});

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: Buffer; stderr: Buffer }> {
  return new Promise((resolve, reject) => {
    // Run in the temporary folder, so that anything written beside the working directory is searched too.
    const p = spawn(process.execPath, ['--import', TSX, path.join(ROOT, 'src/cli/main.ts'), ...args], {
      cwd: TMP,
      env: { ...env, OPENAI_API_KEY: '', INFLAB_SIM_SPEED: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout.on('data', (b) => out.push(b));
    p.stderr.on('data', (b) => err.push(b));
    const timer = setTimeout(() => p.kill('SIGKILL'), 90_000);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err) });
    });
  });
}

// ---------------------------------------------------------------- tests

test('the leak search finds the key in every form it looks for (a search that cannot fail proves nothing)', () => {
  assert.equal(leaks('plain', `x ${KEY} y`).length > 0, true);
  assert.equal(leaks('cut', `key starts ${KEY.slice(0, 30)}`).length > 0, true, 'a key cut in half is found');
  assert.equal(leaks('base64', Buffer.from(`Bearer ${KEY}`).toString('base64')).length > 0, true);
  assert.deepStrictEqual(leaks('clean', 'Bearer [redacted] sk-inflab-planted-'), []);
});

test('inflab run: bench cells against failing servers leave the key nowhere in what is written', async () => {
  const dir = path.join(TMP, 'run');
  fs.mkdirSync(dir);
  const nbFile = path.join(dir, 'day5.inflab');
  const input = serializeNotebook(benchNotebook(t));
  fs.writeFileSync(nbFile, input);
  const out = path.join(dir, 'out', 'day5.executed.inflab');
  const before = Object.fromEntries(Object.entries(t.servers).map(([k, s]) => [k, s.sawKey]));
  const r = await run(['run', nbFile, '--out', out], { ...process.env, INFLAB_API_KEY: KEY });
  assert.ok(r.code === 0 || r.code === 1, `exits normally (code ${r.code}): ${r.stderr.toString().slice(-2000)}`);
  assert.ok(
    fs.existsSync(out),
    `the executed notebook was written: ${r.stdout.toString().slice(-2000)}${r.stderr.toString().slice(-2000)}`,
  );
  // The key was really planted: every reachable server received it.
  for (const [k, s] of Object.entries(t.servers)) assert.ok(s.sawKey > before[k], `the ${k} server received the key`);
  // The executed notebook has the bench cells' outputs (errors, records) to search.
  const executed = parseNotebook(fs.readFileSync(out, 'utf8'));
  const benchCells = executed.cells.filter((c) => c.source.startsWith('bench:'));
  assert.equal(benchCells.length, 5);
  for (const c of benchCells) assert.ok(c.outputs?.length, `outputs for ${c.source.split('\n')[2]}`);
  const found = [
    ...leaks('stdout', r.stdout),
    ...leaks('stderr', r.stderr),
    ...walk(TMP).flatMap((f) => leaks(path.relative(TMP, f), fs.readFileSync(f))),
  ];
  assert.deepStrictEqual(found, [], `the key leaked:\n${found.join('\n')}`);
  assert.equal(fs.readFileSync(nbFile, 'utf8'), input, 'the input notebook is untouched');
});

test('inflab bench --json: the key is in no byte of the JSON, stdout or stderr', async () => {
  const dir = path.join(TMP, 'bench');
  fs.mkdirSync(dir);
  const found: string[] = [];
  for (const [name, url] of [
    ['refused', t.refusedUrl],
    ['unauthorized', t.servers['401'].url],
    ['echo', t.servers.stream.url],
  ]) {
    const json = path.join(dir, `${name}.json`);
    const r = await run(
      [
        'bench',
        '--endpoint',
        url,
        '--input',
        '16',
        '--output',
        '8',
        '--concurrency',
        '1',
        '--requests',
        '2',
        '--timeout',
        '2 s',
        '--gpu',
        'a100-sxm4-80gb',
        '--model',
        'qwen3-8b',
        '--json',
        json,
      ],
      { ...process.env, INFLAB_API_KEY: KEY },
    );
    assert.ok(
      r.code === 0 || r.code === 1,
      `${name}: exits normally (code ${r.code}): ${r.stderr.toString().slice(-1500)}`,
    );
    found.push(...leaks(`${name} stdout`, r.stdout), ...leaks(`${name} stderr`, r.stderr));
    if (fs.existsSync(json)) found.push(...leaks(`${name}.json`, fs.readFileSync(json)));
  }
  assert.ok(fs.readdirSync(dir).length > 0, 'some --json file was written');
  for (const f of walk(dir)) found.push(...leaks(path.relative(TMP, f), fs.readFileSync(f)));
  assert.deepStrictEqual(found, [], `the key leaked:\n${found.join('\n')}`);
});
