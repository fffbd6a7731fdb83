/**
 * Planted-key helpers for the secrets tests: a random API key, a search for it (whole, any 12
 * characters of its secret part, base64) in bytes, servers on 127.0.0.1 that send it back in every
 * way a failure can (error bodies that echo it and the request headers, cut across the 500th
 * character; a stream whose text and a malformed chunk carry it; /metrics labels), a closed port,
 * and a notebook of bench cells against all of them.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import type { Notebook } from '../../src/core/notebook/format';
import { closedPort } from './scriptedServer';

export const SECRET = randomBytes(16).toString('hex');
export const KEY = `sk-inflab-planted-${SECRET}`;
/** A second endpoint's key: it must reach that endpoint only, and KEY never reach it. */
export const KEY_B = `sk-inflab-second-${randomBytes(16).toString('hex')}`;

/** Credentials written into an endpoint URL (userinfo, a token query): never shown, saved or sent. */
export const URL_PASSWORD = `pw${randomBytes(12).toString('hex')}`;
export const URL_TOKEN = `tok${randomBytes(12).toString('hex')}`;

/** `base` (http://127.0.0.1:PORT) with a user and password, and with a token query. */
export function credentialUrls(base: string): { userinfo: string; query: string } {
  const u = new URL(base);
  return { userinfo: `http://admin:${URL_PASSWORD}@${u.host}`, query: `http://${u.host}/?token=${URL_TOKEN}` };
}

/** Where a URL credential shows up in bytes: the password, the token. */
export function credentialLeaks(where: string, bytes: Buffer | string): string[] {
  const b = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
  return [URL_PASSWORD, URL_TOKEN]
    .filter((n) => b.includes(n))
    .map(
      (n) =>
        `${where}: "${n.slice(0, 6)}…" at byte ${b.indexOf(n)}: …${b.subarray(Math.max(0, b.indexOf(n) - 80), b.indexOf(n) + 40).toString()}…`,
    );
}

/** A bench cell per endpoint, each under its own setup, for the two-keys test. */
export function twoEndpointNotebook(a: string, b: string): Notebook {
  const cells: Notebook['cells'] = [];
  for (const [name, url] of [
    ['a', a],
    ['b', b],
  ]) {
    cells.push({
      kind: 'code',
      language: 'inflab',
      source: `setup: ${name}\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${url}\n`,
    });
    cells.push({
      kind: 'code',
      language: 'inflab',
      source: `bench: sweep\nsetup: ${name}\ninput: 16 tokens\noutput: 4 tokens\nconcurrency: [1]\nrequests: 2\ntimeout: 5 s\n`,
    });
  }
  return { cells };
}

// ---------------------------------------------------------------- leak search

/** Every way the key could show up in bytes we wrote. */
export const NEEDLES: Buffer[] = [
  Buffer.from(KEY),
  Buffer.from(Buffer.from(KEY).toString('base64')),
  Buffer.from(Buffer.from(`Bearer ${KEY}`).toString('base64')),
  ...Array.from({ length: SECRET.length - 11 }, (_, i) => Buffer.from(SECRET.slice(i, i + 12))),
];

export function leaks(where: string, bytes: Buffer | string): string[] {
  const b = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
  const found: string[] = [];
  for (const n of NEEDLES) {
    const at = b.indexOf(n);
    if (at !== -1)
      found.push(
        `${where}: "${n.toString().slice(0, 24)}…" at byte ${at}: …${b.subarray(Math.max(0, at - 80), at + 40).toString()}…`,
      );
  }
  return found;
}

export function walk(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

// ---------------------------------------------------------------- servers that echo the key back

export interface Echo {
  url: string;
  sawKey: number;
  close(): Promise<void>;
}

export type Behaviour = '401' | '500' | '429' | 'stream';

/** A server that sends the key back wherever it can, in the way `behaviour` fails. */
export async function echoServer(behaviour: Behaviour): Promise<Echo> {
  const state = { sawKey: 0 };
  const server = http.createServer((req, res) => {
    const auth = String(req.headers.authorization ?? '');
    if (auth === `Bearer ${KEY}`) state.sawKey++;
    const headers = JSON.stringify(req.headers);
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '';
      if (behaviour === '401') {
        // The key straddles the 500th character of the body: its first 22 secret characters fall before it.
        const pad = 'x'.repeat(460);
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(
          `${pad}${KEY} {"error": {"message": "Incorrect API key provided: ${KEY}", "type": "invalid_request_error", "headers": ${headers}}}`,
        );
        return;
      }
      if (url.startsWith('/v1/models')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'list',
            data: [{ id: 'qwen3-8b', object: 'model', max_model_len: 4096, owned_by: `echo ${auth}` }],
          }),
        );
        return;
      }
      if (url.startsWith('/metrics')) {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        res.end(
          `# HELP vllm:num_requests_running running\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="qwen3-8b",auth="${auth}"} 0\n` +
            `vllm:prefix_cache_queries_total{model_name="${KEY}"} 10\nvllm:prefix_cache_hits_total{model_name="${KEY}"} 5\nbroken line with ${KEY}\n`,
        );
        return;
      }
      if (url.startsWith('/health')) {
        res.writeHead(200);
        res.end(`ok ${auth}`);
        return;
      }
      if (behaviour === '500' || behaviour === '429') {
        const status = behaviour === '500' ? 500 : 429;
        res.writeHead(status, {
          'content-type': 'application/json',
          ...(status === 429 ? { 'retry-after': '0' } : {}),
        });
        res.end(
          `${' '.repeat(30)}${'y'.repeat(465)}${KEY}${JSON.stringify({ error: { message: `upstream failed for ${auth}`, request_headers: JSON.parse(headers) } })}`,
        );
        return;
      }
      // stream: the key in the generated text (split across chunks), then a malformed chunk carrying it.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const text = `your key is ${KEY}`;
      const parts = [text.slice(0, 20), text.slice(20, 40), text.slice(40)];
      for (const p of parts)
        res.write(
          `data: ${JSON.stringify({ id: 'x', object: 'text_completion', choices: [{ index: 0, text: p, finish_reason: null }] })}\n\n`,
        );
      res.write(`data: {"choices": [{"text": "${KEY}", broken json ${auth}\n\n`);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get sawKey() {
      return state.sawKey;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface Targets {
  servers: Record<Behaviour, Echo>;
  refusedUrl: string;
  close(): Promise<void>;
}

/** All the misbehaving servers, plus a closed port. */
export async function startTargets(): Promise<Targets> {
  const servers = {} as Record<Behaviour, Echo>;
  for (const b of ['401', '500', '429', 'stream'] as Behaviour[]) servers[b] = await echoServer(b);
  const refusedUrl = `http://127.0.0.1:${await closedPort()}`;
  return {
    servers,
    refusedUrl,
    close: async () => void (await Promise.all(Object.values(servers).map((s) => s.close()))),
  };
}

// ---------------------------------------------------------------- the notebook

/** A setup and a small bench sweep per target (failures continue; timeouts short). */
export function benchNotebook(t: Targets): Notebook {
  const { servers, refusedUrl } = t;
  const targets: [string, string][] = [
    ['refused', refusedUrl],
    ['unauthorized', servers['401']!.url],
    ['broken', servers['500']!.url],
    ['busy', servers['429']!.url],
    ['echo', servers.stream!.url],
  ];
  const cells: Notebook['cells'] = [
    { kind: 'markdown', language: 'markdown', source: '# Benchmarks against servers that misbehave' },
  ];
  for (const [name, url] of targets) {
    cells.push({
      kind: 'code',
      language: 'inflab',
      source: `setup: ${name}\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${url}\n`,
    });
    cells.push({
      kind: 'code',
      language: 'inflab',
      source: `bench: sweep\nsetup: ${name}\nname: ${name}-sweep\ninput: 16 tokens\noutput: 8 tokens\nconcurrency: [1, 2]\nrequests: 2\ntimeout: 2 s\nrequest_timeout: 5 s\non_failure: continue\n`,
    });
  }
  return { cells };
}
