/**
 * How an `audit:` cell reaches what it reads: a log through the host's file service
 * (Services.openFile, so the workspace rule, its confirmation and Restricted Mode apply; a host
 * without one reads nothing), and a /metrics URL through the bench's capped GET (an endless body is
 * cut off at the /metrics cap, saying so; a user name, password or token in the URL is refused
 * before any request, and never shown). Real files, a real HTTP server on 127.0.0.1.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { ReadFileOptions, Services } from '../../src/core/engine/types';
import { nodeFiles } from '../../src/core/host/files';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-reads-'));
after(() => fs.rmSync(DIR, { recursive: true, force: true }));
const LOG = path.join(DIR, 'v.log');
fs.writeFileSync(
  LOG,
  [
    '(APIServer pid=1) INFO 05-12 08:00:00 [api_server.py:1900] vLLM API server version 0.11.0',
    '(EngineCore_DP0 pid=2) INFO 05-12 08:00:20 [kv_cache_utils.py:1087] GPU KV cache size: 410,240 tokens',
  ].join('\n') + '\n',
);

test('a log is opened through the host file service (purpose run, the notebook folder); a host without one reads nothing', async () => {
  const files = nodeFiles();
  const opened: [string, ReadFileOptions][] = [];
  const services: Services = {
    ...files,
    openFile: (abs, o) => (opened.push([abs, o]), files.openFile(abs, o)),
  };
  const r = await runCell('audit: v.log\nplot: false', 0, createNotebookContext(DIR, services));
  assert.ok(r.ok, r.error?.message);
  assert.equal((r.values as { pool_tokens?: number }).pool_tokens, 410240);
  assert.deepEqual(
    opened.map(([abs, o]) => [abs, o.purpose, o.notebookDir]),
    [[LOG, 'run', DIR]],
  );
  const none = await runCell('audit: v.log\nplot: false', 0, createNotebookContext(DIR, {}));
  assert.equal(none.ok, false);
  assert.match(none.error!.message, /this host reads no files/);
  // Restricted Mode: refused, said as a refusal.
  const restricted = await runCell(
    'audit: v.log\nplot: false',
    0,
    createNotebookContext(DIR, nodeFiles({ trusted: () => false })),
  );
  assert.equal(restricted.error?.code, 'audit-read-refused');
  assert.match(restricted.error!.message, /Restricted Mode/);
});

/** A server on 127.0.0.1 answering /metrics with `answer`; counts the requests it got. */
async function metricsServer(answer: (res: http.ServerResponse) => void) {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    answer(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

test(
  'audit: of a /metrics URL whose body never ends is cut off at the /metrics cap, saying which',
  { timeout: 60_000 },
  async () => {
    const chunk = `# HELP x y\n${'vllm:num_requests_running 1\n'.repeat(36_000)}`; // about 1 MiB
    const s = await metricsServer((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const more = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', more);
      };
      more();
    });
    try {
      const r = await runCell(`audit: http://127.0.0.1:${s.port}/metrics`, 0, createNotebookContext(DIR, nodeFiles()));
      assert.equal(r.ok, false);
      assert.equal(r.error?.code, 'audit-fetch-failed');
      assert.match(r.error!.message, /the answer passed 16 MiB \(the cap for \/metrics\) and was cut off/);
    } finally {
      await s.close();
    }
  },
);

test('audit: of a URL with a user name, password or token is refused before any request, the URL shown redacted', async () => {
  const s = await metricsServer((res) => res.end('vllm:num_requests_running 1\n'));
  try {
    for (const url of [
      `http://user:PASS@127.0.0.1:${s.port}/metrics`,
      `http://127.0.0.1:${s.port}/metrics?token=SECRET`,
    ]) {
      const r = await runCell(`audit: ${url}`, 0, createNotebookContext(DIR, nodeFiles()));
      assert.equal(r.ok, false, url);
      assert.equal(r.error?.code, 'audit-url-credentials', url);
      assert.match(r.error!.message, /InfLab sends no credential from a URL/);
      assert.doesNotMatch(JSON.stringify(r), /PASS|SECRET/, `${url}: the credential is in no output`);
    }
    assert.deepEqual(s.seen, [], 'no request was sent');
    // Without them: fetched.
    const ok = await runCell(`audit: http://127.0.0.1:${s.port}/metrics`, 0, createNotebookContext(DIR, nodeFiles()));
    assert.ok(ok.ok, ok.error?.message);
  } finally {
    await s.close();
  }
});

test('the confirmation of a file outside the workspace is not cut short by the read time bound; a yes is asked once', async () => {
  const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-outside-'));
  try {
    const file = path.join(outside, 'x.log');
    fs.writeFileSync(file, 'hello');
    const asked: string[] = [];
    const files = nodeFiles({
      roots: () => [DIR],
      timeoutMs: { run: 2000 },
      // The user takes longer to answer than a read may take.
      confirm: (p) => new Promise((r) => setTimeout(() => r(!!asked.push(p)), 2500)),
    });
    const o: ReadFileOptions = { purpose: 'run', notebookDir: DIR };
    assert.equal(await files.readFile(file, o), 'hello');
    assert.equal((await files.statFile(file, o))?.type, 'file');
    await (await files.openFile(file, o)).close();
    assert.deepEqual(asked, [fs.realpathSync(file)]);
  } finally {
    fs.rmSync(outside, { recursive: true, force: true });
  }
});
