/**
 * Section 1: how accurate the bench client is, and how much it can take. The mock server
 * (mockServer.ts) runs in its own process and records when it really wrote each chunk; the client
 * runs exactly as a bench cell runs it (runSweep → the bundled dist/bench-worker.js worker thread,
 * one undici Agent, X-Request-Id on every request). Each request's record is matched to the server's
 * by that id, and both clocks are epoch-aligned (performance.timeOrigin + performance.now(), checked
 * by the one-way request delay at concurrency 1).
 *
 *   TTFT error  = client's first-chunk arrival − server's first-chunk write  (= measured − true TTFT)
 *   ITL error   = client's gap − server's gap, per gap
 *   chunk delay = arrival − write, per chunk (the client's read lag)
 *
 * What each side can see. The truth is when the server's socket write returned: the chunk is then in
 * the kernel and, on loopback with TCP_NODELAY, readable by the client at once. The client sees only
 * when a read returned: if two chunks of one stream are waiting when its thread gets to the socket
 * (the thread was busy with other sockets, or not scheduled), they come out of one read and undici
 * hands them over microseconds apart; no client can separate them afterwards. vLLM's client has the
 * same limit (aiohttp, one timestamp per chunk it iterates, which is per read). `itl_under_1ms_share`
 * shows how often that happened (the server's own share of back-to-back writes beside it), and the
 * bench reports the same share per point (report.ts, client-read-bursts). At 1,000 streams on 2 cores
 * the rig is saturated (the client costs ~41–76 µs of CPU per chunk over the measured window with 4–8 load threads,
 * threads, undici and the kernel included (cpu_us_per_chunk); the mock ~20), so the server slips (its true ITL spreads from ~7 to 70 ms) and the ITL medians are
 * medians of broad distributions, which move with the share of chunks read together: the number of
 * load threads (shards.ts) is what keeps that share low.
 */
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { fromColumnar } from '../../src/core/bench/records';
import { runSweep, type SweepResult } from '../../src/core/bench';
import { loadThreads } from '../../src/core/bench/shards';
import { percentileSorted } from '../../src/core/bench/metrics';
import { r1, r3, summary } from './stats';
import type { TruthRecord } from './mockServer';

export interface ClientPoint {
  concurrency: number;
  /** Load threads the point ran on (shards.ts: one per 125 streams, at most 8 and two per core, or INFLAB_BENCH_THREADS). */
  load_threads: number;
  requests: number;
  matched: number;
  failed: number;
  chunks: number;
  duration_s: number;
  /** Content chunks the client received per second over the point. */
  chunks_per_s: number;
  ttft_error_ms: { p50: number; p99: number; mean: number; max: number };
  itl_error_ms: { p50: number; p99: number; abs_p99: number };
  itl_median_ms: { measured: number; truth: number; ratio: number };
  /** Quantiles of the gaps as the client measured them and as the server wrote them (the shape behind the medians). */
  itl_quantiles_ms: { q: number[]; measured: number[]; truth: number[] };
  /** Share of gaps under 1 ms: chunks of one stream read together (client) or written together (server). */
  itl_under_1ms_share: { measured: number; truth: number };
  chunk_delay_ms: { p50: number; p99: number; max: number };
  /** How far the server itself slipped: its true TTFT (first write − client send) and ITL vs nominal. */
  server: { ttft_p50_ms: number; ttft_p99_ms: number; itl_p50_ms: number; cpu_s: number };
  /** Request arrival at the server − client send, p50/min: the clock-alignment check. */
  send_to_arrival_ms: { p50: number; min: number };
  /**
   * The whole TTFT error (first-chunk arrival − when the load issued the request − nominal TTFT),
   * split at each instant both sides recorded, per percentile (ms; each part's own percentiles, so
   * they do not add up; the sums are given whole):
   *   client_queue = sent − issued (the request waits for undici to write it: a reused keep-alive
   *                  socket is written after a turn of the event loop; the bench's TTFT starts at sent)
   *   wire_in      = server's first byte − sent (kernel + the server's loop getting to the read)
   *   read_request = request complete − first byte (the server reading and parsing it)
   *   server_slip  = first chunk written − request complete − nominal TTFT (the server's timer)
   *   server_handling = read_request + server_slip, per request
   *   read_side    = client's first-chunk arrival − first chunk written (the client's read lag)
   *   client = client_queue + read_side; server = wire_in + read_request + server_slip; total = both;
   *   reported = what the bench's TTFT reads above nominal (total − client_queue);
   *   vs_record = the bench's TTFT − the server's own (first chunk written − first byte read) =
   *               wire_in + read_side: the whole error against the server's record, the figure
   *               compared with vLLM's client (vllm below).
   */
  ttft_error_parts_ms: Record<string, { p50: number; p90: number; p99: number; max: number }>;
  /** The client process's CPU over the whole point, its threads' start-up included. */
  client_cpu_s: number;
  /** Its CPU over the measured window alone (first send to last end), and that per chunk read. */
  client_window_cpu_s: number;
  cpu_us_per_chunk: number;
  /** The kernel's part of the window's CPU (sockets, epoll, futex wakes of its threads). */
  client_window_system_share: number;
  /** Cores the client and the mock kept busy over the window (of os.cpus().length): a rig above ~1.8 of 2 is saturated. */
  cores_busy: { client: number; server: number };
  worker_loop_lag_ms: { p50: number; p99: number; max: number };
}

/** vLLM's own client (scripts/perf/vllmClient.py) on the same mock, right after InfLab's point. */
export interface OtherClientPoint {
  client: string;
  concurrency: number;
  requests: number;
  matched: number;
  failed: number;
  /** Its TTFT − the server's record (first chunk written − first byte read): send side + read side. */
  vs_record_ms: { p50: number; p99: number };
  send_side_ms: { p50: number; p99: number };
  read_side_ms: { p50: number; p99: number };
  itl_median_ms: { measured: number; truth: number; ratio: number };
  itl_under_0_1ms_share: number;
  /** Its vs_record median ÷ InfLab's at the same point (how many times InfLab's whole error it is). */
  ratio_to_inflab_p50: number;
  ratio_to_inflab_p99: number;
}

export interface ClientAccuracy {
  ttft_nominal_ms: number;
  itl_nominal_ms: number;
  /** How much lower the mock's priority was than the client's (nice steps; 0: equal). */
  mock_nice_offset: number;
  /** The cores each side was held to (PERF_PIN), when it was. */
  pinned?: { client: string; mock: string };
  output_tokens: number;
  input_tokens: number;
  worker: string;
  thread: string;
  points: ClientPoint[];
  /** vLLM's client at the same points, when PERF_VLLM_REQUEST_FUNC names its request function. */
  vllm?: OtherClientPoint[] | { skipped: string };
  /** Highest chunk rate at which the median chunk delay stays ≤ 1 ms and the TTFT error p50 ≤ 5 ms. */
  capacity_chunks_per_s: number;
  capacity_rule: string;
  targets: {
    ttft_p50_error_at_1000_ms: number;
    ttft_target_ms: number;
    itl_ratio_at_1000: number;
    itl_target: string;
    met: boolean;
  };
}

const QS = [5, 10, 25, 40, 50, 60, 75, 90, 95];
const quantiles = (xs: number[], qs: number[]) => {
  const s = Float64Array.from(xs).sort();
  return qs.map((q) => r3(percentileSorted(s, q)));
};
const share = (xs: number[], below: number) => (xs.length ? xs.filter((x) => x < below).length / xs.length : NaN);

const epochNow = () => performance.timeOrigin + performance.now();

/**
 * This process's CPU time sampled every 20 ms (the sweep runs on worker threads, so this thread is
 * free to sample on time): `between(a, b)` is the CPU used from epoch ms a to b, interpolated, so a
 * point's figure covers its measured window and not its threads' start-up.
 */
function traceCpu() {
  const at: number[] = [];
  const cpu: number[] = [];
  const sys: number[] = [];
  const sample = () => {
    const u = process.cpuUsage();
    at.push(epochNow());
    cpu.push((u.user + u.system) / 1e6);
    sys.push(u.system / 1e6);
  };
  sample();
  const timer = setInterval(sample, 20);
  const valueAt = (t: number, of: number[]) => {
    let i = 1;
    while (i < at.length - 1 && at[i] < t) i++;
    const f = Math.min(1, Math.max(0, (t - at[i - 1]) / (at[i] - at[i - 1] || 1)));
    return of[i - 1] + f * (of[i] - of[i - 1]);
  };
  return {
    stop() {
      clearInterval(timer);
      sample();
    },
    between: (a: number, b: number) => valueAt(b, cpu) - valueAt(a, cpu),
    /** Of that, the kernel's (system) time. */
    systemBetween: (a: number, b: number) => valueAt(b, sys) - valueAt(a, sys),
  };
}

/**
 * PERF_PIN: the mock on the last core and this process (its threads, and the load threads it starts
 * later, which inherit it) on the others, so neither side can take the other's core: the nearest
 * this machine comes to a server on a machine of its own. Needs taskset (util-linux).
 */
export function pinCores(pid: number, which: 'last' | 'rest' | 'all'): string {
  const n = os.cpus().length; // not availableParallelism(): that counts the cores this process is held to
  const list = which === 'last' ? String(n - 1) : which === 'all' || n < 2 ? `0-${n - 1}` : `0-${n - 2}`;
  execFileSync('taskset', ['-a', '-p', '-c', list, String(pid)], { stdio: 'ignore' });
  return list;
}

export async function startMock(
  root: string,
  ttft: number,
  itl: number,
  opts: { niceOffset?: number; pin?: boolean } = {},
): Promise<{
  child: ChildProcess;
  url: string;
  take(): Promise<{ records: TruthRecord[]; cpu: NodeJS.CpuUsage }>;
  close(): Promise<void>;
}> {
  const child = fork(path.join(root, 'scripts/perf/mockServer.ts'), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, MOCK_TTFT_MS: String(ttft), MOCK_ITL_MS: String(itl) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  if (opts.niceOffset && child.pid) {
    try {
      os.setPriority(child.pid, Math.min(19, os.getPriority() + opts.niceOffset));
    } catch {
      // not allowed here: the mock runs at this process's priority (the figure records it)
    }
  }
  if (opts.pin && child.pid) pinCores(child.pid, 'last');
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the mock server did not start within 20 s')), 20_000);
    child.once('error', reject);
    child.on('message', (m: any) => {
      if (m?.type === 'listening') {
        clearTimeout(t);
        resolve(m.port);
      }
    });
  });
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    take: () =>
      new Promise((resolve) => {
        const on = (m: any) => {
          if (m?.type !== 'records') return;
          child.off('message', on);
          resolve({ records: m.records, cpu: m.cpu });
        };
        child.on('message', on);
        child.send({ type: 'take' });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.send({ type: 'close' });
        setTimeout(() => child.kill(), 3000).unref();
      }),
  };
}

/**
 * Run vLLM's client (scripts/perf/vllmClient.py with the request function PERF_VLLM_REQUEST_FUNC
 * names) against the mock at one concurrency and judge it as InfLab's is judged.
 */
async function vllmPoint(
  root: string,
  mock: Awaited<ReturnType<typeof startMock>>,
  c: number,
  requests: number,
  shape: { output: number; input: number },
  inflab: ClientPoint,
): Promise<OtherClientPoint> {
  await mock.take(); // forget what came before
  const prefix = `vllm${c}`;
  const py = process.env.PERF_PYTHON ?? 'python3';
  const args = [
    path.join(root, 'scripts/perf/vllmClient.py'),
    mock.url,
    String(c),
    String(requests),
    String(shape.output),
    String(shape.input),
    prefix,
  ];
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = spawn(py, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${py} ${args[0]} exited ${code}: ${err.trim().slice(-500)}`)),
    );
  });
  const { records: truth } = await mock.take();
  const byId = new Map(truth.map((t) => [t.requestId, t]));
  const vsRecord: number[] = [];
  const send: number[] = [];
  const read: number[] = [];
  const gaps: number[] = [];
  const truthGaps: number[] = [];
  let matched = 0;
  let failed = 0;
  for (const line of stdout.split('\n')) {
    if (!line.trim()) continue;
    const r = JSON.parse(line) as { id: string; ok: boolean; start: number; first: number; itl: number[] };
    if (!r.ok) failed++;
    const t = byId.get(r.id);
    if (!t || !r.ok || !Number.isFinite(t.firstByte)) continue;
    matched++;
    vsRecord.push(r.first - r.start - (t.chunks[0] - t.firstByte));
    send.push(t.firstByte - r.start);
    read.push(r.first - t.chunks[0]);
    gaps.push(...r.itl);
    for (let k = 1; k < t.chunks.length; k++) truthGaps.push(t.chunks[k] - t.chunks[k - 1]);
  }
  const v = summary(vsRecord);
  const sd = summary(send);
  const rd = summary(read);
  const g = summary(gaps);
  const tg = summary(truthGaps);
  const mine = inflab.ttft_error_parts_ms.vs_record;
  return {
    client: `vLLM's async_request_openai_completions (${path.basename(process.env.PERF_VLLM_REQUEST_FUNC ?? '')}), aiohttp, as vllm bench serve --max-concurrency`,
    concurrency: c,
    requests,
    matched,
    failed,
    vs_record_ms: { p50: v.p50, p99: v.p99 },
    send_side_ms: { p50: sd.p50, p99: sd.p99 },
    read_side_ms: { p50: rd.p50, p99: rd.p99 },
    itl_median_ms: { measured: g.p50, truth: tg.p50, ratio: r3(g.p50 / tg.p50) },
    itl_under_0_1ms_share: r3(share(gaps, 0.1)),
    ratio_to_inflab_p50: r1(v.p50 / mine.p50),
    ratio_to_inflab_p99: r1(v.p99 / mine.p99),
  };
}

export async function clientAccuracy(
  root: string,
  opts: {
    concurrency: number[];
    rounds: number;
    minRequests: number;
    shards?: number;
    /** Load threads per point (INFLAB_BENCH_THREADS, as a bench cell reads it; default: shards.ts). */
    threads?: number;
    /** The mock's nominal ITL (default 10 ms). */
    itlMs?: number;
    /** The mock's nice value above this process's (PERF_MOCK_NICE; default 0). */
    mockNice?: number;
    /** PERF_PIN: the mock on a core of its own, the client on the rest (pinCores). */
    pin?: boolean;
    log: (s: string) => void;
  },
): Promise<ClientAccuracy> {
  const TTFT = 50;
  const ITL = opts.itlMs ?? 10;
  const OUT = 64;
  const IN = 64;
  const worker = path.join(root, 'dist/bench-worker.js');
  const pinned = opts.pin ? { client: pinCores(process.pid, 'rest'), mock: String(os.cpus().length - 1) } : undefined;
  const mock = await startMock(root, TTFT, ITL, { niceOffset: opts.mockNice ?? 0, pin: opts.pin });
  const points: ClientPoint[] = [];
  const vllm: OtherClientPoint[] = [];
  let vllmSkipped: string | undefined;
  let thread = '';
  try {
    for (const c of opts.concurrency) {
      const requests = Math.max(opts.minRequests, c * opts.rounds);
      const runId = `perf${c}`;
      const srvCpu0 = (await mock.take()).cpu; // (and forget anything recorded before)
      const cpu0 = process.cpuUsage();
      const cpuTrace = traceCpu();
      const shards = Math.max(1, Math.min(opts.shards ?? 1, c));
      const results: SweepResult[] = await Promise.all(
        Array.from({ length: shards }, (_, w) =>
          runSweep(
            {
              endpoint: mock.url,
              vocab: 151_936,
              input: IN,
              output: OUT,
              concurrency: [Math.round(c / shards)],
              requests: Math.round(requests / shards),
              warmup: 0,
              runId: `${runId}w${w}`,
              rttProbes: 3,
              scrape: false,
              seed: { mode: 'per-point', base: 1 + w },
              threads: opts.threads,
            },
            { worker },
          ),
        ),
      );
      const cpu1 = process.cpuUsage(cpu0);
      cpuTrace.stop();
      const { records: truth, cpu: srvCpu1 } = await mock.take();
      thread = results[0].thread;
      const byId = new Map(truth.map((t) => [t.requestId, t]));
      const ttftErr: number[] = [];
      const itlErr: number[] = [];
      const itlAbs: number[] = [];
      const itlClient: number[] = [];
      const itlTruth: number[] = [];
      const delay: number[] = [];
      const srvTtft: number[] = [];
      const sendToArrival: number[] = [];
      const parts: Record<string, number[]> = {
        client_queue: [],
        wire_in: [],
        read_request: [],
        server_slip: [],
        server_handling: [],
        read_side: [],
        client: [],
        server: [],
        total: [],
        reported: [],
        vs_record: [],
        vs_record_after_first_round: [],
        wire_in_after_first_round: [],
      };
      let durationMs = 0;
      let windowFrom = Infinity;
      let windowTo = -Infinity;
      const lag = { p50: 0, p99: 0, max: 0 };
      let matched = 0;
      let failed = 0;
      let chunks = 0;
      for (const [w, result] of results.entries()) {
        const p = result.points[0];
        if (!p?.records)
          throw new Error(
            `concurrency ${c}: the sweep returned no records (${result.stopped?.message ?? result.notes.join('; ')})`,
          );
        durationMs = Math.max(durationMs, p.durationMs);
        windowFrom = Math.min(windowFrom, p.t0EpochMs);
        windowTo = Math.max(windowTo, p.t0EpochMs + p.durationMs);
        lag.p50 = Math.max(lag.p50, p.loopLag.p50_ms);
        lag.p99 = Math.max(lag.p99, p.loopLag.p99_ms);
        lag.max = Math.max(lag.max, p.loopLag.max_ms);
        for (const r of fromColumnar(p.records)) {
          if (!r.ok) failed++;
          const t = byId.get(`inflab-${runId}w${w}-p0-r${r.id}`);
          if (!t || !r.ok || r.chunkMs.length !== t.chunks.length) continue;
          matched++;
          const sent = p.t0EpochMs + r.sentMs;
          const at = r.chunkMs.map((x) => p.t0EpochMs + x);
          chunks += at.length;
          ttftErr.push(at[0] - t.chunks[0]);
          srvTtft.push(t.chunks[0] - sent);
          sendToArrival.push(t.arrived - sent);
          if (Number.isFinite(t.firstByte)) {
            const issued = p.t0EpochMs + r.scheduledMs;
            const q = sent - issued;
            const wi = t.firstByte - sent;
            const rr = t.arrived - t.firstByte;
            const sl = t.chunks[0] - t.arrived - TTFT;
            const rs = at[0] - t.chunks[0];
            parts.client_queue.push(q);
            parts.wire_in.push(wi);
            parts.read_request.push(rr);
            parts.server_slip.push(sl);
            parts.server_handling.push(rr + sl);
            parts.read_side.push(rs);
            parts.client.push(q + rs);
            parts.server.push(wi + rr + sl);
            parts.total.push(at[0] - issued - TTFT);
            parts.reported.push(at[0] - sent - TTFT);
            parts.vs_record.push(at[0] - sent - (t.chunks[0] - t.firstByte));
            // Each stream's first request arrives in one burst of c at the start (as with vLLM's
            // --request-rate inf): the parts without that burst show the steady state.
            if (r.id >= c) {
              parts.vs_record_after_first_round.push(at[0] - sent - (t.chunks[0] - t.firstByte));
              parts.wire_in_after_first_round.push(wi);
            }
          }
          for (let k = 0; k < at.length; k++) {
            delay.push(at[k] - t.chunks[k]);
            if (k) {
              const cg = at[k] - at[k - 1];
              const tg = t.chunks[k] - t.chunks[k - 1];
              itlClient.push(cg);
              itlTruth.push(tg);
              itlErr.push(cg - tg);
              itlAbs.push(Math.abs(cg - tg));
            }
          }
        }
      }
      const te = summary(ttftErr);
      const ie = summary(itlErr);
      const ic = summary(itlClient);
      const it = summary(itlTruth);
      const d = summary(delay);
      const st = summary(srvTtft);
      const sa = summary(sendToArrival);
      const cpuS = (cpu1.user + cpu1.system) / 1e6;
      const windowCpuS = cpuTrace.between(windowFrom, windowTo);
      const srvCpuS = (srvCpu1.user + srvCpu1.system - srvCpu0.user - srvCpu0.system) / 1e6;
      const pt: ClientPoint = {
        concurrency: c,
        load_threads: loadThreads(Math.round(c / shards), opts.threads),
        requests,
        matched,
        failed,
        chunks,
        duration_s: r3(durationMs / 1000),
        chunks_per_s: Math.round(chunks / (durationMs / 1000)),
        ttft_error_ms: { p50: te.p50, p99: te.p99, mean: te.mean, max: te.max },
        itl_error_ms: { p50: ie.p50, p99: ie.p99, abs_p99: summary(itlAbs).p99 },
        itl_median_ms: { measured: ic.p50, truth: it.p50, ratio: r3(ic.p50 / it.p50) },
        itl_quantiles_ms: { q: QS, measured: quantiles(itlClient, QS), truth: quantiles(itlTruth, QS) },
        itl_under_1ms_share: { measured: r3(share(itlClient, 1)), truth: r3(share(itlTruth, 1)) },
        chunk_delay_ms: { p50: d.p50, p99: d.p99, max: d.max },
        server: {
          ttft_p50_ms: st.p50,
          ttft_p99_ms: st.p99,
          itl_p50_ms: it.p50,
          cpu_s: r3(srvCpuS),
        },
        send_to_arrival_ms: { p50: sa.p50, min: r3(Math.min(...sendToArrival)) },
        ttft_error_parts_ms: Object.fromEntries(
          Object.entries(parts).map(([k, xs]) => {
            const sorted = Float64Array.from(xs).sort();
            const q = (p: number) => r3(percentileSorted(sorted, p));
            return [k, { p50: q(50), p90: q(90), p99: q(99), max: r3(sorted[sorted.length - 1]) }];
          }),
        ),
        client_cpu_s: r3(cpuS),
        client_window_cpu_s: r3(windowCpuS),
        client_window_system_share: r3(cpuTrace.systemBetween(windowFrom, windowTo) / windowCpuS),
        cpu_us_per_chunk: r1((windowCpuS * 1e6) / Math.max(1, chunks)),
        cores_busy: { client: r3(windowCpuS / (durationMs / 1000)), server: r3(srvCpuS / (durationMs / 1000)) },
        worker_loop_lag_ms: { p50: r3(lag.p50), p99: r3(lag.p99), max: r3(lag.max) },
      };
      points.push(pt);
      if (process.env.PERF_VLLM_REQUEST_FUNC) {
        try {
          const v = await vllmPoint(root, mock, c, requests, { output: OUT, input: IN }, pt);
          vllm.push(v);
          opts.log(
            `  c=${c}: vLLM's client ${v.matched}/${requests} matched, TTFT − record p50/p99 ${v.vs_record_ms.p50}/${v.vs_record_ms.p99} ms (InfLab ${pt.ttft_error_parts_ms.vs_record.p50}/${pt.ttft_error_parts_ms.vs_record.p99}: ${v.ratio_to_inflab_p50}× / ${v.ratio_to_inflab_p99}×), ITL median ${v.itl_median_ms.measured} vs ${v.itl_median_ms.truth} ms, gaps < 0.1 ms ${v.itl_under_0_1ms_share}`,
          );
        } catch (e) {
          vllmSkipped = (e as Error).message;
          opts.log(`  c=${c}: vLLM's client did not run: ${vllmSkipped}`);
        }
      }
      const pp = pt.ttft_error_parts_ms;
      opts.log(
        `  c=${c}: ${matched}/${requests} matched, TTFT error p50/p99: client ${pp.client.p50}/${pp.client.p99} (queue ${pp.client_queue.p50}/${pp.client_queue.p99}, read ${pp.read_side.p50}/${pp.read_side.p99}), server ${pp.server.p50}/${pp.server.p99} (wire-in ${pp.wire_in.p50}/${pp.wire_in.p99}, read request ${pp.read_request.p50}/${pp.read_request.p99}, slip ${pp.server_slip.p50}/${pp.server_slip.p99}), total ${pp.total.p50}/${pp.total.p99}, reported ${pp.reported.p50}/${pp.reported.p99} ms`,
      );
      opts.log(
        `  c=${c}: ${matched}/${requests} matched, ${pt.chunks_per_s} chunks/s, TTFT err p50 ${te.p50} p99 ${te.p99} ms, ITL median ${ic.p50} vs ${it.p50} ms, chunk delay p50 ${d.p50} p99 ${d.p99} ms, ${pt.cpu_us_per_chunk} µs CPU/chunk, cores busy: client ${pt.cores_busy.client} (kernel ${pt.client_window_system_share}), mock ${pt.cores_busy.server}`,
      );
    }
  } finally {
    await mock.close();
    if (pinned) pinCores(process.pid, 'all');
  }
  const ok = points.filter((p) => p.chunk_delay_ms.p50 <= 1 && p.ttft_error_ms.p50 <= 5);
  const at1000 = points.find((p) => p.concurrency === 1000) ?? points[points.length - 1];
  const met = !!at1000 && at1000.ttft_error_ms.p50 <= 34 && Math.abs(at1000.itl_median_ms.ratio - 1) <= 0.1;
  return {
    ttft_nominal_ms: TTFT,
    itl_nominal_ms: ITL,
    mock_nice_offset: opts.mockNice ?? 0,
    pinned,
    output_tokens: OUT,
    input_tokens: IN,
    worker:
      'dist/bench-worker.js (one worker thread per sweep, as a bench cell runs; a point with many streams split across load threads, see load_threads)',
    thread,
    points,
    ...(process.env.PERF_VLLM_REQUEST_FUNC
      ? { vllm: vllm.length ? vllm : { skipped: vllmSkipped ?? 'no point ran' } }
      : {
          vllm: {
            skipped: "PERF_VLLM_REQUEST_FUNC not set (a vLLM checkout's vllm/benchmarks/lib/endpoint_request_func.py)",
          },
        }),
    capacity_chunks_per_s: ok.length ? Math.max(...ok.map((p) => p.chunks_per_s)) : 0,
    capacity_rule: 'highest chunks/s among the points whose median chunk delay ≤ 1 ms and median TTFT error ≤ 5 ms',
    targets: {
      ttft_p50_error_at_1000_ms: at1000?.ttft_error_ms.p50 ?? NaN,
      ttft_target_ms: 34,
      itl_ratio_at_1000: at1000?.itl_median_ms.ratio ?? NaN,
      itl_target: 'within 10% of the truth (0.9–1.1)',
      met,
    },
  };
}
