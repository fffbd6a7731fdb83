/**
 * The one Node implementation of the Services file hooks, which both hosts hand to the core with
 * their own policy (the editor: its workspace folders, Restricted Mode and a dialog; the CLI: every
 * path, since the user named the file on the command line). Only regular files are opened (never a
 * FIFO, a device such as /dev/zero or /dev/stdin, or a socket: each is refused from its stat before
 * any open, and the open itself does not block), reads are capped in bytes and in time, and text
 * must be UTF-8.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { FileReadError } from '../engine/files';
import type { FileInfo, ReadFileOptions, ReadHandle, ReadPurpose, Services } from '../engine/types';

export interface FilePolicy {
  /**
   * Folders whose files are read without asking (the workspace folders); the notebook's own folder
   * always counts. Undefined: every path is inside.
   */
  roots?: () => readonly string[];
  /** False in Restricted Mode: nothing at all is read or looked at. Default: trusted. */
  trusted?: () => boolean;
  /** Asked before a run reads a file outside the roots; absent (with roots set): refused. */
  confirm?(absPath: string): Promise<boolean>;
  /** Size caps per purpose, bytes. */
  maxBytes?: Partial<Record<ReadPurpose, number>>;
  /** Time bounds per purpose, ms. */
  timeoutMs?: Partial<Record<ReadPurpose, number>>;
}

/** Defaults: a config.json is kilobytes; what analysis reads must never make typing wait. */
export const FILE_LIMITS = {
  maxBytes: { analysis: 4 << 20, run: 64 << 20 } as Record<ReadPurpose, number>,
  timeoutMs: { analysis: 1_000, run: 30_000 } as Record<ReadPurpose, number>,
};

type FileHooks = Required<Pick<Services, 'readFile' | 'openFile' | 'statFile' | 'listFiles'>>;

/** The most files one glob returns (a rotated log set is tens; a mistaken `/**` is stopped). */
export const GLOB_LIMIT = 10_000;

// O_NONBLOCK: opening a FIFO that a race swapped in for the regular file stat saw returns at once.
const OPEN_FLAGS = fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0);

export function nodeFiles(policy: FilePolicy = {}): FileHooks {
  const limit = (o: ReadFileOptions) => o.maxBytes ?? policy.maxBytes?.[o.purpose] ?? FILE_LIMITS.maxBytes[o.purpose];
  const timeout = (o: ReadFileOptions) => policy.timeoutMs?.[o.purpose] ?? FILE_LIMITS.timeoutMs[o.purpose];
  /** Files outside the roots the user allowed reading: asked once (a refusal is asked again next time). */
  const allowed = new Set<string>();

  /**
   * The real path, after Restricted Mode and the workspace rule; throws a FileReadError. The path
   * is resolved within the purpose's time bound; the user's answer to the confirmation is not
   * (a dialog may stay open longer than a read may take).
   */
  async function admit(abs: string, o: ReadFileOptions): Promise<string> {
    const { real, inside } = await bounded(timeout(o), abs, o.signal, () => locate(abs, o));
    if (inside) return real;
    if (o.purpose === 'analysis')
      throw new FileReadError(
        `${abs} is outside the notebook's folder and the workspace: it is read only when the cell runs, after you confirm it`,
        'outside-workspace',
      );
    if (allowed.has(real)) return real;
    if (policy.confirm && (await policy.confirm(real))) {
      allowed.add(real);
      return real;
    }
    throw new FileReadError(
      `${abs} is outside the notebook's folder and the workspace and reading it was not confirmed: move it into the workspace, or confirm the read`,
      'outside-workspace',
    );
  }

  /** The real path and whether it is inside the roots (or the notebook's folder). */
  async function locate(abs: string, o: ReadFileOptions): Promise<{ real: string; inside: boolean }> {
    if (policy.trusted && !policy.trusted())
      throw new FileReadError('InfLab reads no files in Restricted Mode: trust the workspace first', 'restricted');
    let real: string;
    try {
      real = await fs.promises.realpath(abs);
    } catch (e) {
      throw errnoError(e, abs);
    }
    if (!policy.roots) return { real, inside: true };
    const roots = [...policy.roots(), ...(o.notebookDir ? [o.notebookDir] : [])];
    return { real, inside: await insideAny(real, roots) };
  }

  async function regular(real: string, abs: string): Promise<fs.Stats> {
    let st: fs.Stats;
    try {
      st = await fs.promises.stat(real);
    } catch (e) {
      throw errnoError(e, abs);
    }
    if (!st.isFile())
      throw new FileReadError(
        `${abs} is ${describe(st)}, not a regular file: InfLab reads only regular files`,
        'not-a-file',
      );
    return st;
  }

  async function openRegular(real: string, abs: string): Promise<fs.promises.FileHandle> {
    await regular(real, abs);
    let fh: fs.promises.FileHandle;
    try {
      fh = await fs.promises.open(real, OPEN_FLAGS);
    } catch (e) {
      throw errnoError(e, abs);
    }
    const st = await fh.stat();
    if (!st.isFile()) {
      await fh.close();
      throw new FileReadError(`${abs} is ${describe(st)}, not a regular file`, 'not-a-file');
    }
    return fh;
  }

  async function statFile(abs: string, o: ReadFileOptions): Promise<FileInfo | undefined> {
    let real: string;
    try {
      real = await admit(abs, o);
    } catch (e) {
      if (e instanceof FileReadError && e.code === 'not-found') return undefined;
      throw e;
    }
    return bounded(timeout(o), abs, o.signal, async (): Promise<FileInfo | undefined> => {
      let st: fs.Stats;
      try {
        st = await fs.promises.stat(real);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw errnoError(e, abs);
      }
      return {
        type: st.isFile() ? 'file' : st.isDirectory() ? 'directory' : 'other',
        size: st.size,
        mtimeMs: st.mtimeMs,
      };
    });
  }

  return {
    async readFile(abs, o) {
      const real = await admit(abs, o);
      return bounded(timeout(o), abs, o.signal, async () => {
        const max = limit(o);
        const fh = await openRegular(real, abs);
        try {
          const size = (await fh.stat()).size;
          if (size > max) throw tooLarge(abs, size, max);
          // One byte more than the cap: a file that grew since the stat is caught too.
          const buf = Buffer.allocUnsafe(Math.min(max, size) + 1);
          let n = 0;
          for (;;) {
            const { bytesRead } = await fh.read(buf, n, buf.length - n, n);
            if (bytesRead === 0) break;
            n += bytesRead;
            if (n > max) throw tooLarge(abs, n, max);
            if (n === buf.length) break;
          }
          try {
            return new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, n));
          } catch {
            throw new FileReadError(`${abs} is not UTF-8 text`, 'not-text');
          }
        } finally {
          await fh.close();
        }
      });
    },
    async openFile(abs, o) {
      const real = await admit(abs, o);
      return bounded(timeout(o), abs, o.signal, async (): Promise<ReadHandle> => {
        const fh = await openRegular(real, abs);
        const size = (await fh.stat()).size;
        return {
          size,
          read: async (into, position) => (await fh.read(into, 0, into.length, position)).bytesRead,
          close: () => fh.close(),
        };
      });
    },
    statFile,
    async listFiles(pattern, o) {
      const { base, rest } = splitGlob(path.resolve(o.notebookDir ?? '.', pattern));
      // The folder the glob starts in is admitted as a stat of it would be: one question, not one per file.
      const info = await statFile(base, o);
      if (info?.type !== 'directory') return [];
      const max = o.limit ?? GLOB_LIMIT;
      // A timeout or a cancel stops the walk too, not only the wait for it.
      const stop = new AbortController();
      try {
        return await bounded(timeout(o), pattern, o.signal, async () => {
          // tinyglobby loads on the first glob (dist/libs.js beside the bundles), not with the host.
          const { glob } = await import('tinyglobby');
          const found = await glob(rest, {
            cwd: base,
            absolute: true,
            onlyFiles: true,
            expandDirectories: false,
            deep: 64,
            signal: stop.signal,
          });
          const files: { p: string; mtime: number }[] = [];
          for (const p of found.slice(0, max)) {
            const st = await fs.promises.stat(p).catch(() => undefined);
            if (st?.isFile()) files.push({ p: path.normalize(p), mtime: st.mtimeMs });
          }
          // Rotated logs (day4.log.2, day4.log.1, day4.log) come out oldest first; the name breaks ties.
          return files.sort((a, b) => a.mtime - b.mtime || a.p.localeCompare(b.p)).map((f) => f.p);
        });
      } finally {
        stop.abort();
      }
    },
  };
}

/** An absolute glob split at its first segment with a wildcard: the folder to start in, and the rest. */
export function splitGlob(abs: string): { base: string; rest: string } {
  const parts = abs.split(path.sep);
  let k = 0;
  while (k < parts.length && !isGlob(parts[k])) k++;
  return { base: parts.slice(0, k).join(path.sep) || path.sep, rest: parts.slice(k).join('/') };
}

/** Whether a path segment (or a whole value) holds a glob wildcard: `*`, `?`, `[…]` or `{a,b}`. */
export function isGlob(s: string): boolean {
  return /[*?[{]/.test(s);
}

async function insideAny(real: string, roots: readonly string[]): Promise<boolean> {
  for (const r of roots) {
    for (const root of new Set([path.resolve(r), await fs.promises.realpath(r).catch(() => path.resolve(r))])) {
      const rel = path.relative(root, real);
      if (rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel))) return true;
    }
  }
  return false;
}

function describe(st: fs.Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

function tooLarge(abs: string, size: number, max: number): FileReadError {
  return new FileReadError(
    `${abs} is larger than ${fmtMiB(max)} (${size > max ? `at least ${fmtMiB(size)}` : ''}): not read`,
    'too-large',
  );
}

function fmtMiB(n: number): string {
  return `${(n / (1 << 20)).toFixed(n < 1 << 20 ? 2 : 0)} MiB`;
}

function errnoError(e: unknown, abs: string): FileReadError {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return new FileReadError(`${abs} does not exist`, 'not-found');
  return new FileReadError(`${abs} cannot be read (${code ?? (e as Error).message})`, 'unreadable');
}

/** `work` within `ms` (and before `signal`), else a timeout error; the work's own result is dropped. */
function bounded<T>(ms: number, abs: string, signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new FileReadError(`${abs} took longer than ${ms} ms to read: not read`, 'timeout')),
      ms,
    );
    timer.unref?.();
    const onAbort = () => reject(new FileReadError(`reading ${abs} was cancelled`, 'timeout'));
    signal?.addEventListener('abort', onAbort, { once: true });
    work().then(
      (v) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
