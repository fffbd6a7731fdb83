/**
 * Reading logs: chunked streaming (1 MiB reads, split on newlines by hand — faster than readline),
 * so a multi-GB log never sits in memory. Returns the facts and where the time went.
 */
import * as fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { LogAuditor, type AuditFacts } from './parse';

export interface AuditTimings {
  bytes: number;
  lines: number;
  total_ms: number;
  mb_per_s: number;
  lines_per_s: number;
}

export interface AuditFileOptions {
  signal?: AbortSignal;
  /** Called every ~64 MiB with the bytes read so far. */
  onProgress?(bytesRead: number, totalBytes: number): void;
  /** Read size; default 1 MiB. */
  chunkBytes?: number;
}

/** Feed a file's lines into an auditor, streaming. */
export async function feedFile(auditor: LogAuditor, path: string, opts: AuditFileOptions = {}): Promise<number> {
  const total = (await fs.promises.stat(path)).size;
  auditor.beginFile(path);
  const decoder = new StringDecoder('utf8');
  const stream = fs.createReadStream(path, { highWaterMark: opts.chunkBytes ?? 1 << 20 });
  let rest = '';
  let read = 0;
  let nextReport = 64 << 20;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (opts.signal?.aborted) throw new Error('Cancelled');
      read += chunk.length;
      const text = rest + decoder.write(chunk);
      let start = 0;
      let nl: number;
      while ((nl = text.indexOf('\n', start)) >= 0) {
        auditor.feed(text.slice(start, nl));
        start = nl + 1;
      }
      // Copy the remainder so the chunk's big string is not retained by a slice of it.
      rest = start < text.length ? (' ' + text.slice(start)).slice(1) : '';
      if (read >= nextReport) {
        opts.onProgress?.(read, total);
        nextReport += 64 << 20;
      }
    }
  } finally {
    stream.destroy();
  }
  rest += decoder.end();
  if (rest.length) auditor.feed(rest);
  const f = auditor.facts;
  f.files[f.files.length - 1].bytes = read;
  f.bytes += read;
  return read;
}

/** Audit one or more log files, read in the order given, as one timeline. */
export async function auditFiles(paths: string[], opts: AuditFileOptions = {}): Promise<{ facts: AuditFacts; timings: AuditTimings }> {
  const t0 = performance.now();
  const auditor = new LogAuditor();
  let bytes = 0;
  for (const p of paths) bytes += await feedFile(auditor, p, opts);
  const facts = auditor.finish();
  const ms = performance.now() - t0;
  return {
    facts,
    timings: { bytes, lines: facts.lines, total_ms: ms, mb_per_s: bytes / 1e6 / (ms / 1000), lines_per_s: facts.lines / (ms / 1000) },
  };
}

/** Audit one log file (the perf script's entry point). */
export function auditFile(path: string, opts: AuditFileOptions = {}) {
  return auditFiles([path], opts);
}

/** Audit log text already in memory (tests, pasted snippets). */
export function auditText(text: string, name = '<text>'): AuditFacts {
  const a = new LogAuditor();
  a.beginFile(name);
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const l of lines) a.feed(l);
  a.facts.bytes = a.facts.files[0].bytes = Buffer.byteLength(text);
  return a.finish();
}
