import type { z } from 'zod';
import type { Gpu, ModelSpec, Dtype, WidePart } from '../catalog/types';
import type { Price } from '../cost/price';
import type { Fact } from '../facts/schema';
import type { Finding } from '../findings';
import type { InkMark } from '../notebook/ink';
import type { FileCache, FileNeed } from './files';

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
  /** Rental price, $/h per GPU or for the whole setup (cost/price.ts; cost.setupPricePerHour totals it). */
  price?: Price;
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

/**
 * Settings a host passes to the core: the CLI from its flags and environment, the editor from its
 * configuration. The core reads no environment variable itself.
 */
export interface HostSettings {
  /** `endpoint: sim` runs this many times faster than simulated time (default 1). */
  simSpeed?: number;
  /** Load threads for a closed-loop bench point (default: one per 125 streams, at most 8 and two per core). */
  benchThreads?: number;
  /** The bench worker script, when the host knows better than the core where it is. */
  benchWorker?: string;
}

/**
 * Why a file is read: `analysis` as the user types (small, quick, never asks the user anything),
 * `run` for a cell the user ran (a host may ask before reading outside the workspace).
 */
export type ReadPurpose = 'analysis' | 'run';

export interface ReadFileOptions {
  purpose: ReadPurpose;
  /** The notebook's folder: reads inside it (or the workspace) need no confirmation. */
  notebookDir?: string;
  /** Refuse a file larger than this (bytes); the host's default otherwise. */
  maxBytes?: number;
  signal?: AbortSignal;
}

/** What a host says about a path without reading it (statFile). */
export interface FileInfo {
  type: 'file' | 'directory' | 'other';
  size: number;
  mtimeMs: number;
}

/** A regular file opened for reading in chunks (logs of many GB), from openFile. */
export interface ReadHandle {
  /** Size when opened, bytes. */
  size: number;
  /** Reads up to `into.length` bytes at `position`; 0 at the end. */
  read(into: Uint8Array, position: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * Hooks the host (VS Code or CLI) provides; the engine never reaches for them itself: every file,
 * key, permission and setting reaches the core through here. A missing hook means "not available
 * on this host" (a file cannot be read, no key is sent, the host is not asked).
 *
 * File hooks reject with a FileReadError (engine/files.ts) whose code says why: a missing file, not
 * a regular file (a FIFO, /dev/zero), too large, too slow, outside the workspace and not confirmed,
 * or Restricted Mode. src/core/host/files.ts holds the one Node implementation both hosts use.
 */
export interface Services {
  /**
   * The API key the user set for this endpoint URL's origin (scheme, host and port), or undefined.
   * Asked once per endpoint, with the URL the requests go to; never asked for the simulated
   * endpoint. A host never answers with a key the user did not set for that origin.
   */
  getApiKey?(endpointUrl: string): Promise<string | undefined>;
  /**
   * Asked before the first request to a host named by a notebook (not the user's own settings).
   * Returning false refuses the request. The host says in its question whether a key goes along.
   */
  confirmHost?(url: string): Promise<boolean>;
  /** URL of a running simulated endpoint for "endpoint: sim" (started on demand by the host). */
  simEndpoint?(setup: Setup | undefined): Promise<string>;
  /** A regular file's text (UTF-8), bounded in size and time (config.json and the like). */
  readFile?(absPath: string, opts: ReadFileOptions): Promise<string>;
  /** A regular file opened for chunked reading (logs), under readFile's rules but with no size cap. */
  openFile?(absPath: string, opts: ReadFileOptions): Promise<ReadHandle>;
  /** What is at a path (following links), or undefined when nothing is; never opens it. */
  statFile?(absPath: string, opts: ReadFileOptions): Promise<FileInfo | undefined>;
  /**
   * Regular files matching a glob (absolute, or relative to `opts.notebookDir`), oldest first by
   * modification time, at most `opts.limit`; under statFile's rules for the folder the glob starts
   * in (Restricted Mode, the workspace rule and its confirmation). Never opens a file.
   */
  listFiles?(pattern: string, opts: ReadFileOptions & { limit?: number }): Promise<string[]>;
  /** Settings from the host (environment, configuration). */
  settings?: HostSettings;
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
  /**
   * Files read through services before a cell is prepared (prepareCell itself does no I/O), by
   * FileCache key: see engine/files.ts.
   */
  files: FileCache;
  /**
   * The cells in ink, by cell index (notebook/ink.ts): when each was inked and revised. The host
   * fills it from the cells' metadata before they run and after it inks one; compare rows and bench
   * verdicts read it to say whether a prediction was written down before its measurement ran.
   */
  ink: Map<number, InkMark>;
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
  /**
   * Files the cell needs read (or looked at) before it is prepared, from its raw YAML data (which
   * may not validate yet): the engine reads them through Services into NotebookContext.files, for
   * analyze and run alike. Setup keys (model: {config}) are handled by the engine for every kind.
   */
  reads?(data: Record<string, unknown>, dir: string): FileNeed[];
  /** Checks that need no measurement; run as the user types. Reads only NotebookContext.files. */
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
