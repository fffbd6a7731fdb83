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
import { serializeNotebook } from '../../src/core/notebook/format';
import { benchNotebook, KEY, leaks, SECRET, startTargets, type Targets } from '../support/plantedKey';

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-secrets-inproc-'));

let t: Targets;
before(async () => {
  t = await startTargets();
});
after(async () => {
  await t.close();
  fs.rmSync(TMP, { recursive: true, force: true });
});

test('in process (services.getApiKey): results, findings, progress updates and the saved notebook hold no key', async () => {
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
  assert.doesNotMatch(
    saved + JSON.stringify(progress),
    /Bearer (?!\[redacted\])[A-Za-z0-9._~+/-]{8,}/,
    'an unredacted bearer token',
  );
  // The failures were recorded (so there was something to leak): error kinds from the servers.
  const text = JSON.stringify(results);
  for (const kind of ['401', '500', '429']) assert.ok(text.includes(kind), `the ${kind} failure is in the results`);
});

/**
 * A server that puts the key into everything it controls: the model id (and max_model_len) in
 * GET /v1/models, /metrics metric names and labels, and, one request after another, the places a
 * failure's text is cut: an in-stream error whose key straddles the 300th character, a malformed
 * chunk and a non-SSE line whose key straddles the 120th, an HTTP 400 that echoes only a piece of the
 * secret, and base64 of the Authorization header.
 */
function hostileServer(): Promise<{ url: string; models: string[]; close(): Promise<void> }> {
  return import('node:http').then(async (http) => {
    const models: string[] = [];
    let n = 0;
    const server = http.createServer((req, res) => {
      const url = req.url ?? '';
      const body: Buffer[] = [];
      req.on('data', (c) => body.push(c));
      req.on('end', () => {
        if (url.startsWith('/v1/models')) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              object: 'list',
              data: [{ id: `model-${KEY}`, object: 'model', max_model_len: KEY, owned_by: KEY }],
            }),
          );
          return;
        }
        if (url.startsWith('/metrics')) {
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
          res.end(
            `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="${KEY}"} 1\nvllm:prefix_cache_queries_total{k="${KEY}"} 10\nvllm:prefix_cache_hits_total{k="${KEY}"} 1\nvllm:${SECRET}_total 3\n`,
          );
          return;
        }
        if (!url.startsWith('/v1/')) {
          res.writeHead(200);
          res.end('ok');
          return;
        }
        try {
          models.push(JSON.parse(Buffer.concat(body).toString()).model);
        } catch {
          models.push('(no JSON body)');
        }
        const chunk = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
        const usage = chunk({ choices: [], usage: { prompt_tokens: 16, completion_tokens: 2 } }) + 'data: [DONE]\n\n';
        const k = n++ % 6;
        if (k === 4) {
          // Only a piece of the secret, as services that mask keys show them; and base64 of the header.
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              error: {
                message: `Incorrect API key provided: sk-****${SECRET.slice(4, 20)}****`,
                echoed: Buffer.from(String(req.headers.authorization)).toString('base64'),
              },
            }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ model: `model-${KEY}`, choices: [{ index: 0, text: `a ${KEY}` }] }));
        if (k === 0) res.end(chunk({ model: KEY, choices: [{ index: 0, text: KEY }] }) + usage);
        else if (k === 1) res.end(chunk({ error: { message: `${'e'.repeat(290)}${KEY} and more` } }));
        else if (k === 2) res.end(`data: {"choices": [{"text": "${'m'.repeat(80)}${KEY}" not json\n\n`);
        else if (k === 3) res.end(`${'s'.repeat(100)}${KEY}: not an SSE line\n\n`);
        else
          res.end(
            chunk({
              choices: [{ index: 0, text: 'b' }],
              usage: { prompt_tokens: 16, completion_tokens: 2, note: KEY },
            }) + 'data: [DONE]\n\n',
          );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as import('node:net').AddressInfo).port;
    return {
      url: `http://127.0.0.1:${port}`,
      models,
      close: () =>
        new Promise<void>((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
    };
  });
}

test('a server that names its model after the key and echoes it in every failure: nothing the bench stores or shows holds it', async () => {
  const srv = await hostileServer();
  try {
    const progress: ProgressUpdate[] = [];
    const ctx = createNotebookContext(TMP, { getApiKey: async () => KEY });
    const setup = await runCell(`setup: named\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${srv.url}\n`, 0, ctx);
    assert.ok(setup.ok, setup.error?.message);
    const r = await runCell(
      'bench: sweep\ninput: 16 tokens\noutput: 8 tokens\nconcurrency: [1]\nrequests: 6\non_failure: continue\n',
      1,
      ctx,
      { onProgress: (u) => progress.push(u) },
    );
    const text = JSON.stringify(r);
    const found = [...leaks('result', text), ...leaks('progress updates', JSON.stringify(progress))];
    assert.deepStrictEqual(found, [], `the key leaked:\n${found.join('\n')}`);
    // Requests named the model as the server did; what is shown names it redacted, and says why.
    assert.equal(srv.models.length, 6, 'six requests reached the server');
    assert.ok(
      srv.models.every((m) => m === `model-${KEY}`),
      'requests carry the model id the server gave',
    );
    assert.equal((r.values as Record<string, unknown>).model, 'model-[redacted]');
    assert.match(text, /contained the API key/);
    // The failures were recorded (so there was text to leak), each of its kind.
    for (const kind of ['api-error', 'malformed-json', 'malformed-sse', 'bad-request'])
      assert.ok(text.includes(kind), `a ${kind} failure is in the result`);
    assert.match(text, /\[redacted\]/);
  } finally {
    await srv.close();
  }
});
