/**
 * Result files of other load generators, translated into vLLM's metric definitions
 * (`vllm bench serve`: TTFT; TPOT = (E2E − TTFT)/(output − 1) per request; ITL = gap between
 * streamed chunks; E2E), so InfLab's checks and explanations apply to a run made with any tool.
 */

/** The four latency metrics in vLLM's definitions. */
export type LatencyMetric = 'ttft' | 'tpot' | 'itl' | 'e2e';

/**
 * A statistic of a distribution: "mean", "std", "min", "max", or a percentile written "p50",
 * "p99", "p99.9" (the number is the percentile, as vLLM names its result keys).
 */
export type StatName = string;

/** One benchmark point (a concurrency or a rate) of an imported run. */
export interface ImportedPoint {
  /** "concurrency 16", "rate 4 req/s", "sweep point 3" … as the tool describes the load. */
  label: string;
  concurrency?: number;
  rate?: number;
  completed?: number;
  failed?: number;
  durationS?: number;
  meanInputTokens?: number;
  meanOutputTokens?: number;
  /** Each metric's statistics, in ms, in vLLM's definitions. */
  latency: Partial<Record<LatencyMetric, Record<StatName, number>>>;
  outputTokS?: number;
  totalTokS?: number;
  requestS?: number;
}

export interface ImportedRun {
  tool: ImportTool;
  /** The tool's own name and, where the file says, its version or model. */
  description: string;
  points: ImportedPoint[];
  /** How the tool's definitions were translated into vLLM's, one sentence each. */
  translations: string[];
  /** What could not be read or translated, said plainly. */
  warnings: string[];
}

export const IMPORT_TOOLS = ['vllm', 'guidellm', 'aiperf', 'genai-bench'] as const;
export type ImportTool = (typeof IMPORT_TOOLS)[number];

/** The percentile written as vLLM writes its result keys: 99 → "p99", 99.9 → "p99.9". */
export function percentileStat(p: number): StatName {
  return `p${Number.isInteger(p) ? p : String(p)}`;
}
