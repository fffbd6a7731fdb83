import { GiB } from '../units';
import type { Gpu, Interconnect } from './types';

const T = 1e12;
const G = 1e9;
const US = 1e-6;

/*
 * Interconnects. Bandwidth: the vendor's per-GPU figure, halved where it is printed as a
 * bidirectional total (NVIDIA prints NVLink as send + receive). Latency: the fixed cost of one
 * small all-reduce, an assumption of the order nccl-tests' all_reduce_perf shows for its smallest
 * messages within one node (a few µs over NVLink/NVSwitch with vLLM's custom all-reduce; over PCIe
 * through the host bridge about three times that). Every prediction that uses it says so.
 */
const NVLINK3: Interconnect = {
  name: 'NVLink 3 (NVSwitch)',
  bandwidth: 300 * G,
  latency: 6 * US,
  source: 'NVIDIA A100 data sheet: NVLink 600 GB/s per GPU (bidirectional) → 300 GB/s each way',
};
const NVLINK4: Interconnect = {
  name: 'NVLink 4 (NVSwitch)',
  bandwidth: 450 * G,
  latency: 5 * US,
  source: 'NVIDIA H100/H200 data sheets: NVLink 900 GB/s per GPU (bidirectional) → 450 GB/s each way',
};
const NVLINK5: Interconnect = {
  name: 'NVLink 5 (NVSwitch)',
  bandwidth: 900 * G,
  latency: 5 * US,
  source: 'NVIDIA HGX B200 data sheet: NVLink 1.8 TB/s per GPU (bidirectional) → 900 GB/s each way',
};
const PCIE4: Interconnect = {
  name: 'PCIe Gen4 x16',
  bandwidth: 32 * G,
  latency: 15 * US,
  source: 'PCIe 4.0 x16: 16 GT/s × 16 lanes, 128b/130b → 31.5 GB/s each way (card has no NVLink)',
};
const PCIE5: Interconnect = {
  name: 'PCIe Gen5 x16',
  bandwidth: 64 * G,
  latency: 15 * US,
  source: 'PCIe 5.0 x16: 32 GT/s × 16 lanes → 63 GB/s each way (without the optional NVLink bridge)',
};
const INFINITY_FABRIC: Interconnect = {
  name: 'AMD Infinity Fabric (7 links to 7 peers)',
  bandwidth: 448 * G,
  latency: 8 * US,
  source:
    'AMD Instinct MI300X data sheet: 896 GB/s peer-to-peer Infinity Fabric per GPU (bidirectional, 7 × 128 GB/s links) → 448 GB/s each way',
};

/**
 * Dense (no sparsity) Tensor Core peaks from each vendor's data sheet, per compute dtype; HBM/GDDR
 * bandwidth; device memory. Data sheets print sparse peaks first: the dense value is half of it.
 * "80GB" cards hold 80 GiB (the driver reports 81,920 MiB), so their memory is stored in GiB.
 */
export const GPUS: Gpu[] = [
  {
    id: 'a100-sxm4-80gb',
    name: 'NVIDIA A100 SXM4 80GB',
    bandwidth: 2039e9,
    memory: 80 * GiB,
    peak: { bf16: 312 * T, fp16: 312 * T, int8: 624 * T },
    interconnect: NVLINK3,
    source: 'NVIDIA A100 data sheet (SXM4 80GB; dense Tensor Core peaks; no native fp8)',
  },
  {
    id: 'a100-pcie-80gb',
    name: 'NVIDIA A100 PCIe 80GB',
    bandwidth: 1935e9,
    memory: 80 * GiB,
    peak: { bf16: 312 * T, fp16: 312 * T, int8: 624 * T },
    interconnect: PCIE4,
    source: 'NVIDIA A100 data sheet (PCIe 80GB; dense Tensor Core peaks; no native fp8)',
  },
  {
    id: 'h100-sxm',
    name: 'NVIDIA H100 SXM5 80GB',
    bandwidth: 3350e9,
    memory: 80 * GiB,
    peak: { bf16: 989 * T, fp16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    interconnect: NVLINK4,
    source: 'NVIDIA H100 data sheet (SXM5, dense)',
  },
  {
    id: 'h100-pcie',
    name: 'NVIDIA H100 PCIe 80GB',
    bandwidth: 2000e9,
    memory: 80 * GiB,
    peak: { bf16: 756 * T, fp16: 756 * T, fp8: 1513 * T, int8: 1513 * T },
    interconnect: PCIE5,
    source: 'NVIDIA H100 data sheet (PCIe, dense: half the printed sparse 1,513 / 3,026 TFLOPS)',
  },
  {
    id: 'h200',
    name: 'NVIDIA H200 SXM 141GB',
    bandwidth: 4800e9,
    memory: 141e9,
    peak: { bf16: 989 * T, fp16: 989 * T, fp8: 1979 * T, int8: 1979 * T },
    interconnect: NVLINK4,
    source: 'NVIDIA H200 data sheet (SXM, dense; memory as printed, 141 GB)',
  },
  {
    id: 'l40s',
    name: 'NVIDIA L40S 48GB',
    bandwidth: 864e9,
    memory: 48e9,
    peak: { bf16: 362 * T, fp16: 362 * T, fp8: 733 * T, int8: 733 * T },
    interconnect: PCIE4,
    source: 'NVIDIA L40S data sheet (dense; memory as printed, 48 GB)',
  },
  {
    id: 'a10g',
    name: 'NVIDIA A10G 24GB',
    bandwidth: 600e9,
    memory: 24 * GiB,
    peak: { bf16: 70 * T, fp16: 70 * T, int8: 140 * T },
    interconnect: PCIE4,
    source:
      "AWS EC2 G5 (A10G) published figures; NVIDIA prints no A10G data sheet, and its tensor peaks are below the A10's 125 TFLOPS",
  },
  {
    id: 'l4',
    name: 'NVIDIA L4 24GB',
    bandwidth: 300e9,
    memory: 24 * GiB,
    peak: { bf16: 121 * T, fp16: 121 * T, fp8: 242.5 * T, int8: 242.5 * T },
    interconnect: PCIE4,
    source: 'NVIDIA L4 data sheet (dense: half the printed sparse 242 / 485 TFLOPS)',
  },
  {
    id: 'rtx-4090',
    name: 'NVIDIA GeForce RTX 4090 24GB',
    bandwidth: 1008e9,
    memory: 24 * GiB,
    peak: { bf16: 165.2 * T, fp16: 165.2 * T, fp8: 330.3 * T, int8: 660.6 * T },
    interconnect: PCIE4,
    source: 'NVIDIA Ada Lovelace architecture whitepaper (RTX 4090, dense, FP32 accumulate as inference kernels use)',
  },
  {
    id: 'mi300x',
    name: 'AMD Instinct MI300X 192GB',
    bandwidth: 5300e9,
    memory: 192 * GiB,
    peak: { bf16: 1307.4 * T, fp16: 1307.4 * T, fp8: 2614.9 * T, int8: 2614.9 * T },
    interconnect: INFINITY_FABRIC,
    source: 'AMD Instinct MI300X data sheet (dense; 8 HBM3 stacks of 24 GiB)',
  },
  {
    id: 'b200',
    name: 'NVIDIA B200 (HGX) 180GB',
    bandwidth: 7700e9,
    memory: 180e9,
    peak: { bf16: 2250 * T, fp16: 2250 * T, fp8: 4500 * T, int8: 4500 * T },
    interconnect: NVLINK5,
    source:
      'NVIDIA HGX B200 data sheet, per GPU (dense: half the printed sparse peaks; memory as printed, 180 GB; override it with what your driver reports)',
  },
];
