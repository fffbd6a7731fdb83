/**
 * Synthetic vLLM V1 server logs for performance runs: a startup block, then `windows` stats
 * windows (10 s apart) in sweep-like runs with idle gaps, each followed by uvicorn access lines,
 * with occasional unrelated lines. Deterministic for a given seed.
 */
import * as fs from 'node:fs';

export interface GenerateOptions {
  /** Access-log lines per window (completed requests); default 20. */
  accessPerWindow?: number;
  /** Colour the process prefix with ANSI escapes, as vLLM did until late 2025; default true. */
  ansi?: boolean;
  /** Windows per sweep point before an idle gap; default 30. */
  pointWindows?: number;
  seed?: number;
  /** Start stamp, month and day; default 12-31 23:00:00 so long logs cross midnight and new year. */
  start?: { month: number; day: number; hour: number };
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/** The lines of a synthetic log, lazily. */
export function* generateLogLines(windows: number, opts: GenerateOptions = {}): Generator<string> {
  const rand = rng(opts.seed ?? 42);
  const per = opts.accessPerWindow ?? 20;
  const ansi = opts.ansi ?? true;
  const pointWindows = opts.pointWindows ?? 30;
  const st = opts.start ?? { month: 12, day: 31, hour: 23 };
  let t = Date.UTC(2001, st.month - 1, st.day, st.hour) / 1000;
  const stamp = () => {
    const d = new Date(t * 1000);
    return `${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  };
  const api = ansi ? '\x1b[1;36m(APIServer pid=4650)\x1b[0;0m ' : '(APIServer pid=4650) ';
  const core = ansi ? '\x1b[1;36m(EngineCore_0 pid=4711)\x1b[0;0m ' : '(EngineCore_0 pid=4711) ';
  yield `${api}INFO ${stamp()} [api_server.py:1805] vLLM API server version 0.10.0`;
  yield `${core}INFO ${stamp()} [core.py:71] Initializing a V1 LLM engine (v0.10.0) with config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B', skip_tokenizer_init=False`;
  yield `${core}INFO ${stamp()} [default_loader.py:262] Loading weights took 3.91 seconds`;
  yield `${core}INFO ${stamp()} [gpu_model_runner.py:1846] Model loading took 15.2683 GiB and 4.731526 seconds`;
  yield `${core}INFO ${stamp()} [gpu_worker.py:255] Available KV cache memory: 56.34 GiB`;
  yield `${core}INFO ${stamp()} [kv_cache_utils.py:833] GPU KV cache size: 410,240 tokens`;
  yield `${core}INFO ${stamp()} [kv_cache_utils.py:837] Maximum concurrency for 40,960 tokens per request: 10.02x`;
  yield `${core}INFO ${stamp()} [gpu_model_runner.py:2439] Graph capturing finished in 22 secs, took 0.56 GiB`;
  yield `${core}INFO ${stamp()} [core.py:193] init engine (profile, create kv cache, warmup model) took 48.12 seconds`;
  yield `${core}INFO ${stamp()} [topk_topp_sampler.py:49] Using FlashInfer for top-p & top-k sampling.`;
  const levels = [1, 2, 4, 8, 16, 32, 64, 128];
  let port = 40000;
  let hit = 0;
  for (let i = 0; i < windows; i++) {
    const point = Math.floor(i / pointWindows);
    if (i % pointWindows === 0) {
      t += 30 + Math.floor(rand() * 20); // idle gap: V1 prints nothing
      hit = 0;
    }
    t += 10;
    const c = levels[point % levels.length];
    const gen = Math.min(13000, (2039 * c) / (16.38 + 0.147 * c)) * (0.85 + 0.1 * rand());
    const prompt = gen * (0.8 + 0.4 * rand());
    hit = Math.min(95, hit + rand() * 0.5);
    const kv = Math.min(99.9, (c * 1500 * 100) / 410240);
    for (let k = 0; k < per; k++)
      yield `${api}INFO:     127.0.0.1:${port++ % 60000} - "POST /v1/completions HTTP/1.1" ${rand() < 0.001 ? 500 : 200} OK`;
    if (rand() < 0.02) yield 'Traceback (most recent call last):';
    yield `${api}INFO ${stamp()} [loggers.py:122] Engine 000: Avg prompt throughput: ${prompt.toFixed(1)} tokens/s, Avg generation throughput: ${gen.toFixed(1)} tokens/s, Running: ${c} reqs, Waiting: 0 reqs, GPU KV cache usage: ${kv.toFixed(1)}%, Prefix cache hit rate: ${hit.toFixed(1)}%`;
  }
}

/** A synthetic log as one string (small sizes). */
export function generateLog(windows: number, opts: GenerateOptions = {}): string {
  let s = '';
  for (const l of generateLogLines(windows, opts)) s += l + '\n';
  return s;
}

/**
 * Write a synthetic log of at least `targetBytes` (or `windows` windows) to `path`, streaming.
 * Returns the bytes, lines and windows written.
 */
export async function generateLogFile(
  path: string,
  size: { targetBytes?: number; windows?: number },
  opts: GenerateOptions = {},
): Promise<{ bytes: number; lines: number; windows: number }> {
  const out = fs.createWriteStream(path);
  let bytes = 0;
  let lines = 0;
  let buf = '';
  const perWindowGuess = ((opts.accessPerWindow ?? 20) + 1) * 90;
  const windows = size.windows ?? Math.ceil((size.targetBytes ?? 1e6) / perWindowGuess) + 1;
  let stats = 0;
  const flush = async () => {
    if (!out.write(buf)) await new Promise<void>((r) => out.once('drain', () => r()));
    buf = '';
  };
  for (const l of generateLogLines(windows, opts)) {
    buf += l + '\n';
    bytes += Buffer.byteLength(l) + 1;
    lines++;
    if (l.includes('Avg prompt throughput')) stats++;
    if (buf.length > 1 << 20) await flush();
    if (
      size.targetBytes !== undefined &&
      size.windows === undefined &&
      bytes >= size.targetBytes &&
      l.includes('Avg prompt throughput')
    )
      break;
  }
  await flush();
  await new Promise<void>((res, rej) => out.end((e?: Error | null) => (e ? rej(e) : res())));
  return { bytes, lines, windows: stats };
}
