/**
 * vLLM `--save-result` per-request arrays for one point (vllm/benchmarks/serve.py: input_lens,
 * output_lens, ttfts and itls in seconds, errors), from the point's columnar records, plus InfLab's
 * own (start offsets, retries, first answer chunk).
 */
import { fromColumnar } from './records';
import type { PointResult } from './sweep';

export function saveResultArrays(p: Pick<PointResult, 'records' | 'loop'>): Record<string, unknown[]> | undefined {
  if (!p.records) return undefined;
  const recs = fromColumnar(p.records);
  const origin = (r: (typeof recs)[number]) => (p.loop === 'open' ? r.scheduledMs : r.sentMs);
  return {
    input_lens: recs.map((r) => r.promptTokens ?? null),
    output_lens: recs.map((r) => (r.ok ? (r.outputTokens ?? r.chunkMs.length) : 0)),
    ttfts: recs.map((r) => (r.ok && r.chunkMs.length ? (r.chunkMs[0] - origin(r)) / 1000 : 0)),
    itls: recs.map((r) => (r.ok ? r.chunkMs.slice(1).map((t, i) => (t - r.chunkMs[i]) / 1000) : [])),
    errors: recs.map((r) => (r.ok ? '' : (r.errorMessage ?? r.errorKind ?? 'failed'))),
    inflab_start_ms: recs.map((r) => origin(r)),
    inflab_retries: recs.map((r) => r.retries ?? 0),
    inflab_ttft_content_s: recs.map((r) =>
      r.firstContentMs !== undefined ? (r.firstContentMs - origin(r)) / 1000 : null,
    ),
  };
}
