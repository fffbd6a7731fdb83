/**
 * zod building blocks for cell schemas: quantities with units, lists of them, and the translation of
 * zod issues into findings whose messages say what to write instead.
 */
import { z } from 'zod';
import { parseMetricKey } from '../facts/stat';
import { finding, type CellPath, type Finding } from '../findings';
import { DIM_HELP, parseQuantity, type DimName, type Quantity } from '../units';

export interface QuantityOpts {
  /** Unit a bare number is taken in (e.g. "tokens"); without it a bare number needs a unit. */
  bare?: string;
  min?: number;
  positive?: boolean;
}

/** What a quantity schema takes (for completions and key docs): its dimensions and bare unit. */
const QUANTITY_INFO = new WeakMap<object, { dims: DimName[]; bare?: string }>();
/** Keyed by the schema's definition, which `.describe()` and `.meta()` copies share. */
const defKey = (s: unknown): object | undefined => (s as { _zod?: { def?: object } })?._zod?.def;
export function quantityInfo(s: unknown): { dims: DimName[]; bare?: string } | undefined {
  const k = defKey(s);
  return k ? QUANTITY_INFO.get(k) : undefined;
}

/** A quantity of one (or several) dimensions, written "23 ms", "1k tokens", "2,039 GB/s". */
export function quantity(dims: DimName | DimName[], opts: QuantityOpts = {}) {
  const s = quantitySchema(dims, opts);
  const info = { dims: Array.isArray(dims) ? dims : [dims], bare: opts.bare };
  QUANTITY_INFO.set(defKey(s)!, info);
  // A refinement (`.refine(…)`) copies the definition but keeps its input schema: mark that too.
  QUANTITY_INFO.set(defKey(s._zod.def.in)!, info);
  return s;
}

function quantitySchema(dims: DimName | DimName[], opts: QuantityOpts) {
  const list = Array.isArray(dims) ? dims : [dims];
  const help = DIM_HELP[list[0]];
  // A value that is neither text nor a number (a list, a mapping, true, null) gets the same kind of
  // message as bad text: what is needed and an example. A missing one keeps zod's default, which
  // zodFindings turns into "Missing …".
  const wrongType = (iss: { input?: unknown }) =>
    iss.input === undefined
      ? undefined
      : `expected ${help.noun}, e.g. "${help.example}", not ${describeValue(iss.input)}`;
  return z.union([z.string(), z.number()], { error: wrongType }).transform((v, ctx): Quantity => {
    const r = parseQuantity(v, { dims: list, bare: opts.bare });
    if (!r.ok) {
      // A bare number that needs a unit: the quick fix writes it with the example's unit.
      const unit = help.example.replace(/^[\d.,\s]+/, '');
      const bare = typeof v === 'number' || /^\s*[\d.,_]+\s*$/.test(v);
      const fixValue = bare && unit && !unit.startsWith('%') ? `${String(v).trim()} ${unit}` : undefined;
      ctx.addIssue({ code: 'custom', message: r.message, params: fixValue ? { fixValue } : undefined });
      return z.NEVER;
    }
    if ((opts.positive && !(r.quantity.value > 0)) || (opts.min !== undefined && r.quantity.value < opts.min)) {
      ctx.addIssue({
        code: 'custom',
        message: `${v} must be ${opts.positive ? 'greater than zero' : `at least ${opts.min}`}`,
      });
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

/**
 * An object whose known keys are `shape`, and which also takes any key naming a latency metric
 * and a stat (ttft_p95, tpot_p99.9, e2e_median; facts/stat.ts parses them), each read by `value`.
 * So a new percentile needs no new key anywhere. Any other key is unknown, with a suggestion.
 */
export function withMetricKeys<S extends z.ZodRawShape, V extends z.ZodTypeAny>(shape: S, value: V) {
  return z
    .object(shape)
    .catchall(z.unknown())
    .transform((obj, ctx) => {
      const out: Record<string, unknown> = { ...obj };
      for (const k of Object.keys(obj)) {
        if (k in shape) continue;
        if (!parseMetricKey(k)) {
          ctx.addIssue({ code: 'unrecognized_keys', keys: [k], path: [], input: obj });
          continue;
        }
        const r = value.safeParse(obj[k]);
        if (r.success) out[k] = r.data;
        else for (const issue of r.error.issues) ctx.addIssue({ ...issue, path: [k, ...issue.path] } as never);
      }
      return out as z.output<z.ZodObject<S>> & Record<string, z.output<V> | undefined>;
    });
}

/** Levenshtein distance, for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length][b.length];
}

/**
 * Candidates for "did you mean", best first: one that extends what was typed (h100 → h100-sxm,
 * h100-pcie) or that it extends (nvcc_version → nvcc) before any at a small edit distance (h200),
 * then by edit distance, then shorter first.
 */
export function suggestions(word: string, candidates: Iterable<string>, max = 3): string[] {
  const w = word.toLowerCase();
  const scored: { c: string; rank: number; d: number }[] = [];
  for (const c of candidates) {
    const k = c.toLowerCase();
    const d = editDistance(w, k);
    const prefix = w.length >= 3 && (k.startsWith(w) || w.startsWith(k));
    if (k === w) scored.push({ c, rank: -1, d: 0 });
    else if (prefix) scored.push({ c, rank: 0, d: Math.abs(k.length - w.length) });
    else if (d <= Math.max(2, Math.floor(w.length / 3))) scored.push({ c, rank: 1, d });
  }
  scored.sort((a, b) => a.rank - b.rank || a.d - b.d || a.c.length - b.c.length || a.c.localeCompare(b.c));
  return scored.slice(0, max).map((s) => s.c);
}

/** Every candidate, the nearest to `word` first (edit distance, case-blind; then shorter, then A–Z). */
export function nearestFirst(word: string, candidates: Iterable<string>): string[] {
  const w = word.toLowerCase();
  return [...candidates]
    .map((c) => ({ c, d: editDistance(w, c.toLowerCase()) }))
    .sort((a, b) => a.d - b.d || a.c.length - b.c.length || a.c.localeCompare(b.c))
    .map((x) => x.c);
}

export function suggest(word: string, candidates: Iterable<string>): string | undefined {
  return suggestions(word, candidates, 1)[0];
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

/** How a value someone wrote is named in a message: "a list", "true", "an empty value". */
function describeValue(v: unknown): string {
  if (v === null || v === undefined) return 'an empty value';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return Number.isFinite(v) ? `the number ${v}` : String(v);
  if (typeof v === 'string') return v === '' ? 'empty text' : `"${v.length > 30 ? `${v.slice(0, 30)}…` : v}"`;
  return typeof v;
}

const TYPE_WORDS: Record<string, string> = {
  array: 'a list, e.g. [1, 2, 4]',
  object: 'a mapping (indented "key: value" lines, or {key: value})',
  number: 'a number',
  int: 'a whole number',
  string: 'text',
  boolean: 'true or false',
  null: 'empty',
};
const RECEIVED_WORDS: Record<string, string> = {
  array: 'a list',
  object: 'a mapping',
  number: 'a number',
  string: 'text',
  boolean: 'true/false',
  null: 'an empty value',
  undefined: 'nothing',
  NaN: 'NaN',
};

function typeWord(expected: unknown): string {
  return TYPE_WORDS[String(expected)] ?? String(expected);
}
function receivedWord(message: string): string | undefined {
  const m = /received (\w+)/.exec(message);
  return m ? (RECEIVED_WORDS[m[1]] ?? m[1]) : undefined;
}

/** Whether a message already names its key (so it is not prefixed with "key: " again). */
function namesKey(message: string, key: string): boolean {
  if (message.startsWith(`${key}:`) || message.startsWith(`${key} `)) return true;
  return message.includes(`"${key}"`) || message.includes(`"${key}:`) || message.includes(`${key}: …`);
}

/** The keys of the mapping at `path` inside a parsed value (none where there is no mapping). */
function keysAt(input: unknown, path: CellPath): string[] {
  let v: unknown = input;
  for (const seg of path) v = v && typeof v === 'object' ? (v as Record<string | number, unknown>)[seg] : undefined;
  return v && typeof v === 'object' && !Array.isArray(v) ? Object.keys(v) : [];
}

/**
 * Turn zod issues into findings on the offending key, with a message that says what to write.
 * `input` is the value that was parsed: a rename is never suggested onto a key it already has.
 */
export function zodFindings(error: z.ZodError, schema: z.ZodTypeAny, base: CellPath = [], input?: unknown): Finding[] {
  const out: Finding[] = [];
  for (const issue of error.issues) {
    const path = [...base, ...(issue.path as (string | number)[])];
    if (issue.code === 'unrecognized_keys') {
      const known = keysOfSchemaAt(schema, issue.path as CellPath);
      const present = new Set(keysAt(input, issue.path as CellPath));
      for (const k of issue.keys) {
        const s = suggest(k, known);
        // A rename onto a key the mapping already has would duplicate it: say so instead.
        const taken = s !== undefined && present.has(s);
        out.push(
          finding(
            'error',
            'unknown-key',
            `Unknown key "${k}"${s ? `: did you mean "${s}"?${taken ? ` ("${s}" is already here: keep one)` : ''}` : ''} Known keys here: ${known.join(', ')}`,
            [...path, k],
            {
              fix: s && !taken ? `rename "${k}" to "${s}"` : `remove "${k}"`,
              ...(s && !taken
                ? {
                    quickFix: {
                      title: `Rename "${k}" to "${s}"`,
                      edit: { path: [...path, k], value: s, as: 'key' as const },
                    },
                  }
                : {}),
            },
          ),
        );
      }
      continue;
    }
    const last = path[path.length - 1];
    const key = path.length ? String(last) : '';
    // What the message calls the place: "batch" for a key, "batch[2]" for a list element.
    const label =
      typeof last === 'number'
        ? `${
            path
              .slice(0, -1)
              .filter((p) => typeof p === 'string')
              .pop() ?? 'item'
          }[${last}]`
        : key;
    let message = issue.message;
    const missing = () => `Missing "${key}": add a line "${key}: …"`;
    if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
      message = typeof last === 'string' ? missing() : `${label} is empty: write ${typeWord(issue.expected)}`;
    } else if (issue.code === 'invalid_type' && issue.expected === 'int' && /received number/.test(issue.message)) {
      message = `${label} must be a whole number`;
    } else if (issue.code === 'invalid_type' && !/^Invalid input: expected/.test(issue.message)) {
      // a message someone wrote for this place (a schema's own error text): keep it
    } else if (issue.code === 'invalid_type') {
      const got = receivedWord(issue.message);
      message = `${label} must be ${typeWord(issue.expected)}${got ? `, not ${got}` : ''}`;
    } else if (issue.code === 'invalid_union') {
      const branches = (issue.errors ?? []) as z.core.$ZodIssue[][];
      const inner = branches.flat();
      const custom = inner.find((i) => i.code === 'custom');
      // The branch that got furthest (its type matched and something inside it failed, or a
      // number that is not whole) says what is wrong best: report its issues in place.
      const score = (b: z.core.$ZodIssue[]) =>
        b.some((i) => i.path.length > 0)
          ? 2
          : b.some(
                (i) =>
                  i.code === 'too_small' ||
                  i.code === 'too_big' ||
                  (i.code === 'invalid_type' && i.expected === 'int' && /received number/.test(i.message)),
              )
            ? 1
            : 0;
      const best = [...branches].sort((a, b) => score(b) - score(a))[0];
      if (custom) {
        message = custom.message;
        const fx = unitFix(custom, path);
        if (fx.quickFix) {
          out.push(
            finding(
              'error',
              'schema',
              key && typeof last === 'string' && !namesKey(message, key) ? `${key}: ${message}` : message,
              path,
              fx,
            ),
          );
          continue;
        }
      } else if (!/^Invalid input$/.test(issue.message)) message = issue.message;
      else if (inner.length && inner.every((i) => i.code === 'invalid_type' && /received undefined/.test(i.message)))
        message = typeof last === 'string' ? missing() : `${label} is empty`;
      else if (best && score(best) > 0) {
        out.push(
          ...zodFindings(
            new z.ZodError(
              best.map((i) =>
                i.code === 'invalid_type' && i.expected === 'int' && i.path.length === 0
                  ? { ...i, message: `${label} must be a whole number` }
                  : i,
              ),
            ),
            schema,
            path,
          ),
        );
        continue;
      } else {
        const alternatives = [
          ...new Set(
            inner.flatMap((i) =>
              i.code === 'invalid_value'
                ? i.values.map((v) => JSON.stringify(v))
                : i.code === 'invalid_type'
                  ? [typeWord(i.expected)]
                  : [i.message],
            ),
          ),
        ];
        const got = inner.map((i) => (i.code === 'invalid_type' ? receivedWord(i.message) : undefined)).find(Boolean);
        message = `${label} must be ${alternatives.join(' or ')}${got ? `, not ${got}` : ''}`;
      }
    } else if (issue.code === 'invalid_value' && issue.values) {
      message = `"${label}" must be one of: ${issue.values.map((v) => String(v)).join(', ')}`;
    } else if (issue.code === 'too_small' || issue.code === 'too_big') {
      const small = issue.code === 'too_small';
      const bound = Number(small ? (issue as { minimum: unknown }).minimum : (issue as { maximum: unknown }).maximum);
      const inclusive = (issue as { inclusive?: boolean }).inclusive !== false;
      const origin = (issue as { origin?: string }).origin;
      if (origin === 'array' || origin === 'set')
        message = small
          ? `${label} needs at least ${bound} item${bound === 1 ? '' : 's'}`
          : `${label} has more than ${bound} item${bound === 1 ? '' : 's'}`;
      else if (origin === 'string')
        message = small
          ? bound <= 1
            ? `${label} must not be empty`
            : `${label} must be at least ${bound} characters`
          : `${label} must be at most ${bound} characters`;
      else
        message = `${label} must be ${small ? (inclusive ? 'at least' : 'greater than') : inclusive ? 'at most' : 'less than'} ${bound}`;
    }
    if (key && typeof last === 'string' && !namesKey(message, key)) message = `${key}: ${message}`;
    out.push(finding('error', 'schema', message, path, unitFix(issue, path)));
  }
  return out;
}

/** The quick fix a quantity's issue carries (a bare number written with a unit), placed at `path`. */
function unitFix(issue: z.core.$ZodIssue, path: CellPath): Pick<Finding, 'quickFix'> {
  let v = (issue as { params?: { fixValue?: string } }).params?.fixValue;
  // A duration or a timeout is written in seconds far more often than in milliseconds.
  if (v && / ms$/.test(v) && /duration|timeout/.test(String(path[path.length - 1]))) v = v.replace(/ ms$/, ' s');
  return v ? { quickFix: { title: `Write "${v}"`, edit: { path, value: v } } } : {};
}
