/**
 * Files a cell needs, read through the host's Services before the cell is prepared: prepareCell
 * and analyze stay synchronous and do no I/O of their own; they look the file up in
 * NotebookContext.files. A read that fails is kept as its error, said on the line that named it.
 */
import * as path from 'node:path';
import type { FileInfo, ReadPurpose, Services } from './types';

export type FileErrorCode =
  /** Nothing at that path. */
  | 'not-found'
  /** A folder, a FIFO, a device (/dev/zero, /dev/stdin), a socket: never opened. */
  | 'not-a-file'
  /** Larger than the host's cap for this purpose. */
  | 'too-large'
  /** The read did not finish within the host's time bound. */
  | 'timeout'
  /** Outside the notebook's folder and the workspace: not read while typing, or not confirmed. */
  | 'outside-workspace'
  /** Restricted Mode: nothing is read. */
  | 'restricted'
  /** The host cannot read files at all. */
  | 'unavailable'
  /** Not UTF-8 text. */
  | 'not-text'
  /** Any other I/O error (permissions, EIO); the message has the system's code. */
  | 'unreadable';

export class FileReadError extends Error {
  constructor(
    message: string,
    public readonly code: FileErrorCode,
  ) {
    super(message);
    this.name = 'FileReadError';
  }
}

/** A file a cell needs: its text, or only what is there (stat). `path` is absolute. */
export interface FileNeed {
  path: string;
  want: 'text' | 'stat';
}

export type FileEntry = { text: string } | { info: FileInfo | undefined } | { error: FileReadError };

/** Files read for the cells of one notebook context, by fileKey. */
export type FileCache = Map<string, FileEntry>;

export function fileKey(need: FileNeed): string {
  return `${need.want}:${path.resolve(need.path)}`;
}

/** The read for `need`, or undefined when nobody read it (the caller says "not read"). */
export function lookupFile(cache: FileCache, need: FileNeed): FileEntry | undefined {
  return cache.get(fileKey(need));
}

/**
 * Read every need through the host, in parallel, into `cache` (skipping what it already holds).
 * Never throws: a failure is stored as its FileReadError.
 */
export async function readNeeds(
  needs: FileNeed[],
  cache: FileCache,
  services: Services,
  opts: { purpose: ReadPurpose; notebookDir: string; signal?: AbortSignal },
): Promise<void> {
  const todo = new Map<string, FileNeed>();
  for (const n of needs) {
    const k = fileKey(n);
    if (!cache.has(k)) todo.set(k, n);
  }
  await Promise.all(
    [...todo].map(async ([k, n]) => {
      const ro = { purpose: opts.purpose, notebookDir: opts.notebookDir, signal: opts.signal };
      try {
        if (n.want === 'text') {
          if (!services.readFile) throw new FileReadError('this host reads no files', 'unavailable');
          cache.set(k, { text: await services.readFile(path.resolve(n.path), ro) });
        } else {
          if (!services.statFile) throw new FileReadError('this host reads no files', 'unavailable');
          cache.set(k, { info: await services.statFile(path.resolve(n.path), ro) });
        }
      } catch (e) {
        cache.set(k, {
          error:
            e instanceof FileReadError
              ? e
              : new FileReadError((e as NodeJS.ErrnoException).code ?? (e as Error).message, 'unreadable'),
        });
      }
    }),
  );
}
