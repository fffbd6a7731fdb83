/**
 * Where a streaming client's CPU goes, floor first: the same mock (mockServer.ts, its own process)
 * read by three clients in this process, one after another, for a fixed time each —
 *
 *   node:net   raw keep-alive sockets that write a request and wait for its end, with no HTTP parsing
 *              (a response ends at the mock's last chunk, "0\r\n\r\n" at the end of a read): the
 *              kernel's and libuv's share, what any client on Node pays;
s *   undici     Agent.dispatch with a handler that only counts ends (llhttp, undici's pool and timers);
 *   InfLab     sendRequest (client.ts): SSE on the raw bytes, every chunk stamped, usage, errors.
 *
 * Two loads: many tokens a request (the per-chunk cost, at a chunk rate two cores carry) and one
 * token a request (the per-request cost: connection reuse, request write, response head, end). The
 * bench adds its load threads on top (section 1 reports its own CPU a chunk over the window).
 */
import * as net from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import { createAgent, sendRequest, type ClientConfig } from '../../src/core/bench/client';
import { startMock } from './clientAccuracy';
import { r1 } from './stats';

export interface FloorRow {
  client: 'node:net' | 'undici' | 'InfLab';
  load: string;
  streams: number;
  requests: number;
  chunks: number;
  cpu_us_per_chunk: number;
  cpu_us_per_request: number;
  /** The kernel's share of that CPU (sockets, epoll). */
  system_share: number;
  cores_busy: number;
}

/** Runs `streams` closed loops until `stop()`; `ended` once per response that ended. */
type Loop = (stop: () => boolean, ended: () => void) => Promise<void>;

const MODEL = 'mock-model';

function netLoop(port: number, streams: number, body: string): Loop {
  const req = `POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  return (stop, ended) =>
    new Promise((resolve) => {
      let open = streams;
      for (let i = 0; i < streams; i++) {
        const s = net.connect(port, '127.0.0.1');
        s.setNoDelay(true);
        s.on('connect', () => s.write(req));
        s.on('error', () => undefined);
        s.on('close', () => --open || resolve());
        s.on('data', (d: Buffer) => {
          // The mock's last write of a response ends with the zero-length chunk.
          if (d.length >= 5 && d.indexOf('0\r\n\r\n', d.length - 5) >= 0) {
            ended();
            if (stop()) s.end();
            else s.write(req);
          }
        });
      }
    });
}

function undiciLoop(agent: Dispatcher, url: string, streams: number, body: string): Loop {
  const one = (ended: () => void) =>
    new Promise<void>((resolve) =>
      agent.dispatch(
        {
          origin: url,
          path: '/v1/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        {
          onRequestStart() {},
          onResponseStart() {},
          onResponseData() {},
          onResponseEnd() {
            ended();
            resolve();
          },
          onResponseError() {
            resolve();
          },
        },
      ),
    );
  return async (stop, ended) => {
    await Promise.all(
      Array.from({ length: streams }, async () => {
        while (!stop()) await one(ended);
      }),
    );
  };
}

function inflabLoop(agent: Dispatcher, url: string, streams: number, body: string, tokens: number): Loop {
  const cfg: ClientConfig = {
    baseUrl: url,
    api: 'completions',
    model: MODEL,
    idleTimeoutMs: 60_000,
    requestTimeoutMs: 0,
    doneGraceMs: 2_000,
    topP: 1,
    topK: -1,
    temperature: 0,
  };
  return async (stop, ended) => {
    await Promise.all(
      Array.from({ length: streams }, async () => {
        while (!stop()) {
          const r = await sendRequest(agent, cfg, { prompt: [], outputTokens: tokens, body });
          if (!r.ok) throw new Error(`floor: ${r.errorKind}: ${r.errorMessage}`);
          ended();
        }
      }),
    );
  };
}

/**
 * One client at a time on one mock, `seconds` measured after `warmS` of warm-up; chunks are what the
 * mock sent (tokens a request × requests), so every client is charged per the same unit.
 */
export async function clientFloor(
  root: string,
  opts: { streams: number; tokens: number; ttftMs: number; itlMs: number; seconds: number; warmS?: number },
): Promise<FloorRow[]> {
  const mock = await startMock(root, opts.ttftMs, opts.itlMs);
  const body = JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: opts.tokens, stream: true });
  const load = `${opts.tokens} token${opts.tokens > 1 ? 's' : ''}/request, ITL ${opts.itlMs} ms, TTFT ${opts.ttftMs} ms`;
  const rows: FloorRow[] = [];
  try {
    const port = Number(new URL(mock.url).port);
    for (const client of ['node:net', 'undici', 'InfLab'] as const) {
      const agent: Dispatcher =
        client === 'InfLab' ? createAgent(opts.streams) : new Agent({ connections: opts.streams, pipelining: 1 });
      const loop =
        client === 'node:net'
          ? netLoop(port, opts.streams, body)
          : client === 'undici'
            ? undiciLoop(agent, mock.url, opts.streams, body)
            : inflabLoop(agent, mock.url, opts.streams, body, opts.tokens);
      let measuring = false;
      let stopping = false;
      let requests = 0;
      let cpu0 = process.cpuUsage();
      let t0 = 0;
      const running = loop(
        () => stopping,
        () => {
          if (measuring) requests++;
        },
      );
      await new Promise((r) => setTimeout(r, (opts.warmS ?? 1.5) * 1000));
      cpu0 = process.cpuUsage();
      t0 = performance.now();
      measuring = true;
      await new Promise((r) => setTimeout(r, opts.seconds * 1000));
      measuring = false;
      const cpu = process.cpuUsage(cpu0);
      const wall = performance.now() - t0;
      stopping = true;
      await running;
      await agent.close();
      const us = cpu.user + cpu.system;
      const chunks = requests * opts.tokens;
      rows.push({
        client,
        load,
        streams: opts.streams,
        requests,
        chunks,
        cpu_us_per_chunk: r1(us / chunks),
        cpu_us_per_request: r1(us / requests),
        system_share: Math.round((cpu.system / us) * 100) / 100,
        cores_busy: Math.round((us / 1000 / wall) * 100) / 100,
      });
    }
  } finally {
    await mock.close();
  }
  return rows;
}
