/** The CLI from source as a child process (tsx), with what it prints and its exit code. */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `inflab ARGS`; `preload` are node flags before the CLI (e.g. `--import` of a fault injector). */
export function runInflabSource(
  args: string[],
  o: { env?: Record<string, string>; preload?: string[]; killAfterMs?: number } = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [...(o.preload ?? []), '--import', 'tsx', path.join(ROOT, 'src/cli/main.ts'), ...args],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...o.env } },
    );
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout.on('data', (b) => out.push(b));
    p.stderr.on('data', (b) => err.push(b));
    const timer = setTimeout(() => p.kill('SIGKILL'), o.killAfterMs ?? 60_000);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
  });
}
