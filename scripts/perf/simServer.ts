/**
 * The simulated endpoint (startSimServer) in its own process, instrumented for the perf script: for
 * every engine step it records how late the step's tokens started to leave (dispatch start − the
 * step's intended wall time, t0 + end/speed) and how late the last one left (dispatch end − intended).
 * Instrumentation only wraps the engine's public methods from outside; the server is unchanged.
 *
 * (the loop calls engine.hasWork() right after each dispatch, which marks its end).
 *
 * IPC: parent → { type: 'take' } → { type: 'steps', startLate, endLate, tokens, cpu }; { type: 'close' }.
 * child → { type: 'listening', url }.
 */
import { startSimServer } from '../../src/core/sim/server';
import type { StepResult } from '../../src/core/sim/engine';

const speed = 1;
const srv = await startSimServer({ speed, engine: { maxNumSeqs: 4096, maxNumBatchedTokens: 1 << 20 } });
const eng = srv.engine;
// Wall time of virtual t = 0: advanceTo(vnow()) runs right after vnow() is read, so the smallest
// (now − v/speed) seen is that origin to within microseconds.
let origin = Infinity;
let startLate: number[] = [];
let endLate: number[] = [];
let tokens = 0;
let pendingEnd: number | undefined;
const hasWork = eng.hasWork.bind(eng);
eng.hasWork = () => {
  // The loop asks right after a dispatch: that is when the step's last token has been written.
  if (pendingEnd !== undefined) {
    endLate.push(performance.now() - pendingEnd);
    pendingEnd = undefined;
  }
  return hasWork();
};
const advanceTo = eng.advanceTo.bind(eng);
eng.advanceTo = (t: number) => {
  const w = performance.now();
  origin = Math.min(origin, w - (t * 1000) / speed);
  return advanceTo(t);
};
const step = eng.step.bind(eng);
eng.step = () => {
  const res = step() as StepResult | undefined;
  if (!res) return res;
  const due = origin + (res.end * 1000) / speed;
  const list = res.tokens;
  let seen = false;
  Object.defineProperty(res, 'tokens', {
    get() {
      if (!seen) {
        seen = true;
        startLate.push(performance.now() - due);
        tokens += list.length;
        pendingEnd = due; // closed by the loop's next hasWork()
      }
      return list;
    },
  });
  return res;
};

process.send?.({ type: 'listening', url: srv.url });
process.on('message', (m: { type?: string }) => {
  if (m?.type === 'take') {
    process.send?.({ type: 'steps', startLate, endLate, tokens, cpu: process.cpuUsage() });
    startLate = [];
    endLate = [];
    tokens = 0;
  } else if (m?.type === 'close') {
    void srv.close().then(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
