/**
 * The bench worker thread (bundled to dist/bench-worker.js): runs a sweep off the editor's thread
 * and streams what it learns back to the parent as messages.
 *
 *   parent → worker: workerData = { options }, then { type: 'cancel' }
 *   worker → parent: ready, info, progress, point, done (result), fail (message)
 *
 * With workerData = { shard } it is instead one load thread of a point (shards.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { runShardHere, type ShardData } from './shards';
import { runSweepHere, type SweepOptions } from './sweep';

export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'info'; info: unknown }
  | { type: 'progress'; progress: unknown }
  | { type: 'point'; point: unknown }
  | { type: 'done'; result: unknown }
  | { type: 'fail'; message: string };

if (parentPort && (workerData as { shard?: ShardData })?.shard) {
  // A load thread of a point split across threads (shards.ts).
  void runShardHere(parentPort, (workerData as { shard: ShardData }).shard);
} else if (parentPort) {
  const port = parentPort;
  const ac = new AbortController();
  port.on('message', (m: { type?: string }) => {
    if (m?.type === 'cancel') ac.abort();
  });
  const options = (workerData as { options: SweepOptions }).options;
  port.postMessage({ type: 'ready' } satisfies WorkerMessage);
  runSweepHere(options, {
    signal: ac.signal,
    onInfo: (info) => port.postMessage({ type: 'info', info } satisfies WorkerMessage),
    onProgress: (progress) => port.postMessage({ type: 'progress', progress } satisfies WorkerMessage),
    onPoint: (point) => port.postMessage({ type: 'point', point } satisfies WorkerMessage),
  }).then(
    (result) => {
      const { points: _p, ...rest } = result;
      // Points were already sent one by one; the final message carries the rest.
      port.postMessage({ type: 'done', result: rest } satisfies WorkerMessage);
      port.close();
    },
    (e) => {
      port.postMessage({ type: 'fail', message: String((e as Error)?.message ?? e) } satisfies WorkerMessage);
      port.close();
    },
  );
}
