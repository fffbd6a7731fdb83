/**
 * The seam between the audit and the server that wrote the log. What differs between servers —
 * how a line is recognised and read, which lines are the periodic stats, the Prometheus metric
 * names, and what to change when a finding fires — sits behind one LogDialect each; the auditor,
 * the timeline and the findings ask the dialect and never test a server's prefix themselves.
 * vLLM is the first dialect and SGLang the second (sglang/classify.ts).
 */
import type { LineShape } from './lineReader';
import { SGLANG_WORDS, VLLM_WORDS, type DialectId, type DialectWords } from './dialectWords';
import type { Classified } from './types';
import { classifyLine, vllmLineShape } from './vllm/classify';
import { classifySglang, sglangLineShape, sniffSglang } from './sglang/classify';

export type { DialectId } from './dialectWords';

export interface LogDialect extends DialectWords {
  /** Is this line (free of wrappers) unmistakably this server's? The first such line picks the dialect. */
  sniff(line: string): boolean;
  /** What one line is. */
  classify(line: string): Classified;
  /** For the line reader: may this line continue on the next physical line, and how well does it read? */
  shape(line: string): LineShape;
}

export const VLLM: LogDialect = {
  ...VLLM_WORDS,
  sniff: (line) => {
    const c = classifyLine(line);
    return c.stamp !== undefined && c.kind !== 'unknown';
  },
  classify: classifyLine,
  shape: vllmLineShape,
};

export const SGLANG: LogDialect = {
  ...SGLANG_WORDS,
  sniff: sniffSglang,
  classify: classifySglang,
  shape: sglangLineShape,
};

export const DIALECTS: LogDialect[] = [VLLM, SGLANG];

export function dialectById(id: DialectId | undefined): LogDialect {
  return id === 'sglang' ? SGLANG : VLLM;
}
