/**
 * The simulator's clock thread (bundled to dist/sim-worker.js): the real-time loop of clock.ts on a
 * thread of its own. It waits for each step's due time with Atomics.wait (a precise sleep that
 * costs no CPU), and then until the HTTP side has written every step handed over before (so at
 * most one step waits on the HTTP side: when that side falls behind, the clock sees the stall and
 * restarts from the wall clock, as on one thread, instead of queueing steps ever later).
 * Shared `ctl`: [0] set by the HTTP side to close, [1] steps the HTTP side has written, [2]
 * messages this thread has posted on `out` (so the HTTP side, between requests, can see that one
 * is waiting and take it at once with receiveMessageOnPort instead of after its turn's requests).
 *
 *   parent → worker: workerData = { init, ctl, out }, then ToClock messages and { type: 'close' }
 *   worker → parent, on `out`: FromClock messages (ready, step, state)
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { wallMs, startClock, type ClockInit, type ToClock } from './clock';

if (parentPort) {
  const port = parentPort;
  const { init, ctl, out } = workerData as { init: ClockInit; ctl: Int32Array; out: MessagePort };
  let posted = 0;
  const closed = () => {
    if (Atomics.load(ctl, 0) === 0) return false;
    h.close();
    return true;
  };
  const sleep = (due: number) => {
    for (;;) {
      if (closed()) return;
      const left = due - wallMs();
      if (left <= 0) break;
      Atomics.wait(ctl, 0, 0, left);
    }
    for (let w = Atomics.load(ctl, 1); w < posted; w = Atomics.load(ctl, 1)) {
      if (closed()) return;
      Atomics.wait(ctl, 1, w, 100);
    }
  };
  const h = startClock(
    init,
    (m, transfer) => {
      if (m.type === 'step') posted++;
      out.postMessage(m, transfer ?? []);
      Atomics.add(ctl, 2, 1);
    },
    sleep,
  );
  port.on('message', (m: ToClock | { type: 'close' }) => {
    if (m.type === 'close') {
      h.close();
      port.close();
      out.close();
    } else h.onMessage(m);
  });
}
