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
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { parseNotebook, serializeNotebook } from '../../src/core/notebook/format';
import {
  benchNotebook,
  credentialLeaks,
  credentialUrls,
  KEY,
  KEY_B,
  leaks,
  startTargets,
  twoEndpointNotebook,
  URL_PASSWORD,
  URL_TOKEN,
  walk,
  type Targets,
} from '../support/plantedKey';
import { inflabArgv, spawnBytes } from '../support/cli';
import { startScriptedServer } from '../support/scriptedServer';

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-secrets-'));

let t: Targets;
before(async () => {
  t = await startTargets();
});
after(async () => {
  await t.close();
  fs.rmSync(TMP, { recursive: true, force: true });
});

/** `inflab ARGS` from source with exactly `env` (no API key but the test's), its output as bytes. */
const run = (args: string[], env: NodeJS.ProcessEnv) =>
  // Run in the temporary folder, so that anything written beside the working directory is searched too.
  spawnBytes(process.execPath, inflabArgv(args, { source: true }), {
    cwd: TMP,
    env: { ...env, OPENAI_API_KEY: '', INFLAB_SIM_SPEED: '' },
    killAfterMs: 90_000,
  });

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
  // A notebook's hosts get a key only from INFLAB_API_KEYS (origin=key), one entry per host.
  const perHost = [...Object.values(t.servers).map((x) => x.url), t.refusedUrl].map((u) => `${u}=${KEY}`).join(' ');
  const r = await run(['run', nbFile, '--out', out], { ...process.env, INFLAB_API_KEYS: perHost });
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

test('two endpoints, two keys: each key reaches only its own host; INFLAB_API_KEY goes to no notebook host', async () => {
  const dir = path.join(TMP, 'two-keys');
  fs.mkdirSync(dir);
  const [a, b, c] = await Promise.all([
    startScriptedServer({ ttftMs: 1, itlMs: 1 }),
    startScriptedServer({ ttftMs: 1, itlMs: 1 }),
    startScriptedServer({ ttftMs: 1, itlMs: 1 }),
  ]);
  try {
    const nbFile = path.join(dir, 'two.inflab');
    const nb = twoEndpointNotebook(a.url, b.url);
    // A third host the notebook names, with no key set for it.
    nb.cells.push(...twoEndpointNotebook(c.url, c.url).cells.slice(0, 2));
    nb.cells[4].source = nb.cells[4].source.replace('setup: a', 'setup: c');
    nb.cells[5].source = nb.cells[5].source.replace('setup: a', 'setup: c');
    fs.writeFileSync(nbFile, serializeNotebook(nb));
    const third = `sk-inflab-flag-only-${Date.now()}`;
    const r = await run(['run', nbFile, '--out', path.join(dir, 'out.inflab')], {
      ...process.env,
      INFLAB_API_KEYS: `${a.url}=${KEY}\n${b.url}=${KEY_B}`,
      INFLAB_API_KEY: third,
    });
    assert.equal(r.code, 0, r.stderr.toString().slice(-1500));
    const auths = (s: typeof a) => [...new Set(s.requests.map((q) => q.authorization ?? '(none)'))];
    assert.ok(a.requests.length > 0 && b.requests.length > 0 && c.requests.length > 0, 'every host was measured');
    assert.deepEqual(auths(a), [`Bearer ${KEY}`]);
    assert.deepEqual(auths(b), [`Bearer ${KEY_B}`]);
    assert.deepEqual(auths(c), ['(none)'], 'INFLAB_API_KEY is for --endpoint only');
    const err = r.stderr.toString();
    assert.match(err, new RegExp(`no API key goes to ${c.url.replace(/[.]/g, '\\.')}.*INFLAB_API_KEYS`));
    assert.equal(err.split('no API key goes to').length - 1, 1, 'warned once');
    assert.ok(!err.includes(third) && !r.stdout.toString().includes(third), 'the flag key is not printed');
  } finally {
    await Promise.all([a.close(), b.close(), c.close()]);
  }
});

test('credentials in an endpoint URL are refused with the URL redacted, never sent, shown or saved', async () => {
  const dir = path.join(TMP, 'url-creds');
  fs.mkdirSync(dir);
  const s = await startScriptedServer({ ttftMs: 1, itlMs: 1 });
  try {
    const { userinfo, query } = credentialUrls(s.url);
    const found: string[] = [];
    // A notebook whose setups name them: each setup cell fails on its endpoint line.
    const nbFile = path.join(dir, 'creds.inflab');
    const nb = twoEndpointNotebook(userinfo, query);
    fs.writeFileSync(nbFile, serializeNotebook(nb));
    const out = path.join(dir, 'out.inflab');
    const r = await run(['run', nbFile, '--out', out], { ...process.env });
    assert.equal(r.code, 1, `the setup cells fail: ${r.stdout}${r.stderr}`);
    assert.ok(fs.existsSync(out), `the executed notebook was written: ${r.stdout}${r.stderr}`);
    const executed = parseNotebook(fs.readFileSync(out, 'utf8'));
    const setupText = JSON.stringify(executed.cells[0].outputs);
    assert.match(setupText, /http:\/\/\*\*\*@127\.0\.0\.1:\d+ carries a user name or password/);
    assert.match(JSON.stringify(executed.cells[2].outputs), /\?token=\*\*\* carries a query/);
    found.push(...credentialLeaks('run stdout', r.stdout), ...credentialLeaks('run stderr', r.stderr));
    // The cells' sources are the user's own text; everything InfLab wrote beside them is searched.
    const written = fs.readFileSync(out, 'utf8');
    assert.equal(credentialLeaks('sources', JSON.stringify(nb.cells.map((c) => c.source))).length, 2);
    found.push(...credentialLeaks('executed outputs', JSON.stringify(executed.cells.map((c) => c.outputs ?? []))));
    assert.equal(written.split(URL_PASSWORD).length - 1, 1, 'the password only in its source line');
    assert.equal(written.split(URL_TOKEN).length - 1, 1, 'the token only in its source line');
    // eval --json: the same cells, as JSON.
    const yamlFile = path.join(dir, 'cells.yaml');
    fs.writeFileSync(yamlFile, nb.cells.map((c) => c.source).join('---\n'));
    const e = await run(['eval', yamlFile, '--json'], { ...process.env });
    found.push(...credentialLeaks('eval --json', e.stdout), ...credentialLeaks('eval stderr', e.stderr));
    // bench --endpoint: a usage error that names the redacted URL; nothing is sent.
    for (const url of [userinfo, query]) {
      const json = path.join(dir, 'bench.json');
      const b = await run(
        [
          'bench',
          '--endpoint',
          url,
          '--input',
          '16',
          '--output',
          '4',
          '--concurrency',
          '1',
          '--requests',
          '2',
          '--json',
          json,
        ],
        { ...process.env, INFLAB_API_KEY: KEY },
      );
      assert.equal(b.code, 2, b.stderr.toString());
      assert.match(b.stderr.toString(), /carries .*InfLab sends no credential from a URL/);
      assert.ok(!fs.existsSync(json), 'no results file');
      found.push(...credentialLeaks('bench stdout', b.stdout), ...credentialLeaks('bench stderr', b.stderr));
    }
    assert.deepEqual(found, [], found.join('\n'));
    assert.equal(s.requests.length, 0, 'no request reached the server');
  } finally {
    await s.close();
  }
});
