/**
 * One vLLM log line (already free of wrappers; see lineReader.ts): what it is, with its fields.
 * `(Process pid=N) LEVEL MM-DD HH:MM:SS [file:line] message` — before 2025-02 without the opening
 * bracket — or uvicorn's `LEVEL:     …` access and server lines.
 */
import type { Classified, Level } from '../types';
import { parseStats, statsShape, STATS_NEEDLE } from './stats';
import {
  CRASH_NEEDLES,
  crashOf,
  INFO_NEEDLES,
  infoLineOf,
  SAMPLER_NEEDLE,
  GENERATOR_FALLBACK,
  samplerOf,
  startupCut,
  startupFacts,
  STARTUP_RULES,
} from './startup';
import { READER_NEEDLES } from '../lineReader';

const ANSI_RE = /\x1b\[[0-9;]*[A-Za-z]/g;
// After the optional process prefix: "METHOD PATH HTTP/x" STATUS, uvicorn's access format.
const ACCESS_RE = /(?:INFO|WARNING|ERROR):\s+(\S+) - "([A-Z]+) (\S+) HTTP\/[\d.]+" (\d{3})/y;
// No prototype: a word like "toString" is no level.
const LEVELS: Record<string, Level> = Object.assign(Object.create(null) as Record<string, Level>, {
  DEBUG: 'DEBUG',
  INFO: 'INFO',
  WARNING: 'WARNING',
  ERROR: 'ERROR',
  CRITICAL: 'CRITICAL',
});

const isDigit = (c: number) => c >= 48 && c <= 57;
const two = (s: string, i: number) => (s.charCodeAt(i) - 48) * 10 + (s.charCodeAt(i + 1) - 48);
const escape = (n: string) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Every text that makes classifyLine() read a vLLM-format message as more than an "other" line,
 * anything the line reader would change (a glued head, a lost-ESC colour), an ESC byte (ANSI
 * stripping could join a needle) and the block glyphs of the 2026 banner as UTF-8 read in Latin-1
 * (the byte scanner's view). A message with none of them is an "other" line.
 */
export const MESSAGE_NEEDLES = new RegExp(
  [
    STATS_NEEDLE,
    'Prefix cache hit rate: GPU: ',
    'is preempted by PreemptionMode.',
    SAMPLER_NEEDLE,
    GENERATOR_FALLBACK,
    ...INFO_NEEDLES,
    ...CRASH_NEEDLES,
    ...STARTUP_RULES.filter((r) => !/[█]/.test(r.re.source)).map((r) => r.needle),
  ]
    .map(escape)
    .concat(READER_NEEDLES, '\\x1b', '\\xe2\\x96[\\x80-\\x90]')
    .join('|'),
);

/** Say what one log line is. Fast for the common cases (access and stats lines). */
export function classifyLine(raw: string): Classified {
  let line = raw;
  const n0 = line.length;
  if (n0 && line.charCodeAt(n0 - 1) === 13) line = line.slice(0, -1);
  if (line.indexOf('\x1b') >= 0) line = line.replace(ANSI_RE, '');
  const n = line.length;
  let off = 0;
  while (off < n && line.charCodeAt(off) <= 32) off++;
  if (off === n) return { kind: 'blank' };
  // Process prefix "(EngineCore_DP0 pid=4711) " / "(VllmWorker rank=0 pid=12) ".
  let process: string | undefined;
  let processTail: string | undefined;
  if (line.charCodeAt(off) === 40) {
    const e = line.indexOf(') ', off);
    const pid = e > 0 ? line.lastIndexOf(' pid=', e) : -1;
    if (pid > off && e - off < 96) {
      process = line.slice(off + 1, pid);
      processTail = line.slice(pid + 1, e);
      off = e + 2;
    }
  }
  // LEVEL MM-DD HH:MM:SS [file:line] message — before 2025-02 without the opening bracket.
  const sp = line.indexOf(' ', off);
  const level = sp > off && sp - off <= 8 ? LEVELS[line.slice(off, sp)] : undefined;
  const p = sp + 1;
  if (
    !level ||
    p + 14 > n ||
    line.charCodeAt(p + 2) !== 45 ||
    line.charCodeAt(p + 5) !== 32 ||
    line.charCodeAt(p + 8) !== 58 ||
    line.charCodeAt(p + 11) !== 58 ||
    !isDigit(line.charCodeAt(p)) ||
    !isDigit(line.charCodeAt(p + 13))
  ) {
    if (line.indexOf(' - "', off) > 0) {
      ACCESS_RE.lastIndex = off;
      const a = ACCESS_RE.exec(line);
      if (a)
        return {
          kind: 'access',
          process,
          processTail,
          access: { client: a[1], method: a[2], path: a[3], status: Number(a[4]) },
        };
    }
    // uvicorn's own lines: "INFO:     Started server process [4650]".
    const uv = line.indexOf(':     ', off);
    if (uv > off && uv - off <= 8 && LEVELS[line.slice(off, uv)]) {
      const lv = LEVELS[line.slice(off, uv)];
      const message = line.slice(uv + 6);
      const crash = lv === 'ERROR' || lv === 'CRITICAL' ? crashOf(message, true) : undefined;
      return { kind: 'vllm', level: lv, process, processTail, message, ...(crash ? { crash } : {}) };
    }
    return { kind: 'unknown' };
  }
  let q = p + 14;
  if (line.charCodeAt(q) === 44 || line.charCodeAt(q) === 46) {
    // fractional seconds, ",mmm" or ".mmm"
    q++;
    while (q < n && isDigit(line.charCodeAt(q))) q++;
  }
  if (line.charCodeAt(q) !== 32) return { kind: 'unknown' };
  const close = line.indexOf(']', q);
  if (close < 0 || close - q > 120) return { kind: 'unknown' };
  const msg = line.charCodeAt(close + 1) === 32 ? line.slice(close + 2) : line.slice(close + 1);
  const base: Classified = {
    kind: 'vllm',
    level,
    stamp: line.slice(p, p + 14),
    month: two(line, p),
    day: two(line, p + 3),
    secOfDay: two(line, p + 6) * 3600 + two(line, p + 9) * 60 + two(line, p + 12),
    process,
    processTail,
    message: msg,
  };
  const at = msg.indexOf(STATS_NEEDLE);
  if (at >= 0) {
    const s = parseStats(msg, at);
    if (s) return { ...base, kind: 'stats', stats: s };
    return base;
  }
  if (msg.startsWith('Prefix cache hit rate: GPU: ')) {
    const p = /GPU: ([\d.]+)%, CPU: ([\d.]+)%/.exec(msg);
    if (p) return { ...base, kind: 'prefix-v0', prefixV0: { gpu_pct: Number(p[1]), cpu_pct: Number(p[2]) } };
  }
  if (msg.indexOf('is preempted by PreemptionMode.') >= 0) {
    const p = /PreemptionMode\.(\w+)/.exec(msg);
    // The cumulative count: total_num_cumulative_preemption (≥ v0.4), total_cumulative_preemption_cnt before.
    const c = /total_(?:num_cumulative_preemption|cumulative_preemption_cnt)=(\d+)/.exec(msg);
    return {
      ...base,
      kind: 'preemption',
      preemption: { mode: p?.[1] ?? 'RECOMPUTE', cumulative: c ? Number(c[1]) : undefined },
    };
  }
  const info = msg.indexOf(' metrics: ') >= 0 ? infoLineOf(msg) : undefined;
  if (info) return { ...base, kind: 'info', info };
  const crash = crashOf(msg, level === 'ERROR' || level === 'CRITICAL');
  if (crash) base.crash = crash;
  if (msg.indexOf(SAMPLER_NEEDLE) >= 0 || msg.indexOf(GENERATOR_FALLBACK) >= 0) {
    const s = samplerOf(msg);
    if (s) return { ...base, kind: 'sampler', sampler: s };
  }
  const facts = startupFacts(msg);
  if (facts.length) {
    const out: Classified = { ...base, kind: 'startup', startup: facts[0], startups: facts };
    if (facts[0].key === 'version' && msg.indexOf('LLM engine (v') >= 0) {
      // The engine-config line carries the model too.
      const model = /\bmodel=['"]([^'"]+)['"]/.exec(msg);
      if (model) out.configModel = model[1];
    }
    return out;
  }
  return base;
}

/** The reader's question about a line: may it continue on the next physical line, and how well does it read? */
export function vllmLineShape(text: string): { cut: boolean; score: number; parsed: Classified } {
  const c = classifyLine(text);
  const msg = c.message ?? '';
  if (c.kind === 'stats') return { ...statsShape(msg, msg.indexOf(STATS_NEEDLE)), parsed: c };
  if (c.kind === 'startup') return { cut: startupCut(msg), score: 10 * (c.startups?.length ?? 1), parsed: c };
  if (c.kind === 'vllm' && msg && (msg.indexOf(STATS_NEEDLE) >= 0 || startupCut(msg)))
    return { cut: true, score: 0, parsed: c };
  return { cut: false, score: c.kind === 'unknown' ? -1 : 0, parsed: c };
}
