/**
 * Per-request records in a compact columnar form, for the notebook (MIME.records) and for the
 * trip from the worker: one array per field, times rounded to the microsecond, and each request's
 * chunk times stored as the first chunk's offset from its send time followed by the gaps (ITLs).
 */
import type { ErrorKind, RequestRecord } from './metrics';

export interface ColumnarRecords {
  format: 'inflab.records.v1';
  /** Times are ms relative to the point's start (t = 0), rounded to 0.001 ms. */
  unit: 'ms';
  n: number;
  id: number[];
  scheduled: number[];
  sent: number[];
  end: number[];
  /** Number of content chunks per request. */
  chunks: number[];
  /** Flattened: per request, [first chunk − sent, gap 1, gap 2, …]. */
  chunk_ms: number[];
  prompt_tokens: (number | null)[];
  output_tokens: (number | null)[];
  cached_tokens: (number | null)[];
  ok: (0 | 1)[];
  error_kind: (string | null)[];
  error_message: (string | null)[];
  http_status: (number | null)[];
  /** Present when a request's answer text began after reasoning chunks: first answer chunk − sent (else null). */
  first_content_ms?: (number | null)[];
  /** Present when a request was retried: 1 for those (on a fresh connection, before any response byte), else 0. */
  retries?: number[];
  /** The first attempt's error of each retried request (else null); present with `retries`. */
  retry_error?: (string | null)[];
  /** Present when a workload plan set per-request lengths: the prompt tokens asked for (null: not known to the client) and max_tokens. */
  requested_input?: (number | null)[];
  requested_output?: (number | null)[];
}

const us = (x: number) => Math.round(x * 1000) / 1000;

export function toColumnar(records: RequestRecord[]): ColumnarRecords {
  const c: ColumnarRecords = {
    format: 'inflab.records.v1',
    unit: 'ms',
    n: records.length,
    id: [],
    scheduled: [],
    sent: [],
    end: [],
    chunks: [],
    chunk_ms: [],
    prompt_tokens: [],
    output_tokens: [],
    cached_tokens: [],
    ok: [],
    error_kind: [],
    error_message: [],
    http_status: [],
  };
  for (const r of records) {
    c.id.push(r.id);
    c.scheduled.push(us(r.scheduledMs));
    c.sent.push(us(r.sentMs));
    c.end.push(us(r.endMs));
    c.chunks.push(r.chunkMs.length);
    // Gaps are rounded from rounded absolute times, so decoding adds no drift.
    let prev = us(r.sentMs);
    for (const t of r.chunkMs) {
      const a = us(t);
      c.chunk_ms.push(us(a - prev));
      prev = a;
    }
    c.prompt_tokens.push(r.promptTokens ?? null);
    c.output_tokens.push(r.outputTokens ?? null);
    c.cached_tokens.push(r.cachedTokens ?? null);
    c.ok.push(r.ok ? 1 : 0);
    c.error_kind.push(r.errorKind ?? null);
    c.error_message.push(r.errorMessage ?? null);
    c.http_status.push(r.httpStatus ?? null);
  }
  if (records.some((r) => r.firstContentMs !== undefined))
    c.first_content_ms = records.map((r) =>
      r.firstContentMs === undefined ? null : us(us(r.firstContentMs) - us(r.sentMs)),
    );
  if (records.some((r) => r.retries)) {
    c.retries = records.map((r) => r.retries ?? 0);
    c.retry_error = records.map((r) => r.retryError ?? null);
  }
  if (records.some((r) => r.requestedOutput !== undefined || r.requestedInput !== undefined)) {
    c.requested_input = records.map((r) => r.requestedInput ?? null);
    c.requested_output = records.map((r) => r.requestedOutput ?? null);
  }
  return c;
}

export function fromColumnar(c: ColumnarRecords): RequestRecord[] {
  const out: RequestRecord[] = [];
  let k = 0;
  for (let i = 0; i < c.n; i++) {
    const chunkMs: number[] = [];
    let t = c.sent[i];
    for (let j = 0; j < c.chunks[i]; j++) {
      t = us(t + c.chunk_ms[k++]);
      chunkMs.push(t);
    }
    const r: RequestRecord = {
      id: c.id[i],
      scheduledMs: c.scheduled[i],
      sentMs: c.sent[i],
      endMs: c.end[i],
      chunkMs,
      ok: c.ok[i] === 1,
    };
    if (c.prompt_tokens[i] !== null) r.promptTokens = c.prompt_tokens[i]!;
    if (c.output_tokens[i] !== null) r.outputTokens = c.output_tokens[i]!;
    if (c.cached_tokens[i] !== null) r.cachedTokens = c.cached_tokens[i]!;
    if (c.error_kind[i] !== null) r.errorKind = c.error_kind[i] as ErrorKind;
    if (c.error_message[i] !== null) r.errorMessage = c.error_message[i]!;
    if (c.http_status[i] !== null) r.httpStatus = c.http_status[i]!;
    const fc = c.first_content_ms?.[i];
    if (fc !== undefined && fc !== null) r.firstContentMs = us(c.sent[i] + fc);
    if (c.retries?.[i]) {
      r.retries = c.retries[i];
      const e = c.retry_error?.[i];
      if (e) r.retryError = e;
    }
    const ri = c.requested_input?.[i];
    if (ri !== undefined && ri !== null) r.requestedInput = ri;
    const ro = c.requested_output?.[i];
    if (ro !== undefined && ro !== null) r.requestedOutput = ro;
    out.push(r);
  }
  return out;
}
