import { GPUS } from './gpus';
import { MODELS } from './models';
import type { Gpu, ModelSpec } from './types';

export * from './types';
export { GPUS } from './gpus';
export { MODELS } from './models';

export function findGpu(id: string): Gpu | undefined {
  const k = id.toLowerCase();
  return GPUS.find((g) => g.id === k);
}

export function findModel(id: string): ModelSpec | undefined {
  const k = id.toLowerCase();
  return MODELS.find((m) => m.id === k);
}
