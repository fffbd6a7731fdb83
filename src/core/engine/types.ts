import type { z } from 'zod';
import type { Gpu, ModelSpec, Dtype, WidePart } from '../catalog/types';
import type { Fact } from '../facts/schema';
import type { Finding } from '../findings';

/** One item of an output: text mimes carry a string, JSON mimes (…json, …+json) a JSON value. */
export interface OutputItem {
  mime: string;
  data: unknown;
}
export interface CellOutput {
  items: OutputItem[];
}

/** What a setup cell defines for the cells after it (and inline keys override per cell). */
export interface Setup {
  name: string;
  gpu: Gpu;
  model: ModelSpec;
  weights: Dtype;
  kvCache: Dtype;
  /**
   * Parts of a quantized checkpoint kept at 16 bits (embeddings, lm_head, norms), as fp8/int8/int4
   * checkpoints ship. Absent: every parameter at the weights' dtype (a setup cell fills it in).
   */
  unquantized?: WidePart[];
  /** GPUs: tensor × pipeline parallel per replica, data-parallel replicas (absent: one GPU). */
  parallel?: { tp: number; pp: number; dp: number };
  /** Rental price, $/h per GPU (a per-node price is divided by the GPUs it covers). */
  price?: { perGpuHour: number; written: string };
  /** "sim" or an http(s) URL. */
  endpoint?: string;
  /** Index of the cell that defined it, for related information in findings. */
  cellIndex?: number;
  /** Extra vLLM/server knobs a setup may carry (gpu_memory_utilization, max_model_len, …). */
  server?: Record<string, unknown>;
}

export interface CellResult {
  /** Kind id, e.g. "predict: decode-roofline", "setup", "record". */
  kind: string;
  name?: string;
  /** Named values, visible to later cells and printed by `inflab eval --json`. */
  values: Record<string, unknown>;
  /** Typed, unit-carrying facts: what later cells, checks, compare, hovers and plots read. */
  facts: Fact[];
  findings: Finding[];
  outputs: CellOutput[];
  ok: boolean;
  error?: { message: string; code: string; path: (string | number)[] };
  /** Wall time of the run, ms. */
  durationMs?: number;
}

/** Hooks the host (VS Code or CLI) provides; the engine never reaches for them itself. */
export interface Services {
  /** API key for an endpoint, from SecretStorage or the environment. Never stored by the engine. */
  getApiKey?(endpoint: string): Promise<string | undefined>;
  /**
   * Asked before the first request to a host named by a notebook (not the user's own settings).
   * Returning false refuses the request.
   */
  confirmHost?(url: string): Promise<boolean>;
  /** URL of a running simulated endpoint for "endpoint: sim" (started on demand by the host). */
  simEndpoint?(setup: Setup | undefined): Promise<string>;
  /** Read a text file relative to the notebook (config.json, logs). Defaults to fs. */
  readFile?(absPath: string): Promise<string>;
}

export interface ProgressUpdate {
  message?: string;
  /** 0..1 */
  fraction?: number;
  /** Replace the cell's outputs with these (a sweep growing point by point). */
  outputs?: CellOutput[];
}

/** The notebook-scoped state cells see: setups and earlier results, by name and by index. */
export interface NotebookContext {
  /** Absolute directory of the notebook (relative paths resolve against it). */
  dir: string;
  setups: Map<string, Setup>;
  defaultSetup?: Setup;
  /** Results of cells run so far, by cell index. */
  results: Map<number, CellResult>;
  /** Results by cell name. */
  named: Map<string, CellResult>;
  services: Services;
}

export interface RunContext {
  notebook: NotebookContext;
  /** The setup in force for this cell (named via `setup:`, else the latest, with inline overrides). */
  setup?: Setup;
  cellIndex: number;
  signal: AbortSignal;
  progress(update: ProgressUpdate): void;
}

/** What static analysis sees: like RunContext but nothing may do I/O beyond small local reads. */
export interface AnalyzeContext {
  notebook: NotebookContext;
  setup?: Setup;
  cellIndex: number;
}

export interface RunOutput {
  values?: Record<string, unknown>;
  /** What the run states for later cells and the checks (every kind returns them). */
  facts?: Fact[];
  outputs?: CellOutput[];
  findings?: Finding[];
}

/**
 * A cell kind: one module with its schema and its run function. Registered in kinds/index.ts.
 * `key` is the cell's first key; `variant` its value for kinds like `predict: floors`.
 */
export interface KindModule<T = any> {
  key: string;
  variant?: string;
  /** One line for completions and the unknown-kind message. */
  summary: string;
  /** The cell's schema (without the shared keys: name, setup, gpu, model, weights, kv_cache, endpoint). */
  schema: z.ZodType<T>;
  /** True when the cell cannot do anything without a gpu/model setup. */
  needsSetup?: boolean;
  /** Facts the cell's own keys state with no run (a record's typed numbers), checked as the user types. */
  statedFacts?(cell: T): Fact[];
  /** Checks that need no measurement; run as the user types. */
  analyze?(cell: T, ctx: AnalyzeContext): Finding[];
  run(cell: T, ctx: RunContext): Promise<RunOutput>;
  /**
   * The facts a result's values state, for a notebook saved before facts existed (read once, when
   * it is reopened). Kinds whose run derives its facts from its values use the same function.
   */
  migrate?(values: Record<string, unknown>, cell: T): Fact[];
}

export function kindId(k: Pick<KindModule, 'key' | 'variant'>): string {
  return k.variant ? `${k.key}: ${k.variant}` : k.key;
}
