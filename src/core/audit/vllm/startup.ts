/**
 * vLLM's startup lines, the informative periodic lines beside the stats line, and the lines that
 * say it failed. Every rule is tried on every line: one line can carry several facts (V1 ≥ 0.11
 * prints the pool and the concurrency on one line: "GPU KV cache size: N tokens, Maximum
 * concurrency for M tokens per request: X.XXx").
 *
 * Units. vLLM's V0 model runner (vllm/worker/model_runner.py, v0.4 – v0.10) logged
 * `"Loading model weights took %.4f GB", self.model_memory_usage / float(2**30)`, and the early V1
 * runner `"Model loading took %.4f GB and %.6f seconds"` with the same division: the number is GiB
 * though the label says GB. The later V1 runner prints "GiB". A weights value labelled "GB" is
 * therefore read as GiB, and the fact says so (`note`).
 */
import type { CrashMark, InfoLine, StartupFact } from '../types';

const num = (s: string) => Number(s.replace(/,/g, ''));

/** The unit vLLM computed for a weights figure it labelled "GB" (see the comment above). */
export const GB_LABEL_NOTE =
  'printed "GB", read as GiB: vLLM divided the bytes by 2^30 in the versions that print this wording (vllm/worker/model_runner.py, v0.4–v0.10)';

export interface StartupRule {
  /** Text that must be in the message for the rule to be tried (also the byte scanner's needle). */
  needle: string;
  re: RegExp;
  make(m: RegExpExecArray, msg: string): StartupFact | StartupFact[] | undefined;
}

const gib = (v: string, unit: string) => (/bytes/i.test(unit) ? num(v) / 2 ** 30 : num(v));

export const STARTUP_RULES: StartupRule[] = [
  {
    needle: 'vLLM API server version',
    re: /vLLM API server version (\S+)/,
    make: (m) => ({ key: 'version', value: m[1] }),
  },
  {
    needle: 'LLM engine (v',
    re: /LLM engine \(v([^)\s]+)\) with config: /,
    make: (m, msg) => {
      const out: StartupFact[] = [{ key: 'version', value: m[1] }];
      const tp = /\btensor_parallel_size=(\d+)/.exec(msg);
      const pp = /\bpipeline_parallel_size=(\d+)/.exec(msg);
      const dp = /\bdata_parallel_size=(\d+)/.exec(msg);
      if (tp || pp || dp) {
        const extra: Record<string, number> = {};
        if (tp) extra.tp = Number(tp[1]);
        if (pp) extra.pp = Number(pp[1]);
        if (dp) extra.dp = Number(dp[1]);
        out.push({ key: 'parallel', value: 'config', extra });
      }
      return out;
    },
  },
  {
    // The ASCII-art banner of 2026 builds: "… █  version 0.28.1.dev12+g…" and "… █  model   NAME".
    needle: 'version ',
    re: /[█▄▀▐▌]\s+version\s+(\d+\.\d+[\w.+-]*)/,
    make: (m) => ({ key: 'version', value: m[1] }),
  },
  {
    needle: 'model ',
    re: /[█▄▀▐▌]\s+model\s+(\S+)\s*$/,
    make: (m) => ({ key: 'model', value: m[1] }),
  },
  {
    needle: 'Model loading took',
    re: /Model loading took ([\d.]+) (GiB|GB)(?: memory)? and ([\d.]+) seconds/,
    make: (m) => ({
      key: 'weights_gib',
      value: num(m[1]),
      extra: { seconds: num(m[3]) },
      ...(m[2] === 'GB' ? { note: GB_LABEL_NOTE } : {}),
    }),
  },
  {
    needle: 'Loading model weights took',
    re: /Loading model weights took ([\d.]+) (GiB|GB)/,
    make: (m) => ({ key: 'weights_gib', value: num(m[1]), ...(m[2] === 'GB' ? { note: GB_LABEL_NOTE } : {}) }),
  },
  {
    needle: 'Loading weights took',
    re: /Loading weights took ([\d.]+) seconds/,
    make: (m) => ({ key: 'weights_load_s', value: num(m[1]) }),
  },
  {
    needle: 'Available KV cache memory:',
    re: /Available KV cache memory: ([\d.]+) GiB/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]) }),
  },
  {
    needle: 'reserved for KV Cache is',
    re: /reserved for KV Cache is ([\d.]+) ?GiB/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]) }),
  },
  {
    // v0.6.x: "Memory profiling results: … kv_cache_size=3.81GiB …".
    needle: 'kv_cache_size=',
    re: /\bkv_cache_size=([\d.]+) ?GiB/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]) }),
  },
  {
    // v0.6.5's memory table: "available_kv_cache_memory 53.29GiB" (or "=53.29GiB").
    needle: 'available_kv_cache_memory',
    re: /\bavailable_kv_cache_memory[\s=:|]+([\d.]+) ?GiB/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]) }),
  },
  {
    // CPU backend: "Auto set (166.94/343.76) GiB for KV cache on node 0", "Explicitly set (1.0/15.51) GiB …".
    needle: ' set (',
    re: /(?:Auto|Explicitly) set \(([\d.]+)\/([\d.]+)\) GiB for KV cache/,
    make: (m) => ({ key: 'available_kv_gib', value: num(m[1]), extra: { node_gib: num(m[2]) } }),
  },
  {
    // "Free memory on device (22.45/23.99 GiB) on startup. … Current kv cache memory in use is 20.52 GiB."
    needle: 'Free memory on device',
    re: /Free memory on device \(([\d.]+)\/([\d.]+) GiB\) on startup/,
    make: (m) => ({ key: 'device_memory', value: num(m[2]), extra: { free_gib: num(m[1]) } }),
  },
  {
    needle: 'kv cache memory in use is',
    re: /kv cache memory in use is ([\d.]+) ?(GiB|bytes)/,
    make: (m) => ({ key: 'available_kv_gib', value: gib(m[1], m[2]) }),
  },
  {
    needle: 'GPU KV cache size:',
    re: /GPU KV cache size: ([\d,]+) tokens/,
    make: (m) => ({ key: 'pool_tokens', value: num(m[1]) }),
  },
  {
    needle: 'Maximum concurrency for',
    re: /Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/,
    make: (m) => ({ key: 'max_concurrency', value: num(m[2]), extra: { tokens_per_request: num(m[1]) } }),
  },
  {
    needle: 'Graph capturing finished',
    re: /Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB/,
    make: (m) => ({ key: 'cuda_graph', value: num(m[2]), extra: { seconds: num(m[1]) } }),
  },
  {
    needle: 'init engine (profile, create kv cache',
    re: /init engine \(profile, create kv cache, warmup model\) took ([\d.]+) (?:seconds|secs?|s)\b(?:[^(]*\(compilation: ([\d.]+) s\))?/,
    make: (m) => ({
      key: 'engine_init_s',
      value: num(m[1]),
      ...(m[2] !== undefined ? { extra: { compilation_s: num(m[2]) } } : {}),
    }),
  },
  {
    // V0 "# GPU blocks: N, # CPU blocks: M", older "# cuda blocks: …", V1 0.7 "# GPU blocks: N" alone.
    needle: ' blocks: ',
    re: /# (?:GPU|gpu|cuda|CUDA|npu|NPU|xpu|XPU) blocks: (\d+)(?:, # (?:CPU|cpu) blocks: (\d+))?/,
    make: (m) => ({
      key: 'gpu_blocks',
      value: num(m[1]),
      ...(m[2] !== undefined ? { extra: { cpu_blocks: num(m[2]) } } : {}),
    }),
  },
  {
    // The CPU backend alone: "# cpu blocks: 1170" (its KV cache lives in CPU memory).
    needle: ' blocks: ',
    re: /^(?!.*# (?:GPU|gpu|cuda|CUDA) blocks).*# (?:CPU|cpu) blocks: (\d+)/,
    make: (m) => ({ key: 'cpu_blocks', value: num(m[1]) }),
  },
  {
    // "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 302267" — the
    // front end's sum over data-parallel engines (vllm/v1/engine/core_client.py).
    needle: 'num_gpu_blocks is:',
    re: /num_gpu_blocks is: (\d+)/,
    make: (m) => ({ key: 'blocks_total', value: num(m[1]) }),
  },
  {
    needle: 'non-default args:',
    re: /non-default args: .*?'model(?:_tag)?': '([^']+)'/,
    make: (m) => ({ key: 'model', value: m[1] }),
  },
  {
    needle: 'args: Namespace(',
    re: /args: Namespace\(.*?\bmodel='([^']+)'/,
    make: (m) => ({ key: 'model', value: m[1] }),
  },
];

/** Every startup fact a message carries, in rule order (one line can carry several). */
export function startupFacts(msg: string): StartupFact[] {
  let out: StartupFact[] | undefined;
  for (const r of STARTUP_RULES) {
    if (msg.indexOf(r.needle) < 0) continue;
    const m = r.re.exec(msg);
    if (!m) continue;
    const f = r.make(m, msg);
    if (!f) continue;
    (out ??= []).push(...(Array.isArray(f) ? f : [f]));
  }
  return out ?? [];
}

/** A message with a startup needle whose rule did not fire: it may continue on the next line. */
export function startupCut(msg: string): boolean {
  for (const r of STARTUP_RULES) if (r.needle.length > 8 && msg.indexOf(r.needle) >= 0 && !r.re.test(msg)) return true;
  return false;
}

export const SAMPLER_NEEDLE = 'sampl';
/** XPU and others: "… does not support per-request generators. Falling back to PyTorch-native implementation." */
export const GENERATOR_FALLBACK = 'Falling back to PyTorch-native implementation';
const SAMPLER_FALLBACKS = [
  'Falling back to the PyTorch-native implementation of top-p & top-k sampling',
  'Falling back to default sampling implementation',
  'using PyTorch-native sampler',
];

export function samplerOf(msg: string): { backend: 'flashinfer' | 'fallback'; text: string } | undefined {
  if (msg.indexOf('Using FlashInfer for top-p & top-k sampling') >= 0) return { backend: 'flashinfer', text: msg };
  if (SAMPLER_FALLBACKS.some((s) => msg.indexOf(s) >= 0)) return { backend: 'fallback', text: msg };
  if (msg.indexOf(GENERATOR_FALLBACK) >= 0 && /generator|sampl/i.test(msg)) return { backend: 'fallback', text: msg };
  return undefined;
}

// ------------------------------------------------------------------------------------------------
// Informative periodic lines.

export const INFO_NEEDLES = ['SpecDecoding metrics: ', 'Speculative metrics: ', 'KV Transfer metrics: '];

/** "Key: value[ unit], Key: value, …" with a list value ("Per-position acceptance rate: a, b, c"). */
function keyValues(body: string): { fields: Record<string, number>; lists: Record<string, number[]> } {
  const fields: Record<string, number> = {};
  const lists: Record<string, number[]> = {};
  let last = '';
  for (const part of body.replace(/\.$/, '').split(', ')) {
    const c = part.indexOf(': ');
    if (c > 0) {
      last = part.slice(0, c).trim();
      const v = parseFloat(part.slice(c + 2).replace(/,/g, ''));
      if (Number.isFinite(v)) fields[last] = v;
    } else if (last && /^\s*-?[\d.]+\s*$/.test(part)) {
      (lists[last] ??= [fields[last]]).push(Number(part));
    }
  }
  return { fields, lists };
}

/**
 * V1 "SpecDecoding metrics: …" in its three wordings (vllm/v1/spec_decode/metrics.py): ≈ v0.8
 * "Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens"; ≈ v0.9 adds "Mean
 * acceptance length" and "Per-position acceptance rate"; ≈ v0.10+ "Mean acceptance length: %.2f,
 * Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens,
 * Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%". V0
 * "Speculative metrics: Draft acceptance rate: %.3f (a fraction), System efficiency: %.3f, Number of
 * speculative tokens: %d, Number of accepted tokens: %d, Number of draft tokens: %d, Number of
 * emitted tokens: %d." KV connectors (NIXL, offloading): "KV Transfer metrics: k=v, k=v" or a dict.
 */
export function infoLineOf(msg: string): InfoLine | undefined {
  let at = msg.indexOf('SpecDecoding metrics: ');
  if (at >= 0) {
    const { fields, lists } = keyValues(msg.slice(at + 22));
    const per =
      lists['Per-position acceptance rate'] ??
      (fields['Per-position acceptance rate'] !== undefined ? [fields['Per-position acceptance rate']] : undefined);
    const generation =
      'Accepted throughput' in fields
        ? 'throughput'
        : 'Mean acceptance length' in fields
          ? 'acceptance length'
          : 'acceptance rate';
    const rate =
      fields['Avg Draft acceptance rate'] ??
      fields['Draft acceptance rate'] ??
      (fields.Accepted !== undefined && fields.Drafted ? (100 * fields.Accepted) / fields.Drafted : undefined);
    const f: Record<string, number> = {};
    if (rate !== undefined) f.acceptance_pct = rate;
    if (fields['Mean acceptance length'] !== undefined) f.mean_acceptance_length = fields['Mean acceptance length'];
    if (fields.Accepted !== undefined) f.accepted_tokens = fields.Accepted;
    if (fields.Drafted !== undefined) f.drafted_tokens = fields.Drafted;
    if (fields['Accepted throughput'] !== undefined) f.accepted_tok_s = fields['Accepted throughput'];
    if (fields['Drafted throughput'] !== undefined) f.drafted_tok_s = fields['Drafted throughput'];
    delete fields['Per-position acceptance rate'];
    return { kind: 'spec-decode', generation, fields: f, ...(per ? { perPosition: per } : {}) };
  }
  at = msg.indexOf('Speculative metrics: ');
  if (at >= 0) {
    const { fields } = keyValues(msg.slice(at + 21));
    const f: Record<string, number> = {};
    const r = fields['Draft acceptance rate'];
    if (r !== undefined) f.acceptance_pct = r <= 1 ? r * 100 : r;
    if (fields['System efficiency'] !== undefined) f.system_efficiency = fields['System efficiency'];
    for (const [k, name] of [
      ['Number of speculative tokens', 'speculative_tokens'],
      ['Number of accepted tokens', 'accepted_tokens'],
      ['Number of draft tokens', 'drafted_tokens'],
      ['Number of draft tokens tokens', 'drafted_tokens'],
      ['Number of emitted tokens', 'emitted_tokens'],
      ['Number of emitted tokens tokens', 'emitted_tokens'],
    ] as const)
      if (fields[k] !== undefined) f[name] = fields[k];
    return { kind: 'spec-decode-v0', generation: 'v0', fields: f };
  }
  at = msg.indexOf('KV Transfer metrics: ');
  if (at >= 0) {
    const f: Record<string, number> = {};
    const re = /['"]?([A-Za-z][\w ()/.%-]{0,60}?)['"]?\s*[=:]\s*(-?\d[\d.]*(?:e[+-]?\d+)?)/g;
    for (let m = re.exec(msg.slice(at + 21)); m; m = re.exec(msg.slice(at + 21))) {
      f[m[1].trim()] = Number(m[2]);
      if (Object.keys(f).length >= 32) break;
    }
    return { kind: 'kv-transfer', fields: f };
  }
  return undefined;
}

// ------------------------------------------------------------------------------------------------
// Failures.

export const CRASH_NEEDLES = [
  'Traceback (most recent call last)',
  'out of memory',
  'OutOfMemoryError',
  'EngineDeadError',
  'died unexpectedly',
  'fatal error',
  'initialization failed',
  'No available memory for the cache blocks',
  'larger than the available KV cache memory',
  'stored in KV cache',
  'less than desired GPU memory utilization',
];

const OOM_RE =
  /\b(?:CUDA|HIP|XPU|NPU|MPS)? ?out of memory|OutOfMemoryError|No available memory for the cache blocks|less than desired GPU memory utilization/i;
const KV_SMALL_RE =
  /larger than the available KV cache memory|larger than the maximum number of tokens that can be stored in KV cache/;
const DEAD_RE =
  /EngineCore encountered a fatal error|Engine core proc \S+ died unexpectedly|died unexpectedly|\b(?:Async)?EngineDeadError\b|Engine core initialization failed|WorkerProc hit an exception|Engine process failed to start/;
const EXC_RE = /^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning))(?::\s?(.*))?$/;

/**
 * Does this text say something failed? A message of the server's own format counts by its
 * level (ERROR, CRITICAL) or by the needles above; a line in no server format (a traceback's
 * lines) also when it reads as an exception ("ValueError: …").
 */
export function crashOf(text: string, isError: boolean, bareLine = false): CrashMark | undefined {
  const t = text.trim();
  if (!t) return undefined;
  if (t.startsWith('Traceback (most recent call last)')) return { kind: 'traceback', text: t };
  if (OOM_RE.test(t)) return { kind: 'oom', text: t };
  if (KV_SMALL_RE.test(t)) return { kind: 'kv-too-small', text: t };
  if (DEAD_RE.test(t)) return { kind: 'engine-dead', text: t };
  const e = bareLine || isError ? EXC_RE.exec(t) : null;
  if (e && !/Warning$/.test(e[1])) return { kind: 'exception', text: t };
  if (isError) return { kind: 'error', text: t };
  return undefined;
}
