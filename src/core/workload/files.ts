/**
 * Workload files, parsed from text the host read (the core does no I/O here): Mooncake-shaped
 * traces (kvcache-ai/Mooncake FAST'25 traces: one JSON object a line with `timestamp` in ms,
 * `input_length`, `output_length` and `hash_ids`, each id one 512-token block) and observed lengths
 * (one integer a line, or a JSON array). Errors name the line and what to write.
 */
import * as path from 'node:path';
import { z } from 'zod';
import type { NotebookContext } from '../engine/types';
import { tokenize } from '../sim/tokenizer';
import type { DatasetRow, TraceRow } from './plan';

/** Workload files are text of at most this many bytes (a 1M-request trace is ~100 MB). */
const MAX_WORKLOAD_BYTES = 512 * 1024 * 1024;

/**
 * Read a file a cell names, relative to the notebook, through the host's file service (which
 * applies the workspace rule, Restricted Mode and the size cap); the core itself opens nothing.
 */
export async function readRunFile(nb: NotebookContext, rel: string, maxBytes: number): Promise<string> {
  if (!nb.services.readFile) throw new Error('this host reads no files');
  return nb.services.readFile(path.resolve(nb.dir, rel), { purpose: 'run', notebookDir: nb.dir, maxBytes });
}

/** Read a workload file (a trace, lengths, a dataset) named relative to the notebook. */
export async function readWorkloadFile(nb: NotebookContext, rel: string): Promise<string> {
  try {
    return await readRunFile(nb, rel, MAX_WORKLOAD_BYTES);
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

/** The validated rows of a JSON-lines file; an error names the line and the shape a line takes. */
function* jsonLines<T>(text: string, file: string, schema: z.ZodType<T>, shape: string): Generator<T> {
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    let j: unknown;
    try {
      j = JSON.parse(line);
    } catch {
      throw new WorkloadFileError(`${file}:${i + 1}: not JSON; each line is ${shape}`);
    }
    const r = schema.safeParse(j);
    if (!r.success)
      throw new WorkloadFileError(
        `${file}:${i + 1}: ${r.error.issues.map((x) => `${x.path.length ? `${x.path.join('.')}: ` : ''}${x.message}`).join('; ')}`,
      );
    yield r.data;
  }
}

export function parseTrace(text: string, file: string): TraceRow[] {
  const rows: TraceRow[] = [];
  for (const d of jsonLines(
    text,
    file,
    traceLine,
    '{"timestamp": ms, "input_length": N, "output_length": N, "hash_ids": [..]}',
  ))
    rows.push({ timestampMs: d.timestamp, input: d.input_length, output: d.output_length, hashIds: d.hash_ids });
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

const jsonlRow = z
  .object({
    prompt: z.string().optional(),
    prompt_token_ids: z.array(z.number().int().min(0)).optional(),
    input_len: z.number().int().positive().optional(),
    output_len: z.number().int().positive().optional(),
  })
  .loose()
  .refine((r) => r.prompt !== undefined || r.prompt_token_ids !== undefined || r.input_len !== undefined, {
    message: 'each row needs "prompt", "prompt_token_ids" or "input_len"',
  });

const sharegptRow = z
  .object({
    conversations: z.array(z.object({ from: z.string(), value: z.string() }).loose()),
  })
  .loose();

/**
 * Dataset rows. Text is counted in the simulated server's tokens (one a character) so that
 * `predict: serving` and `endpoint: sim` agree; a live bench re-counts through the server's
 * /tokenize. A ShareGPT row is its first human turn and the first reply after it (the reply's length
 * is the output length, as vLLM's sharegpt sampling does); rows without both are skipped.
 */
export function parseDataset(text: string, file: string, vocab: number, format?: 'jsonl' | 'sharegpt'): DatasetRow[] {
  const fmt = format ?? (text.trimStart().startsWith('[') ? 'sharegpt' : 'jsonl');
  const rows: DatasetRow[] = [];
  if (fmt === 'sharegpt') {
    let j: unknown;
    try {
      j = JSON.parse(text);
    } catch (e) {
      throw new WorkloadFileError(
        `${file}: not JSON (${(e as Error).message}); ShareGPT is a JSON array of {conversations: [...]}`,
      );
    }
    if (!Array.isArray(j)) throw new WorkloadFileError(`${file}: ShareGPT is a JSON array of {conversations: [...]}`);
    j.forEach((raw) => {
      const r = sharegptRow.safeParse(raw);
      if (!r.success) return;
      const c = r.data.conversations;
      const h = c.findIndex((t) => t.from === 'human' || t.from === 'user');
      const reply = h >= 0 ? c.slice(h + 1).find((t) => t.from === 'gpt' || t.from === 'assistant') : undefined;
      if (h < 0 || !reply || !c[h].value || !reply.value) return;
      const ids = Uint32Array.from(tokenize(c[h].value, vocab));
      rows.push({ ids, text: c[h].value, input: ids.length, output: Math.max(1, tokenize(reply.value, vocab).length) });
    });
  } else {
    for (const d of jsonLines(
      text,
      file,
      jsonlRow,
      '{"prompt": "…" | "prompt_token_ids": [..] | "input_len": N, "output_len": N}',
    )) {
      const ids = d.prompt_token_ids
        ? Uint32Array.from(d.prompt_token_ids)
        : d.prompt !== undefined
          ? Uint32Array.from(tokenize(d.prompt, vocab))
          : undefined;
      rows.push({ ids, text: d.prompt, input: ids?.length ?? d.input_len!, output: d.output_len });
    }
  }
  if (!rows.length) throw new WorkloadFileError(`${file}: no usable rows`);
  return rows;
}
