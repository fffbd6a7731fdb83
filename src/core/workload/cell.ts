/**
 * A cell's workload made ready to run: the files it names read through the host's file service,
 * held in a form that crosses to the bench's worker thread (plain data, structured-clone safe), and
 * the planner of one point built from it. `predict: serving` and the bench (against a live endpoint
 * or `sim`) both build their requests here, so one seed gives one request set in both.
 */
import type { NotebookContext } from '../engine/types';
import { parseDataset, parseLengths, parseTrace, readWorkloadFile } from './files';
import { meanLength, RequestPlanner, type DatasetRow, type LoadedLengths, type TraceRow } from './plan';
import { scheduleArrivals, scheduleTotals, type RateSchedule } from './schedule';
import type { DatasetSpec, LengthSpec, SessionSpec, SharedPrefixSpec, TraceSpec } from './spec';

/** The workload keys of a cell (bench or predict: serving), as the schema parsed them. */
export interface WorkloadCellKeys {
  input: LengthSpec;
  output: LengthSpec;
  shared_prefix?: SharedPrefixSpec;
  trace?: TraceSpec;
  sessions?: SessionSpec;
  dataset?: DatasetSpec;
  rate_schedule?: RateSchedule;
}

export interface CellWorkload {
  input: LengthSpec;
  output: LengthSpec;
  sharedPrefix?: SharedPrefixSpec;
  sessions?: SessionSpec;
  trace?: { rows: TraceRow[]; speed: number; blockSize: number };
  loaded: LoadedLengths;
  /** The dataset file's text: parsed where the vocabulary is known (the server's may differ from the setup's). */
  dataset?: { text: string; file: string; format?: DatasetSpec['format'] };
  rateSchedule?: RateSchedule;
}

/** Read the files a cell's workload names (relative to the notebook). */
export async function loadCellWorkload(cell: WorkloadCellKeys, nb: NotebookContext): Promise<CellWorkload> {
  const loaded: LoadedLengths = {};
  const read = (rel: string) => readWorkloadFile(nb, rel);
  if ('file' in cell.input) loaded.input = parseLengths(await read(cell.input.file), cell.input.file);
  if ('file' in cell.output) loaded.output = parseLengths(await read(cell.output.file), cell.output.file);
  return {
    input: cell.input,
    output: cell.output,
    sharedPrefix: cell.shared_prefix,
    sessions: cell.sessions,
    trace: cell.trace
      ? {
          rows: parseTrace(await read(cell.trace.file), cell.trace.file),
          speed: cell.trace.speed,
          blockSize: cell.trace.block_size,
        }
      : undefined,
    loaded,
    dataset: cell.dataset
      ? { text: await read(cell.dataset.file), file: cell.dataset.file, format: cell.dataset.format }
      : undefined,
    rateSchedule: cell.rate_schedule,
  };
}

/**
 * Fixed lengths and nothing else: no planner, so each consumer keeps the prompts it always made
 * (earlier predictions and benches reproduce exactly).
 */
export function isPlainWorkload(w: CellWorkload): boolean {
  return (
    'value' in w.input &&
    'value' in w.output &&
    !w.sharedPrefix &&
    !w.sessions &&
    !w.trace &&
    !w.dataset &&
    !w.rateSchedule
  );
}

const parsed = new WeakMap<CellWorkload, Map<number, DatasetRow[]>>();

/** The dataset's rows for a vocabulary (text counted in the simulated server's tokens), parsed once. */
export function datasetRows(w: CellWorkload, vocab: number): DatasetRow[] | undefined {
  if (!w.dataset) return undefined;
  let m = parsed.get(w);
  if (!m) parsed.set(w, (m = new Map()));
  let rows = m.get(vocab);
  if (!rows) m.set(vocab, (rows = parseDataset(w.dataset.text, w.dataset.file, vocab, w.dataset.format)));
  return rows;
}

/**
 * The planner of one point (undefined for a plain workload). A dataset's rows are taken in order
 * from `datasetOffset` (point i of a per-point-seed sweep starts past the rows earlier points sent,
 * so it does not find them in the prefix cache).
 */
export function plannerFor(
  w: CellWorkload,
  seed: number,
  vocab: number,
  datasetOffset = 0,
): RequestPlanner | undefined {
  if (isPlainWorkload(w)) return undefined;
  return new RequestPlanner({
    input: w.input,
    output: w.output,
    seed,
    vocab,
    sharedPrefix: w.sharedPrefix,
    sessions: w.sessions,
    trace: w.trace,
    loaded: w.loaded,
    dataset: datasetRows(w, vocab),
    datasetOffset,
    arrivals: w.rateSchedule ? scheduleArrivals(w.rateSchedule, seed) : undefined,
  });
}

/** Mean prompt and output lengths (a dataset's or a trace's own where it has them). */
export function workloadMeans(w: CellWorkload, vocab: number): { input: number; output: number } {
  const rows = w.trace?.rows;
  if (rows?.length)
    return {
      input: rows.reduce((a, r) => a + r.input, 0) / rows.length,
      output: rows.reduce((a, r) => a + Math.max(1, r.output), 0) / rows.length,
    };
  const ds = datasetRows(w, vocab);
  const outMean = meanLength(w.output, w.loaded.output);
  if (ds?.length)
    return {
      input: ds.reduce((a, r) => a + r.input, 0) / ds.length,
      output: ds.reduce((a, r) => a + (r.output ?? outMean), 0) / ds.length,
    };
  return { input: meanLength(w.input, w.loaded.input), output: outMean };
}

/**
 * A trace or a rate schedule sets its own arrivals: the offered rate it averages (req/s), which
 * labels its one point; undefined for other workloads.
 */
export function replayRate(w: CellWorkload): number | undefined {
  const tr = w.trace;
  if (tr) {
    const span = (tr.rows[tr.rows.length - 1].timestampMs - tr.rows[0].timestampMs) / 1000 / tr.speed;
    return span > 0 ? (tr.rows.length - 1) / span : tr.rows.length;
  }
  if (w.rateSchedule) {
    const t = scheduleTotals(w.rateSchedule);
    return t.durationS > 0 ? t.expectedRequests / t.durationS : undefined;
  }
  return undefined;
}
