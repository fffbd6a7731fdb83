/**
 * The CLI as a child process, as a user runs it: the bundle the package ships (dist/cli.js, built
 * by buildCli) or the source through tsx (no build step); what it printed and its exit code.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Node's arguments that start the CLI: the built bundle, or the source (tsx resolved here, so any working directory does). */
const ENTRY = {
  dist: [path.join(ROOT, 'dist/cli.js')],
  source: ['--import', import.meta.resolve('tsx'), path.join(ROOT, 'src/cli/main.ts')],
};

/** No API key from the developer's shell reaches a CLI under test (a test that wants one passes it in env). */
const NO_KEYS = { INFLAB_API_KEY: '', OPENAI_API_KEY: '' };

/** The newest modification time under `dir` (files only). */
function newest(dir: string): number {
  let t = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : fs.statSync(p).mtimeMs);
  }
  return t;
}

/** Whether every bundle in dist/ is newer than the sources and the build script. */
function distFresh(): boolean {
  const outs = ['cli.js', 'bench-worker.js', 'sim-worker.js'].map((f) => path.join(ROOT, 'dist', f));
  if (!outs.every((f) => fs.existsSync(f))) return false;
  const built = Math.min(...outs.map((f) => fs.statSync(f).mtimeMs));
  const inputs = Math.max(
    newest(path.join(ROOT, 'src')),
    newest(path.join(ROOT, 'scripts/shims')),
    ...['scripts/build.mjs', 'package-lock.json'].map((f) => fs.statSync(path.join(ROOT, f)).mtimeMs),
  );
  return built > inputs;
}

/**
 * Build dist/ (`before(buildCli)` in a file that runs the bundle) unless it is already newer than
 * the sources (`npm test` builds first): test files run two at a time, and a rebuild rewrites
 * dist/cli.js under another file's running CLI (seen as a run exiting 1 mid-suite). A failing build
 * fails the file.
 */
export function buildCli(): void {
  if (distFresh()) return;
  const b = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(b.status, 0, b.stderr);
}

export interface CliBytes {
  code: number | null;
  stdout: Buffer;
  stderr: Buffer;
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Both streams as they came, interleaved (for a message). */
  printed: string;
}

export interface SpawnOptions {
  /** The working directory (the repository's root by default). */
  cwd?: string;
  /** The child's whole environment (this process's by default). */
  env?: NodeJS.ProcessEnv;
  /** SIGKILL after this long (60 s by default). */
  killAfterMs?: number;
  /** Called after each chunk with everything printed so far (both streams) and the child (to signal it). */
  onOutput?: (printed: string, child: ChildProcess) => void;
}

/** A command as a child process, with its output as bytes. */
export function spawnBytes(cmd: string, args: string[], o: SpawnOptions = {}): Promise<CliBytes & { printed: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd: o.cwd ?? ROOT, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let printed = '';
    const take = (to: Buffer[]) => (b: Buffer) => {
      to.push(b);
      printed += b;
      o.onOutput?.(printed, p);
    };
    p.stdout.on('data', take(out));
    p.stderr.on('data', take(err));
    const timer = setTimeout(() => p.kill('SIGKILL'), o.killAfterMs ?? 60_000);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err), printed });
    });
  });
}

/** A command as a child process, with its output as text. */
export async function spawnText(cmd: string, args: string[], o: SpawnOptions = {}): Promise<CliRun> {
  const r = await spawnBytes(cmd, args, o);
  return { code: r.code, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'), printed: r.printed };
}

export interface CliOptions extends Omit<SpawnOptions, 'env'> {
  /** From source (tsx) instead of dist/cli.js. */
  source?: boolean;
  /** Added to this process's environment (after the API keys are emptied). */
  env?: NodeJS.ProcessEnv;
  /** Node flags before the CLI (e.g. `--import` of a fault injector). */
  node?: string[];
}

/** Node's argument list for `inflab ARGS`. */
export const inflabArgv = (args: string[], o: { source?: boolean; node?: string[] } = {}) => [
  ...(o.node ?? []),
  ...ENTRY[o.source ? 'source' : 'dist'],
  ...args,
];

const cliEnv = (env: NodeJS.ProcessEnv | undefined) => ({ ...process.env, ...NO_KEYS, ...env });

/** `inflab ARGS`: the bundle (buildCli first) unless `source`. */
export function runInflab(args: string[], o: CliOptions = {}): Promise<CliRun> {
  return spawnText(process.execPath, inflabArgv(args, o), { ...o, env: cliEnv(o.env) });
}

/** The same, synchronously: spawnSync's result (status, stdout, stderr). */
export function runInflabSync(
  args: string[],
  o: Pick<CliOptions, 'source' | 'cwd' | 'env'> = {},
): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, inflabArgv(args, o), { cwd: o.cwd ?? ROOT, encoding: 'utf8', env: cliEnv(o.env) });
}
