/**
 * runSweep: a sweep in a worker thread (so the editor stays responsive and other extensions cannot
 * skew the timestamps), falling back to this thread only when a worker cannot start.
 *
 * The worker script is found next to the running code: the bundled dist/bench-worker.js beside
 * dist/extension.js or dist/cli.js, or src/core/bench/worker.ts when running from source (under a
 * TypeScript loader such as tsx, which a worker inherits through execArgv).
 */
import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { startWorker } from '../host/worker';
import { redact, redactDeep } from './client';
import {
  runSweepHere,
  type PointResult,
  type SweepHooks,
  type SweepInfo,
  type SweepOptions,
  type SweepResult,
} from './sweep';
import type { WorkerMessage } from './worker';

export type { PointResult, SweepHooks, SweepInfo, SweepOptions, SweepResult, ProgressInfo } from './sweep';

export interface RunSweepControl extends SweepHooks {
  /** 'auto' (default): worker, else in-thread; 'off': in-thread; or an explicit worker script path. */
  worker?: 'auto' | 'off' | string;
}

/** Where the worker script is, or undefined when none can be found. */
export function resolveWorkerScript(explicit?: string): string | undefined {
  if (explicit && explicit !== 'auto' && explicit !== 'off') return fs.existsSync(explicit) ? explicit : undefined;
  const here = import.meta.url;
  for (const rel of ['./bench-worker.js', './worker.ts', './worker.js']) {
    try {
      const p = fileURLToPath(new URL(rel, here));
      if (fs.existsSync(p)) return p;
    } catch {
      // not a file URL (e.g. bundled into a browser); no worker
    }
  }
  return undefined;
}

class WorkerStartError extends Error {}

function inWorker(script: string, opts: SweepOptions, hooks: RunSweepControl): Promise<SweepResult> {
  return new Promise<SweepResult>((resolve, reject) => {
    let w: Worker;
    try {
      w = startWorker(script, { options: opts });
    } catch (e) {
      reject(new WorkerStartError((e as Error).message));
      return;
    }
    let ready = false;
    let info: SweepInfo | undefined;
    const points: PointResult[] = [];
    let settled = false;
    const onAbort = () => w.postMessage({ type: 'cancel' });
    hooks.signal?.addEventListener('abort', onAbort, { once: true });
    if (hooks.signal?.aborted) onAbort();
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      hooks.signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const crashed = (message: string) =>
      settle(() => {
        if (!ready) reject(new WorkerStartError(message));
        else
          resolve({
            ...(info ?? {
              endpoint: opts.endpoint,
              model: opts.model ?? 'unknown',
              metricsAvailable: false,
              notes: [],
              runId: '',
            }),
            points,
            stopped: {
              reason: 'crash',
              afterPoint: points.length - 1,
              message: `the bench worker stopped: ${redact(message, opts.apiKey)}; ${points.length} finished point(s) kept`,
            },
            thread: 'worker',
          });
      });
    w.on('message', (m: WorkerMessage) => {
      switch (m.type) {
        case 'ready':
          ready = true;
          break;
        case 'info':
          info = m.info as SweepInfo;
          hooks.onInfo?.(info);
          break;
        case 'progress':
          hooks.onProgress?.(m.progress as any);
          break;
        case 'point':
          points.push(m.point as PointResult);
          hooks.onPoint?.(m.point as PointResult);
          break;
        case 'done':
          settle(() => resolve({ ...(m.result as Omit<SweepResult, 'points' | 'thread'>), points, thread: 'worker' }));
          break;
        case 'fail':
          crashed(m.message);
          break;
      }
    });
    w.on('error', (e) => crashed(e.message));
    w.on('exit', (code) => crashed(`exited with code ${code} before finishing`));
  });
}

/**
 * Run a sweep. Points arrive through onPoint as each finishes; cancel with the signal (finished
 * points are kept, stopped.reason = "cancelled"). Never throws for endpoint trouble.
 */
export async function runSweep(opts: SweepOptions, hooks: RunSweepControl = {}): Promise<SweepResult> {
  const key = opts.apiKey;
  // Whatever came from the server is redacted where it is made; every result is scrubbed once more
  // here, on the side that hands it to the host, whichever thread produced it.
  const scrubbed: RunSweepControl = {
    ...hooks,
    onInfo: hooks.onInfo && ((i) => hooks.onInfo!(redactDeep(i, key))),
    onPoint: hooks.onPoint && ((p) => hooks.onPoint!(redactDeep(p, key))),
    onProgress: hooks.onProgress && ((p) => hooks.onProgress!(redactDeep(p, key))),
  };
  try {
    const mode = hooks.worker ?? 'auto';
    if (mode !== 'off') {
      const script = resolveWorkerScript(mode);
      if (script) {
        try {
          return redactDeep(await inWorker(script, opts, scrubbed), key);
        } catch (e) {
          if (!(e instanceof WorkerStartError)) throw e;
          // fall through: in-thread
        }
      }
    }
    const r = await runSweepHere(opts, scrubbed);
    return redactDeep({ ...r, thread: 'main' as const }, key);
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    err.message = redact(err.message, key);
    if (err.stack) err.stack = redact(err.stack, key);
    throw err;
  }
}
