/** Readers of values whose shape is not known yet: parsed YAML or JSON, a cell's saved outputs. */

/** A mapping (an object that is not null and not a list). */
export const isObj = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

/** A number, or the value of a quantity a schema parsed ({value, dims, …}, e.g. a setup's max_model_len). */
export function numberOf(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (v && typeof v === 'object' && typeof (v as { value?: unknown }).value === 'number')
    return (v as { value: number }).value;
  return undefined;
}
