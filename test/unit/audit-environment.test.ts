/**
 * `audit: environment`: one test per toolchain seam, each from the real output format of the
 * command that shows it (nvidia-smi 535/550 headers, nvcc 12.x `--version`, Ubuntu's gcc/g++
 * `--version` first lines, bash's "command not found", GNU ls's "cannot access").
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import { CUDA_MIN_DRIVER, NVCC_MAX_GCC } from '../../src/core/kinds/auditEnvironment';

const SMI_535 = `Tue Dec  1 19:02:11 2026
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
+-----------------------------------------+----------------------+----------------------+`;
const SMI_550 = `+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+`;
const NVCC_124 = `nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Thu_Mar_28_02:18:24_PDT_2024
Cuda compilation tools, release 12.4, V12.4.131
Build cuda_12.4.r12.4/compiler.34097967_0`;
const NVCC_118 = `nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2022 NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_2022
Cuda compilation tools, release 11.8, V11.8.89
Build cuda_11.8.r11.8/compiler.31833905_0`;
const GCC_11 = `gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Copyright (C) 2021 Free Software Foundation, Inc.
This is free software; see the source for copying conditions.  There is NO
warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.`;
const GXX_11 = GCC_11.replace(/^gcc/, 'g++');
const GCC_14 = `gcc (Ubuntu 14.2.0-4ubuntu2) 14.2.0
Copyright (C) 2024 Free Software Foundation, Inc.`;
const GXX_14 = GCC_14.replace(/^gcc/, 'g++');

/** A YAML block scalar of pasted output under `key`. */
const block = (key: string, text: string) =>
  `${key}: |\n${text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n')}\n`;

/** A clean box: every command's output agrees. */
const CLEAN = {
  nvidia_smi: SMI_550,
  nvcc: NVCC_124,
  torch_cuda: '12.4',
  gcc: GCC_11,
  gxx: GXX_11,
  cc1plus: '/usr/lib/gcc/x86_64-linux-gnu/11/cc1plus',
  python_h: '/usr/include/python3.10/Python.h',
  ninja: '1.11.1.git.kitware.jobserver-1',
};

function cellOf(over: Partial<Record<keyof typeof CLEAN, string>> = {}): string {
  const all = { ...CLEAN, ...over };
  return (
    'audit: environment\n' +
    Object.entries(all)
      .map(([k, v]) => block(k, v))
      .join('')
  );
}

const findingsOf = (src: string) => analyzeCells([src], os.tmpdir())[0];
const codes = (src: string) => findingsOf(src).map((f) => f.code);

test('a clean box: no findings, and the run shows each piece with the command that confirms it', async () => {
  assert.deepEqual(findingsOf(cellOf()), []);
  const r = await runCell(cellOf(), 0, createNotebookContext(os.tmpdir()));
  assert.equal(r.ok, true, r.error?.message);
  assert.equal(r.kind, 'audit: environment');
  assert.deepEqual(r.values, {
    driver: '550.54.15',
    driver_cuda: '12.4',
    nvcc_cuda: '12.4',
    torch_cuda: '12.4',
    gcc: '11.4.0',
    gxx: '11.4.0',
    ninja: '1.11.1',
  });
  const text = r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.plain)!.data as string;
  assert.match(text, /NVIDIA driver\s+550\.54\.15\s+nvidia-smi/);
  assert.match(text, /ninja\s+1\.11\.1\s+ninja --version/);
});

test("driver older than torch's CUDA runtime (535 driver = CUDA 12.2, torch cu124): warning naming nvidia-smi and the driver to install", () => {
  const fs = findingsOf(cellOf({ nvidia_smi: SMI_535, nvcc: NVCC_124, torch_cuda: '12.4' }));
  const f = fs.filter((x) => x.code === 'env-driver-older-than-runtime');
  assert.deepEqual(
    f.map((x) => [x.severity, x.path[0]]),
    [
      ['warning', 'torch_cuda'],
      ['warning', 'nvcc'],
    ],
  );
  assert.match(f[0].message, /535\.104\.05 supports CUDA up to 12\.2, older than torch's CUDA runtime 12\.4/);
  const need = CUDA_MIN_DRIVER.find(([c]) => c === '12.4')![1];
  assert.ok(f[0].fix!.includes(need) && f[0].fix!.includes('`nvidia-smi`'), f[0].fix);
});

test('a driver of an older CUDA major than the runtime is an error (insufficient driver)', () => {
  const smi118 = SMI_535.replace(
    '535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2',
    '520.61.05              Driver Version: 520.61.05   CUDA Version: 11.8',
  );
  const f = findingsOf(cellOf({ nvidia_smi: smi118, nvcc: NVCC_124, torch_cuda: '12.4' })).find(
    (x) => x.code === 'env-driver-older-than-runtime' && x.path[0] === 'torch_cuda',
  );
  assert.equal(f?.severity, 'error');
  assert.match(f!.message, /insufficient/);
});

test("nvcc's major is not torch's: error on the nvcc line, fix names both commands", () => {
  const fs = findingsOf(cellOf({ nvcc: NVCC_118, torch_cuda: '12.4' }));
  const f = fs.find((x) => x.code === 'env-nvcc-torch-major');
  assert.ok(f, JSON.stringify(fs));
  assert.deepEqual(f.path, ['nvcc']);
  assert.match(f.message, /CUDA 11\.8 but torch was built with CUDA 12\.4/);
  assert.ok(f.fix!.includes('nvcc --version') && f.fix!.includes('torch.version.cuda'), f.fix);
  // Same major, different minor is fine (torch's check is on the major).
  assert.ok(
    !codes(cellOf({ nvcc: NVCC_124.replace(/12\.4/g, '12.1'), torch_cuda: '12.4' })).includes('env-nvcc-torch-major'),
  );
});

test('gcc newer than nvcc supports (GCC 14 with nvcc 12.4): error with the g++ to install and NVCC_CCBIN', () => {
  const fs = findingsOf(cellOf({ gcc: GCC_14, gxx: GXX_14 }));
  const f = fs.find((x) => x.code === 'env-gcc-unsupported-by-nvcc');
  assert.ok(f, JSON.stringify(fs));
  const max = NVCC_MAX_GCC.find(([c]) => c === '12.4')![1];
  assert.equal(max, 13);
  assert.match(f.message, /GCC 14\.2\.0 is outside what nvcc 12\.4 supports \(GCC 6–13\)/);
  assert.ok(f.fix!.includes('g++-13') && f.fix!.includes('NVCC_CCBIN') && f.fix!.includes('g++ --version'), f.fix);
  // nvcc 12.8 takes GCC 14.
  const nvcc128 = NVCC_124.replace(/12\.4/g, '12.8');
  assert.ok(
    !codes(
      cellOf({
        gcc: GCC_14,
        gxx: GXX_14,
        nvcc: nvcc128,
        torch_cuda: '12.8',
        nvidia_smi: SMI_550.replace('12.4 ', '12.8 '),
      }),
    ).includes('env-gcc-unsupported-by-nvcc'),
  );
});

test("cc1plus missing: gcc echoes the bare name back; the fix installs g++ for gcc's major", () => {
  const fs = findingsOf(
    cellOf({ cc1plus: 'cc1plus', gxx: "Command 'g++' not found, but can be installed with:\nsudo apt install g++" }),
  );
  const f = fs.find((x) => x.code === 'env-no-cc1plus');
  assert.ok(f, JSON.stringify(fs));
  assert.match(f.message, /for GCC 11/);
  assert.ok(f.fix!.includes('sudo apt install g++-11') && f.fix!.includes('gcc -print-prog-name=cc1plus'), f.fix);
  assert.ok(fs.some((x) => x.code === 'env-no-compiler' && x.path[0] === 'gxx'));
  assert.ok(!codes(cellOf()).includes('env-no-cc1plus'), 'a full path is fine');
});

test('no Python.h: GNU ls "cannot access" → python3-dev', () => {
  const fs = findingsOf(
    cellOf({ python_h: "ls: cannot access '/usr/include/python3*/Python.h': No such file or directory" }),
  );
  const f = fs.find((x) => x.code === 'env-no-python-h');
  assert.ok(f, JSON.stringify(fs));
  assert.ok(f.fix!.includes('python3-dev') && f.fix!.includes('ls /usr/include/python3*/Python.h'), f.fix);
});

test('no ninja: bash "command not found" → pip install ninja', () => {
  const fs = findingsOf(cellOf({ ninja: 'bash: ninja: command not found' }));
  const f = fs.find((x) => x.code === 'env-no-ninja');
  assert.ok(f, JSON.stringify(fs));
  assert.equal(f.severity, 'error');
  assert.ok(f.fix!.includes('pip install ninja') && f.fix!.includes('ninja --version'), f.fix);
});

test('a CPU-only torch (torch.version.cuda prints None) is an error', () => {
  const fs = findingsOf(cellOf({ torch_cuda: 'None' }));
  assert.ok(fs.some((x) => x.code === 'env-torch-cpu' && x.severity === 'error'));
});

test('a key with nothing recognisable says so; an unknown key is a schema error', () => {
  assert.ok(findingsOf(cellOf({ nvcc: 'hello' })).some((x) => x.code === 'env-unreadable' && x.path[0] === 'nvcc'));
  const bad = findingsOf('audit: environment\nnvcc_version: 12.4\n');
  assert.ok(
    bad.some((x) => x.code === 'unknown-key' && /did you mean "nvcc"/.test(x.message)),
    JSON.stringify(bad),
  );
});

test('every key is optional: a cell with only nvidia-smi runs', async () => {
  const r = await runCell(`audit: environment\n${block('nvidia_smi', SMI_550)}`, 0, createNotebookContext(os.tmpdir()));
  assert.equal(r.ok, true, r.error?.message);
  assert.deepEqual(r.findings, []);
});
