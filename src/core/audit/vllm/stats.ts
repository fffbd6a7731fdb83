/**
 * vLLM's periodic stats line: "Key: value unit" pairs whose order and optional fields vary by
 * version (see the formats reference): V1 `[Engine NNN: |N Engines Aggregated: ]Avg prompt
 * throughput: …, Running: …, Waiting: …[, Deferred: …][, Corrupted: …][, Preemptions: …], GPU KV
 * cache usage: …%, Prefix cache hit rate: …%[, External prefix cache hit rate: …%][, MM cache hit
 * rate: …%]`, and V0's `…, Running: …, Swapped: …, Pending: …, GPU KV cache usage: …%, CPU KV cache
 * usage: …%.`
 */
import type { StatsFields } from '../types';

/** The keys parseStats() reads (the byte scanner reads the same ones). */
export const STATS_KEYS = [
  'Avg prompt throughput',
  'Avg generation throughput',
  'Running',
  'Waiting',
  'Pending',
  'Swapped',
  'Deferred',
  'Corrupted',
  'Preemptions',
  'GPU KV cache usage',
  'CPU KV cache usage',
  'Prefix cache hit rate',
  'External prefix cache hit rate',
  'MM cache hit rate',
] as const;
const KNOWN = new Set<string>(STATS_KEYS);

export const STATS_NEEDLE = 'Avg prompt throughput: ';

/** Parse the stats fields of a message with "Avg prompt throughput: " at `at`. */
export function parseStats(msg: string, at: number): StatsFields | undefined {
  const head = msg.slice(0, at);
  const body = msg.slice(at);
  const f: StatsFields = {
    format: 'v1',
    prompt_tok_s: NaN,
    gen_tok_s: NaN,
    running: NaN,
    waiting: NaN,
    kv_usage_pct: NaN,
  };
  let e = /Engine (\d+):\s*$/.exec(head);
  if (e) f.engine = Number(e[1]);
  else if ((e = /(\d+) Engines Aggregated:\s*$/.exec(head))) f.aggregatedEngines = Number(e[1]);
  let sawPending = false;
  for (const part of body.split(', ')) {
    const c = part.indexOf(': ');
    if (c < 0) continue;
    const key = part.slice(0, c);
    const v = parseFloat(part.slice(c + 2).replace(/,/g, ''));
    switch (key) {
      case 'Avg prompt throughput':
        f.prompt_tok_s = v;
        break;
      case 'Avg generation throughput':
        f.gen_tok_s = v;
        break;
      case 'Running':
        f.running = v;
        break;
      case 'Waiting':
        f.waiting = v;
        break;
      case 'Pending':
        f.waiting = v;
        sawPending = true;
        break;
      case 'Swapped':
        f.swapped = v;
        break;
      case 'Deferred':
        f.deferred = v;
        break;
      case 'Corrupted':
        f.corrupted = v;
        break;
      case 'Preemptions':
        f.preemptions = v;
        break;
      case 'GPU KV cache usage':
        f.kv_usage_pct = v;
        break;
      case 'CPU KV cache usage':
        f.cpu_kv_usage_pct = v;
        break;
      case 'Prefix cache hit rate':
        f.prefix_hit_pct = v;
        break;
      case 'External prefix cache hit rate':
        f.external_prefix_hit_pct = v;
        break;
      case 'MM cache hit rate':
        f.mm_hit_pct = v;
        break;
    }
  }
  if (sawPending || f.swapped !== undefined || f.cpu_kv_usage_pct !== undefined) f.format = 'v0';
  if (Number.isNaN(f.prompt_tok_s) || Number.isNaN(f.gen_tok_s)) return undefined;
  if (Number.isNaN(f.running)) f.running = 0;
  if (Number.isNaN(f.waiting)) f.waiting = 0;
  return f;
}

/**
 * How whole a stats message looks. Every version prints the GPU KV usage and then the prefix hit
 * rate (V1) or the CPU KV usage (V0), and ends the line with a percentage (V0 "%.", or V1's
 * optional "Corrupted: N reqs"); a line that does not was cut by a terminal's hard wrap. The score
 * counts the parts whose key is known and whose value is a number, less the parts that read as
 * neither.
 */
export function statsShape(msg: string, at: number): { cut: boolean; score: number } {
  const body = msg.slice(at).trimEnd();
  let score = 0;
  let gpu = false;
  let second = false;
  for (const part of body.split(', ')) {
    const c = part.indexOf(': ');
    const key = c > 0 ? part.slice(0, c) : '';
    if (KNOWN.has(key) && /^[\d,]*\.?\d/.test(part.slice(c + 2))) {
      score += 10;
      if (key === 'GPU KV cache usage') gpu = true;
      else if (gpu && (key === 'Prefix cache hit rate' || key === 'CPU KV cache usage')) second = true;
    } else score -= 1;
  }
  const cut = !(gpu && second && /(?:%\.?|\breqs)$/.test(body));
  return { cut, score: score + (cut ? 0 : 5) };
}
