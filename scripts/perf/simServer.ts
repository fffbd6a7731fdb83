/**
 * The simulated endpoint (startSimServer) in its own process, instrumented for the perf script
 * through the server's onStepWritten hook: for every engine step, how late its tokens started to
 * be written (write start − the step's due wall time, t0 + end/speed) and how late the last one was
 * handed to its socket (write end − due), and how many steps were so late (more than two steps, over 2 ms)
 * that the engine restarted its clock from the wall clock (host stalls).
 *
 * IPC: parent → { type: 'take' } → { type: 'steps', startLate, endLate, tokens, stalls, cpu }; { type: 'close' }.
 * child → { type: 'listening', url }.
 */
import { startSimServer } from '../../src/core/sim/server';

let startLate: number[] = [];
let endLate: number[] = [];
let tokens = 0;
let stalls = 0;
const srv = await startSimServer({
  speed: 1,
  engine: { maxNumSeqs: 4096, maxNumBatchedTokens: 1 << 20 },
  onStepWritten: (s) => {
    startLate.push(s.startMs - s.dueMs);
    endLate.push(s.endMs - s.dueMs);
    tokens += s.tokens;
    if (s.stalled) stalls++;
  },
});

process.send?.({ type: 'listening', url: srv.url });
process.on('message', (m: { type?: string }) => {
  if (m?.type === 'take') {
    process.send?.({ type: 'steps', startLate, endLate, tokens, stalls, cpu: process.cpuUsage() });
    startLate = [];
    endLate = [];
    tokens = 0;
    stalls = 0;
  } else if (m?.type === 'close') {
    void srv.close().then(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
