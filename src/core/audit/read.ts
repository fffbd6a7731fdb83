/**
 * Reading logs: the file's bytes go straight to the auditor (no decoding of the whole text), read
 * in large chunks with the next read in flight while this one is parsed, so a multi-GB log never
 * sits in memory and the disk and the parser work at once. Returns the facts and where the time went.
 *
 * Files are opened through the host's file service (Services.openFile, which applies the
 * workspace rule, its confirmation and Restricted Mode, and opens only regular files); called as
 * a library with no host (the perf script, tests), the Node implementation with no policy.
 */
import * as path from 'node:path';
import type { ReadHandle } from '../engine/types';
import { nodeFiles } from '../host/files';
import { LogAuditor, type AuditFacts } from './parse';

export interface AuditTimings {
  bytes: number;
  lines: number;
  total_ms: number;
  mb_per_s: number;
  /**
   * CPU time of this process (all its threads) while auditing, and MB per CPU-second: on a busy
   * machine the wall-clock rate says more about the other work than about the parser.
   */
  cpu_ms: number;
  mb_per_cpu_s: number;
  lines_per_s: number;
}

export interface AuditFileOptions {
  signal?: AbortSignal;
  /** Called every ~64 MiB with the bytes read so far. */
  onProgress?(bytesRead: number, totalBytes: number): void;
  /** Read size; default 4 MiB. */
  chunkBytes?: number;
  /** Opens a log for chunked reading: the host's Services.openFile. Default: every path, regular files only. */
  open?(absPath: string): Promise<ReadHandle>;
}

const openAnyPath = (abs: string) => nodeFiles().openFile(abs, { purpose: 'run', notebookDir: path.dirname(abs) });

/** Feed a file's lines into an auditor, streaming. */
export async function feedFile(auditor: LogAuditor, file: string, opts: AuditFileOptions = {}): Promise<number> {
  // The file service refuses a device, FIFO or socket from its stat, before any open: /dev/zero
  // never ends and opening a FIFO blocks until something writes to it.
  const fh = await (opts.open ?? openAnyPath)(file);
  const size = Math.max(1, Math.floor(opts.chunkBytes ?? 4 << 20));
  let read = 0;
  let pending: Promise<number> | undefined;
  try {
    const total = fh.size;
    auditor.beginFile(file);
    // Two buffers: the next read fills one while the parser reads the other.
    const bufs = [Buffer.allocUnsafe(size), Buffer.allocUnsafe(size)];
    let which = 0;
    let nextReport = 64 << 20;
    pending = fh.read(bufs[0], 0);
    for (;;) {
      const bytesRead = await pending;
      pending = undefined;
      if (opts.signal?.aborted) throw new Error('Cancelled');
      if (bytesRead === 0) break;
      const cur = bufs[which];
      read += bytesRead;
      which ^= 1;
      pending = fh.read(bufs[which], read);
      auditor.feedChunk(cur.subarray(0, bytesRead));
      if (read >= nextReport) {
        opts.onProgress?.(read, total);
        nextReport += 64 << 20;
      }
    }
    auditor.endChunks();
  } finally {
    // A read may still be in flight (cancelled, or a parse error): let it land before closing.
    if (pending) await pending.catch(() => undefined);
    await fh.close();
  }
  const f = auditor.facts;
  f.files[f.files.length - 1].bytes = read;
  f.bytes += read;
  return read;
}

/** Audit one or more log files, read in the order given, as one timeline. */
export async function auditFiles(
  paths: string[],
  opts: AuditFileOptions = {},
): Promise<{ facts: AuditFacts; timings: AuditTimings }> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const auditor = new LogAuditor();
  let bytes = 0;
  for (const p of paths) bytes += await feedFile(auditor, p, opts);
  const facts = auditor.finish();
  const ms = performance.now() - t0;
  const cu = process.cpuUsage(c0);
  const cpu = (cu.user + cu.system) / 1000;
  return {
    facts,
    timings: {
      bytes,
      lines: facts.lines,
      total_ms: ms,
      mb_per_s: bytes / 1e6 / (ms / 1000),
      lines_per_s: facts.lines / (ms / 1000),
      cpu_ms: cpu,
      mb_per_cpu_s: bytes / 1e6 / (cpu / 1000),
    },
  };
}

/** Audit one log file (the perf script's entry point). */
export function auditFile(path: string, opts: AuditFileOptions = {}) {
  return auditFiles([path], opts);
}

/** Audit log bytes given in chunks, split anywhere (what feedFile does, without a file). */
export function auditChunks(chunks: Iterable<Uint8Array>, name = '<bytes>'): AuditFacts {
  const a = new LogAuditor();
  a.beginFile(name);
  let bytes = 0;
  for (const c of chunks) {
    a.feedChunk(c);
    bytes += c.byteLength;
  }
  a.endChunks();
  a.facts.bytes = a.facts.files[0].bytes = bytes;
  return a.finish();
}

/** Audit log text already in memory (tests, pasted snippets), line by line through classifyLine(). */
export function auditText(text: string, name = '<text>'): AuditFacts {
  const a = new LogAuditor();
  a.beginFile(name);
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const l of lines) a.feed(l);
  a.facts.bytes = a.facts.files[0].bytes = Buffer.byteLength(text);
  return a.finish();
}
