/**
 * A standalone mock OpenAI-compatible streaming server for the client-accuracy benchmark, run as its
 * own process (so it never shares the client's event loop). Every stream has a nominal TTFT and ITL;
 * the server writes its chunks on that schedule as well as it can and records, per request, when the
 * read holding its first byte reached the process, when the whole request had been read, and when it
 * actually handed each chunk to the kernel (epoch ms, sub-ms): the truth the client is judged by.
 *
 * Built for throughput, so the rig measures the client and not the mock: raw HTTP/1.1 on node:net
 * (keep-alive, chunked transfer encoding, one socket write per chunk), every due chunk of every stream
 * sent from one timer in slices of at most SLICE_MS (so requests are read between them), chunk JSON
 * built by concatenation. Under load it still slips; when a stream
 * falls more than one ITL behind its schedule it re-anchors instead of bursting.
 *
 * Control over IPC (child_process.fork):
 *   parent → child: { type: 'take' } → { type: 'records', records, cpu } (and forget them),
 *                   { type: 'close' }
 *   child → parent: { type: 'listening', port }
 * Options come from the environment: MOCK_TTFT_MS (50), MOCK_ITL_MS (10).
 */
import * as net from 'node:net';

const TTFT = Number(process.env.MOCK_TTFT_MS ?? 50);
const ITL = Number(process.env.MOCK_ITL_MS ?? 10);
const MODEL = 'mock-model';

const epoch = () => performance.timeOrigin + performance.now();

export interface TruthRecord {
  requestId: string;
  /** When the read that brought the request's first byte reached this process (its 'data' event), epoch ms. */
  firstByte: number;
  /** When the whole request had been read, epoch ms. */
  arrived: number;
  /** When each content chunk was written, epoch ms. */
  chunks: number[];
}

interface Stream {
  sock: net.Socket;
  rid: string;
  id: string;
  n: number;
  k: number;
  due: number;
  firstByte: number;
  arrived: number;
  sent: Float64Array;
  promptTokens: number;
  onDone: () => void;
}

let finished: TruthRecord[] = [];

// ---- a binary min-heap of streams by due time ----
const heap: Stream[] = [];
function push(s: Stream) {
  heap.push(s);
  let i = heap.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (heap[p].due <= s.due) break;
    heap[i] = heap[p];
    i = p;
  }
  heap[i] = s;
}
function pop(): Stream {
  const top = heap[0];
  const last = heap.pop()!;
  if (heap.length) {
    let i = 0;
    const n = heap.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && heap[r].due < heap[l].due ? r : l;
      if (heap[c].due >= last.due) break;
      heap[i] = heap[c];
      i = c;
    }
    heap[i] = last;
  }
  return top;
}

let timer: NodeJS.Timeout | undefined;
let timerAt = Infinity;
function arm() {
  if (!heap.length || resumeQueued) return;
  const at = heap[0].due;
  if (timer && at >= timerAt) return;
  if (timer) clearTimeout(timer);
  timerAt = at;
  timer = setTimeout(tick, Math.max(0, at - performance.now()));
}

const frame = (s: string) => {
  const len = Buffer.byteLength(s);
  return `${len.toString(16)}\r\n${s}\r\n`;
};

/**
 * How long one tick may write before it lets the loop read sockets. A server that is behind on its
 * schedule would otherwise write for as long as chunks are due and read no request meanwhile (at
 * 1,000 streams on 2 cores, a second), and every new request's wait would land in the server's share.
 */
const SLICE_MS = 2;
let resumeQueued = false;

function tick() {
  timer = undefined;
  timerAt = Infinity;
  resumeQueued = false;
  // Send everything due (a quarter millisecond early at most: timers fire late, never early).
  let now = performance.now();
  const sliceEnd = now + SLICE_MS;
  for (let guard = 0; heap.length && heap[0].due <= now + 0.25 && guard < 1_000_000; guard++) {
    if (now > sliceEnd) {
      // Still behind: read what has come in (poll phase), then carry on (check phase).
      resumeQueued = true;
      setImmediate(tick);
      return;
    }
    const s = pop();
    if (s.sock.destroyed) continue;
    const last = s.k === s.n - 1;
    const body = `data: {"id":"${s.id}","object":"text_completion","created":1700000000,"model":"${MODEL}","choices":[{"index":0,"text":" t${s.k}","logprobs":null,"finish_reason":${last ? '"length"' : 'null'},"stop_reason":null}],"usage":null}\n\n`;
    let out = frame(body);
    if (last) {
      const usage = `data: {"id":"${s.id}","object":"text_completion","created":1700000000,"model":"${MODEL}","choices":[],"usage":{"prompt_tokens":${s.promptTokens},"total_tokens":${s.promptTokens + s.n},"completion_tokens":${s.n}}}\n\n`;
      out += frame(usage) + frame('data: [DONE]\n\n') + '0\r\n\r\n';
    }
    s.sock.write(out);
    now = performance.now();
    s.sent[s.k] = performance.timeOrigin + now;
    s.k++;
    if (last) {
      finished.push({ requestId: s.rid, firstByte: s.firstByte, arrived: s.arrived, chunks: Array.from(s.sent) });
      s.onDone();
      continue;
    }
    let next = s.due + ITL;
    if (next < now - ITL) next = now; // fell behind by more than one ITL: re-anchor, do not burst
    s.due = next;
    push(s);
  }
  arm();
}

// ---- HTTP/1.1, just enough for the bench client ----
function respond(sock: net.Socket, status: string, type: string, body: string) {
  sock.write(
    `HTTP/1.1 ${status}\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: keep-alive\r\n\r\n${body}`,
  );
}

let seq = 0;
const server = net.createServer((sock) => {
  sock.setNoDelay(true);
  let buf: Buffer = Buffer.alloc(0);
  /** When the read holding the first byte of the request now being parsed arrived. */
  let firstByte = NaN;
  let busy = false;
  const onData = () => {
    while (!busy) {
      const h = buf.indexOf('\r\n\r\n');
      if (h < 0) return;
      const head = buf.toString('latin1', 0, h);
      const lines = head.split('\r\n');
      const [method, path] = lines[0].split(' ');
      let len = 0;
      let rid = '';
      for (let i = 1; i < lines.length; i++) {
        const c = lines[i].indexOf(':');
        const name = lines[i].slice(0, c).trim().toLowerCase();
        if (name === 'content-length') len = Number(lines[i].slice(c + 1).trim());
        else if (name === 'x-request-id') rid = lines[i].slice(c + 1).trim();
      }
      if (buf.length < h + 4 + len) return;
      const body = buf.toString('utf8', h + 4, h + 4 + len);
      buf = buf.subarray(h + 4 + len);
      const arrived = epoch();
      const first = firstByte;
      // A next request already in the buffer came in the same read (the client does not pipeline, so rarely).
      if (!buf.length) firstByte = NaN;
      if (method === 'GET' && path === '/v1/models') {
        respond(
          sock,
          '200 OK',
          'application/json',
          JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model', max_model_len: 32768 }] }),
        );
      } else if (method === 'GET' && path === '/health') {
        respond(sock, '200 OK', 'text/plain', '');
      } else if (method === 'POST' && path === '/v1/completions') {
        let n: number;
        let promptTokens: number;
        try {
          const j = JSON.parse(body);
          n = Math.max(1, Number(j.max_tokens ?? 16));
          promptTokens = Array.isArray(j.prompt) ? j.prompt.length : String(j.prompt ?? '').length;
        } catch {
          respond(sock, '400 Bad Request', 'application/json', '{"error":{"message":"body is not JSON","code":400}}');
          continue;
        }
        sock.write(
          'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n',
        );
        busy = true; // one request at a time per connection (the client does not pipeline)
        const t = performance.now();
        push({
          sock,
          rid,
          id: `cmpl-${seq++}`,
          n,
          k: 0,
          due: t + TTFT,
          firstByte: first,
          arrived,
          sent: new Float64Array(n),
          promptTokens,
          onDone: () => {
            busy = false;
            if (buf.length) setImmediate(onData);
          },
        });
        arm();
      } else {
        respond(
          sock,
          '404 Not Found',
          'application/json',
          JSON.stringify({ error: { message: `no route ${method} ${path}`, code: 404 } }),
        );
      }
    }
  };
  sock.on('data', (d: Buffer) => {
    if (!buf.length) firstByte = epoch();
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    onData();
  });
  sock.on('error', () => undefined);
});

server.listen({ port: 0, host: '127.0.0.1', backlog: 8192 }, () => {
  const port = (server.address() as net.AddressInfo).port;
  process.send?.({ type: 'listening', port });
});

process.on('message', (m: { type?: string }) => {
  if (m?.type === 'take') {
    const records = finished;
    finished = [];
    process.send?.({ type: 'records', records, cpu: process.cpuUsage() });
  } else if (m?.type === 'close') {
    if (timer) clearTimeout(timer);
    server.close();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
