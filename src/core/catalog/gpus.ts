import type { Gpu } from './types';

const T = 1e12;
const GiB = 2 ** 30;

/** Dense (no sparsity) peaks from each vendor's data sheet. "80GB" cards hold 80 GiB. */
export const GPUS: Gpu[] = [
  {
    id: 'a100-sxm4-80gb',
    name: 'NVIDIA A100 SXM4 80GB',
    bandwidth: 2039e9,
    memory: 80 * GiB,
    peak: { bf16: 312 * T, fp16: 312 * T, int8: 624 * T },
    source: 'NVIDIA A100 data sheet (dense Tensor Core peaks)',
  },
  {
    id: 'a100-pcie-80gb',
    name: 'NVIDIA A100 PCIe 80GB',
    bandwidth: 1935e9,
    memory: 80 * GiB,
    peak: { bf16: 312 * T, fp16: 312 * T, int8: 624 * T },
    source: 'NVIDIA A100 data sheet (dense Tensor Core peaks)',
  },
  {
    id: 'h100-sxm',
    name: 'NVIDIA H100 SXM5 80GB',
    bandwidth: 3350e9,
    memory: 80 * GiB,
    peak: { bf16: 989 * T, fp16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    source: 'NVIDIA H100 data sheet (SXM5, dense)',
  },
  {
    id: 'h200',
    name: 'NVIDIA H200 SXM 141GB',
    bandwidth: 4800e9,
    memory: 141e9,
    peak: { bf16: 989 * T, fp16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    source: 'NVIDIA H200 data sheet (SXM, dense)',
  },
  {
    id: 'l40s',
    name: 'NVIDIA L40S 48GB',
    bandwidth: 864e9,
    memory: 48e9,
    peak: { bf16: 362 * T, fp16: 362 * T, fp8: 733 * T, int8: 733 * T },
    source: 'NVIDIA L40S data sheet (dense)',
  },
];
