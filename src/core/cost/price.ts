/**
 * The setup key `price:` — what renting the setup's GPUs costs. Written as a rental price in the
 * units units.ts knows ($/h, $/min, $/s):
 *
 *   price: 1.20 $/h                 per GPU (the whole setup: × tensor × pipeline × data parallel)
 *   price: 1.20 $/h per GPU         the same, said
 *   price: 9.60 $/h per node        the whole setup's GPUs for one price
 *   price: {gpu: 1.20 $/h}          the same two, as a mapping
 *   price: {node: 9.60 $/h}
 *
 * "$1.20/h" is read as "1.20 $/h". A bare number is refused: say the unit.
 */
import { z } from 'zod';
import { DIM_HELP, parseQuantity } from '../units';

export interface Price {
  /** $ per hour of one GPU (per: gpu) or of the whole setup (per: node). */
  usdPerHour: number;
  per: 'gpu' | 'node';
  /** As the person wrote it, for messages. */
  written: string;
}

const EXAMPLE = 'write "1.20 $/h" (per GPU), "9.60 $/h per node" (every GPU of the setup), or {node: 9.60 $/h}';

/** "$1.20/h" → "1.20 $/h", and the "per GPU" / "per node" tail split off. */
function normalize(text: string): { rate: string; per?: 'gpu' | 'node' } {
  let s = text.trim();
  let per: 'gpu' | 'node' | undefined;
  const tail = /\s*(?:\bper\s+|\/\s*)(gpu|node)\s*$/i.exec(s);
  if (tail) {
    per = tail[1].toLowerCase() as 'gpu' | 'node';
    s = s.slice(0, tail.index).trim();
  }
  const lead = /^\$\s*([0-9][0-9,_]*(?:\.[0-9]+)?)\s*(\/.*)$/.exec(s);
  if (lead) s = `${lead[1]} $${lead[2].replace(/\s+/g, '')}`;
  return { rate: s, ...(per ? { per } : {}) };
}

/** One price, or the message that says what to write instead. */
export function parsePrice(v: unknown): Price | string {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length !== 1 || (keys[0] !== 'gpu' && keys[0] !== 'node'))
      return `price as a mapping takes one key, gpu or node (e.g. {node: 9.60 $/h}), not ${keys.length ? keys.join(', ') : 'none'}`;
    const per = keys[0] as 'gpu' | 'node';
    const inner = (v as Record<string, unknown>)[per];
    if (typeof inner !== 'string' && typeof inner !== 'number') return `price.${per}: ${EXAMPLE}`;
    const r = parsePrice(inner);
    if (typeof r === 'string') return r;
    return { ...r, per, written: `${r.written} per ${per}` };
  }
  if (typeof v !== 'string' && typeof v !== 'number') return `price must be a rental price: ${EXAMPLE}`;
  if (typeof v === 'number' || /^\s*\$?\s*[0-9.,_]+\s*$/.test(v))
    return `price ${String(v).trim()} needs a unit: ${EXAMPLE.replace(
      /1\.20/,
      String(v)
        .replace(/^\s*\$?\s*/, '')
        .trim(),
    )}`;
  const { rate, per } = normalize(v);
  const r = parseQuantity(rate, { dims: ['price_rate'] });
  if (!r.ok) return `price: ${r.message.replace(DIM_HELP.price_rate.example, '1.20 $/h')}; ${EXAMPLE}`;
  if (!(r.quantity.value > 0)) return `price ${v.trim()} must be more than zero: ${EXAMPLE}`;
  return { usdPerHour: r.quantity.value * 3600, per: per ?? 'gpu', written: v.trim() };
}

/** The zod schema of the key: a Price, or an issue whose message is parsePrice's. */
export const priceSchema = z.unknown().transform((v, ctx): Price => {
  const r = parsePrice(v);
  if (typeof r === 'string') {
    ctx.addIssue({ code: 'custom', message: r });
    return z.NEVER;
  }
  return r;
});
