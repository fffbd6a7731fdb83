/** Helpers the rules share: the physics bounds of a setup, short number formats, related info. */
import type { Setup } from '../engine/types';
import type { CellPath, RelatedInfo } from '../findings';
import { computePeak, decodeFloorSeconds, kvBytesPerToken, prefillFloorSimple, weightsReadPerStep } from '../physics';
import { kvPool, type KvPool } from '../physics/kvPool';
import { expectedTokensPerStep } from '../physics/speculative';
import { acceptanceOf, speculativeSetupSchema } from '../kinds/speculativeKeys';
import { GiB } from '../units';
import { serverKnob } from './measurements';
import type { CheckInput } from './types';

/** A few significant digits without trailing zeros: 52.5, 8.03, 16.38, 124.5, 19,046. */
export function short(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  const d = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 1 ? 2 : a === 0 ? 0 : Math.min(6, 2 - Math.floor(Math.log10(a)));
  return x.toLocaleString('en-US', { maximumFractionDigits: d });
}

export function time(s: number): string {
  const a = Math.abs(s);
  if (a >= 1) return `${short(s)} s`;
  if (a >= 1e-3 || a === 0) return `${short(s * 1e3)} ms`;
  return `${short(s * 1e6)} µs`;
}

export function gib(bytes: number): string {
  return `${short(bytes / 1e9)} GB (${short(bytes / GiB)} GiB)`;
}

export const pct = (f: number) => `${short(f * 100)}%`;

export interface Bounds {
  /** 2·params·prompt/peak, seconds (the simple form; docs/physics.md). */
  prefillFloor(promptTokens: number): number;
  /** Weight bytes read per decode step / bandwidth, seconds. */
  decodeFloor: number;
  weightBytes: number;
  /** 1 / decodeFloor, tok/s per user. */
  ceiling: number;
  /** peak / (2·active params), tok/s. */
  computeRoof: number;
  peak: number;
  kvBytesPerToken: number;
  pool: KvPool;
  /**
   * A setup whose server decodes speculatively (`speculative: {k, acceptance}`): a step emits up to
   * k + 1 tokens, E on average, so a TPOT may beat the decode floor down to floor / E (expected)
   * and never below floor / (k + 1).
   */
  speculative?: { k: number; tokensPerStep?: number; expectedFloor?: number; hardFloor: number };
}

/** A setup's speculative decoding (its `speculative:` key), as the decode-floor bounds use it. */
function speculativeBounds(setup: Setup, decodeFloor: number): Bounds['speculative'] {
  const r = speculativeSetupSchema.safeParse(setup.server?.speculative);
  if (!r.success) return undefined;
  const { k, acceptance } = r.data;
  const E = acceptance === undefined ? undefined : expectedTokensPerStep(k, acceptanceOf(acceptance));
  return {
    k,
    hardFloor: decodeFloor / (k + 1),
    ...(E !== undefined ? { tokensPerStep: E, expectedFloor: decodeFloor / E } : {}),
  };
}

export function bounds(setup: Setup): Bounds {
  const W = weightsReadPerStep(setup.model, setup.weights, undefined, 1, setup.unquantized);
  const peak = computePeak(setup.gpu, setup.weights);
  // On several GPUs: each reads its share, plus the all-reduces (physics/parallel).
  const decodeFloor = decodeFloorSeconds(setup);
  return {
    prefillFloor: (p) => prefillFloorSimple(setup, p),
    decodeFloor,
    weightBytes: W,
    ceiling: 1 / decodeFloor,
    computeRoof: peak / (2 * setup.model.params.active),
    peak,
    kvBytesPerToken: kvBytesPerToken(setup.model, setup.kvCache),
    pool: kvPool(setup, {
      gpuMemoryUtilization: serverKnob(setup, 'gpu_memory_utilization'),
      maxModelLen: serverKnob(setup, 'max_model_len'),
    }),
    speculative: speculativeBounds(setup, decodeFloor),
  };
}

/** "Qwen3-8B bf16 on a100-sxm4-80gb" */
export function setupWords(setup: Setup): string {
  return `${setup.model.name} ${setup.weights} on ${setup.gpu.id}`;
}

/** Related information pointing at the setup cell that set a floor (or this cell's inline keys). */
export function setupRelated(input: CheckInput, what: string, path: CellPath = ['gpu']): RelatedInfo[] {
  const s = input.setup;
  if (!s) return [];
  return [
    {
      message: `${what} from setup "${s.name}": ${s.gpu.id} (${short(computePeak(s.gpu, s.weights) / 1e12)} TFLOP/s ${s.weights === 'int4' ? 'bf16' : s.weights}, ${short(s.gpu.bandwidth / 1e9)} GB/s, ${gib(s.gpu.memory)}), ${s.model.name} (${short(s.model.params.total / 1e9)} B params, ${s.weights})`,
      cellIndex: s.cellIndex ?? input.cellIndex,
      path,
    },
  ];
}

export function sameCell(input: CheckInput, message: string, path: CellPath): RelatedInfo {
  return { message, cellIndex: input.cellIndex, path };
}
