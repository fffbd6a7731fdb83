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
 * Requests follow docs/physics.md's benchmark rules: prompts are token-id lists of exact length,
 * `ignore_eos` + `min_tokens` + `max_tokens` fix the output length, top_p/top_k are set (so vLLM keeps
 * its fused sampler), no request-level `seed`, and `stream_options.include_usage` is on.
 *
 * The API key only ever goes into the Authorization header; every message that could carry text
 * from the server passes through redact() first.
 */
import * as net from 'node:net';
import * as zlib from 'node:zlib';
import { Agent, Client, type Dispatcher } from 'undici';
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
  /** The first attempt's send time (a retried request keeps it). */
  sentAt: number;
  /** Arrival of each chunk that carried text (answer or reasoning). */
  chunkAt: number[];
  /** Arrival of the first chunk with answer text, when reasoning chunks came before it. */
  firstContentAt?: number;
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

/** [from, to) ranges of `text` whose windows are pieces (the raw pass: the text as it is). */
function rawMatches(s: string, pieces: Set<string>, out: [number, number][]) {
  for (let i = 0; i + REDACT_PIECE <= s.length; i++)
    if (pieces.has(s.slice(i, i + REDACT_PIECE))) out.push([i, i + REDACT_PIECE]);
}

/**
 * The same on the skeleton, counting only windows whose characters stand apart at least twice in
 * the text (a key spelled out, hex bytes spaced): a window across one word boundary is how ordinary
 * text next to a piece of the key would be eaten, and the raw pass already has what lies on either side.
 */
function skeletonMatches(sk: { s: string; at: number[] }, pieces: Set<string>, out: [number, number][]) {
  const { s, at } = sk;
  for (let i = 0; i + REDACT_PIECE <= s.length; i++) {
    if (!pieces.has(s.slice(i, i + REDACT_PIECE))) continue;
    let gaps = 0;
    for (let j = i; j < i + REDACT_PIECE - 1 && gaps < 2; j++) if (at[j + 1] !== at[j] + 1) gaps++;
    if (gaps >= 2) out.push([at[i], at[i + REDACT_PIECE - 1] + 1]);
  }
}

/** Remove every stretch of the text that shares REDACT_PIECE or more characters with a form of the key. */
function redactKey(text: string, key: string): string {
  if (key.length < REDACT_MIN_KEY) return text.split(key).join(MARK);
  const r = redactorFor(key);
  const found: [number, number][] = [];
  rawMatches(asciiLower(text), r.raw, found);
  skeletonMatches(skeleton(text), r.bare, found);
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
  if (status >= 300 && status < 400) return 'redirect';
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

/** Bytes of an error body kept (compressed or not), and characters of it decoded for the message. */
const MAX_ERROR_BODY = 16 * 1024;
const MAX_ERROR_TEXT = 4096;

/** latin1 text (one char per byte) back to the UTF-8 string its bytes encode. */
const utf8 = (latin1: string) => Buffer.from(latin1, 'latin1').toString('utf8');

const headerOf = (h: Record<string, string | string[] | undefined> | undefined, name: string) => {
  const v = h?.[name];
  return Array.isArray(v) ? v.join(', ') : v;
};

/**
 * A server's bytes as text fit for a message: decoded when they are gzip/deflate/br-encoded (as
 * `content-encoding` says, or by gzip's magic number), and described instead of quoted when what is
 * left is not text (control characters, or bytes that are not UTF-8).
 */
export function describeBody(bytes: Buffer, encoding?: string): string {
  let b = bytes;
  let enc = (encoding ?? '').trim().toLowerCase();
  if (!enc && b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b) enc = 'gzip';
  if (enc && enc !== 'identity') {
    const opts = { maxOutputLength: MAX_ERROR_TEXT * 4, finishFlush: zlib.constants.Z_SYNC_FLUSH };
    try {
      if (enc === 'gzip' || enc === 'x-gzip') b = zlib.gunzipSync(b, opts);
      else if (enc === 'deflate') b = zlib.inflateSync(b, opts);
      else if (enc === 'br') b = zlib.brotliDecompressSync(b, { maxOutputLength: MAX_ERROR_TEXT * 4 });
      else return `(a ${enc}-encoded body of ${bytes.length} bytes)`;
    } catch (e) {
      // A body cut at the cap still inflates up to the cut; anything else is described.
      if ((e as { code?: string }).code !== 'ERR_BUFFER_TOO_LARGE')
        return `(a ${enc}-encoded body of ${bytes.length} bytes that does not decode)`;
    }
  }
  const text = b.toString('utf8', 0, Math.min(b.length, MAX_ERROR_TEXT * 4));
  let bad = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0xfffd || (c < 32 && c !== 9 && c !== 10 && c !== 13) || c === 127) bad++;
  }
  if (bad > Math.max(2, text.length * 0.05))
    return `(a binary body of ${bytes.length} bytes${enc && enc !== 'identity' ? `, ${enc}-encoded` : ''})`;
  // A few stray control characters are shown as U+FFFD rather than sent to a terminal.
  return (
    (enc && enc !== 'identity' ? `(${enc}-decoded) ` : '') +
    text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '\ufffd')
  );
}

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
/** llama.cpp's server (examples/server/utils.hpp, 2024 builds) writes a stream error as an `error: {json}` line. */
const ERROR_LINE = Buffer.from('error:');
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
/** A chunk that ends a choice (`"finish_reason":"length"`) or carries no text goes to the full parse. */
const FINISH = Buffer.from('finish_reason":"');
const EMPTY_TEXT = Buffer.from('text":""');
const EMPTY_CONTENT = Buffer.from('content":""');
const NULL_CONTENT = Buffer.from('content":null');
const EMPTY_DELTA = Buffer.from('delta":{}');

/**
 * An ordinary content chunk, decided on the bytes: a JSON object with `"choices":[{`, with neither
 * `"usage":{` nor `"error"`, no finish_reason set, and no empty text (`"text":""`, `"content":""`,
 * `"content":null`, `"delta":{}`). One pass over the bytes, looking only after each quote. Anything
 * else is parsed in full (the finishing chunk, llama.cpp's empty last chunk, usage, errors).
 */
export function isPlainChunk(b: Buffer, s: number, e: number): boolean {
  if (e - s < 2 || b[s] !== 123 /* { */ || b[e - 1] !== 125 /* } */) return false;
  let choices = false;
  for (let i = s + 1; i < e - 1; i++) {
    if (b[i] !== 34 /* " */) continue;
    const c = b[i + 1];
    if (c === 99 /* c */) {
      if (!choices && startsWith(b, i + 1, e, CHOICES)) choices = true;
      else if (startsWith(b, i + 1, e, EMPTY_CONTENT) || startsWith(b, i + 1, e, NULL_CONTENT)) return false;
    } else if (c === 117 /* u */) {
      if (startsWith(b, i + 1, e, USAGE)) return false;
    } else if (c === 101 /* e */) {
      if (startsWith(b, i + 1, e, ERROR)) return false;
    } else if (c === 102 /* f */) {
      if (startsWith(b, i + 1, e, FINISH)) return false;
    } else if (c === 116 /* t */) {
      if (startsWith(b, i + 1, e, EMPTY_TEXT)) return false;
    } else if (c === 100 /* d */) {
      if (startsWith(b, i + 1, e, EMPTY_DELTA)) return false;
    }
  }
  return choices;
}

/** The same decision on latin1 text (an event that spanned socket reads). */
function isPlainChunkText(p: string): boolean {
  return isPlainChunk(Buffer.from(p, 'latin1'), 0, p.length);
}

/** A usage count as a server should send it: a finite whole number ≥ 0. */
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** What a choice carries: answer text, reasoning text (reasoning_content / reasoning), or nothing. */
function choiceText(ch: any): 'content' | 'reasoning' | undefined {
  if (!ch || typeof ch !== 'object') return undefined;
  if (typeof ch.text === 'string' && ch.text.length) return 'content';
  const d = ch.delta;
  if (!d || typeof d !== 'object') return undefined;
  if (typeof d.content === 'string' && d.content.length) return 'content';
  if (Array.isArray(d.tool_calls) && d.tool_calls.length) return 'content';
  if (
    (typeof d.reasoning_content === 'string' && d.reasoning_content.length) ||
    (typeof d.reasoning === 'string' && d.reasoning.length)
  )
    return 'reasoning';
  return undefined;
}

/** Whether a failed attempt may be sent again: nothing of a response came, and its connection went away under it. */
function retryable(r: RawResult, responded: boolean): boolean {
  return !responded && r.errorKind === 'reset' && !r.chunkAt.length;
}

/**
 * Send one streaming request. Never throws and never rejects: every outcome, including a
 * refused connection, ends in a RawResult with an error kind.
 *
 * A request whose connection closed or reset before any byte of a response came (a server that
 * closes idle keep-alive connections — llama.cpp's server does after every streamed response — can
 * close one just as a request is written on it) is sent once more, on a fresh connection of its
 * own. The retry is recorded (`retries`, and the first attempt's error in `retryError`), its
 * latencies count from the first attempt's send time, and its TCP connect is inside its TTFT.
 * `onWrite` is called once, as the request is first written to a connection: the load generator
 * counts a request in flight from then, the instant its E2E counts from (Little's law's L and W).
 */
export async function sendRequest(
  dispatcher: Dispatcher,
  cfg: ClientConfig,
  spec: RequestSpec,
  signal?: AbortSignal,
  onWrite?: () => void,
): Promise<RawResult> {
  // `onWrite` runs once, when the request is first written (the instant its latencies count from).
  let written = false;
  const wrote = () => {
    if (written) return;
    written = true;
    onWrite?.();
  };
  const first = await attempt(dispatcher, cfg, spec, signal, undefined, wrote);
  if (!retryable(first.result, first.responded) || signal?.aborted) return first.result;
  const fresh = new Client(new URL(normalizeBaseUrl(cfg.baseUrl)).origin, { pipelining: 1, connectTimeout: 10_000 });
  try {
    const second = await attempt(fresh, cfg, spec, signal, first.result.sentAt, wrote);
    second.result.retries = 1;
    second.result.retryError = first.result.errorMessage;
    return second.result;
  } finally {
    fresh.destroy().catch(() => undefined);
  }
}

function attempt(
  dispatcher: Dispatcher,
  cfg: ClientConfig,
  spec: RequestSpec,
  signal: AbortSignal | undefined,
  sentFrom?: number,
  onWrite?: () => void,
): Promise<{ result: RawResult; responded: boolean }> {
  return new Promise((resolve) => {
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

    /** Arrival of each chunk that carried text (answer or reasoning). */
    const chunkAt: number[] = [];
    /** Index in chunkAt of the first chunk with answer text; -1 until one came. */
    let contentFrom = -1;
    let status = 0;
    let resHeaders: Record<string, string | string[] | undefined> | undefined;
    const errChunks: Buffer[] = [];
    let errBytes = 0;
    /** An incomplete line carried over to the next read (copied). */
    let rest: Buffer | undefined;
    /** The current event's data as latin1 text, when it spans lines or reads. */
    let data: string | undefined;
    /** The current event's `event:` name, when it had one. */
    let eventName: string | undefined;
    /** Line endings: LF or CRLF (the usual), or CR alone (allowed by the SSE spec), decided on the first line end. */
    let crOnly: boolean | undefined;
    let crPending = false;
    let done = false;
    let usageSeen = false;
    let usageBad: string | undefined;
    let promptTokens: number | undefined;
    let outputTokens: number | undefined;
    let cachedTokens: number | undefined;
    let finished = false;
    let controller: Dispatcher.DispatchController | undefined;
    let failure: { kind: ErrorKind; message: string } | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    let totalTimer: NodeJS.Timeout | undefined;
    let idleTimer: NodeJS.Timeout | undefined;
    let offAbort: (() => void) | undefined;
    let sentAt = now();
    /** Last event that was not a comment (for the stream-idle timeout; chunk times are in chunkAt). */
    let lastEventAt = sentAt;

    const finish = (end: number) => {
      if (finished) return;
      finished = true;
      if (graceTimer) clearTimeout(graceTimer);
      if (totalTimer) clearTimeout(totalTimer);
      if (idleTimer) clearTimeout(idleTimer);
      offAbort?.();
      const r: RawResult = {
        sentAt: sentFrom ?? sentAt,
        chunkAt,
        endAt: end,
        promptTokens,
        outputTokens,
        cachedTokens,
        ok: false,
      };
      if (contentFrom > 0) r.firstContentAt = chunkAt[contentFrom];
      if (status) r.httpStatus = status;
      if (failure) {
        r.errorKind = failure.kind;
        r.errorMessage = redact(failure.message, cfg.apiKey);
      } else if (status !== 200) {
        r.errorKind = classifyStatus(status);
        const text = errBytes ? describeBody(Buffer.concat(errChunks), headerOf(resHeaders, 'content-encoding')) : '';
        // Redact before cutting to 500 characters: a cut through the key would leave part of it unredacted.
        const shown = redactCut(text.trim(), 500, cfg.apiKey) || '(empty body)';
        if (r.errorKind === 'redirect') {
          const to = headerOf(resHeaders, 'location');
          r.errorMessage = `HTTP ${status}: a redirect${to ? ` to ${redactCut(to, 200, cfg.apiKey)}` : ''}, not followed: point the endpoint at the URL the server answers on${errBytes ? ` (body: ${shown})` : ''}`;
        } else r.errorMessage = `HTTP ${status}: ${shown}`;
      } else if (done || usageSeen) {
        if (!chunkAt.length) {
          r.errorKind = 'empty';
          r.errorMessage = 'the stream ended without a chunk carrying text';
        } else {
          r.ok = true;
          if (!usageSeen || usageBad) {
            r.errorKind = usageBad ? 'bad-usage' : 'missing-usage';
            r.errorMessage = usageBad
              ? `${usageBad}: output tokens counted from chunks`
              : 'no usage chunk (stream_options.include_usage ignored?): output tokens counted from chunks';
            r.outputTokens = chunkAt.length;
            if (usageBad) r.promptTokens = isCount(promptTokens) ? promptTokens : undefined;
          } else if (!done) {
            r.errorKind = 'no-done';
            r.errorMessage = `no "data: [DONE]" within ${cfg.doneGraceMs} ms after the usage chunk`;
          }
        }
      } else {
        r.errorKind = 'truncated';
        r.errorMessage = `the stream closed after ${chunkAt.length} chunks without usage or [DONE]`;
      }
      resolve({ result: r, responded: status !== 0 });
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
        cfg.requestTimeoutMs - (sentFrom !== undefined ? sentAt - sentFrom : 0),
      );
    // Stream idle: no event (comments and pings do not count) for idleTimeoutMs. One timer per idle
    // period, re-armed from the last event's time, so no chunk touches a timer.
    const idle = cfg.idleTimeoutMs;
    const checkIdle = () => {
      idleTimer = undefined;
      if (finished || failure) return;
      const last = Math.max(lastEventAt, chunkAt.length ? chunkAt[chunkAt.length - 1] : 0);
      const left = last + idle - now();
      if (left <= 0)
        fail(
          'timeout',
          `no ${status ? 'stream event' : 'response'} for ${idle} ms (stream idle timeout${status ? '; comments and pings do not count' : ''})`,
        );
      else idleTimer = setTimeout(checkIdle, Math.max(1, left));
    };
    if (idle > 0) idleTimer = setTimeout(checkIdle, idle);

    const streamError = (message: unknown) => {
      const m =
        typeof message === 'string'
          ? message
          : message && typeof message === 'object'
            ? ((message as any).message ?? JSON.stringify(message))
            : String(message);
      fail('api-error', `error in the stream: ${redactCut(String(m), 300, cfg.apiKey)}`);
    };

    // `payload` is latin1 (see the header): ASCII tests work on it directly; decode before parsing.
    const onEvent = (payload: string, t: number) => {
      const name = eventName;
      eventName = undefined;
      lastEventAt = t;
      if (payload === '[DONE]') {
        done = true;
        return;
      }
      if (contentFrom >= 0 && name === undefined && isPlainChunkText(payload)) {
        chunkAt.push(t);
        return;
      }
      let obj: any;
      try {
        obj = JSON.parse(utf8(payload));
      } catch {
        if (name === 'error') return streamError(utf8(payload));
        fail('malformed-json', `a chunk is not JSON: ${redactCut(utf8(payload.slice(0, 4096)), 120, cfg.apiKey)}`);
        return;
      }
      if (obj === null || typeof obj !== 'object') {
        if (name === 'error') return streamError(String(obj));
        fail(
          'malformed-json',
          `a chunk is not a JSON object: ${redactCut(utf8(payload.slice(0, 4096)), 120, cfg.apiKey)}`,
        );
        return;
      }
      // Errors: {"error": …} (vLLM, OpenAI), vLLM's older unwrapped ErrorResponse {"object":"error",
      // "message": …}, and an SSE event named "error".
      if (obj.error) return streamError(obj.error);
      if (obj.object === 'error') return streamError(obj.message ?? obj);
      if (name === 'error') return streamError(obj);
      const choices = obj.choices;
      let finishing = false;
      if (Array.isArray(choices) && choices.length) {
        const kind = choiceText(choices[0]);
        if (kind) {
          chunkAt.push(t);
          if (kind === 'content' && contentFrom < 0) contentFrom = chunkAt.length - 1;
        }
        finishing = choices.every((c: any) => c && c.finish_reason != null);
      }
      const usage = obj.usage;
      if (usage && typeof usage === 'object') {
        usageSeen = true;
        const p = usage.prompt_tokens;
        const c = usage.completion_tokens;
        if (p !== undefined && !isCount(p)) usageBad = `usage.prompt_tokens = ${JSON.stringify(p)} is not a count`;
        else if (p !== undefined) promptTokens = p;
        if (c !== undefined && !isCount(c)) usageBad = `usage.completion_tokens = ${JSON.stringify(c)} is not a count`;
        else if (c !== undefined) outputTokens = c;
        const cached = usage.prompt_tokens_details?.cached_tokens;
        if (isCount(cached)) cachedTokens = cached;
        // Usage in a chunk that still carries a running choice is vLLM's continuous_usage_stats:
        // the stream goes on. Only the usage that ends it (no choices, or every choice finished)
        // starts the wait for [DONE].
        const ends = !Array.isArray(choices) || !choices.length || finishing;
        if (ends && !done && cfg.doneGraceMs >= 0 && !graceTimer) {
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
        if (contentFrom >= 0 && eventName === undefined && isPlainChunk(b, dS, dE)) chunkAt.push(t);
        else onEvent(b.toString('latin1', dS, dE), t);
      } else if (data !== undefined) {
        const d = data;
        data = undefined;
        onEvent(d, t);
      } else eventName = undefined;
    };
    /** CR-only line endings (SSE allows CR, LF or CRLF) turned into LF, a CRLF split across reads included. */
    const fromCr = (b: Buffer): Buffer => {
      const out = Buffer.allocUnsafe(b.length);
      let n = 0;
      for (let i = 0; i < b.length; i++) {
        const c = b[i];
        if (crPending && c === 10) {
          crPending = false;
          continue;
        }
        crPending = c === 13;
        out[n++] = c === 13 ? 10 : c;
      }
      return out.subarray(0, n);
    };
    /** Scan one read's bytes: SSE lines, an event per blank line, every event stamped with the read's time. */
    const onBytes = (chunk: Buffer, t: number) => {
      let buf = chunk;
      if (crOnly === undefined) {
        const lf = buf.indexOf(10);
        const cr = buf.indexOf(13);
        if (cr >= 0 && (lf < 0 || cr < lf - 1)) crOnly = true;
        else if (lf >= 0) crOnly = false;
      }
      if (crOnly) buf = fromCr(buf);
      if (rest) {
        buf = Buffer.concat([rest, buf]);
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
        } else if (buf[pos] === 58 /* ':' comment */) {
          // a comment (a keep-alive ping): not an event
        } else if (startsWith(buf, pos, end, EVENT)) {
          const v = pos + 6 < end && buf[pos + 6] === 32 ? pos + 7 : pos + 6;
          eventName = buf.toString('latin1', v, end);
        } else if (startsWith(buf, pos, end, ID) || startsWith(buf, pos, end, RETRY)) {
          // not used by OpenAI-compatible streams
        } else if (startsWith(buf, pos, end, ERROR_LINE)) {
          const v = pos + 6 < end && buf[pos + 6] === 32 ? pos + 7 : pos + 6;
          const text = buf.toString('utf8', v, Math.min(end, v + 4096));
          let m: unknown = text;
          try {
            m = JSON.parse(text);
          } catch {
            // the line's text is the message
          }
          streamError(m && typeof m === 'object' && 'error' in (m as object) ? (m as any).error : m);
          return;
        } else {
          fail(
            'malformed-sse',
            `not an SSE line: ${redactCut(describeBody(buf.subarray(pos, Math.min(end, pos + 4096))), 120, cfg.apiKey)}`,
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
        onWrite?.();
        controller = c;
        if (failure) c.abort(namedError('BenchFail', failure.message));
      },
      onResponseStart(_c, statusCode, h) {
        status = statusCode;
        resHeaders = h as Record<string, string | string[] | undefined>;
        lastEventAt = now();
        if (statusCode === 200) {
          const enc = headerOf(resHeaders, 'content-encoding');
          if (enc && enc.trim().toLowerCase() !== 'identity')
            fail(
              'malformed-sse',
              `the stream is ${enc}-encoded (content-encoding: ${enc}); the bench reads plain text/event-stream: turn compression off for streams on the server or proxy`,
            );
        }
      },
      onResponseData(_c, chunk) {
        const t = now();
        if (status !== 200) {
          if (errBytes < MAX_ERROR_BODY) {
            const part = chunk.subarray(0, MAX_ERROR_BODY - errBytes);
            errChunks.push(Buffer.from(part));
            errBytes += part.length;
          }
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
            else if (failure.kind === 'reset' && !status)
              failure.message = `the connection closed before any response: ${failure.message}`;
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
          bodyTimeout: 0,
        },
        handler,
      );
    } catch (e) {
      failure = classifyError(e);
      finish(now());
    }
  });
}

/**
 * The most a GET may bring back, per path: a server (or whatever answers on its port) can send an
 * endless body, and bytes that keep flowing never trip an idle timeout.
 */
export const GET_CAPS: Record<string, number> = {
  '/v1/models': 1 << 20,
  '/metrics': 16 << 20,
  '/health': 64 << 10,
};
export const DEFAULT_GET_CAP = 1 << 20;

const sizeText = (n: number) => (n >= 1 << 20 ? `${n / (1 << 20)} MiB` : `${n / 1024} KiB`);

/**
 * A small GET (JSON or text) with a timeout (on the whole exchange, not just idle time) and a size
 * cap (GET_CAPS by path unless given); returns status and body, or throws a classified error whose
 * message says which limit was hit. With `json`, a POST of that body instead (e.g. /tokenize);
 * `signal` cancels it.
 */
export async function getText(
  dispatcher: Dispatcher,
  baseUrl: string,
  path: string,
  apiKey: string | undefined,
  timeoutMs = 5000,
  maxBytes = GET_CAPS[path] ?? DEFAULT_GET_CAP,
  json?: unknown,
  signal?: AbortSignal,
): Promise<{ status: number; body: string; ms: number }> {
  const u = new URL(normalizeBaseUrl(baseUrl));
  const headers: Record<string, string> = {};
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const method = json === undefined ? 'GET' : 'POST';
  if (json !== undefined) headers['content-type'] = 'application/json';
  const t0 = now();
  const ac = new AbortController();
  const timer = setTimeout(
    () => ac.abort(namedError('BenchTimeout', `${method} ${path}: no complete answer within ${timeoutMs} ms`)),
    timeoutMs,
  );
  const onAbort = () => ac.abort(namedError('Cancelled', `${method} ${path}: cancelled`));
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const res = await dispatcher.request({
      origin: u.origin,
      path: `${u.pathname.replace(/\/$/, '')}${path}`,
      method,
      headers,
      ...(json === undefined ? {} : { body: JSON.stringify(json) }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: ac.signal,
    });
    const parts: Buffer[] = [];
    let n = 0;
    for await (const c of res.body) {
      n += (c as Buffer).length;
      if (n > maxBytes) {
        res.body.destroy();
        const err = new Error(
          `${method} ${path}: the answer passed ${sizeText(maxBytes)} (the cap for ${path}) and was cut off`,
        );
        (err as any).kind = 'too-large';
        throw err;
      }
      parts.push(c as Buffer);
    }
    const enc = headerOf(res.headers as Record<string, string | string[] | undefined>, 'content-encoding');
    const raw = Buffer.concat(parts);
    const body = enc && enc.trim().toLowerCase() !== 'identity' ? describeBody(raw, enc) : raw.toString('utf8');
    return { status: res.statusCode, body, ms: now() - t0 };
  } catch (e) {
    if ((e as any)?.kind === 'too-large') throw e;
    const c = ac.signal.aborted ? { kind: 'timeout', message: (ac.signal.reason as Error).message } : classifyError(e);
    const err = new Error(redact(c.message, apiKey));
    (err as any).kind = c.kind;
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * One TCP connect to the endpoint's host and port (no request, Nagle off), in ms: a SYN/SYN-ACK
 * round trip, which every request's TTFT contains at least once, so it cannot exceed the TTFT it
 * is quoted beside (a GET round trip can: a server's Nagle/delayed-ACK pause lands in it).
 */
export function tcpConnectMs(baseUrl: string, timeoutMs = 5000): Promise<number> {
  const u = new URL(normalizeBaseUrl(baseUrl));
  const port = Number(u.port) || (u.protocol === 'https:' ? 443 : 80);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const t0 = now();
    const sock = net.connect({ host, port, noDelay: true });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`TCP connect to ${host}:${port} took over ${timeoutMs} ms`));
    }, timeoutMs);
    sock.once('connect', () => {
      const ms = now() - t0;
      clearTimeout(timer);
      sock.destroy();
      resolve(ms);
    });
    sock.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}
