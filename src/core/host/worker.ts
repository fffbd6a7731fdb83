/**
 * Starting a worker thread from either a bundle (dist/*.js: the extension, the CLI) or a TypeScript
 * source file (tests and the perf script, which run under tsx). One definition for the bench's
 * sweep thread, its load threads and the simulator's clock thread.
 */
import { pathToFileURL } from 'node:url';
import { Worker, type TransferListItem } from 'node:worker_threads';

/**
 * The parent's Node flags less a TypeScript loader (`--import tsx`, `--require tsx/…`, `--loader …tsx…`):
 * a bundle needs none, and on Node 20 each thread that inherits `--import tsx` loads and registers it
 * again (its own hooks thread included) before the bundle runs.
 */
export function bundleExecArgv(argv: readonly string[] = process.execArgv): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const joined = /^(--import|--require|-r|--loader|--experimental-loader)=(.*)$/.exec(a);
    if (joined) {
      if (!/tsx/.test(joined[2])) out.push(a);
      continue;
    }
    if (/^(--import|--require|-r|--loader|--experimental-loader)$/.test(a) && i + 1 < argv.length) {
      if (!/tsx/.test(argv[i + 1])) out.push(a, argv[i + 1]);
      i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

/** Where tsx's registration API is, when this runs from source. */
function tsxApi(): string | undefined {
  try {
    return (import.meta as unknown as { resolve?: (s: string) => string }).resolve?.('tsx/esm/api');
  } catch {
    return undefined;
  }
}

/**
 * A worker running `script` with `workerData`. A `.ts` script registers tsx inside the worker first
 * (a worker does not inherit the loader's hooks on Node 20); throws when no loader is found.
 */
export function startWorker(script: string, workerData: unknown, transferList: TransferListItem[] = []): Worker {
  if (!script.endsWith('.ts')) {
    // Inherit the flags unless there is a loader to drop: a flag given explicitly that a worker may
    // not take (--max-old-space-size, --title, --expose-gc: the process's own) makes the constructor
    // throw, where inherited it is quietly left to the process.
    const argv = bundleExecArgv();
    if (argv.length === process.execArgv.length) return new Worker(script, { workerData, transferList });
    try {
      return new Worker(script, { workerData, transferList, execArgv: argv });
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e;
      return new Worker(script, { workerData, transferList });
    }
  }
  const api = tsxApi();
  if (!api) throw new Error(`no TypeScript loader to run ${script} in a worker thread`);
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(script).href)}); })`;
  return new Worker(code, { eval: true, workerData, transferList, execArgv: [] });
}
