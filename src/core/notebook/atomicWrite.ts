import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Write a file so that a crash or a full disk never leaves it truncated: write a temp file beside
 * it, flush, then rename over the original (atomic on POSIX). On any failure the temp file is
 * removed, the original is left byte for byte as it was, and the error (with its errno `code`)
 * says so. A symlinked target stays a symlink (the file it points to is replaced), and an existing
 * file keeps its permission bits.
 */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  let target = file;
  try {
    target = fs.realpathSync(file);
  } catch {
    // does not exist yet (or a dangling link): write the path as given
  }
  let mode: number | undefined;
  try {
    mode = fs.statSync(target).mode & 0o7777;
  } catch {
    // new file
  }
  const tmp = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`,
  );
  let fd: number | undefined;
  try {
    fd = fs.openSync(tmp, 'wx', mode ?? 0o666);
    if (mode !== undefined) fs.fchmodSync(fd, mode);
    fs.writeFileSync(fd, data); // loops until every byte is written
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = undefined;
    fs.renameSync(tmp, target);
  } catch (e) {
    if (fd !== undefined) {
      try {
        fs.closeSync(fd);
      } catch {
        // already failing; the first error is the one to report
      }
    }
    try {
      fs.rmSync(tmp, { force: true });
    } catch {
      // e.g. ENOTDIR when the folder itself is gone: there is no temp file to remove
    }
    const err = e as NodeJS.ErrnoException;
    if (err && typeof err.message === 'string')
      err.message = `could not save ${file}: ${err.message}; the file on disk was left as it was`;
    throw err;
  }
  // Make the rename itself durable (best effort: not every platform can fsync a directory).
  try {
    const dfd = fs.openSync(path.dirname(target), 'r');
    try {
      fs.fsyncSync(dfd);
    } finally {
      fs.closeSync(dfd);
    }
  } catch {
    // ignore
  }
}
