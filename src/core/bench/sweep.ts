/**
 * A sweep: probe the endpoint (model, RTT, /metrics), then run the points in order — each with its
 * own seed unless a fixed one was asked for — scraping /metrics before, during and after each, and
 * reporting every finished point at once (so a cancel or a crash keeps it). Runs wherever it is
 * called: the bench worker calls it, and so does the in-thread fallback.
 */
import { setMaxListeners } from 'node:events';
import type { Loop } from '../facts/schema';
import type { Dispatcher } from 'undici';
import {
  createAgent,
  getText,
  normalizeBaseUrl,
  redact,
  redactDeep,
  tcpConnectMs,
  type BenchApi,
  type ClientConfig,
} from './client';
import {
  loadCheck,
  rttVerdict,
  serverCounterCheck,
  usageCheck,
  type LoadCheck,
  type ServerCounterCheck,
  type UsageCheck,
} from './crosscheck';
import { runPoint, type PointRun } from './loadgen';
import { median, summarizeRecords, type PointMetrics, type RequestRecord, type SloSpec } from './metrics';
import { evidence, snapshotOf, type ServerEvidence, type Snapshot } from './prometheus';
import { detectDialect, type TelemetryDialect } from './telemetry';
import { planSource, promptSource } from './prompts';
import { seedOf } from '../sim/rng';
import { datasetRows, plannerFor, type CellWorkload } from '../workload/cell';
import { countTexts, tokenizeNote, type TokenizeDrift } from './tokenize';
import {
  capacitySequence,
  listSequence,
  stepSeed,
  type CapacityOutcome,
  type CapacityPlan,
  type ProbeVerdict,
} from './sequence';
import { toColumnar, type ColumnarRecords } from './records';

export interface SweepOptions {
  endpoint: string;
  /** Used for the Authorization header only; never copied into a result. */
  apiKey?: string;
  api?: BenchApi;
  /** Model name for requests; default: the first model /v1/models lists. */
  model?: string;
  /** Vocabulary size for random prompt ids (the server's own, from /v1/models, wins where it says). */
  vocab: number;
  /** Names of the setup's model (catalog id, display name), to compare with what /v1/models serves. */
  setupModel?: string[];
  /** Prompt and output length of every request (a workload plan's means, when there is one). */
  input: number;
  output: number;
  /**
   * The cell's workload beyond fixed lengths (distributions, shared prefixes, sessions, a trace, a
   * dataset, a rate schedule): each point's requests come from its plan (workload/cell.ts), the one
   * `predict: serving` runs. Absent: fixed-length random prompts of `input` tokens.
   */
  workload?: CellWorkload;
  /** Closed loop: one point per concurrency. */
  concurrency?: number[];
  /** Open loop: one point per rate (req/s). `concurrency` (a single value) then caps in-flight requests. */
  rate?: number[];
  burstiness?: number;
  /** Open loop cap. */
  maxConcurrency?: number;
  requests?: number;
  durationMs?: number;
  warmup?: number;
  /** Per-point seeds derived from `base` (default), or one fixed seed for every point (the trap). */
  seed?: { mode: 'per-point'; base: number } | { mode: 'fixed'; value: number };
  /** Stream idle: no event (comments and pings do not count) for this long ends a request. Default DEFAULT_IDLE_TIMEOUT_MS. */
  idleTimeoutMs?: number;
  /** Whole-request limit. Default DEFAULT_REQUEST_TIMEOUT_MS; 0 = none. */
  requestTimeoutMs?: number;
  doneGraceMs?: number;
  topP?: number;
  topK?: number;
  temperature?: number;
  /** Scrape /metrics before/during/after each point when the endpoint has it. Default true. */
  scrape?: boolean;
  scrapeIntervalMs?: number;
  /** Stop after a point whose failure rate exceeds this (0..1); undefined = continue. */
  stopAbove?: number;
  /** TCP connects used to measure the network RTT. */
  rttProbes?: number;
  percentiles?: number[];
  slo?: SloSpec;
  /** A point whose Δ prefix-cache hit rate (or cached-token share) exceeds this is contaminated. */
  contaminationThreshold?: number;
  /** Keep the per-request records (columnar) in each point. Default true. */
  keepRecords?: boolean;
  /** Each load runs this many times in a row, with fresh prompts each time (a seed per repeat). Default 1. */
  repeats?: number;
  /** Instead of the concurrency or rate list: search for the highest load that meets `slo`. */
  capacity?: CapacityPlan;
  /** X-Request-Id prefix; default a random run id. */
  runId?: string;
  /** Load threads per closed-loop point (a host setting; default: see shards.ts). */
  threads?: number;
  /** The worker script for load threads (a host setting; default: found beside this code). */
  workerScript?: string;
}

/** A point's load-generator run (its timings, in-flight counts and lags) with what the sweep made of it. */
export interface PointResult extends Omit<PointRun, 'records'> {
  index: number;
  loop: Loop;
  concurrency?: number;
  rate?: number;
  seed: number;
  /** With repeats: which run of its load this is (0-based), and the load's place in the plan. */
  repeat?: number;
  slot?: number;
  /** In a capacity search: the probe this point belongs to and whether it met every SLO. */
  probe?: ProbeVerdict;
  metrics: PointMetrics;
  evidence?: ServerEvidence;
  /** Share of prompt tokens the server reported as cached (usage.prompt_tokens_details.cached_tokens). */
  cached_share?: number;
  contaminated: boolean;
  contaminationReason?: string;
  records?: ColumnarRecords;
  /** The server's usage against the request and the chunks. */
  usage?: UsageCheck;
  /** The client's token totals against the server's counters (when /metrics has them). */
  serverCounters?: ServerCounterCheck;
  /** The load the point really had. */
  load?: LoadCheck;
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 600_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;

export interface RttResult {
  /** How it was measured: TCP connects to the endpoint's host and port. */
  method: 'tcp-connect';
  /** Kept for older results: the target ("host:port"). */
  path: string;
  n: number;
  median_ms: number;
  min_ms: number;
  /** False when the probe exceeds a median TTFT it should be inside (then it is not quoted). */
  reliable?: boolean;
  unreliable_reason?: string;
}

export interface SweepInfo {
  endpoint: string;
  model: string;
  maxModelLen?: number;
  rtt?: RttResult;
  metricsAvailable: boolean;
  /** Whose /metrics names were read (vLLM, llama.cpp, SGLang). */
  telemetry?: { dialect: TelemetryDialect['id']; server: string };
  /** The vocabulary prompt ids were drawn from, and where it came from. */
  vocab?: { size: number; source: 'server' | 'setup'; server?: number; setup: number };
  /** The limits every request ran under (ms; 0 = none). */
  timeouts?: { request_ms: number; stream_idle_ms: number };
  /** A dataset's text prompts counted by the server's /tokenize, against the dataset's own count. */
  tokenize?: TokenizeDrift;
  notes: string[];
  runId: string;
}

export interface SweepResult extends SweepInfo {
  points: PointResult[];
  stopped?: { reason: 'cancelled' | 'failure-policy' | 'crash'; afterPoint: number; message: string };
  /** A capacity search's answer. */
  capacity?: CapacityOutcome;
  /** Where the load ran. */
  thread: 'worker' | 'main';
}

export interface ProgressInfo {
  point: number;
  points: number;
  done: number;
  total?: number;
  message: string;
}

export interface SweepHooks {
  signal?: AbortSignal;
  onInfo?(info: SweepInfo): void;
  onPoint?(p: PointResult): void;
  onProgress?(p: ProgressInfo): void;
}

/** Lower-case letters and digits: "Qwen/Qwen3-8B" and "qwen3-8b" compare equal. */
const squash = (x: string) => x.toLowerCase().replace(/[^a-z0-9]/g, '');

async function probe(
  d: Dispatcher,
  o: SweepOptions,
  notes: string[],
): Promise<{ model?: string; maxModelLen?: number; rtt?: RttResult; simSpeed?: number; serverVocab?: number }> {
  let model: string | undefined;
  let maxModelLen: number | undefined;
  let simSpeed: number | undefined;
  let serverVocab: number | undefined;
  const shown = normalizeBaseUrl(o.endpoint).replace(/\/\/[^@/]*@/, '//');
  try {
    const r = await getText(d, o.endpoint, '/v1/models', o.apiKey);
    if (r.status === 200) {
      try {
        const j = JSON.parse(r.body);
        const m0 = j?.data?.[0];
        const id = m0?.id;
        if (typeof id === 'string' && id) model = id;
        const len = m0?.max_model_len;
        if (typeof len === 'number' && Number.isFinite(len)) maxModelLen = len;
        const sp = m0?.inflab_sim_speed;
        if (typeof sp === 'number' && sp > 0 && sp !== 1) simSpeed = sp;
        // llama.cpp's server lists its vocabulary in meta.n_vocab.
        const nv = m0?.meta?.n_vocab;
        if (typeof nv === 'number' && Number.isInteger(nv) && nv > 0) serverVocab = nv;
      } catch {
        notes.push('GET /v1/models did not return JSON');
      }
    } else notes.push(`GET /v1/models answered HTTP ${r.status}`);
  } catch (e) {
    const kind = (e as { kind?: string }).kind;
    notes.push(kind === 'too-large' ? (e as Error).message : `cannot reach ${shown}: ${(e as Error).message}`);
    if (kind !== 'too-large') return {};
  }
  const times: number[] = [];
  const u = new URL(normalizeBaseUrl(o.endpoint));
  for (let i = 0; i < Math.max(1, o.rttProbes ?? 5); i++) {
    try {
      times.push(await tcpConnectMs(o.endpoint));
    } catch (e) {
      notes.push(`the RTT probe could not connect: ${redact((e as Error).message, o.apiKey)}`);
      break;
    }
  }
  return {
    model,
    maxModelLen,
    simSpeed,
    serverVocab,
    rtt: times.length
      ? {
          method: 'tcp-connect',
          path: `${u.hostname}:${u.port || (u.protocol === 'https:' ? 443 : 80)}`,
          n: times.length,
          median_ms: median(times),
          min_ms: Math.min(...times),
        }
      : undefined,
  };
}

/**
 * The simulated endpoint can run faster than simulated time; its latencies are then scaled back so
 * a sweep reports what the simulated server would show (and physics checks compare like with like).
 */
function toSimulatedTime(records: RequestRecord[], speed: number): RequestRecord[] {
  return records.map((r) => ({
    ...r,
    scheduledMs: r.scheduledMs * speed,
    sentMs: r.sentMs * speed,
    chunkMs: r.chunkMs.map((t) => t * speed),
    endMs: r.endMs * speed,
  }));
}

async function scrape(d: Dispatcher, o: SweepOptions, notes?: string[]): Promise<Snapshot | undefined> {
  try {
    const r = await getText(d, o.endpoint, '/metrics', o.apiKey, 3000);
    if (r.status !== 200) return undefined;
    return snapshotOf(r.body);
  } catch (e) {
    if ((e as { kind?: string }).kind === 'too-large' && notes && !notes.includes((e as Error).message))
      notes.push((e as Error).message);
    return undefined;
  }
}

/** Run a sweep in this thread. Never throws for endpoint trouble: that ends up in records and notes. */
export async function runSweepHere(o: SweepOptions, hooks: SweepHooks = {}): Promise<Omit<SweepResult, 'thread'>> {
  const signal = hooks.signal;
  // Every request in flight listens for cancel.
  if (signal) setMaxListeners(0, signal);
  const notes: string[] = [];
  const runId = o.runId ?? Math.random().toString(36).slice(2, 10);
  const open = o.capacity ? o.capacity.key === 'rate' : !!o.rate?.length;
  const seq = o.capacity
    ? capacitySequence(o.capacity, o.slo, o.repeats)
    : listSequence(
        open ? o.rate!.map((r) => ({ rate: r })) : (o.concurrency ?? []).map((c) => ({ concurrency: c })),
        o.repeats,
      );
  const of = seq.total === undefined ? '' : ` of ${seq.total}`;
  const maxConn = Math.max(1, open ? (o.maxConcurrency ?? 256) : seq.maxConcurrency) + 4;
  const agent = createAgent(maxConn);
  const points: PointResult[] = [];
  let stopped: SweepResult['stopped'];
  try {
    const pr = await probe(agent, o, notes);
    // Requests name the model as the server does; everything shown or stored names it redacted
    // (a hostile server can put the key, or part of it, in a model id).
    const model = o.model ?? pr.model ?? 'default';
    const shownModel = redact(model, o.apiKey);
    if (!o.model && !pr.model) notes.push('no model name from /v1/models; requests name "default"');
    if (shownModel !== model)
      notes.push('the model name from the endpoint contained the API key (or part of it); it is shown redacted');
    const speed = pr.simSpeed ?? 1;
    if (speed !== 1)
      notes.push(
        `the simulated endpoint runs ${speed}× faster than simulated time: latencies and throughputs are reported in simulated time (measured × ${speed})`,
      );
    const names = (o.setupModel ?? []).filter(Boolean);
    const served = pr.model ? squash(pr.model) : '';
    if (served && names.length && !names.some((n) => served.includes(squash(n)) || squash(n).includes(served)))
      notes.push(
        `the server serves "${shownModel}", the setup names "${names[names.length - 1]}": prompts are token ids drawn for the setup's model, and physics checks use it; if the server runs another model, name that one in the setup (ids outside its vocabulary fail every request)`,
      );
    let vocab = o.vocab;
    let vocabSource: 'server' | 'setup' = 'setup';
    if (pr.serverVocab !== undefined) {
      if (pr.serverVocab !== o.vocab)
        notes.push(
          `prompt token ids are drawn from the server's vocabulary (${pr.serverVocab}, /v1/models meta.n_vocab), not the setup's (${o.vocab})`,
        );
      vocab = pr.serverVocab;
      vocabSource = 'server';
    }
    const baseline = o.scrape === false ? undefined : await scrape(agent, o, notes);
    const dialect = detectDialect(baseline);
    const metricsAvailable = !!dialect;
    if (o.scrape !== false && !metricsAvailable)
      notes.push(
        'the endpoint has no /metrics of a known server (vLLM, llama.cpp, SGLang): no server evidence (prefix-cache hit rate, preemptions, token counters)',
      );
    const timeouts = {
      request_ms: o.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      stream_idle_ms: o.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    };
    // A dataset's text prompts: their length in the server's tokens, from its /tokenize.
    let tokenize: TokenizeDrift | undefined;
    let textTokens: ((text: string) => number | undefined) | undefined;
    const textRows = o.workload
      ? (datasetRows(o.workload, vocab) ?? []).filter((r): r is typeof r & { text: string } => r.text !== undefined)
      : [];
    if (textRows.length) {
      const counted = await countTexts(
        agent,
        { baseUrl: o.endpoint, apiKey: o.apiKey, model, api: o.api ?? 'completions' },
        textRows,
      );
      tokenize = counted.drift;
      notes.push(tokenizeNote(tokenize));
      if (counted.counts.size) textTokens = (t) => counted.counts.get(t);
    }
    const info: SweepInfo = redactDeep(
      {
        endpoint: normalizeBaseUrl(o.endpoint),
        model: shownModel,
        maxModelLen: pr.maxModelLen,
        rtt: pr.rtt,
        metricsAvailable,
        telemetry: dialect ? { dialect: dialect.id, server: dialect.server } : undefined,
        vocab: { size: vocab, source: vocabSource, server: pr.serverVocab, setup: o.vocab },
        timeouts,
        tokenize,
        notes,
        runId,
      },
      o.apiKey,
    );
    hooks.onInfo?.({ ...info, notes: [...info.notes] });
    const cfg: ClientConfig = {
      baseUrl: o.endpoint,
      api: o.api ?? 'completions',
      model,
      apiKey: o.apiKey,
      idleTimeoutMs: timeouts.stream_idle_ms,
      requestTimeoutMs: timeouts.request_ms,
      doneGraceMs: o.doneGraceMs ?? 1000,
      topP: o.topP ?? 0.95,
      topK: o.topK ?? 50,
      temperature: o.temperature ?? 1.0,
    };
    const seedCfg = o.seed ?? { mode: 'per-point', base: (Math.random() * 2 ** 32) >>> 0 };
    let warmConnections = 1;
    for (let i = 0; ; i++) {
      const step = signal?.aborted ? undefined : seq.next();
      if (signal?.aborted) {
        stopped = {
          reason: 'cancelled',
          afterPoint: i - 1,
          message: `cancelled before point ${i + 1}${of}`,
        };
        break;
      }
      if (!step) break;
      const l = step.load;
      const seed = stepSeed(seedCfg, step);
      const kind = cfg.api === 'chat' ? 'words' : 'ids';
      // Per-point seeds: a dataset's rows continue where the point before stopped (as in predict: serving).
      const perPoint = (o.requests ?? 0) * (seedCfg.mode === 'fixed' ? 0 : i);
      const planner = o.workload ? plannerFor(o.workload, seed, vocab, perPoint) : undefined;
      // A plan's arrivals and think times are in simulated time on a faster-running simulated endpoint.
      const prompts = planner
        ? planSource(planner, {
            kind,
            timeScale: 1 / speed,
            // Warm-ups: another seed, and a dataset's rows past those the points send.
            warm: plannerFor(o.workload!, seedOf(`warmup:${seed}`), vocab, (o.requests ?? 0) * seq.limit),
            textTokens,
          })
        : promptSource(seed, o.input, vocab, kind);
      const label = `${open ? `rate ${l.rate} req/s` : `concurrency ${l.concurrency}`}${step.repeat ? ` (repeat ${step.repeat + 1})` : ''}`;
      const before = metricsAvailable ? await scrape(agent, o) : undefined;
      const during: Snapshot[] = [];
      let scraping = true;
      const scraper = (async () => {
        if (!metricsAvailable) return;
        for (let k = 0; k < 100_000 && scraping; k++) {
          await new Promise((r) => setTimeout(r, o.scrapeIntervalMs ?? 1000));
          if (!scraping) break;
          const s = await scrape(agent, o);
          if (s) during.push(s);
        }
      })();
      // Open the connections the point needs before its clock starts, so no TTFT pays a TCP connect.
      const want = open ? Math.min(o.maxConcurrency ?? 64, 256) : (l.concurrency ?? 1);
      if (want > warmConnections) {
        await Promise.all(
          Array.from({ length: want - warmConnections }, () =>
            getText(agent, o.endpoint, '/health', o.apiKey, 5000).catch(() => undefined),
          ),
        );
        warmConnections = want;
      }
      let lastProgress = 0;
      hooks.onProgress?.({
        point: i,
        points: seq.total ?? i + 1,
        done: 0,
        total: o.requests,
        message: `${label}: starting`,
      });
      const run = await runPoint(
        agent,
        cfg,
        {
          loop: open ? 'open' : 'closed',
          concurrency: open ? o.maxConcurrency : l.concurrency,
          // The offered rate and the point's length are in simulated time, as every latency and
          // throughput is reported: a simulator running `speed`× faster takes its arrivals `speed`×
          // as often, for 1/speed of the wall time.
          rate: l.rate === undefined ? undefined : l.rate * speed,
          burstiness: o.burstiness,
          requests: o.requests,
          durationMs: o.durationMs === undefined ? undefined : o.durationMs / speed,
          warmup: o.warmup ?? 0,
          outputTokens: o.output,
          seed,
        },
        prompts,
        {
          signal,
          threads: o.threads,
          workerScript: o.workerScript,
          requestIdPrefix: `inflab-${runId}-p${i}`,
          onRequest(done, total) {
            const t = performance.now();
            if (t - lastProgress < 200 && done !== total) return;
            lastProgress = t;
            hooks.onProgress?.({
              point: i,
              points: seq.total ?? i + 1,
              done,
              total,
              message: `${label}: ${done}${total ? `/${total}` : ''} requests`,
            });
          },
        },
      );
      scraping = false;
      await scraper;
      const after = metricsAvailable ? await scrape(agent, o) : undefined;
      if (speed !== 1) {
        run.records = toSimulatedTime(run.records, speed);
        run.durationMs *= speed;
      }
      const metrics = summarizeRecords(run.records, {
        latencyFrom: open ? 'scheduled' : 'sent',
        percentiles: o.percentiles,
        slo: o.slo,
        durationMs: run.durationMs,
        observedInFlight: run.observedInFlight,
      });
      const ev = before && after ? evidence(before, after, during, dialect) : undefined;
      const threshold = o.contaminationThreshold ?? 0.1;
      const cachedShare =
        metrics.total_input_tokens > 0 && run.records.some((r) => r.cachedTokens !== undefined)
          ? metrics.cached_tokens / metrics.total_input_tokens
          : undefined;
      let contaminationReason: string | undefined;
      if (ev?.prefix_hit_rate !== undefined && ev.prefix_hit_rate > threshold)
        contaminationReason = `server prefix-cache hit rate ${(ev.prefix_hit_rate * 100).toFixed(1)}% (Δhits/Δqueries) > ${(threshold * 100).toFixed(0)}%`;
      else if (cachedShare !== undefined && cachedShare > threshold)
        contaminationReason = `${(cachedShare * 100).toFixed(1)}% of prompt tokens reported cached (usage.prompt_tokens_details.cached_tokens) > ${(threshold * 100).toFixed(0)}%`;
      const p: PointResult = {
        index: i,
        loop: open ? 'open' : 'closed',
        ...(open ? { rate: l.rate } : { concurrency: l.concurrency }),
        seed,
        ...((o.repeats ?? 1) > 1 || o.capacity ? { repeat: step.repeat, slot: step.slot } : {}),
        metrics,
        evidence: ev,
        cached_share: cachedShare,
        contaminated: !!contaminationReason,
        contaminationReason,
        durationMs: run.durationMs,
        t0EpochMs: run.t0EpochMs,
        observedInFlight: run.observedInFlight,
        maxInFlight: run.maxInFlight,
        dispatchLagMs: run.dispatchLagMs,
        loopLag: run.loopLag,
        cancelled: run.cancelled,
        warmup: run.warmup,
        records: o.keepRecords === false ? undefined : toColumnar(run.records),
        usage: usageCheck(run.records, o.input, o.output),
        serverCounters: serverCounterCheck(run.records, run.warmup, ev, dialect),
        load: loadCheck(open ? o.maxConcurrency : l.concurrency, run.records.length, run.maxInFlight),
      };
      if (run.cancelled) {
        // A point cut short is not a measurement of its load: report it as cancelled, not as a point.
        stopped = {
          reason: 'cancelled',
          afterPoint: i - 1,
          message: `cancelled during point ${i + 1}${of} (${label}); ${i} finished point(s) kept`,
        };
        break;
      }
      const verdict = seq.finished(step, metrics);
      if (verdict) p.probe = verdict;
      // Error messages were redacted where they were made; this catches any other server text.
      redactDeep(p, o.apiKey);
      points.push(p);
      hooks.onPoint?.(p);
      // A capacity probe's failures are part of its verdict, not a reason to stop the search.
      if (!o.capacity && o.stopAbove !== undefined && metrics.failure_rate > o.stopAbove && i < seq.total! - 1) {
        stopped = {
          reason: 'failure-policy',
          afterPoint: i,
          message: `stopped after point ${i + 1} (${label}): ${(metrics.failure_rate * 100).toFixed(0)}% of requests failed, above on_failure.stop_above ${(o.stopAbove * 100).toFixed(0)}%`,
        };
        break;
      }
    }
    if (info.rtt) {
      const v = rttVerdict(
        info.rtt.median_ms,
        points.map((p) => p.metrics.ttft_ms.median),
      );
      info.rtt.reliable = v.reliable;
      if (v.reason) info.rtt.unreliable_reason = v.reason;
    }
    const capacity = seq.outcome();
    return redactDeep(
      { ...info, notes: notes.map((n) => redact(n, o.apiKey)), points, stopped, ...(capacity ? { capacity } : {}) },
      o.apiKey,
    );
  } finally {
    await agent.destroy().catch(() => undefined);
  }
}
