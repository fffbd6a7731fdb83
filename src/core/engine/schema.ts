/**
 * zod building blocks for cell schemas: quantities with units, lists of them, and the translation of
 * zod issues into findings whose messages say what to write instead.
 */
import { z } from 'zod';
import { finding, type CellPath, type Finding } from '../findings';
import { parseQuantity, type DimName, type Quantity } from '../units';

export interface QuantityOpts {
  /** Unit a bare number is taken in (e.g. "tokens"); without it a bare number needs a unit. */
  bare?: string;
  min?: number;
  positive?: boolean;
}

/** A quantity of one (or several) dimensions, written "23 ms", "1k tokens", "2,039 GB/s". */
export function quantity(dims: DimName | DimName[], opts: QuantityOpts = {}) {
  const list = Array.isArray(dims) ? dims : [dims];
  return z.union([z.string(), z.number()]).transform((v, ctx): Quantity => {
    const r = parseQuantity(v, { dims: list, bare: opts.bare });
    if (!r.ok) {
      ctx.addIssue({ code: 'custom', message: r.message });
      return z.NEVER;
    }
    if ((opts.positive && !(r.quantity.value > 0)) || (opts.min !== undefined && r.quantity.value < opts.min)) {
      ctx.addIssue({ code: 'custom', message: `${v} must be ${opts.positive ? 'greater than zero' : `at least ${opts.min}`}` });
      return z.NEVER;
    }
    return r.quantity;
  });
}

/** One value or a list of them: `concurrency: 8` or `concurrency: [1, 2, 4]`. */
export function oneOrMany<T extends z.ZodTypeAny>(item: T) {
  return z.union([z.array(item).min(1), item]).transform((v) => (Array.isArray(v) ? v : [v]) as z.output<T>[]);
}

export const positiveInt = z.number().int().positive();

/** Levenshtein distance, for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length][b.length];
}

export function suggest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const dd = editDistance(word.toLowerCase(), c.toLowerCase());
    if (dd < bestD) {
      bestD = dd;
      best = c;
    }
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

function keysOfSchemaAt(schema: z.ZodTypeAny, path: CellPath): string[] {
  let s: any = schema;
  for (const seg of path) {
    s = unwrap(s);
    if (s?.shape && typeof seg === 'string') s = s.shape[seg];
    else if (s?.element) s = s.element;
    else return [];
  }
  s = unwrap(s);
  return s?.shape ? Object.keys(s.shape) : [];
}

function unwrap(s: any): any {
  for (let i = 0; i < 10 && s; i++) {
    const def = s._zod?.def ?? s.def;
    if (!def) return s;
    if (def.type === 'object') return s;
    if (def.innerType) s = def.innerType;
    else if (def.in && def.type === 'pipe') s = def.in;
    else if (def.schema) s = def.schema;
    else return s;
  }
  return s;
}

/** Turn zod issues into findings on the offending key, with a message that says what to write. */
export function zodFindings(error: z.ZodError, schema: z.ZodTypeAny, base: CellPath = []): Finding[] {
  const out: Finding[] = [];
  for (const issue of error.issues) {
    const path = [...base, ...(issue.path as (string | number)[])];
    if (issue.code === 'unrecognized_keys') {
      const known = keysOfSchemaAt(schema, issue.path as CellPath);
      for (const k of issue.keys) {
        const s = suggest(k, known);
        out.push(
          finding('error', 'unknown-key', `Unknown key "${k}"${s ? `: did you mean "${s}"?` : ''} Known keys here: ${known.join(', ')}`, [...path, k], {
            fix: s ? `rename "${k}" to "${s}"` : `remove "${k}"`,
          }),
        );
      }
      continue;
    }
    const key = path.length ? String(path[path.length - 1]) : '';
    let message = issue.message;
    if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
      message = `Missing "${key}": add a line "${key}: …"`;
    } else if (issue.code === 'invalid_union') {
      // The quantity union reports the transform's message inside; surface the most specific one.
      const inner = (issue as any).errors?.flat?.().find((i: any) => i.code === 'custom');
      if (inner) message = inner.message;
    } else if (issue.code === 'invalid_value' && (issue as any).values) {
      const vals = (issue as any).values as unknown[];
      message = `"${key}" must be one of: ${vals.join(', ')}`;
    }
    if (key && !message.includes(key) && typeof path[path.length - 1] === 'string') message = `${key}: ${message}`;
    out.push(finding('error', 'schema', message, path));
  }
  return out;
}
