/**
 * Workload files, parsed from text the host read (the core does no I/O here): Mooncake-shaped
 * traces (kvcache-ai/Mooncake FAST'25 traces: one JSON object a line with `timestamp` in ms,
 * `input_length`, `output_length` and `hash_ids`, each id one 512-token block) and observed lengths
 * (one integer a line, or a JSON array). Errors name the line and what to write.
 */
import * as path from 'node:path';
import { z } from 'zod';
import type { NotebookContext } from '../engine/types';
import type { TraceRow } from './plan';

/** Workload files are text of at most this many bytes (a 1M-request trace is ~100 MB). */
const MAX_WORKLOAD_BYTES = 512 * 1024 * 1024;

/** Read a workload file named relative to the notebook, through the host's file service when it has one. */
export async function readWorkloadFile(nb: NotebookContext, rel: string): Promise<string> {
  const abs = path.resolve(nb.dir, rel);
  try {
    if (nb.services.readFile)
      return await nb.services.readFile(abs, { purpose: 'run', notebookDir: nb.dir, maxBytes: MAX_WORKLOAD_BYTES });
    const fs = await import('node:fs/promises');
    const st = await fs.stat(abs);
    if (!st.isFile()) throw new Error('not a regular file');
    if (st.size > MAX_WORKLOAD_BYTES)
      throw new Error(`${st.size} bytes, over the ${MAX_WORKLOAD_BYTES} a workload file may have`);
    return await fs.readFile(abs, 'utf8');
  } catch (e) {
    throw new WorkloadFileError(`Cannot read "${rel}": ${(e as Error).message}`);
  }
}

const traceLine = z
  .object({
    timestamp: z.number().finite().min(0),
    input_length: z.number().int().positive(),
    output_length: z.number().int().min(0),
    hash_ids: z.array(z.number().int().min(0)).default([]),
  })
  .loose();

export class WorkloadFileError extends Error {}

export function parseTrace(text: string, file: string): TraceRow[] {
  const rows: TraceRow[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    let j: unknown;
    try {
      j = JSON.parse(line);
    } catch {
      throw new WorkloadFileError(
        `${file}:${i + 1}: not JSON; each line is {"timestamp": ms, "input_length": N, "output_length": N, "hash_ids": [..]}`,
      );
    }
    const r = traceLine.safeParse(j);
    if (!r.success)
      throw new WorkloadFileError(
        `${file}:${i + 1}: ${r.error.issues.map((x) => `${x.path.join('.') || 'line'}: ${x.message}`).join('; ')}`,
      );
    rows.push({
      timestampMs: r.data.timestamp,
      input: r.data.input_length,
      output: r.data.output_length,
      hashIds: r.data.hash_ids,
    });
  }
  if (!rows.length) throw new WorkloadFileError(`${file}: no trace rows`);
  for (let i = 1; i < rows.length; i++)
    if (rows[i].timestampMs < rows[i - 1].timestampMs)
      throw new WorkloadFileError(`${file}: timestamps go backwards at row ${i + 1}; sort the trace by timestamp`);
  return rows;
}

export function parseLengths(text: string, file: string): number[] {
  const t = text.trim();
  let xs: unknown[];
  if (t.startsWith('[')) {
    try {
      xs = JSON.parse(t);
    } catch (e) {
      throw new WorkloadFileError(`${file}: not a JSON array: ${(e as Error).message}`);
    }
  } else
    xs = t
      .split(/\r?\n/)
      .filter((l) => l.trim() !== '')
      .map((l) => Number(l.trim()));
  const out: number[] = [];
  xs.forEach((x, i) => {
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 1)
      throw new WorkloadFileError(`${file}: entry ${i + 1} is not a positive whole number of tokens`);
    out.push(x);
  });
  if (!out.length) throw new WorkloadFileError(`${file}: no lengths`);
  return out;
}
