/** inflab catalog [gpus|models]: the ids a setup's `gpu:` and `model:` accept, with their numbers. */
import { GPUS, MODELS, type Gpu, type ModelSpec } from '../../core/catalog';
import { MIME, tableOutput } from '../../core/engine/outputs';
import { fmtIn } from '../../core/units';
import { command, type CommandSpec, type Parsed } from '../args';
import { UsageError } from '../usage';

export const catalogSpec: CommandSpec = {
  name: 'catalog',
  args: '[gpus|models]',
  summary: "list the catalog's GPUs and models (the ids `gpu:` and `model:` take)",
  options: {
    json: { type: 'boolean', help: 'print the catalog entries as JSON' },
  },
};

const gpuTable = () =>
  tableOutput<Gpu>(
    'GPUs',
    [
      { key: 'id', label: 'id' },
      { key: 'name', label: 'name' },
      { key: 'memory', label: 'memory', fmt: (v: number) => fmtIn(v, 'GiB'), align: 'right' },
      { key: 'bandwidth', label: 'bandwidth', fmt: (v: number) => fmtIn(v, 'GB/s'), align: 'right' },
      {
        key: 'peak',
        label: 'bf16 dense',
        fmt: (v: Gpu['peak']) => (v.bf16 ? fmtIn(v.bf16, 'TFLOP/s') : '—'),
        align: 'right',
      },
      {
        key: 'peak',
        label: 'fp8 dense',
        fmt: (v: Gpu['peak']) => (v.fp8 ? fmtIn(v.fp8, 'TFLOP/s') : '—'),
        align: 'right',
      },
    ],
    GPUS,
  );

const modelTable = () =>
  tableOutput<ModelSpec>(
    'Models',
    [
      { key: 'id', label: 'id' },
      { key: 'name', label: 'name' },
      {
        key: 'params',
        label: 'params (total)',
        fmt: (p: ModelSpec['params']) => `${(p.total / 1e9).toFixed(2)} B`,
        align: 'right',
      },
      {
        key: 'params',
        label: 'active',
        fmt: (p: ModelSpec['params']) => `${(p.active / 1e9).toFixed(2)} B`,
        align: 'right',
      },
      { key: 'layers', label: 'layers' },
      { key: 'kvHeads', label: 'KV heads' },
      { key: 'vocab', label: 'vocab' },
      { key: 'maxPosition', label: 'max context' },
    ],
    MODELS,
  );

export const catalogCommand = command(catalogSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  const which = positionals[0] ?? 'all';
  if (positionals.length > 1 || !['all', 'gpus', 'models'].includes(which))
    throw new UsageError(
      `give "gpus", "models" or nothing (both): inflab catalog [gpus|models]; got "${positionals.join(' ')}"`,
    );
  const want = { gpus: which !== 'models', models: which !== 'gpus' };
  if (values.json) {
    console.log(
      JSON.stringify({ ...(want.gpus ? { gpus: GPUS } : {}), ...(want.models ? { models: MODELS } : {}) }, null, 2),
    );
    return 0;
  }
  const plain = (o: ReturnType<typeof gpuTable>) => String(o.items.find((i) => i.mime === MIME.plain)!.data);
  const parts = [...(want.gpus ? [plain(gpuTable())] : []), ...(want.models ? [plain(modelTable())] : [])];
  console.log(parts.join('\n\n'));
  console.log(
    '\nOr define your own: gpu: {bandwidth: 2039 GB/s, bf16: 312 TFLOPS, memory: 80 GiB}; model: {config: ./config.json}',
  );
  return 0;
});
