/**
 * The streaming client: one POST per request on undici's raw dispatch API (no stream objects, no
 * promise per chunk), SSE parsed incrementally, and one monotonic timestamp taken per socket read
 * as the bytes arrive — before any parsing — and given to every event that read completes.
 *
 * Per chunk the work is kept minimal (the client's own CPU time is measurement error under load): the
 * SSE lines are found on the raw bytes undici hands over (no string is made for an ordinary chunk),
 * and an ordinary content chunk — `{…"choices":[{…}`, with no `"usage":{` and no `"error"` — is
 * recognised on those bytes and counted without JSON.parse (about 0.8 µs of CPU per chunk, the
 * timestamp included, against 1.1–1.8 µs with latin1 strings). The first chunk of every stream, the
 * usage chunk and anything else are decoded and parsed in full. Cancel listeners fan out from one
 * listener per signal.
 *
 * Timestamps are per read: chunks that arrive in one socket read (the thread fell behind, or the
 * server wrote them together) get times microseconds apart, and no client can separate them afterwards; vLLM's
 * own client (aiohttp, one timestamp per chunk it iterates) has the same limit. The bench reports the
 * share of such gaps (see report.ts) so a point read in bursts is visible.
 *
 * Requests follow PHYSICS.md's benchmark rules: prompts are token-id lists of exact length,
 * `ignore_eos` + `min_tokens` + `max_tokens` fix the output length, top_p/top_k are set (so vLLM keeps
 * its fused sampler), no request-level `seed`, and `stream_options.include_usage` is on.
 *
 * The API key only ever goes into the Authorization header; every message that could carry text
 * from the server passes through redact() first.
 */
import { Agent, type Dispatcher } from 'undici';
import type { ErrorKind, RequestOutcome } from './metrics';

export type BenchApi = 'completions' | 'chat';

export interface ClientConfig {
  /** Base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted). */
  baseUrl: string;
  api: BenchApi;
  model: string;
  apiKey?: string;
  /** No bytes for this long → the request ends with kind "timeout". */
  idleTimeoutMs: number;
  /** Whole-request limit, ms (0 = none). */
  requestTimeoutMs: number;
  /** After the usage chunk, how long to wait for [DONE] before ending with kind "no-done". */
  doneGraceMs: number;
  topP: number;
  topK: number;
  temperature: number;
  /** Extra JSON fields merged into every request body. */
  extraBody?: Record<string, unknown>;
  /** Extra headers (never logged). */
  headers?: Record<string, string>;
}

export interface RequestSpec {
  /** Token ids (completions) or text (chat). */
  prompt: number[] | string;
  outputTokens: number;
  /** Sent as X-Request-Id (vLLM uses it as the request id); lets a server's log be matched. */
  requestId?: string;
  /** A body built ahead of time with buildBody (keeps JSON work out of the measured window). */
  body?: string;
}

/**
 * What one request produced; times are absolute performance.now() ms of the thread that sent it.
 * `sentAt` is when undici began writing the request to a connection: a reused keep-alive socket is
 * written only after a turn of the event loop (undici checks an idle socket for a late close first),
 * and that wait is the client's, not the server's, so it is not part of TTFT. A request never
 * written (refused, cancelled) has the time sendRequest was called.
 */
export interface RawResult extends RequestOutcome {
  sentAt: number;
  chunkAt: number[];
  endAt: number;
}

export const now: () => number = () => performance.now();

/**
 * Redaction. A server can send the key back in any text it controls (an error body, a model id, a
 * chunk), whole or in part: cut to a length, masked in the middle, encoded (base64 inside an echoed
 * header, hex, URL- or JSON-escaped), spelled out with separators ("s k - a b c", "sk:ab:cd"), or
 * reversed. Matching is therefore done on a skeleton of both sides — letters and digits only,
 * ASCII lower-cased, every separator dropped — so any spacing or punctuation between the characters
 * is seen through, and the key's encodings are added as further forms. Every run of REDACT_PIECE or
 * more skeleton characters that also occurs in one of the forms is removed (with the separators
 * inside it). Keys shorter than REDACT_MIN_KEY are only removed whole (a short key's pieces are not
 * distinctive).
 */
export const REDACT_PIECE = 8;
const REDACT_MIN_KEY = 12;
const MARK = '[redacted]';

/**
 * The forms a key can come back in: itself and reversed; JSON-, URL- and \\u-escaped; hex (plain,
 * \\x, 0x or % per byte; separators between bytes need no form of their own); base64 (standard and
 * URL-safe) at each byte alignment; and the encodings of the reversed key.
 */
function keyForms(key: string): string[] {
  const forms = new Set<string>();
  for (const k of [key, [...key].reverse().join('')]) {
    const bytes = Buffer.from(k);
    const hex = bytes.toString('hex');
    forms.add(k);
    forms.add(JSON.stringify(k).slice(1, -1));
    forms.add(encodeURIComponent(k));
    forms.add(hex);
    forms.add([...k].map((c) => `u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join(''));
    forms.add(hex.replace(/../g, 'x$&'));
    forms.add(hex.replace(/../g, '0x$&'));
    for (let pad = 0; pad < 3; pad++) {
      // The key's bytes at offset `pad` within a base64 group: drop the characters the neighbours share.
      const b64 = Buffer.concat([Buffer.alloc(pad), bytes])
        .toString('base64')
        .replace(/=+$/, '');
      const core = b64.slice(pad ? 4 : 0, b64.length - 3);
      if (core.length >= REDACT_PIECE) {
        forms.add(core);
        forms.add(core.replace(/\+/g, '-').replace(/\//g, '_'));
      }
    }
  }
  return [...forms];
}

const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

/** Letters and digits of a text, ASCII lower-cased, with the index each came from. */
function skeleton(text: string): { s: string; at: number[] } {
  let s = '';
  const at: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (!isAlnum(c)) continue;
    s += c >= 65 && c <= 90 ? String.fromCharCode(c + 32) : text[i];
    at.push(i);
  }
  return { s, at };
}

interface Redactor {
  key: string;
  /** Windows of the forms as they are (lower-cased): a key that is mostly separators is still caught. */
  raw: Set<string>;
  /** Windows of the forms' skeletons: the key spelled out with any separators is caught. */
  bare: Set<string>;
}
let lastRedactor: Redactor | undefined;

function windows(s: string, into: Set<string>) {
  for (let i = 0; i + REDACT_PIECE <= s.length; i++) into.add(s.slice(i, i + REDACT_PIECE));
}

function redactorFor(key: string): Redactor {
  if (lastRedactor?.key === key) return lastRedactor;
  const raw = new Set<string>();
  const bare = new Set<string>();
  for (const f of keyForms(key)) {
    windows(asciiLower(f), raw);
    windows(skeleton(f).s, bare);
  }
  lastRedactor = { key, raw, bare };
  return lastRedactor;
}

/** [from, to) ranges of `text` whose windows (through `at`, index → text index) are pieces. */
function matches(s: string, at: ((i: number) => number) | number[], pieces: Set<string>, out: [number, number][]) {
  const pos = typeof at === 'function' ? at : (i: number) => at[i];
  for (let i = 0; i + REDACT_PIECE <= s.length; i++)
    if (pieces.has(s.slice(i, i + REDACT_PIECE))) out.push([pos(i), pos(i + REDACT_PIECE - 1) + 1]);
}

/** Remove every stretch of the text that shares REDACT_PIECE or more characters with a form of the key. */
function redactKey(text: string, key: string): string {
  if (key.length < REDACT_MIN_KEY) return text.split(key).join(MARK);
  const r = redactorFor(key);
  const found: [number, number][] = [];
  matches(asciiLower(text), (i) => i, r.raw, found);
  const sk = skeleton(text);
  matches(sk.s, sk.at, r.bare, found);
  if (!found.length) return text;
  found.sort((a, b) => a[0] - b[0]);
  // Overlapping or touching stretches are one echo.
  const ranges: [number, number][] = [];
  for (const [a, b] of found) {
    const last = ranges[ranges.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else ranges.push([a, b]);
  }
  let out = '';
  let pos = 0;
  for (const [a, b] of ranges) {
    out += text.slice(pos, a) + MARK;
    pos = b;
  }
  return out + text.slice(pos);
}

/**
 * Remove the key (whole, in part, or encoded; see above) and anything that looks like a bearer token
 * or an Authorization value from a text meant to be shown or stored.
 */
export function redact(text: string, key?: string): string {
  let s = text;
  if (key && key.length >= 4) s = redactKey(s, key);
  return s
    .replace(/(authorization["']?\s*[:=]\s*["']?)(bearer\s+)?[^\s"',}]+/gi, '$1[redacted]')
    .replace(/bearer\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]{4,}/gi, 'Bearer [redacted]');
}

/** The first `n` characters of a server's text, redacted before the cut (a cut through the key would leave part of it). */
export function redactCut(text: string, n: number, key?: string): string {
  return redact(text.slice(0, n + 1024), key).slice(0, n);
}

/**
 * Redact every string in a value (objects and arrays walked, in place), for results assembled from
 * what a server sent. Numbers and other values are left as they are.
 */
export function redactDeep<T>(value: T, key?: string): T {
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return redact(v, key);
    if (v === null || typeof v !== 'object' || depth > 64) return v;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const x = v[i];
        if (typeof x === 'number') continue;
        v[i] = walk(x, depth + 1);
      }
      return v;
    }
    if (ArrayBuffer.isView(v)) return v;
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) o[k] = walk(o[k], depth + 1);
    return v;
  };
  return walk(value, 0) as T;
}

export function normalizeBaseUrl(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/** An undici Agent sized for a sweep: enough connections for the largest point, no pipelining. */
export function createAgent(connections: number): Agent {
  return new Agent({
    connections: Math.max(1, connections),
    pipelining: 1,
    keepAliveTimeout: 30_000,
    connectTimeout: 10_000,
  });
}

export function buildBody(cfg: ClientConfig, spec: RequestSpec): string {
  const common = {
    model: cfg.model,
    max_tokens: spec.outputTokens,
    min_tokens: spec.outputTokens,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
    temperature: cfg.temperature,
    top_p: cfg.topP,
    top_k: cfg.topK,
    ...(cfg.extraBody ?? {}),
  };
  if (cfg.api === 'chat') {
    const text = typeof spec.prompt === 'string' ? spec.prompt : spec.prompt.join(' ');
    return JSON.stringify({ ...common, messages: [{ role: 'user', content: text }] });
  }
  return JSON.stringify({ ...common, prompt: spec.prompt });
}

function classifyStatus(status: number): ErrorKind {
  if (status === 429) return 'rate-limited';
  if (status >= 500) return 'server-error';
  return 'bad-request';
}

function classifyError(err: any): { kind: ErrorKind; message: string } {
  const code: string = err?.code ?? err?.cause?.code ?? '';
  const msg = `${err?.message ?? err}${code && !String(err?.message).includes(code) ? ` (${code})` : ''}`;
  if (err?.name === 'BenchTimeout') return { kind: 'timeout', message: err.message };
  if (err?.name === 'BenchCancel' || err?.name === 'AbortError' || code === 'UND_ERR_ABORTED')
    return { kind: 'cancelled', message: 'cancelled' };
  if (code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT')
    return { kind: 'timeout', message: msg };
  if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL'].includes(code))
    return { kind: 'connect', message: msg };
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE' || code === 'UND_ERR_CLOSED')
    return { kind: 'reset', message: msg };
  return { kind: 'client', message: msg };
}

function namedError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}

const MAX_ERROR_BODY = 2048;

/** latin1 text (one char per byte) back to the UTF-8 string its bytes encode. */
const utf8 = (latin1: string) => Buffer.from(latin1, 'latin1').toString('utf8');

/**
 * One 'abort' listener per signal, fanning out to the requests in flight: EventTarget checks every
 * listener already added on each add and remove, which is quadratic with a thousand streams.
 */
const abortFans = new WeakMap<AbortSignal, Set<() => void>>();
function onAbortOf(signal: AbortSignal, fn: () => void): () => void {
  let fan = abortFans.get(signal);
  if (!fan) {
    const f = new Set<() => void>();
    fan = f;
    abortFans.set(signal, f);
    signal.addEventListener(
      'abort',
      () => {
        for (const g of [...f]) g();
        f.clear();
      },
      { once: true },
    );
  }
  const set = fan;
  set.add(fn);
  return () => void set.delete(fn);
}

const DATA = Buffer.from('data:');
const EVENT = Buffer.from('event:');
const ID = Buffer.from('id:');
const RETRY = Buffer.from('retry:');
/** Appended when the response ends, so a last event without its blank line is still dispatched. */
const END_OF_STREAM = Buffer.from('\n\n');

function startsWith(b: Buffer, pos: number, end: number, p: Buffer): boolean {
  if (end - pos < p.length) return false;
  for (let i = 0; i < p.length; i++) if (b[pos + i] !== p[i]) return false;
  return true;
}

/** `"choices":[{` after the opening quote, `"usage":{` and `"error"` likewise. */
const CHOICES = Buffer.from('choices":[{');
const USAGE = Buffer.from('usage":{');
const ERROR = Buffer.from('error"');

/**
 * An ordinary content chunk, decided on the bytes: a JSON object with `"choices":[{` and neither
 * `"usage":{` nor `"error"`. One pass over the bytes, looking only after each quote.
 */
export function isPlainChunk(b: Buffer, s: number, e: number): boolean {
  if (e - s < 2 || b[s] !== 123 /* { */ || b[e - 1] !== 125 /* } */) return false;
  let choices = false;
  for (let i = s + 1; i < e - 1; i++) {
    if (b[i] !== 34 /* " */) continue;
    const c = b[i + 1];
    if (c === 99 /* c */) {
      if (!choices && startsWith(b, i + 1, e, CHOICES)) choices = true;
    } else if (c === 117 /* u */) {
      if (startsWith(b, i + 1, e, USAGE)) return false;
    } else if (c === 101 /* e */) {
      if (startsWith(b, i + 1, e, ERROR)) return false;
    }
  }
  return choices;
}

/**
 * Send one streaming request. Never throws and never rejects: every outcome, including a
 * refused connection, ends in a RawResult with an error kind.
 */
export function sendRequest(
  dispatcher: Dispatcher,
  cfg: ClientConfig,
  spec: RequestSpec,
  signal?: AbortSignal,
): Promise<RawResult> {
  return new Promise<RawResult>((resolve) => {
    const base = normalizeBaseUrl(cfg.baseUrl);
    const u = new URL(base);
    const path = `${u.pathname.replace(/\/$/, '')}/v1/${cfg.api === 'chat' ? 'chat/completions' : 'completions'}`;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(cfg.headers ?? {}),
    };
    if (cfg.apiKey) headers.authorization = `Bearer ${cfg.apiKey}`;
    if (spec.requestId) headers['x-request-id'] = spec.requestId;
    const body = spec.body ?? buildBody(cfg, spec);

    const chunkAt: number[] = [];
    let status = 0;
    let errBody = '';
    /** An incomplete line carried over to the next read (copied). */
    let rest: Buffer | undefined;
    /** The current event's data as latin1 text, when it spans lines or reads. */
    let data: string | undefined;
    let done = false;
    let usageSeen = false;
    let promptTokens: number | undefined;
    let outputTokens: number | undefined;
    let cachedTokens: number | undefined;
    let finished = false;
    let controller: Dispatcher.DispatchController | undefined;
    let failure: { kind: ErrorKind; message: string } | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    let totalTimer: NodeJS.Timeout | undefined;
    let offAbort: (() => void) | undefined;
    let sentAt = now();

    const finish = (end: number) => {
      if (finished) return;
      finished = true;
      if (graceTimer) clearTimeout(graceTimer);
      if (totalTimer) clearTimeout(totalTimer);
      offAbort?.();
      const r: RawResult = { sentAt, chunkAt, endAt: end, promptTokens, outputTokens, cachedTokens, ok: false };
      if (status) r.httpStatus = status;
      if (failure) {
        r.errorKind = failure.kind;
        r.errorMessage = redact(failure.message, cfg.apiKey);
      } else if (status !== 200) {
        r.errorKind = classifyStatus(status);
        // Redact before cutting to 500 characters: a cut through the key would leave part of it unredacted.
        r.errorMessage = `HTTP ${status}: ${redactCut(errBody.trim(), 500, cfg.apiKey) || '(empty body)'}`;
      } else if (done || usageSeen) {
        if (!chunkAt.length) {
          r.errorKind = 'empty';
          r.errorMessage = 'the stream ended without a chunk carrying a choice';
        } else {
          r.ok = true;
          if (!usageSeen) {
            r.errorKind = 'missing-usage';
            r.errorMessage =
              'no usage chunk (stream_options.include_usage ignored?): output tokens counted from chunks';
            r.outputTokens = chunkAt.length;
          } else if (!done) {
            r.errorKind = 'no-done';
            r.errorMessage = `no "data: [DONE]" within ${cfg.doneGraceMs} ms after the usage chunk`;
          }
        }
      } else {
        r.errorKind = 'truncated';
        r.errorMessage = `the stream closed after ${chunkAt.length} chunks without usage or [DONE]`;
      }
      resolve(r);
    };
    const fail = (kind: ErrorKind, message: string) => {
      if (failure || finished) return;
      failure = { kind, message };
      controller?.abort(namedError('BenchFail', message));
      // abort() reaches onResponseError, which finishes; if the request had not started, finish now.
      if (!controller) finish(now());
    };
    const onAbort = () => fail('cancelled', 'cancelled');
    if (signal) {
      if (signal.aborted) {
        failure = { kind: 'cancelled', message: 'cancelled before it was sent' };
        finish(sentAt);
        return;
      }
      offAbort = onAbortOf(signal, onAbort);
    }
    if (cfg.requestTimeoutMs > 0)
      totalTimer = setTimeout(
        () => fail('timeout', `no complete response within ${cfg.requestTimeoutMs} ms (request timeout)`),
        cfg.requestTimeoutMs,
      );

    // `payload` is latin1 (see the header): ASCII tests work on it directly; decode before parsing.
    const onEvent = (payload: string, t: number) => {
      if (payload === '[DONE]') {
        done = true;
        return;
      }
      const n = payload.length;
      if (
        chunkAt.length > 0 &&
        payload.charCodeAt(0) === 123 /* { */ &&
        payload.charCodeAt(n - 1) === 125 /* } */ &&
        payload.includes('"choices":[{') &&
        !payload.includes('"usage":{') &&
        !payload.includes('"error"')
      ) {
        chunkAt.push(t);
        return;
      }
      let obj: any;
      try {
        obj = JSON.parse(utf8(payload));
      } catch {
        fail('malformed-json', `a chunk is not JSON: ${redactCut(utf8(payload.slice(0, 4096)), 120, cfg.apiKey)}`);
        return;
      }
      if (obj === null || typeof obj !== 'object') {
        fail(
          'malformed-json',
          `a chunk is not a JSON object: ${redactCut(utf8(payload.slice(0, 4096)), 120, cfg.apiKey)}`,
        );
        return;
      }
      if (obj.error) {
        const m = typeof obj.error === 'string' ? obj.error : (obj.error.message ?? JSON.stringify(obj.error));
        fail('api-error', `error in the stream: ${redactCut(String(m), 300, cfg.apiKey)}`);
        return;
      }
      const choices = obj.choices;
      if (Array.isArray(choices) && choices.length) chunkAt.push(t);
      const usage = obj.usage;
      if (usage && typeof usage === 'object') {
        usageSeen = true;
        if (typeof usage.prompt_tokens === 'number') promptTokens = usage.prompt_tokens;
        if (typeof usage.completion_tokens === 'number') outputTokens = usage.completion_tokens;
        const c = usage.prompt_tokens_details?.cached_tokens;
        if (typeof c === 'number') cachedTokens = c;
        if (!done && cfg.doneGraceMs >= 0 && !graceTimer) {
          graceTimer = setTimeout(() => {
            if (!done && !finished) {
              controller?.abort(namedError('BenchGrace', 'no [DONE]'));
            }
          }, cfg.doneGraceMs);
        }
      }
    };

    // The current event's data when it is one line inside the read being scanned (the common case):
    // a range of that read's bytes, checked in place without making a string.
    let dBuf: Buffer | undefined;
    let dS = 0;
    let dE = 0;
    const dispatch = (t: number) => {
      if (dBuf) {
        const b = dBuf;
        dBuf = undefined;
        if (chunkAt.length > 0 && isPlainChunk(b, dS, dE)) chunkAt.push(t);
        else onEvent(b.toString('latin1', dS, dE), t);
      } else if (data !== undefined) {
        const d = data;
        data = undefined;
        onEvent(d, t);
      }
    };
    /** Scan one read's bytes: SSE lines, an event per blank line, every event stamped with the read's time. */
    const onBytes = (chunk: Buffer, t: number) => {
      let buf = chunk;
      if (rest) {
        buf = Buffer.concat([rest, chunk]);
        rest = undefined;
      }
      const n = buf.length;
      let pos = 0;
      while (pos < n) {
        const nl = buf.indexOf(10, pos);
        if (nl < 0) break;
        let end = nl;
        if (end > pos && buf[end - 1] === 13) end--;
        if (end === pos) {
          dispatch(t);
          if (failure) return;
        } else if (startsWith(buf, pos, end, DATA)) {
          const v = pos + 5 < end && buf[pos + 5] === 32 ? pos + 6 : pos + 5;
          if (dBuf === undefined && data === undefined) {
            dBuf = buf;
            dS = v;
            dE = end;
          } else {
            // A second data line of one event: join as text.
            const prev = dBuf ? dBuf.toString('latin1', dS, dE) : data;
            dBuf = undefined;
            data = `${prev}\n${buf.toString('latin1', v, end)}`;
          }
        } else if (
          buf[pos] === 58 /* ':' comment */ ||
          startsWith(buf, pos, end, EVENT) ||
          startsWith(buf, pos, end, ID) ||
          startsWith(buf, pos, end, RETRY)
        ) {
          // not used by OpenAI-compatible streams
        } else {
          fail(
            'malformed-sse',
            `not an SSE line: ${redactCut(buf.toString('utf8', pos, Math.min(end, pos + 4096)), 120, cfg.apiKey)}`,
          );
          return;
        }
        pos = nl + 1;
      }
      // The read ended inside an event: keep its data as text (the buffer is undici's, not ours to hold).
      if (dBuf) {
        data = dBuf.toString('latin1', dS, dE);
        dBuf = undefined;
      }
      if (pos < n) {
        if (n - pos > 1 << 20) fail('malformed-sse', 'an SSE line longer than 1 MiB');
        else rest = Buffer.from(buf.subarray(pos));
      }
    };

    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        // undici calls this on the connection right before it writes the request (client-h1 writeH1).
        sentAt = now();
        controller = c;
        if (failure) c.abort(namedError('BenchFail', failure.message));
      },
      onResponseStart(_c, statusCode) {
        status = statusCode;
      },
      onResponseData(_c, chunk) {
        const t = now();
        if (status !== 200) {
          if (errBody.length < MAX_ERROR_BODY)
            errBody += chunk.toString('utf8', 0, Math.min(chunk.length, MAX_ERROR_BODY));
          return;
        }
        if (failure) return;
        onBytes(chunk, t);
      },
      onResponseEnd() {
        const t = now();
        if (status === 200 && !failure) {
          onBytes(END_OF_STREAM, t);
        }
        finish(t);
      },
      onResponseError(_c, err) {
        const t = now();
        if (!failure) {
          if ((err as Error)?.name === 'BenchGrace') {
            // usage came, [DONE] did not: finish() records a soft "no-done".
          } else if ((err as Error)?.name !== 'BenchFail') {
            failure = classifyError(err);
            if (failure.kind === 'reset' && chunkAt.length)
              failure.message = `connection reset after ${chunkAt.length} chunks: ${failure.message}`;
          }
        }
        finish(t);
      },
    };
    try {
      dispatcher.dispatch(
        {
          origin: u.origin,
          path,
          method: 'POST',
          headers,
          body,
          headersTimeout: cfg.idleTimeoutMs,
          bodyTimeout: cfg.idleTimeoutMs,
        },
        handler,
      );
    } catch (e) {
      failure = classifyError(e);
      finish(now());
    }
  });
}

/** A small GET (JSON or text) with a timeout; returns status and body, or throws a classified error. */
export async function getText(
  dispatcher: Dispatcher,
  baseUrl: string,
  path: string,
  apiKey: string | undefined,
  timeoutMs = 5000,
): Promise<{ status: number; body: string; ms: number }> {
  const u = new URL(normalizeBaseUrl(baseUrl));
  const headers: Record<string, string> = {};
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const t0 = now();
  try {
    const res = await dispatcher.request({
      origin: u.origin,
      path: `${u.pathname.replace(/\/$/, '')}${path}`,
      method: 'GET',
      headers,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const body = await res.body.text();
    return { status: res.statusCode, body, ms: now() - t0 };
  } catch (e) {
    const c = classifyError(e);
    const err = new Error(redact(c.message, apiKey));
    (err as any).kind = c.kind;
    throw err;
  }
}
