/**
 * SGLang's server log, the second dialect. Format read from SGLang's source (python/sglang/srt,
 * v0.4.x, scheduler.py and utils.py): `configure_logger` writes `[%(asctime)s{prefix}] %(message)s`
 * with datefmt "%Y-%m-%d %H:%M:%S" (v0.1 printed "%H:%M:%S" only; later builds "%m-%d %H:%M:%S")
 * and prefix " TP0", " DP0 TP0", " PP0 TP0"…; uvicorn's access lines `[stamp] INFO:     client -
 * "METHOD PATH HTTP/1.1" status`. The scheduler's periodic lines:
 *
 *   Prefill batch. #new-seq: N, #new-token: N, #cached-token: N, token usage: 0.xx, #running-req: N, #queue-req: N,
 *   Decode batch. #running-req: N, #token: N, token usage: 0.xx, [accept len: x.xx, ]gen throughput (token/s): x.xx, #queue-req: N,
 *
 * (older builds add "cache hit rate: x.xx%" to the prefill line; mixed chunked prefill prints
 * "Prefill batch(mixed #running-req: N). …"). "Decode batch" is the window: one every
 * --decode-log-interval decode steps; the prefill lines between two windows give its prompt tokens
 * and cached tokens. Memory figures labelled "GB" are GiB: `get_available_gpu_memory` divides the
 * bytes by 1 << 30.
 */
import type { LineShape } from '../lineReader';
import type { Classified, StartupFact } from '../types';
import { crashOf } from '../vllm/startup';
import { classifyLine } from '../vllm/classify';

const HEAD =
  /^\[(?:(\d{4})-)?(?:(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)(?:[.,]\d+)?((?: (?:TP|DP|PP|EP|CP|MoE)\d+)*)\] (.*)$/;
const LEVEL = /^(DEBUG|INFO|WARNING|ERROR|CRITICAL)[: ]\s*/;

/** SGLang's own periodic and startup texts, any of which marks a log as SGLang's. */
const MARKS =
  /^(?:Prefill batch[.(]|Decode batch\. |server_args=ServerArgs\(|Load weight (?:begin|end)\. |KV Cache is allocated\. |Memory pool end\. |max_total_num_tokens=)/;

export function sniffSglang(line: string): boolean {
  const m = HEAD.exec(line);
  if (!m) return false;
  return m[7] !== '' || MARKS.test(m[8]);
}

const pairs = (body: string): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const part of body.split(', ')) {
    const c = part.lastIndexOf(': ');
    if (c <= 0) continue;
    const v = parseFloat(part.slice(c + 2));
    if (Number.isFinite(v)) out[part.slice(0, c).trim()] = v;
  }
  return out;
};

const pad = (n: number) => String(n).padStart(2, '0');

export function classifySglang(raw: string): Classified {
  const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
  if (!line.trim()) return { kind: 'blank' };
  const m = HEAD.exec(line);
  if (!m) {
    // uvicorn's lines, their SGLang stamp peeled by the line reader, read as vLLM reads them.
    const c = classifyLine(line);
    return c.kind === 'access' || (c.kind === 'vllm' && c.stamp === undefined) ? c : { kind: 'unknown' };
  }
  const month = m[2] ? Number(m[2]) : 1;
  const day = m[3] ? Number(m[3]) : 1;
  const hh = Number(m[4]),
    mi = Number(m[5]),
    ss = Number(m[6]);
  let msg = m[8];
  const lv = LEVEL.exec(msg);
  const level = lv ? (lv[1] as Classified['level']) : 'INFO';
  const base: Classified = {
    kind: 'vllm',
    level,
    stamp: `${pad(month)}-${pad(day)} ${pad(hh)}:${pad(mi)}:${pad(ss)}`,
    month,
    day,
    secOfDay: hh * 3600 + mi * 60 + ss,
    process: m[7].trim() || undefined,
    message: msg,
  };
  if (lv) {
    msg = msg.slice(lv[0].length);
    // uvicorn's access line behind SGLang's stamp.
    const a = /^(\S+) - "([A-Z]+) (\S+) HTTP\/[\d.]+" (\d{3})/.exec(msg);
    if (a) return { kind: 'access', access: { client: a[1], method: a[2], path: a[3], status: Number(a[4]) } };
  }
  if (msg.startsWith('Decode batch. ')) {
    const f = pairs(msg.slice(14));
    const gen = f['gen throughput (token/s)'];
    if (gen === undefined) return base;
    const usage = f['token usage'] ?? f['full token usage'] ?? f['page usage'];
    return {
      ...base,
      kind: 'stats',
      stats: {
        format: 'sglang',
        prompt_tok_s: 0,
        gen_tok_s: gen,
        running: f['#running-req'] ?? 0,
        waiting: f['#queue-req'] ?? 0,
        kv_usage_pct: usage === undefined ? NaN : usage * 100,
      },
    };
  }
  if (msg.startsWith('Prefill batch')) {
    const at = msg.indexOf('. ');
    const f = pairs(msg.slice(at + 2));
    const fields: Record<string, number> = {};
    if (f['#new-seq'] !== undefined) fields.new_seq = f['#new-seq'];
    if (f['#new-token'] !== undefined) fields.new_token = f['#new-token'];
    if (f['#cached-token'] !== undefined) fields.cached_token = f['#cached-token'];
    if (f['#running-req'] !== undefined) fields.running = f['#running-req'];
    if (f['#queue-req'] !== undefined) fields.queue = f['#queue-req'];
    return { ...base, kind: 'info', info: { kind: 'prefill-batch', fields } };
  }
  const startups: StartupFact[] = [];
  let s: RegExpExecArray | null;
  if ((s = /\bmax_total_num_tokens=(\d+)/.exec(msg))) startups.push({ key: 'pool_tokens', value: Number(s[1]) });
  else if ((s = /KV Cache is allocated\. #tokens: (\d+)/.exec(msg)))
    startups.push({ key: 'pool_tokens', value: Number(s[1]) });
  if ((s = /Load weight end\..*?mem usage=([\d.]+) GB/.exec(msg)))
    startups.push({
      key: 'weights_gib',
      value: Number(s[1]),
      note: 'printed "GB", read as GiB: SGLang divides the bytes by 1 << 30 (get_available_gpu_memory)',
    });
  if ((s = /Load weight end\. elapsed=([\d.]+) s/.exec(msg)))
    startups.push({ key: 'weights_load_s', value: Number(s[1]) });
  if ((s = /server_args=ServerArgs\(model_path='([^']+)'/.exec(msg))) startups.push({ key: 'model', value: s[1] });
  if ((s = /server_args=ServerArgs\(.*?\btp_size=(\d+)/.exec(msg))) {
    const dp = /\bdp_size=(\d+)/.exec(msg);
    const pp = /\bpp_size=(\d+)/.exec(msg);
    startups.push({
      key: 'parallel',
      value: 'config',
      extra: { tp: Number(s[1]), ...(dp ? { dp: Number(dp[1]) } : {}), ...(pp ? { pp: Number(pp[1]) } : {}) },
    });
  }
  if ((s = /\bsglang(?: version)?[ =:]+v?(\d+\.\d+\.\d+[\w.+-]*)/i.exec(msg)))
    startups.push({ key: 'version', value: s[1] });
  if (startups.length) return { ...base, kind: 'startup', startup: startups[0], startups };
  const crash = crashOf(msg, level === 'ERROR' || level === 'CRITICAL');
  if (crash) base.crash = crash;
  return base;
}

export function sglangLineShape(text: string): LineShape {
  const c = classifySglang(text);
  if (c.kind === 'stats') return { cut: !/#queue-req: \d+/.test(text), score: 10, parsed: c };
  return { cut: false, score: c.kind === 'unknown' ? -1 : 0, parsed: c };
}
