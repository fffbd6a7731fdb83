/**
 * The byte-level fast path of the log parser. A big log is almost all uvicorn access lines and
 * periodic stats lines; this reads those straight from the file's bytes — no string decoding, no
 * regular expression, no allocation for an access line — and other vLLM-format lines whose message
 * holds none of the parser's needles (one regular expression over the Latin-1 view of the message),
 * and says "don't know" (FALLBACK) for anything else, which then goes to classifyLine() on the
 * decoded line. It accepts only a strict
 * subset of what classifyLine() accepts (ASCII, ANSI colour only in the process prefix, all-digit
 * stamps) and gives exactly the same result for it; the tests hold the two paths to that.
 *
 * The head of a line (ANSI colour, process prefix, level) repeats from line to line, so the head of
 * the last line that passed the full check is kept as a template, and a line that starts with the
 * same bytes skips the check. Likewise a stats line is read through the last one's skeleton (its
 * bytes with the numbers cut out) when it has the same bytes between its numbers.
 */
import type { Level, StatsFields } from './types';

export const FALLBACK = 0;
export const ACCESS = 1;
export const STATS = 2;
/** A vLLM-format line whose message carries none of the parser's needles. */
export const OTHER = 3;
export const BLANK = 4;
export type ScanKind = typeof FALLBACK | typeof ACCESS | typeof STATS | typeof OTHER | typeof BLANK;

export const LEVEL_NAMES: Level[] = ['DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'];

const bytes = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));

const ESC = 0x1b;
const SP = 0x20;
const isDigit = (c: number) => c >= 48 && c <= 57;
/** Printable ASCII, no space: what `\S` is in the part of the ASCII range this path accepts. */
const isGraph = (c: number) => c > SP && c < 0x7f;
const isLetter = (c: number) => (c | 0x20) >= 97 && (c | 0x20) <= 122;

const POW10 = Array.from({ length: 23 }, (_, i) => 10 ** i);

// Stats keys ("Key: "), in the order parseStats() knows them.
const K_PROMPT = 0,
  K_GEN = 1,
  K_RUNNING = 2,
  K_WAITING = 3,
  K_PENDING = 4,
  K_SWAPPED = 5,
  K_DEFERRED = 6,
  K_PREEMPT = 7,
  K_GPU_KV = 8,
  K_CPU_KV = 9,
  K_PREFIX = 10,
  K_EXT_PREFIX = 11,
  K_MM = 12,
  K_CORRUPTED = 13;
const KEYS = [
  'Avg prompt throughput: ',
  'Avg generation throughput: ',
  'Running: ',
  'Waiting: ',
  'Pending: ',
  'Swapped: ',
  'Deferred: ',
  'Preemptions: ',
  'GPU KV cache usage: ',
  'CPU KV cache usage: ',
  'Prefix cache hit rate: ',
  'External prefix cache hit rate: ',
  'MM cache hit rate: ',
  'Corrupted: ',
].map(bytes);
/** Key ids by first byte. */
const KEYS_BY_FIRST: number[][] = Array.from({ length: 128 }, () => []);
KEYS.forEach((k, i) => KEYS_BY_FIRST[k[0]].push(i));

const ENGINE = bytes('Engine ');
const AVG_PROMPT = KEYS[K_PROMPT];
const HTTP = bytes(' HTTP/');
const DASH_QUOTE = bytes(' - "');

/** Scratch state: the templates, and the fields of the line just scanned. */
export class ScanState {
  // Head templates: access head (through the whitespace after "INFO:"), vLLM head (through "LEVEL ").
  tplA = new Uint8Array(256);
  tplALen = 0;
  /** The templates as little-endian 32-bit words, for the hot path's compares. */
  tplAW = new Int32Array(64);
  tplV = new Uint8Array(256);
  tplVLen = 0;
  tplVLevel = 0;
  // The access line's middle, ` - "METHOD PATH HTTP/1.1" `, and the route it names.
  tplR = new Uint8Array(512);
  tplRLen = 0;
  tplRW = new Int32Array(128);
  routeKey = '';
  /** Bumped when routeKey changes. */
  routeId = 0;
  // Fields of the last line.
  level = 0;
  month = 0;
  day = 0;
  secOfDay = 0;
  /** The stamp's ten digits, MMDDhhmmss, as a number. */
  stampDigits = 0;
  status = 0;
  /** Where the access line's status ends (the reason phrase follows). */
  statusEnd = 0;
  /** The caller's chunk and a DataView on it, for word compares (unset for other buffers). */
  dvBuf: Buffer | undefined;
  dv: DataView = new DataView(new ArrayBuffer(0));
  stats: StatsFields | undefined;
  // A stats line's values by key id (present when their bit is set in `has`).
  vals = new Float64Array(14);
  has = 0;
  sawPending = false;
  // The stats skeleton: the last stats line's bytes from "Avg prompt throughput: " on, and where
  // its numbers (of which keys) sit in them.
  sk = new Uint8Array(1024);
  skDv = new DataView(this.sk.buffer);
  skLen = 0;
  skSlots = 0;
  skStart = new Int32Array(32);
  skEnd = new Int32Array(32);
  skKey = new Int32Array(32);
  /**
   * A regular expression that finds, in a message, anything that makes classifyLine() look closer:
   * a needle of its rules or an ESC byte (ANSI stripping could join a needle). Set by the parser.
   */
  needles: RegExp = /[^]/;
  /** The text inside the process prefix of a head the long way just read (for the parallelism facts). */
  procInside: string | undefined;
}

function toWords(tpl: Uint8Array, n: number, out: Int32Array): void {
  for (let k = 0; 4 * k + 4 <= n; k++)
    out[k] = tpl[4 * k] | (tpl[4 * k + 1] << 8) | (tpl[4 * k + 2] << 16) | (tpl[4 * k + 3] << 24);
}

/** buf[at, at + n) equals tpl (a word at a time); the caller has checked at + n is in range. */
function sameW(buf: Buffer, dv: DataView, at: number, tpl: Uint8Array, words: Int32Array, n: number): boolean {
  const nw = n >> 2;
  for (let k = 0; k < nw; k++) if (dv.getInt32(at + 4 * k, true) !== words[k]) return false;
  for (let j = nw << 2; j < n; j++) if (buf[at + j] !== tpl[j]) return false;
  return true;
}

/** After an access line's status: only a reason phrase ("OK", "Not Found") and a CR, at most 48 bytes. */
export function reasonTail(buf: Uint8Array, from: number, e: number): boolean {
  if (e - from > 48) return false;
  for (let z = from; z < e; z++) {
    const c = buf[z];
    if (!isLetter(c) && c !== SP && c !== 13 && c !== 0x2d && c !== 0x27) return false;
  }
  return true;
}

/**
 * The hot path: an access line at `s` with the last access line's head and middle, read without
 * knowing where it ends (`n` is the end of the data) — nothing it accepts is a newline, so it
 * cannot run past one. Returns the index of the line's newline (status in st.status), or -1: then
 * the caller finds the end of the line and calls scanLine().
 */
export function scanAccessRun(buf: Buffer, dv: DataView, s: number, n: number, st: ScanState): number {
  const L = st.tplALen;
  const R = st.tplRLen;
  if (!L || !R || s + L >= n || !sameW(buf, dv, s, st.tplA, st.tplAW, L)) return -1;
  const p = s + L;
  let q = p;
  // The client, four bytes at a time while none is below '!' or above '~'.
  while (q + 4 <= n) {
    const x = dv.getInt32(q, true);
    if (((x - 0x21212121) & ~x & 0x80808080) | (((x + 0x01010101) | x) & 0x80808080)) break;
    q += 4;
  }
  while (q < n && isGraph(buf[q])) q++;
  if (q === p || q + R + 3 > n || buf[q] !== SP || !sameW(buf, dv, q, st.tplR, st.tplRW, R)) return -1;
  const r = q + R;
  const a = buf[r] - 48,
    b = buf[r + 1] - 48,
    c = buf[r + 2] - 48;
  if (a >>> 0 > 9 || b >>> 0 > 9 || c >>> 0 > 9) return -1;
  st.status = a * 100 + b * 10 + c;
  // The rest (" OK", a reason phrase: letters, spaces, '-', "'") to the newline; anything else
  // (a glued line) is for the careful path.
  let z = r + 3;
  const lim = Math.min(n, z + 48);
  for (; z < lim; z++) {
    const c = buf[z];
    if (c === 10) return z;
    if (!isLetter(c) && c !== SP && c !== 13 && c !== 0x2d && c !== 0x27) return -1;
  }
  return -1;
}

function same(buf: Buffer, at: number, tpl: Uint8Array, n: number): boolean {
  for (let k = 0; k < n; k++) if (buf[at + k] !== tpl[k]) return false;
  return true;
}

function startsWith(buf: Buffer, at: number, end: number, lit: Uint8Array): boolean {
  const n = lit.length;
  if (at + n > end) return false;
  for (let k = 0; k < n; k++) if (buf[at + k] !== lit[k]) return false;
  return true;
}

/** Skip one ANSI sequence `ESC [ [0-9;]* [A-Za-z]` at i; -1 if there is none there. */
function ansiEnd(buf: Buffer, i: number, end: number): number {
  if (buf[i] !== ESC || i + 1 >= end || buf[i + 1] !== 0x5b) return -1;
  let j = i + 2;
  while (j < end && (isDigit(buf[j]) || buf[j] === 0x3b)) j++;
  return j < end && isLetter(buf[j]) ? j + 1 : -1;
}

/**
 * The head of a line the long way: ANSI sequences, an optional "(Process pid=N) " prefix (ANSI
 * sequences allowed around its closing bracket), then "LEVEL " or "LEVEL:" + spaces. Returns the
 * kind of head and sets the matching template; FALLBACK for anything else.
 */
function scanHead(buf: Buffer, s: number, e: number, st: ScanState): number {
  let i = s;
  while (i < e && buf[i] === ESC) {
    const j = ansiEnd(buf, i, e);
    if (j < 0) return FALLBACK;
    i = j;
  }
  if (i >= e) return FALLBACK;
  if (buf[i] === 0x28) {
    // "(APIServer pid=4650)": the first ')' closes it; " pid=" inside; under 96 characters.
    const open = i;
    let pid = false;
    let j = i + 1;
    for (; j < e; j++) {
      const c = buf[j];
      if (c === 0x29) break;
      if (c < SP || c >= 0x7f) return FALLBACK;
      if (
        c === SP &&
        j + 4 < e &&
        buf[j + 1] === 0x70 &&
        buf[j + 2] === 0x69 &&
        buf[j + 3] === 0x64 &&
        buf[j + 4] === 0x3d
      )
        pid = true;
    }
    if (j >= e || !pid || j - open >= 96) return FALLBACK;
    st.procInside = buf.toString('latin1', open + 1, j);
    i = j + 1;
    while (i < e && buf[i] === ESC) {
      const k = ansiEnd(buf, i, e);
      if (k < 0) return FALLBACK;
      i = k;
    }
    if (i >= e || buf[i] !== SP) return FALLBACK;
    i++;
  }
  // The level word.
  let w = i;
  while (w < e && w - i < 9 && buf[w] >= 65 && buf[w] <= 90) w++;
  const lv = levelOf(buf, i, w);
  if (lv < 0 || w >= e) return FALLBACK;
  const n = w - s;
  if (buf[w] === SP) {
    if (n + 1 > st.tplV.length) return FALLBACK;
    st.tplV.set(buf.subarray(s, w + 1));
    st.tplVLen = n + 1;
    st.tplVLevel = lv;
    return OTHER; // a vLLM head
  }
  // uvicorn's "INFO:     " (the access format allows INFO, WARNING and ERROR).
  if (buf[w] !== 0x3a || !(lv === 1 || lv === 2 || lv === 3)) return FALLBACK;
  let k = w + 1;
  while (k < e && (buf[k] === SP || buf[k] === 9)) k++;
  if (k === w + 1 || k >= e || k - s > st.tplA.length) return FALLBACK;
  st.tplA.set(buf.subarray(s, k));
  st.tplALen = k - s;
  toWords(st.tplA, st.tplALen, st.tplAW);
  return ACCESS;
}

function levelOf(buf: Buffer, i: number, w: number): number {
  for (let l = 0; l < LEVEL_NAMES.length; l++) {
    const name = LEVEL_NAMES[l];
    if (w - i !== name.length) continue;
    let ok = true;
    for (let k = 0; k < name.length; k++)
      if (buf[i + k] !== name.charCodeAt(k)) {
        ok = false;
        break;
      }
    if (ok) return l;
  }
  return -1;
}

/**
 * Scan one line, buf[s, e) without its newline. Returns what it is, with the fields in `st`;
 * FALLBACK when the line is not one this path reads (the caller then decodes it).
 */
export function scanLine(buf: Buffer, s: number, e: number, st: ScanState): ScanKind {
  if (e > s && buf[e - 1] === 13) e--;
  if (e === s) return BLANK;
  if (st.tplALen && s + st.tplALen < e && same(buf, s, st.tplA, st.tplALen))
    return scanAccess(buf, s + st.tplALen, e, st);
  if (st.tplVLen && s + st.tplVLen < e && same(buf, s, st.tplV, st.tplVLen)) {
    st.level = st.tplVLevel;
    return scanVllm(buf, s + st.tplVLen, e, st);
  }
  const h = scanHead(buf, s, e, st);
  if (h === ACCESS) return scanAccess(buf, s + st.tplALen, e, st);
  if (h === OTHER) {
    st.level = st.tplVLevel;
    return scanVllm(buf, s + st.tplVLen, e, st);
  }
  return FALLBACK;
}

/** After the access head: CLIENT - "METHOD PATH HTTP/x" STATUS. */
function scanAccess(buf: Buffer, p: number, e: number, st: ScanState): ScanKind {
  let q = p;
  while (q < e && isGraph(buf[q])) q++;
  if (q === p || q >= e || buf[q] !== SP) return FALLBACK;
  // The middle: the same bytes as the last access line, or checked and kept.
  let r: number;
  if (st.tplRLen && q + st.tplRLen + 3 <= e && same(buf, q, st.tplR, st.tplRLen)) r = q + st.tplRLen;
  else {
    if (!startsWith(buf, q, e, DASH_QUOTE)) return FALLBACK;
    const m0 = q + DASH_QUOTE.length;
    let m = m0;
    while (m < e && buf[m] >= 65 && buf[m] <= 90) m++;
    if (m === m0 || m >= e || buf[m] !== SP) return FALLBACK;
    const p0 = m + 1;
    let pe = p0;
    let query = -1;
    while (pe < e && isGraph(buf[pe])) {
      if (buf[pe] === 0x3f && query < 0) query = pe;
      pe++;
    }
    if (pe === p0 || !startsWith(buf, pe, e, HTTP)) return FALLBACK;
    let v = pe + HTTP.length;
    const v0 = v;
    while (v < e && (isDigit(buf[v]) || buf[v] === 0x2e)) v++;
    if (v === v0 || v + 1 >= e || buf[v] !== 0x22 || buf[v + 1] !== SP) return FALLBACK;
    r = v + 2;
    if (r - q > st.tplR.length) return FALLBACK;
    st.tplR.set(buf.subarray(q, r));
    st.tplRLen = r - q;
    toWords(st.tplR, st.tplRLen, st.tplRW);
    // ASCII only, so Latin-1 is UTF-8 here.
    st.routeKey = latin1(buf, m0, m) + ' ' + latin1(buf, p0, query >= 0 ? query : pe);
    st.routeId++;
  }
  if (r + 3 > e || !isDigit(buf[r]) || !isDigit(buf[r + 1]) || !isDigit(buf[r + 2])) return FALLBACK;
  st.status = (buf[r] - 48) * 100 + (buf[r + 1] - 48) * 10 + (buf[r + 2] - 48);
  st.statusEnd = r + 3;
  return ACCESS;
}

function latin1(buf: Buffer, a: number, b: number): string {
  return buf.toString('latin1', a, b);
}

/** After "LEVEL ": MM-DD HH:MM:SS[.fff] [file:line] message. */
function scanVllm(buf: Buffer, p: number, e: number, st: ScanState): ScanKind {
  if (p + 14 > e) return FALLBACK;
  // All ten digits (classifyLine() checks fewer; this path takes only clean stamps).
  const d0 = buf[p] - 48,
    d1 = buf[p + 1] - 48,
    d3 = buf[p + 3] - 48,
    d4 = buf[p + 4] - 48,
    d6 = buf[p + 6] - 48,
    d7 = buf[p + 7] - 48,
    d9 = buf[p + 9] - 48,
    d10 = buf[p + 10] - 48,
    d12 = buf[p + 12] - 48,
    d13 = buf[p + 13] - 48;
  if (
    d0 >>> 0 > 9 ||
    d1 >>> 0 > 9 ||
    d3 >>> 0 > 9 ||
    d4 >>> 0 > 9 ||
    d6 >>> 0 > 9 ||
    d7 >>> 0 > 9 ||
    d9 >>> 0 > 9 ||
    d10 >>> 0 > 9 ||
    d12 >>> 0 > 9 ||
    d13 >>> 0 > 9 ||
    buf[p + 2] !== 0x2d ||
    buf[p + 5] !== SP ||
    buf[p + 8] !== 0x3a ||
    buf[p + 11] !== 0x3a
  )
    return FALLBACK;
  st.month = d0 * 10 + d1;
  st.day = d3 * 10 + d4;
  const hh = d6 * 10 + d7,
    mm = d9 * 10 + d10,
    ss = d12 * 10 + d13;
  st.secOfDay = hh * 3600 + mm * 60 + ss;
  st.stampDigits = ((st.month * 100 + st.day) * 100 + hh) * 10000 + mm * 100 + ss;
  let q = p + 14;
  if (q < e && (buf[q] === 0x2c || buf[q] === 0x2e)) {
    q++;
    while (q < e && isDigit(buf[q])) q++;
  }
  if (q >= e || buf[q] !== SP) return FALLBACK;
  // "[file.py:123]" (or, before 2025-02, "file.py:123]"): the first ']' within 120 characters.
  let c = q + 1;
  for (; c < e && c - q <= 120; c++) {
    const b = buf[c];
    if (b === 0x5d) break;
    if (b < SP || b >= 0x7f) return FALLBACK;
  }
  if (c >= e || c - q > 120 || buf[c] !== 0x5d) return FALLBACK;
  const m = c + 1 < e && buf[c + 1] === SP ? c + 2 : c + 1;
  // Stats: "Avg prompt throughput: …" or "Engine NNN: Avg prompt throughput: …".
  let engine = -1;
  let a = m;
  if (startsWith(buf, m, e, ENGINE)) {
    let k = m + ENGINE.length;
    const k0 = k;
    while (k < e && isDigit(buf[k]) && k - k0 < 9) k++;
    if (k > k0 && k + 1 < e && buf[k] === 0x3a && buf[k + 1] === SP && startsWith(buf, k + 2, e, AVG_PROMPT)) {
      engine = 0;
      for (let j = k0; j < k; j++) engine = engine * 10 + (buf[j] - 48);
      a = k + 2;
    }
  }
  if (a !== m || startsWith(buf, m, e, AVG_PROMPT)) return scanStats(buf, a, e, engine, st);
  // Anything else: an OTHER line unless it holds a needle (or an ESC) — then classifyLine() decides.
  st.needles.lastIndex = 0;
  if (st.needles.test(latin1(buf, m, e))) return FALLBACK;
  return OTHER;
}

/** The "Key: value" parts of a stats line from `a` (at "Avg prompt throughput: "), as parseStats() reads them. */
function scanStats(buf: Buffer, a: number, e: number, engine: number, st: ScanState): ScanKind {
  st.has = 0;
  st.sawPending = false;
  // The skeleton of the last stats line: its bytes with the numbers cut out. Most lines have it.
  if (st.skSlots && statsBySkeleton(buf, a, e, st)) return buildStats(engine, st);
  st.has = 0;
  st.sawPending = false;
  let slots = 0;
  let skeleton = e - a <= st.sk.length;
  let ps = a;
  for (;;) {
    // The part runs to the next ", " (or the end of the line).
    let pe = ps;
    while (pe < e) {
      const b = buf[pe];
      if (b === 0x2c && pe + 1 < e && buf[pe + 1] === SP) break;
      if (b === ESC) return FALLBACK; // ANSI stripping could move the split
      pe++;
    }
    const cands = ps < pe && buf[ps] < 128 ? KEYS_BY_FIRST[buf[ps]] : undefined;
    if (cands && cands.length) {
      let key = -1;
      for (let ci = 0; ci < cands.length; ci++) {
        const lit = KEYS[cands[ci]];
        if (ps + lit.length <= pe && same(buf, ps, lit, lit.length)) {
          key = cands[ci];
          break;
        }
      }
      if (key >= 0) {
        const vs = ps + KEYS[key].length;
        const j = scanNumber(buf, vs, pe, key, st);
        if (j < 0) return FALLBACK;
        if (buf[j - 1] === 0x2c || slots === st.skStart.length) skeleton = false;
        else {
          st.skStart[slots] = vs - a;
          st.skEnd[slots] = j - a;
          st.skKey[slots] = key;
          slots++;
        }
      }
    }
    if (pe >= e) break;
    ps = pe + 2;
  }
  if (!(st.has & (1 << K_PROMPT)) || !(st.has & (1 << K_GEN))) return FALLBACK;
  // Keep this line as the skeleton (numbers ending in ',' would make a new ", ": no skeleton then).
  if (skeleton && slots) {
    st.sk.set(buf.subarray(a, e));
    st.skLen = e - a;
    st.skSlots = slots;
  } else st.skSlots = 0;
  return buildStats(engine, st);
}

/**
 * parseFloat() of the value at vs (commas dropped), for `key`: digits, commas and one '.'; a
 * value that starts otherwise, runs past 15 digits or has an exponent is -1 (fall back). Records
 * the value in st; returns where the number ends.
 */
function scanNumber(buf: Buffer, vs: number, pe: number, key: number, st: ScanState): number {
  if (vs >= pe || !isDigit(buf[vs])) return -1;
  let mant = 0,
    digits = 0,
    frac = 0,
    dot = false,
    j = vs;
  for (; j < pe; j++) {
    const b = buf[j];
    if (b >= 48 && b <= 57) {
      if (++digits > 15) return -1;
      mant = mant * 10 + (b - 48);
      if (dot) frac++;
    } else if (b === 0x2c) continue;
    else if (b === 0x2e && !dot) dot = true;
    else break;
  }
  if (j < pe && (buf[j] | 0x20) === 0x65) return -1; // an exponent
  // Exact: both integers are below 2^53 and 10^frac is exact, so the one division rounds as parseFloat does.
  const v = frac ? mant / POW10[frac] : mant;
  if (key === K_PENDING) {
    st.vals[K_WAITING] = v;
    st.has |= 1 << K_WAITING;
    st.sawPending = true;
  } else {
    st.vals[key] = v;
    st.has |= 1 << key;
  }
  return j;
}

/**
 * A stats line with the skeleton's bytes between its numbers: then its parts and keys are the
 * skeleton's (a number holds no space, and none ends in ',', so no ", " moves), and only the
 * numbers need reading.
 */
function statsBySkeleton(buf: Buffer, a: number, e: number, st: ScanState): boolean {
  const sk = st.sk;
  const skDv = st.skDv;
  const dv = st.dvBuf === buf ? st.dv : undefined;
  let pos = a;
  let prev = 0;
  for (let i = 0; i < st.skSlots; i++) {
    const start = st.skStart[i];
    const len = start - prev;
    if (pos + len > e) return false;
    let k = 0;
    if (dv) for (; k + 4 <= len; k += 4) if (dv.getInt32(pos + k, true) !== skDv.getInt32(prev + k, true)) return false;
    for (; k < len; k++) if (buf[pos + k] !== sk[prev + k]) return false;
    pos += len;
    // The number ends where parseFloat stops; the skeleton's next bytes must follow.
    let stop = pos;
    while (stop < e && (isDigit(buf[stop]) || buf[stop] === 0x2c || buf[stop] === 0x2e)) stop++;
    const j = scanNumber(buf, pos, stop, st.skKey[i], st);
    if (j < 0 || buf[j - 1] === 0x2c) return false;
    pos = j;
    prev = st.skEnd[i];
  }
  const len = st.skLen - prev;
  if (pos + len !== e) return false;
  let k = 0;
  if (dv) for (; k + 4 <= len; k += 4) if (dv.getInt32(pos + k, true) !== skDv.getInt32(prev + k, true)) return false;
  for (; k < len; k++) if (buf[pos + k] !== sk[prev + k]) return false;
  return true;
}

function buildStats(engine: number, st: ScanState): ScanKind {
  const h = st.has;
  const v = st.vals;
  const f: StatsFields = {
    format: st.sawPending || h & (1 << K_SWAPPED) || h & (1 << K_CPU_KV) ? 'v0' : 'v1',
    prompt_tok_s: v[K_PROMPT],
    gen_tok_s: v[K_GEN],
    running: h & (1 << K_RUNNING) ? v[K_RUNNING] : 0,
    waiting: h & (1 << K_WAITING) ? v[K_WAITING] : 0,
    kv_usage_pct: h & (1 << K_GPU_KV) ? v[K_GPU_KV] : NaN,
  };
  if (engine >= 0) f.engine = engine;
  if (h & (1 << K_SWAPPED)) f.swapped = v[K_SWAPPED];
  if (h & (1 << K_DEFERRED)) f.deferred = v[K_DEFERRED];
  if (h & (1 << K_PREEMPT)) f.preemptions = v[K_PREEMPT];
  if (h & (1 << K_CPU_KV)) f.cpu_kv_usage_pct = v[K_CPU_KV];
  if (h & (1 << K_PREFIX)) f.prefix_hit_pct = v[K_PREFIX];
  if (h & (1 << K_EXT_PREFIX)) f.external_prefix_hit_pct = v[K_EXT_PREFIX];
  if (h & (1 << K_MM)) f.mm_hit_pct = v[K_MM];
  if (h & (1 << K_CORRUPTED)) f.corrupted = v[K_CORRUPTED];
  st.stats = f;
  return STATS;
}
