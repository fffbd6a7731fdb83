/**
 * Load threads: a closed-loop point with many streams is split across worker threads, each with its
 * own event loop and undici Agent, so no single thread's loop falls behind its sockets (a late loop
 * reads several chunks in one read and stamps them with one time: TTFT too high, ITL near zero).
 *
 * The thread running the sweep draws every prompt (with a workload plan's output length) in request
 * order (so a point's request set is the same however it is split), gives each shard a contiguous block of request ids, a share of the
 * concurrency, the requests and the warm-up, and starts all shards together once each has opened
 * its connections. Records come back in columnar form and are moved onto this thread's clock (the
 * shards' epoch origins, performance.timeOrigin + t0, align within a fraction of a millisecond);
 * per-request latencies never mix clocks. Little's-law in-flight counts add up; loop lag is the
 * worst shard's.
 *
 * Threads: INFLAB_BENCH_THREADS, else one per STREAMS_PER_THREAD streams, at most MAX_LOAD_THREADS
 * and at most THREADS_PER_CORE per core. A few more threads than cores helps: a thread with fewer
 * sockets gets back to each of them sooner, and the scheduler wakes a mostly idle thread promptly,
 * while one busy thread waits its turn behind the server and everything else on the machine.
 * Measured on 2 cores against a mock server in its own process, 1,000 streams (load average 10–15
 * from other work): with 2 threads 23–40% of the gaps between chunks were chunks read together and
 * the ITL median came out 0.85–0.96× the server's; with 8 threads 3–11% and 0.99–1.03×. Past two
 * threads a core they only cost: on a quiet 2-core machine (perf script, 1,000 streams at ITL
 * 10 ms, two runs each) 4 threads read 5% of gaps together (8 threads: 1–4%), ITL median 1.007×,
 * at 44 µs of CPU a chunk against 53–62 µs, and a server on the same cores, which the extra
 * threads outnumber for the CPU, read requests late by a p99 of 108–130 ms against 247–322 ms.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { fileURLToPath } from 'node:url';
import type { MessagePort, Worker } from 'node:worker_threads';
import { startWorker } from '../host/worker';
import { createAgent, getText, now, type ClientConfig } from './client';
import { drawPrompt, runPoint, type PointLoad, type PointRun, type RunPointOptions } from './loadgen';
import type { RequestRecord } from './metrics';
import type { PlannedPrompt, PromptSource } from './prompts';
import { fromColumnar, toColumnar, type ColumnarRecords } from './records';

export const STREAMS_PER_THREAD = 125;
export const MAX_LOAD_THREADS = 8;
export const THREADS_PER_CORE = 2;

/** How many load threads a closed-loop point of this concurrency uses on a machine with `cores` cores. */
export function loadThreads(concurrency: number, requested?: number, cores = os.availableParallelism()): number {
  const cap = Math.min(MAX_LOAD_THREADS, THREADS_PER_CORE * Math.max(1, cores));
  const want = requested ?? Math.min(cap, Math.ceil(concurrency / STREAMS_PER_THREAD));
  return Math.max(1, Math.min(Math.floor(want), concurrency));
}

export interface ShardData {
  cfg: ClientConfig;
  load: PointLoad;
  /** Warm-up requests first, then the measured ones, in request order (prompt, and a plan's output length). */
  prompts: PlannedPrompt[];
  idOffset: number;
  warmIdOffset: number;
  requestIdPrefix: string;
}

type ToShard = { type: 'go' } | { type: 'cancel' };
type FromShard =
  | { type: 'ready' }
  | { type: 'progress'; done: number }
  | { type: 'done'; run: Omit<PointRun, 'records'> & { records: ColumnarRecords } }
  | { type: 'fail'; message: string };

export class ShardStartError extends Error {}

function shardScript(explicit?: string): string | undefined {
  if (explicit) return fs.existsSync(explicit) ? explicit : undefined;
  for (const rel of ['./bench-worker.js', './worker.ts', './worker.js']) {
    try {
      const p = fileURLToPath(new URL(rel, import.meta.url));
      if (fs.existsSync(p)) return p;
    } catch {
      // not a file URL: no worker
    }
  }
  return undefined;
}

function spawn(script: string, data: ShardData): Worker {
  try {
    return startWorker(script, { shard: data });
  } catch (e) {
    throw new ShardStartError((e as Error).message);
  }
}

const split = (total: number, parts: number, k: number) =>
  Math.floor((total * (k + 1)) / parts) - Math.floor((total * k) / parts);

/** Run a closed-loop point on `threads` worker threads; throws ShardStartError when one cannot start. */
export async function runPointThreads(
  threads: number,
  cfg: ClientConfig,
  load: PointLoad,
  prompts: PromptSource,
  opts: RunPointOptions,
): Promise<PointRun> {
  const script = shardScript(opts.workerScript);
  if (!script) throw new ShardStartError('no worker script');
  const total = load.requests ?? 0;
  const warm = Math.max(0, load.warmup ?? 0);
  const c = Math.max(1, load.concurrency ?? 1);
  const warmPrompts = Array.from({ length: warm }, () => drawPrompt(prompts, 'w'));
  const measured = Array.from({ length: total }, () => drawPrompt(prompts, 'r'));
  const prefix = opts.requestIdPrefix ?? 'inflab';
  const shards: ShardData[] = [];
  let off = 0;
  let woff = 0;
  for (let k = 0; k < threads; k++) {
    const n = split(total, threads, k);
    const w = split(warm, threads, k);
    shards.push({
      cfg,
      load: { ...load, concurrency: split(c, threads, k), requests: n, warmup: w },
      prompts: [...warmPrompts.slice(woff, woff + w), ...measured.slice(off, off + n)],
      idOffset: off,
      warmIdOffset: woff,
      requestIdPrefix: prefix,
    });
    off += n;
    woff += w;
  }
  const workers: Worker[] = [];
  const done = new Array<number>(threads).fill(0);
  const runs: (FromShard & { type: 'done' })['run'][] = [];
  let t0 = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      let ready = 0;
      let started = false;
      let finished = 0;
      const fail = (m: string) => {
        if (!started) reject(new ShardStartError(m));
        else reject(new Error(`a load thread stopped: ${m}`));
      };
      for (let k = 0; k < threads; k++) {
        let w: Worker;
        try {
          w = spawn(script, shards[k]);
        } catch (e) {
          return fail((e as Error).message);
        }
        workers.push(w);
        w.on('message', (m: FromShard) => {
          if (m.type === 'ready' && ++ready === threads) {
            started = true;
            t0 = now();
            for (const x of workers) x.postMessage({ type: 'go' } satisfies ToShard);
          } else if (m.type === 'progress') {
            done[k] = m.done;
            opts.onRequest?.(
              done.reduce((a, b) => a + b, 0),
              total,
            );
          } else if (m.type === 'done') {
            runs[k] = m.run;
            if (++finished === threads) resolve();
          } else if (m.type === 'fail') fail(m.message);
        });
        w.on('error', (e) => fail(e.message));
        w.on('exit', (code) => {
          if (!runs[k]) fail(`exited with code ${code}`);
        });
      }
      const onAbort = () => workers.forEach((x) => x.postMessage({ type: 'cancel' } satisfies ToShard));
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  } finally {
    for (const w of workers) void w.terminate();
  }
  // The point's clock starts when the first shard's does (after its warm-up), as on one thread.
  const base = runs.length ? Math.min(...runs.map((r) => r.t0EpochMs)) : performance.timeOrigin + t0;
  const records: RequestRecord[] = [];
  let observed = 0;
  let maxInFlight = 0;
  const lag = { mean_ms: 0, p50_ms: 0, p99_ms: 0, max_ms: 0 };
  const warmup = { requests: 0, promptTokens: 0, outputTokens: 0, unknown: 0 };
  for (const r of runs) {
    for (const key of Object.keys(warmup) as (keyof typeof warmup)[]) warmup[key] += r.warmup[key];
    const shift = r.t0EpochMs - base;
    for (const x of fromColumnar(r.records)) {
      x.scheduledMs += shift;
      x.sentMs += shift;
      x.endMs += shift;
      for (let i = 0; i < x.chunkMs.length; i++) x.chunkMs[i] += shift;
      records.push(x);
    }
    observed += r.observedInFlight;
    maxInFlight += r.maxInFlight;
    for (const key of Object.keys(lag) as (keyof typeof lag)[]) lag[key] = Math.max(lag[key], r.loopLag[key]);
  }
  records.sort((a, b) => a.id - b.id);
  return {
    records,
    durationMs: records.reduce((m, r) => Math.max(m, r.endMs), 0),
    t0EpochMs: base,
    observedInFlight: observed,
    maxInFlight,
    loopLag: lag,
    cancelled: !!opts.signal?.aborted || runs.some((r) => r.cancelled),
    warmup,
  };
}

/** The shard side (in the worker thread): open the connections, wait for go, run the share, report. */
export async function runShardHere(port: MessagePort, d: ShardData): Promise<void> {
  const ac = new AbortController();
  let go: () => void = () => undefined;
  const started = new Promise<void>((r) => (go = r));
  port.on('message', (m: ToShard) => {
    if (m.type === 'go') go();
    else if (m.type === 'cancel') {
      ac.abort();
      go();
    }
  });
  const c = Math.max(1, d.load.concurrency ?? 1);
  const agent = createAgent(c + 4);
  try {
    // Open this thread's connections before the clock starts, so no TTFT pays a TCP connect.
    await Promise.all(
      Array.from({ length: c }, () =>
        getText(agent, d.cfg.baseUrl, '/health', d.cfg.apiKey, 5000).catch(() => undefined),
      ),
    );
    port.postMessage({ type: 'ready' } satisfies FromShard);
    await started;
    let i = 0;
    let last = 0;
    const run = await runPoint(
      agent,
      d.cfg,
      d.load,
      { next: () => d.prompts[i++].prompt, request: () => d.prompts[i++] },
      {
        signal: ac.signal,
        requestIdPrefix: d.requestIdPrefix,
        idOffset: d.idOffset,
        warmIdOffset: d.warmIdOffset,
        threads: 1,
        onRequest(done, total) {
          const t = now();
          if (t - last < 100 && done !== total) return;
          last = t;
          port.postMessage({ type: 'progress', done } satisfies FromShard);
        },
      },
    );
    const { records, ...rest } = run;
    port.postMessage({ type: 'done', run: { ...rest, records: toColumnar(records) } } satisfies FromShard);
  } catch (e) {
    port.postMessage({ type: 'fail', message: String((e as Error)?.message ?? e) } satisfies FromShard);
  } finally {
    await agent.destroy().catch(() => undefined);
    port.close();
  }
}
