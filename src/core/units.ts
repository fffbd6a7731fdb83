/**
 * Quantities with units, parsed from what people write ("80 GiB", "2,039 GB/s", "1k tokens",
 * "23 ms"). Values are stored in base units (bytes, seconds, FLOP, tokens, requests) with a
 * dimension vector, so arithmetic tracks dimensions and GB (1e9) and GiB (2^30) never mix silently:
 * the unit a person wrote is kept beside the value for messages and formatting.
 */

export type BaseDim = 'byte' | 's' | 'flop' | 'token' | 'request' | 'usd';
export type Dims = Partial<Record<BaseDim, number>>;

export type DimName =
  | 'bytes'
  | 'bandwidth'
  | 'compute'
  | 'flops'
  | 'time'
  | 'tokens'
  | 'token_rate'
  | 'requests'
  | 'request_rate'
  | 'intensity'
  | 'ratio'
  /** A rental price, $ per unit time ("1.20 $/h"). */
  | 'price_rate'
  /** What a token costs ("0.108 $/Mtok"). */
  | 'cost_per_token';

export const DIMS: Record<DimName, Dims> = {
  bytes: { byte: 1 },
  bandwidth: { byte: 1, s: -1 },
  compute: { flop: 1, s: -1 },
  flops: { flop: 1 },
  time: { s: 1 },
  tokens: { token: 1 },
  token_rate: { token: 1, s: -1 },
  requests: { request: 1 },
  request_rate: { request: 1, s: -1 },
  intensity: { flop: 1, byte: -1 },
  ratio: {},
  price_rate: { usd: 1, s: -1 },
  cost_per_token: { usd: 1, token: -1 },
};

/** What each dimension is called in messages, and an example of how to write it. */
export const DIM_HELP: Record<DimName, { noun: string; example: string }> = {
  bytes: { noun: 'a size in bytes', example: '80 GiB' },
  bandwidth: { noun: 'a bandwidth', example: '2,039 GB/s' },
  compute: { noun: 'a compute rate', example: '312 TFLOP/s' },
  flops: { noun: 'an amount of compute', example: '16 TFLOP' },
  time: { noun: 'a time', example: '23 ms' },
  tokens: { noun: 'a token count', example: '1,000 tokens' },
  token_rate: { noun: 'a token rate', example: '88.4 tok/s' },
  requests: { noun: 'a request count', example: '200 requests' },
  request_rate: { noun: 'a request rate', example: '4 req/s' },
  intensity: { noun: 'an arithmetic intensity', example: '153 FLOP/byte' },
  ratio: { noun: 'a percentage', example: '90%' },
  price_rate: { noun: 'a rental price', example: '1.20 $/h' },
  cost_per_token: { noun: 'a cost per token', example: '0.108 $/Mtok' },
};

export interface Quantity {
  /** Value in base units: bytes, seconds, FLOP, tokens, requests, US dollars; a ratio as a fraction. */
  value: number;
  dims: Dims;
  /** The unit as the person wrote it (canonical spelling), e.g. "GB", "GiB", "ms". */
  unit: string;
}

interface UnitDef {
  dim: DimName;
  factor: number;
  canonical: string;
}

// No prototype: a unit spelled "constructor" or "valueOf" is unknown, not a function.
const U: Record<string, UnitDef> = Object.create(null);
function def(dim: DimName, factor: number, canonical: string, ...spellings: string[]): void {
  for (const s of [canonical, ...spellings]) U[s] = { dim, factor, canonical };
}

/** Binary and decimal gigabytes: the one place these numbers are written. */
export const GiB = 2 ** 30;
export const GB = 1e9;
/** One GB expressed in GiB (0.931) and one GiB in GB (1.074): the ratio a GB/GiB slip leaves behind. */
export const GB_IN_GIB = GB / GiB;
export const GIB_IN_GB = GiB / GB;

/** Card sizes sold as "N GB" whose memory really is N GiB (an "80GB" A100 holds 80 GiB). */
const BINARY_CARD_SIZES = new Set([16, 24, 32, 40, 80, 96]);

/** N when `bytes` is exactly N GB for such a card size (memory written in GB where GiB is meant). */
export function decimalCardSize(bytes: number): number | undefined {
  const n = bytes / GB;
  return Number.isInteger(n) && BINARY_CARD_SIZES.has(n) ? n : undefined;
}
def('bytes', 1, 'B', 'byte', 'bytes');
def('bytes', 1e3, 'KB', 'kB', 'kb');
def('bytes', 1e6, 'MB');
def('bytes', 1e9, 'GB');
def('bytes', 1e12, 'TB');
def('bytes', 2 ** 10, 'KiB');
def('bytes', 2 ** 20, 'MiB');
def('bytes', GiB, 'GiB');
def('bytes', 2 ** 40, 'TiB');
def('bandwidth', 1, 'B/s');
def('bandwidth', 1e3, 'KB/s', 'kB/s');
def('bandwidth', 2 ** 10, 'KiB/s');
def('bandwidth', 1e6, 'MB/s');
def('bandwidth', 1e9, 'GB/s');
def('bandwidth', 1e12, 'TB/s');
def('bandwidth', 2 ** 20, 'MiB/s');
def('bandwidth', GiB, 'GiB/s');
def('bandwidth', 2 ** 40, 'TiB/s');
def('compute', 1, 'FLOP/s', 'FLOPS', 'flop/s');
def('compute', 1e9, 'GFLOP/s', 'GFLOPS');
def('compute', 1e12, 'TFLOP/s', 'TFLOPS', 'TFLOPs', 'tflops', 'TFlops', 'TOPS', 'TOP/s');
def('compute', 1e15, 'PFLOP/s', 'PFLOPS', 'POPS', 'POP/s');
def('flops', 1, 'FLOP', 'flop');
def('flops', 1e9, 'GFLOP');
def('flops', 1e12, 'TFLOP');
def('flops', 1e15, 'PFLOP');
def('time', 1, 's', 'sec', 'secs', 'second', 'seconds');
def('time', 1e-3, 'ms', 'msec');
def('time', 1e-6, 'µs', 'us', 'μs');
def('time', 1e-9, 'ns');
def('time', 60, 'min', 'mins', 'minute', 'minutes');
def('time', 3600, 'h', 'hour', 'hours');
def('tokens', 1, 'tokens', 'token', 'tok', 'toks');
def('token_rate', 1, 'tok/s', 'tokens/s', 'token/s', 'tps', 'tokens per second', 'tok/sec', 'tokens/sec');
def('token_rate', 1 / 60, 'tok/min', 'tokens/min');
def('requests', 1, 'requests', 'request', 'req', 'reqs');
def('request_rate', 1, 'req/s', 'requests/s', 'request/s', 'rps', 'requests per second', 'req/sec');
def('request_rate', 1 / 60, 'req/min', 'requests/min', 'rpm');
def('intensity', 1, 'FLOP/byte', 'FLOP/B', 'FLOPs/byte', 'flop/byte', 'flop/B');
def('ratio', 0.01, '%', 'percent');
def('price_rate', 1 / 3600, '$/h', '$/hr', '$/hour', 'USD/h', 'USD/hr', 'USD/hour');
def('price_rate', 1 / 60, '$/min', 'USD/min');
def('price_rate', 1, '$/s', 'USD/s');
def('cost_per_token', 1e-6, '$/Mtok', '$/Mtoken', '$/Mtokens', 'USD/Mtok', '$/1Mtok');
def('cost_per_token', 1e-3, '$/ktok', '$/ktoken', '$/ktokens');
def('cost_per_token', 1, '$/tok', '$/token');

const NUMBER =
  /^([+-]?(?:\d{1,3}(?:,\d{3})+|\d[\d_]*)(?:\.\d+)?(?:[eE][+-]?\d+)?|[+-]?\.\d+)(?:\s*([kKM])(?![a-zA-Z]))?/;

export type ParseResult = { ok: true; quantity: Quantity; dim: DimName } | { ok: false; message: string };

export interface ParseOptions {
  /** Dimensions accepted here (first is the one named in messages). */
  dims: DimName[];
  /**
   * A bare number (no unit) is taken in this unit, e.g. "tokens" for `input: 1000`. Without it a
   * bare number is an error that says which unit to write.
   */
  bare?: string;
}

function dimOf(d: Dims): DimName | undefined {
  for (const [name, dd] of Object.entries(DIMS) as [DimName, Dims][]) if (sameDims(dd, d)) return name;
  return undefined;
}

export function sameDims(a: Dims, b: Dims): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<BaseDim>;
  for (const k of keys) if ((a[k] ?? 0) !== (b[k] ?? 0)) return false;
  return true;
}

export function dimName(q: Quantity): DimName | undefined {
  return dimOf(q.dims);
}

/** Parse one quantity. `text` may be a number (from YAML) or a string like "1,000 tokens". */
export function parseQuantity(text: string | number, opts: ParseOptions): ParseResult {
  const want = opts.dims;
  const wanted = DIM_HELP[want[0]];
  if (typeof text === 'number') {
    if (!Number.isFinite(text)) return { ok: false, message: `${text} is not a finite number` };
    return bareNumber(text, String(text), opts);
  }
  const s = text.trim();
  if (s === '') return { ok: false, message: `expected ${wanted.noun}, e.g. "${wanted.example}"` };
  const m = NUMBER.exec(s);
  if (!m) {
    return { ok: false, message: `"${s}" is not ${wanted.noun}: write a number then a unit, e.g. "${wanted.example}"` };
  }
  let value = Number(m[1].replace(/[,_]/g, ''));
  if (m[2]) value *= m[2] === 'M' ? 1e6 : 1e3;
  if (!Number.isFinite(value)) return { ok: false, message: tooLarge(s, wanted) };
  const rest = s.slice(m[0].length).trim();
  if (rest === '') return bareNumber(value, s, opts);
  const u = U[rest] ?? U[rest.replace(/\s+/g, '')] ?? caseInsensitive(rest);
  if (!u) {
    const amb = ambiguousByteUnit(rest);
    if (amb) return { ok: false, message: `"${rest}" in "${s}" is ambiguous: ${amb}` };
    const known = want.flatMap((d) => unitsOf(d)).join(', ');
    return { ok: false, message: `unknown unit "${rest}" in "${s}"; use one of: ${known}` };
  }
  if (!want.includes(u.dim)) {
    return {
      ok: false,
      message: `"${s}" is ${DIM_HELP[u.dim].noun}, but ${wanted.noun} is needed here, e.g. "${wanted.example}"`,
    };
  }
  if (!Number.isFinite(value * u.factor)) return { ok: false, message: tooLarge(s, wanted) };
  return { ok: true, dim: u.dim, quantity: { value: value * u.factor, dims: DIMS[u.dim], unit: u.canonical } };
}

/** A number past the largest double (~1.8e308, after the unit's factor) is refused, never Infinity. */
function tooLarge(s: string, wanted: { noun: string; example: string }): string {
  return `"${s.length > 40 ? `${s.slice(0, 40)}…` : s}" is too large to be a finite number: write ${wanted.noun}, e.g. "${wanted.example}"`;
}

/**
 * "gb", "Gb", "gib", "GIB": a size whose case cannot be trusted. Say which two units exist instead of
 * guessing (GB is 10^9 bytes, GiB 2^30; a lowercase b is bits).
 */
function ambiguousByteUnit(rest: string): string | undefined {
  const m = /^([kKmMgGtT])(i?)([bB])(\/s)?$/i.exec(rest.replace(/\s+/g, ''));
  if (!m) return undefined;
  const p = m[1].toUpperCase();
  const per = m[4] ? '/s' : '';
  const dec = `${p}B${per}`;
  const bin = `${p}iB${per}`;
  const pow = { K: ['10^3', '2^10'], M: ['10^6', '2^20'], G: ['10^9', '2^30'], T: ['10^12', '2^40'] }[p]!;
  const bits = m[3] === 'b' ? ' (a lowercase b means bits)' : '';
  return `write "${dec}" (${pow[0]} bytes${per}) or "${bin}" (${pow[1]} bytes${per})${bits}`;
}

function caseInsensitive(rest: string): UnitDef | undefined {
  // Only for spellings where case cannot change the meaning (never GB vs Gb, ms vs Ms).
  const lower = rest.toLowerCase();
  for (const [k, v] of Object.entries(U)) {
    if (
      k.toLowerCase() === lower &&
      (v.dim === 'tokens' ||
        v.dim === 'token_rate' ||
        v.dim === 'requests' ||
        v.dim === 'request_rate' ||
        v.dim === 'compute' ||
        v.dim === 'price_rate' ||
        v.dim === 'cost_per_token')
    )
      return v;
  }
  return undefined;
}

function bareNumber(value: number, s: string, opts: ParseOptions): ParseResult {
  if (opts.bare) {
    const u = U[opts.bare];
    if (!u) throw new Error(`bad bare unit ${opts.bare}`);
    if (!Number.isFinite(value * u.factor)) return { ok: false, message: tooLarge(s, DIM_HELP[u.dim]) };
    return { ok: true, dim: u.dim, quantity: { value: value * u.factor, dims: DIMS[u.dim], unit: u.canonical } };
  }
  const h = DIM_HELP[opts.dims[0]];
  return { ok: false, message: `${s} needs a unit: ${h.noun}, e.g. "${h.example}"` };
}

/** The canonical unit spellings of a dimension, for messages. */
export function unitsOf(d: DimName): string[] {
  return [
    ...new Set(
      Object.values(U)
        .filter((u) => u.dim === d)
        .map((u) => u.canonical),
    ),
  ];
}

export function q(value: number, dim: DimName, unit?: string): Quantity {
  return { value, dims: DIMS[dim], unit: unit ?? unitsOf(dim)[0] };
}

/** Parse or throw; for trusted literals in catalogs and tests. */
export function qty(text: string, dim: DimName): Quantity {
  const r = parseQuantity(text, { dims: [dim] });
  if (!r.ok) throw new Error(r.message);
  return r.quantity;
}

function combine(a: Dims, b: Dims, sign: 1 | -1): Dims {
  const out: Dims = { ...a };
  for (const [k, v] of Object.entries(b) as [BaseDim, number][]) {
    const n = (out[k] ?? 0) + sign * v;
    if (n === 0) delete out[k];
    else out[k] = n;
  }
  return out;
}

export function mul(a: Quantity, b: Quantity | number): Quantity {
  if (typeof b === 'number') return { ...a, value: a.value * b };
  return { value: a.value * b.value, dims: combine(a.dims, b.dims, 1), unit: '' };
}

export function div(a: Quantity, b: Quantity | number): Quantity {
  if (typeof b === 'number') return { ...a, value: a.value / b };
  return { value: a.value / b.value, dims: combine(a.dims, b.dims, -1), unit: '' };
}

export function add(a: Quantity, b: Quantity): Quantity {
  if (!sameDims(a.dims, b.dims)) throw new Error(`cannot add ${describeDims(a.dims)} to ${describeDims(b.dims)}`);
  return { value: a.value + b.value, dims: a.dims, unit: a.unit };
}

export function sub(a: Quantity, b: Quantity): Quantity {
  return add(a, { ...b, value: -b.value });
}

export function describeDims(d: Dims): string {
  const n = dimOf(d);
  if (n) return DIM_HELP[n].noun;
  return (
    Object.entries(d)
      .map(([k, v]) => (v === 1 ? k : `${k}^${v}`))
      .join('·') || 'a pure number'
  );
}

/** Value of `q` expressed in `unit` (which must have the same dimension). */
export function inUnit(qq: Quantity, unit: string): number {
  const u = U[unit];
  if (!u) throw new Error(`unknown unit ${unit}`);
  if (!sameDims(DIMS[u.dim], qq.dims)) throw new Error(`cannot express ${describeDims(qq.dims)} in ${unit}`);
  return qq.value / u.factor;
}

/** A number with thousands separators and a sensible number of significant digits. */
export function fmtNum(v: number, digits?: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  const d = digits ?? (a >= 1000 ? 0 : a >= 100 ? 1 : a >= 1 ? 2 : a === 0 ? 0 : 3);
  // One formatter per digit count: toLocaleString builds a new one on every call (~60 µs).
  let f = NUM_FORMATS.get(d);
  if (!f)
    NUM_FORMATS.set(d, (f = new Intl.NumberFormat('en-US', { minimumFractionDigits: d, maximumFractionDigits: d })));
  return f.format(v);
}
const NUM_FORMATS = new Map<number, Intl.NumberFormat>();

/** Format a value in a given unit: fmtIn(16.38e9, 'GB') → "16.38 GB". Always names the unit. */
export function fmtIn(valueInBase: number, unit: string, digits?: number): string {
  const u = U[unit];
  if (!u) throw new Error(`unknown unit ${unit}`);
  const sep = unit === '%' ? '' : ' ';
  return `${fmtNum(valueInBase / u.factor, digits)}${sep}${u.canonical}`;
}

/** Bytes in both decimal and binary units, so the two can never be confused: "16.38 GB (15.26 GiB)". */
export function fmtBytes(bytes: number, digits = 2): string {
  const a = Math.abs(bytes);
  if (a >= 1e12) return `${fmtIn(bytes, 'TB', digits)} (${fmtIn(bytes, 'TiB', digits)})`;
  if (a >= 1e9) return `${fmtIn(bytes, 'GB', digits)} (${fmtIn(bytes, 'GiB', digits)})`;
  if (a >= 1e6) return `${fmtIn(bytes, 'MB', digits)} (${fmtIn(bytes, 'MiB', digits)})`;
  if (a >= 1e4) return `${fmtNum(bytes, 0)} B (${fmtIn(bytes, 'KB', digits)} = ${fmtIn(bytes, 'KiB', digits)})`;
  return `${fmtNum(bytes, 0)} B`;
}

export function fmtTime(seconds: number, digits?: number): string {
  const a = Math.abs(seconds);
  if (a >= 1 || a === 0) return fmtIn(seconds, 's', digits ?? 2);
  if (a >= 1e-3) return fmtIn(seconds, 'ms', digits ?? (a >= 0.1 ? 1 : 2));
  return fmtIn(seconds, 'µs', digits ?? 1);
}

/** Human formatting of a quantity in the unit it was written in, or a chosen one. */
export function fmtQuantity(qq: Quantity, unit?: string, digits?: number): string {
  const d = dimOf(qq.dims);
  if (d === 'bytes' && !unit) return fmtBytes(qq.value);
  if (d === 'time' && !unit) return fmtTime(qq.value);
  const useUnit = unit ?? (qq.unit || (d ? unitsOf(d)[0] : ''));
  if (!U[useUnit]) return `${fmtNum(qq.value, digits)} ${describeDims(qq.dims)}`;
  return fmtIn(qq.value, useUnit, digits);
}

/** All the ways to show a quantity, for hovers: "80 GiB = 85.90 GB = 85,899,345,920 B". */
export function otherUnits(qq: Quantity): string[] {
  const d = dimOf(qq.dims);
  if (!d) return [];
  const pick: Record<DimName, string[]> = {
    bytes: ['GB', 'GiB', 'MB', 'MiB', 'B'],
    bandwidth: ['GB/s', 'GiB/s', 'TB/s'],
    compute: ['TFLOP/s', 'PFLOP/s'],
    flops: ['TFLOP', 'GFLOP'],
    time: ['s', 'ms', 'µs'],
    tokens: ['tokens'],
    token_rate: ['tok/s'],
    requests: ['requests'],
    request_rate: ['req/s', 'req/min'],
    intensity: ['FLOP/byte'],
    ratio: ['%'],
    price_rate: ['$/h'],
    cost_per_token: ['$/Mtok'],
  };
  if (d === 'ratio') return [fmtIn(qq.value, '%', undefined), `${fmtNum(qq.value, 4)} (fraction)`];
  return pick[d].map((u) => fmtIn(qq.value, u, u === 'B' ? 0 : undefined));
}
