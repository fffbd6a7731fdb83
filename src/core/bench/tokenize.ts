/**
 * Dataset text counted by the server it is sent to: vLLM's POST /tokenize, so a live bench knows
 * each text prompt's length in the server's own tokens (for the usage check), and how far that is
 * from the dataset's count (what `predict: serving` used: the simulated tokenizer's, one token a
 * character). The shapes are vLLM v0.11's (vllm/entrypoints/openai/protocol.py at ec3b890):
 * TokenizeCompletionRequest {model, prompt, add_special_tokens = true}, TokenizeChatRequest
 * {model, messages, add_generation_prompt = true}, TokenizeResponse {count, max_model_len, tokens,
 * token_strs}. A chat request is counted as messages, so the count includes the chat template, as
 * usage.prompt_tokens does.
 */
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { getText, redact, type ClientConfig } from './client';

const tokenizeResponse = z.looseObject({ count: z.number().int().min(0) });

/** Rows counted at most (each is one small request before the first point). */
export const MAX_TOKENIZE_ROWS = 5000;
const PARALLEL = 8;

export interface TokenizeDrift {
  endpoint: '/tokenize';
  /** Text rows the server counted. */
  rows: number;
  /** Mean prompt length in the dataset's count (the simulated tokenizer's), and in the server's. */
  dataset_mean: number;
  server_mean?: number;
  /** server_mean / dataset_mean − 1 */
  drift?: number;
  /** The largest |server / dataset − 1| of one row. */
  max_row_drift?: number;
  /** Why the server counted nothing (then lengths are the dataset's own counts). */
  failed?: string;
}

/** Count each distinct text (up to MAX_TOKENIZE_ROWS) with the server's /tokenize. */
export async function countTexts(
  d: Dispatcher,
  cfg: Pick<ClientConfig, 'baseUrl' | 'apiKey' | 'model' | 'api'>,
  rows: { text: string; input: number }[],
): Promise<{ counts: Map<string, number>; drift: TokenizeDrift }> {
  const todo = rows.slice(0, MAX_TOKENIZE_ROWS);
  const counts = new Map<string, number>();
  let failed: string | undefined;
  let next = 0;
  const one = async (text: string) => {
    const body =
      cfg.api === 'chat'
        ? { model: cfg.model, messages: [{ role: 'user', content: text }] }
        : { model: cfg.model, prompt: text };
    const r = await getText(d, cfg.baseUrl, '/tokenize', cfg.apiKey, 10_000, 1 << 24, body);
    if (r.status !== 200) throw new Error(`POST /tokenize answered HTTP ${r.status}`);
    let j: unknown;
    try {
      j = JSON.parse(r.body);
    } catch {
      throw new Error('POST /tokenize did not return JSON');
    }
    const p = tokenizeResponse.safeParse(j);
    if (!p.success) throw new Error('POST /tokenize returned no "count" (not vLLM\'s TokenizeResponse)');
    counts.set(text, p.data.count);
  };
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL, todo.length) }, async () => {
      while (next < todo.length && failed === undefined) {
        const row = todo[next++];
        if (counts.has(row.text)) continue;
        try {
          await one(row.text);
        } catch (e) {
          failed ??= redact((e as Error).message, cfg.apiKey);
        }
      }
    }),
  );
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const datasetMean = mean(todo.map((r) => r.input));
  if (failed !== undefined)
    return { counts: new Map(), drift: { endpoint: '/tokenize', rows: 0, dataset_mean: datasetMean, failed } };
  const server = todo.map((r) => counts.get(r.text)!);
  const serverMean = mean(server);
  let maxRow = 0;
  todo.forEach((r, i) => {
    if (r.input > 0) maxRow = Math.max(maxRow, Math.abs(server[i] / r.input - 1));
  });
  return {
    counts,
    drift: {
      endpoint: '/tokenize',
      rows: todo.length,
      dataset_mean: datasetMean,
      server_mean: serverMean,
      drift: datasetMean > 0 ? serverMean / datasetMean - 1 : undefined,
      max_row_drift: maxRow,
    },
  };
}

/** The sentence a sweep's notes carry about the count. */
export function tokenizeNote(t: TokenizeDrift): string {
  if (t.failed !== undefined)
    return `dataset text was not counted by the server (${t.failed}): prompt lengths are the dataset's own counts (the simulated tokenizer's, one token a character)`;
  const pct = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}%`;
  return `dataset text counted by the server's /tokenize (${t.rows} rows): mean ${t.server_mean!.toFixed(1)} tokens against ${t.dataset_mean.toFixed(1)} in the dataset's count (what predict: serving used), drift ${pct(t.drift ?? 0)} (largest row ${pct(t.max_row_drift ?? 0)})`;
}
