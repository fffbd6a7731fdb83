/**
 * The .inflab file format: JSON with a format version, validated with zod on read, written with a
 * stable key order, two-space indentation and a trailing newline. Cell sources are stored as arrays
 * of lines so a one-line edit is a one-line diff; JSON output data stays JSON.
 */
import { z } from 'zod';
import { isJsonMime } from '../engine/outputs';

export const FORMAT_VERSION = 1;

const outputItemSchema = z.object({ mime: z.string().min(1), data: z.unknown() }).strict();
const outputSchema = z.object({ items: z.array(outputItemSchema), metadata: z.record(z.string(), z.unknown()).optional() }).strict();

const lastRunSchema = z
  .object({
    executionOrder: z.number().int().optional(),
    success: z.boolean().optional(),
    startTime: z.number().optional(),
    endTime: z.number().optional(),
  })
  .strict();

const cellSchema = z
  .object({
    kind: z.enum(['code', 'markdown']),
    language: z.string().min(1),
    source: z.array(z.string()),
    metadata: z.record(z.string(), z.unknown()).optional(),
    lastRun: lastRunSchema.optional(),
    outputs: z.array(outputSchema).optional(),
  })
  .strict();

const fileSchema = z
  .object({
    inflab: z.number().int().positive(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    cells: z.array(cellSchema),
  })
  .strict();

export type NotebookCellFile = z.infer<typeof cellSchema>;
export type NotebookFile = z.infer<typeof fileSchema>;

export interface NbOutputItem {
  mime: string;
  data: unknown;
}
export interface NbCell {
  kind: 'code' | 'markdown';
  language: string;
  source: string;
  metadata?: Record<string, unknown>;
  lastRun?: z.infer<typeof lastRunSchema>;
  outputs?: { items: NbOutputItem[]; metadata?: Record<string, unknown> }[];
}
export interface Notebook {
  metadata?: Record<string, unknown>;
  cells: NbCell[];
}

export class NotebookFormatError extends Error {
  constructor(
    message: string,
    /** 1-based line in the file, where known. */
    public readonly line?: number,
  ) {
    super(message);
    this.name = 'NotebookFormatError';
  }
}

/** Parse file text. Throws NotebookFormatError naming what is wrong and where; never guesses. */
export function parseNotebook(text: string): Notebook {
  if (text.trim() === '') return { cells: [] };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    const msg = (e as Error).message;
    const m = /position (\d+)/.exec(msg);
    const line = m ? text.slice(0, Number(m[1])).split('\n').length : undefined;
    throw new NotebookFormatError(`Not valid JSON${line ? ` at line ${line}` : ''}: ${msg}. The file was not changed.`, line);
  }
  if (json && typeof json === 'object' && typeof (json as any).inflab === 'number' && (json as any).inflab > FORMAT_VERSION) {
    throw new NotebookFormatError(
      `This notebook uses .inflab format version ${(json as any).inflab}, newer than this InfLab understands (version ${FORMAT_VERSION}). Update the InfLab extension to open it; the file was not changed.`,
    );
  }
  const r = fileSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0];
    const where = i.path.length ? i.path.join('.') : 'the top level';
    throw new NotebookFormatError(
      `Not a valid .inflab notebook: at ${where}: ${i.message}${r.error.issues.length > 1 ? ` (and ${r.error.issues.length - 1} more problems)` : ''}. The file was not changed.`,
    );
  }
  return {
    metadata: r.data.metadata,
    cells: r.data.cells.map((c) => ({
      kind: c.kind,
      language: c.language,
      source: c.source.join('\n'),
      metadata: c.metadata,
      lastRun: c.lastRun,
      outputs: c.outputs?.map((o) => ({ items: o.items.map((it) => ({ mime: it.mime, data: it.data })), metadata: o.metadata })),
    })),
  };
}

/** Serialize with stable key order and a trailing newline; the same notebook gives the same bytes. */
export function serializeNotebook(nb: Notebook): string {
  const file: Record<string, unknown> = { inflab: FORMAT_VERSION };
  if (nb.metadata && Object.keys(nb.metadata).length) file.metadata = sortKeys(nb.metadata);
  file.cells = nb.cells.map((c) => {
    const cell: Record<string, unknown> = { kind: c.kind, language: c.language, source: c.source.split('\n') };
    if (c.metadata && Object.keys(c.metadata).length) cell.metadata = sortKeys(c.metadata);
    if (c.lastRun && Object.keys(c.lastRun).length) cell.lastRun = sortKeys(c.lastRun);
    if (c.outputs && c.outputs.length)
      cell.outputs = c.outputs.map((o) => {
        const out: Record<string, unknown> = { items: o.items.map((it) => ({ mime: it.mime, data: sortKeys(it.data) })) };
        if (o.metadata && Object.keys(o.metadata).length) out.metadata = sortKeys(o.metadata);
        return out;
      });
    return cell;
  });
  return JSON.stringify(file, null, 2) + '\n';
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) o[k] = sortKeys((v as Record<string, unknown>)[k]);
    return o;
  }
  return v;
}

/** Output item data to bytes (what VS Code holds) and back: JSON mimes as JSON, text as UTF-8. */
export function itemToBytes(item: NbOutputItem): Uint8Array {
  const text = isJsonMime(item.mime) || typeof item.data !== 'string' ? JSON.stringify(item.data) : (item.data as string);
  return new TextEncoder().encode(text);
}

export function itemFromBytes(mime: string, bytes: Uint8Array): NbOutputItem {
  const text = new TextDecoder().decode(bytes);
  if (isJsonMime(mime)) {
    try {
      return { mime, data: JSON.parse(text) };
    } catch {
      return { mime, data: text };
    }
  }
  return { mime, data: text };
}
