/**
 * The simulated endpoint (startSimServer) in its own process, instrumented for the perf script
 * through the server's onStepWritten hook: for every engine step, how late its tokens started to
 * be written (write start − the step's due wall time, t0 + end/speed), how late its first and its
 * last response's bytes were handed to the kernel (the first is the step's lateness, as /metrics
 * counts it), every chunk's lateness and each stream's inter-token error (a chunk's lateness − the
 * same stream's previous chunk's), and how many steps were so late (more than two steps, over 2 ms)
 * that the engine restarted its clock from the wall clock (host stalls).
 *
 * The clock thread's own lateness (when it handed the step over − due) is kept too. argv[2]: where the
 * real-time loop runs, 'worker' (default) or 'here' (the HTTP thread, as before the clock had a thread).
 *
 * IPC: parent → { type: 'take' } → { type: 'steps', startLate, stepLate, endLate, clockLate, chunkLate, itlError, tokens, stalls, cpu, mainCpuS }; { type: 'close' }.
 * child → { type: 'listening', url, clock }.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { startSimServer } from '../../src/core/sim/server';

// PERF_NICE (see perf.ts): before the clock thread starts, which inherits it.
if (process.env.PERF_NICE) os.setPriority(Number(process.env.PERF_NICE));

let startLate: number[] = [];
/** The step's lateness as /metrics counts it: its first response's bytes handed to the kernel − due. */
let stepLate: number[] = [];
let endLate: number[] = [];
let clockLate: number[] = [];
/** Per chunk: lateness, and its stream's inter-token error (this chunk's lateness − its previous one's). */
let chunkLate: Float64Array = new Float64Array(1 << 16);
let itlError: Float64Array = new Float64Array(1 << 16);
let nChunks = 0;
let nGaps = 0;
const append = (to: Float64Array, n: number, xs: Float64Array): Float64Array => {
  if (n + xs.length > to.length) {
    const b = new Float64Array(Math.max(2 * to.length, n + xs.length));
    b.set(to.subarray(0, n));
    to = b;
  }
  to.set(xs, n);
  return to;
};
let tokens = 0;
let stalls = 0;
const srv = await startSimServer({
  speed: 1,
  clock: process.argv[2] === 'here' ? 'here' : 'worker',
  engine: { maxNumSeqs: 4096, maxNumBatchedTokens: 1 << 20 },
  onStepWritten: (s) => {
    startLate.push(s.startMs - s.dueMs);
    stepLate.push(s.firstMs - s.dueMs);
    endLate.push(s.endMs - s.dueMs);
    clockLate.push(s.clockMs - s.dueMs);
    chunkLate = append(chunkLate, nChunks, s.chunkLateMs);
    nChunks += s.chunkLateMs.length;
    itlError = append(itlError, nGaps, s.itlErrorMs);
    nGaps += s.itlErrorMs.length;
    tokens += s.tokens;
    if (s.stalled) stalls++;
  },
});

/** CPU seconds of this process's main thread (the HTTP thread) alone: Linux's per-task record, else null. */
function mainThreadCpuS(): number | null {
  try {
    const f = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 (utime, stime) in clock ticks; the rest starts at field 3.
    return (Number(rest[11]) + Number(rest[12])) / 100;
  } catch {
    return null;
  }
}

process.send?.({ type: 'listening', url: srv.url, clock: srv.clock });
process.on('message', (m: { type?: string }) => {
  if (m?.type === 'take') {
    process.send?.({
      type: 'steps',
      startLate,
      stepLate,
      endLate,
      clockLate,
      chunkLate: Array.from(chunkLate.subarray(0, nChunks)),
      itlError: Array.from(itlError.subarray(0, nGaps)),
      tokens,
      stalls,
      cpu: process.cpuUsage(),
      mainCpuS: mainThreadCpuS(),
    });
    startLate = [];
    stepLate = [];
    endLate = [];
    clockLate = [];
    nChunks = 0;
    nGaps = 0;
    tokens = 0;
    stalls = 0;
  } else if (m?.type === 'close') {
    void srv.close().then(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
