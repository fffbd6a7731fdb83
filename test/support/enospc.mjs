/**
 * Preloaded into a child process (node --import): every write into the folder named by
 * INFLAB_TEST_ENOSPC_DIR fails as a full disk does, with ENOSPC, after its first 4,096 bytes (the
 * partial block a full disk leaves). Only for what cannot run here: filling a real disk.
 */
import fs from 'node:fs';
import path from 'node:path';
import { syncBuiltinESMExports } from 'node:module';

const dir = path.resolve(process.env.INFLAB_TEST_ENOSPC_DIR);
const inDir = (p) => typeof p === 'string' && path.dirname(path.resolve(p)) === dir;
const fds = new Set();
const written = new Map();
const enospc = () =>
  Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });

const open = fs.openSync;
fs.openSync = function (p, ...rest) {
  const fd = open.call(this, p, ...rest);
  if (inDir(p)) fds.add(fd);
  return fd;
};
const close = fs.closeSync;
fs.closeSync = function (fd) {
  fds.delete(fd);
  written.delete(fd);
  return close.call(this, fd);
};
/** Write at most what is left of the 4,096 bytes, then fail. */
function limited(fd, buf, write) {
  const done = written.get(fd) ?? 0;
  const room = Math.max(0, 4096 - done);
  if (room === 0) throw enospc();
  const n = Math.min(room, buf.length);
  write(buf.subarray(0, n));
  written.set(fd, done + n);
  if (n < buf.length) throw enospc();
  return n;
}
const writeSync = fs.writeSync;
fs.writeSync = function (fd, data, ...rest) {
  if (!fds.has(fd)) return writeSync.call(this, fd, data, ...rest);
  const buf = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return limited(fd, buf, (b) => writeSync.call(fs, fd, b));
};
const writeFileSync = fs.writeFileSync;
fs.writeFileSync = function (target, data, ...rest) {
  const hit = typeof target === 'number' ? fds.has(target) : inDir(target);
  if (!hit) return writeFileSync.call(this, target, data, ...rest);
  const fd = typeof target === 'number' ? target : fs.openSync(target, 'w');
  try {
    const buf =
      typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    limited(fd, buf, (b) => writeSync.call(fs, fd, b));
  } finally {
    if (typeof target !== 'number') fs.closeSync(fd);
  }
};
syncBuiltinESMExports();
