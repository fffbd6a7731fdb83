/**
 * `audit: environment` — the toolchain seams that break a fresh GPU box, read from the pasted
 * output of the commands that show them:
 *
 *   audit: environment
 *   nvidia_smi: |          # nvidia-smi (its header line is enough)
 *     | NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |
 *   nvcc: |                # nvcc --version
 *     Cuda compilation tools, release 12.4, V12.4.131
 *   torch_cuda: "12.4"     # python -c "import torch; print(torch.version.cuda)"
 *   gcc: gcc (Ubuntu 13.2.0-23ubuntu4) 13.2.0        # gcc --version
 *   gxx: g++ (Ubuntu 13.2.0-23ubuntu4) 13.2.0        # g++ --version
 *   cc1plus: cc1plus       # gcc -print-prog-name=cc1plus  (a bare name: g++ is not installed)
 *   python_h: "ls: cannot access '…/Python.h': No such file or directory"   # ls of the headers
 *   ninja: "bash: ninja: command not found"          # ninja --version
 *
 * Every key is optional: paste what you have; each finding names the command that confirms it and
 * the fix. The version tables below come from NVIDIA's published ranges (sources next to each).
 */
import { z } from 'zod';
import { tableOutput } from '../engine/outputs';
import type { KindModule } from '../engine/types';
import { finding, type Finding } from '../findings';

/** The commands whose output each key holds (also what each finding says to run again). */
export const ENV_COMMANDS = {
  nvidia_smi: 'nvidia-smi',
  nvcc: 'nvcc --version',
  torch_cuda: 'python -c "import torch; print(torch.version.cuda)"',
  gcc: 'gcc --version',
  gxx: 'g++ --version',
  cc1plus: 'gcc -print-prog-name=cc1plus',
  python_h: 'ls /usr/include/python3*/Python.h',
  ninja: 'ninja --version',
} as const;
type EnvKey = keyof typeof ENV_COMMANDS;

const pasted = (key: EnvKey) =>
  z
    .union([z.string(), z.number()], {
      error: `${key}: paste the output of \`${ENV_COMMANDS[key]}\` (a block: "${key}: |" and the lines indented below)`,
    })
    .transform(String)
    .optional();

const schema = z
  .object({
    audit: z.literal('environment'),
    /** Output of `nvidia-smi`: the header line with "Driver Version" and "CUDA Version". */
    nvidia_smi: pasted('nvidia_smi'),
    /** Output of `nvcc --version`: "Cuda compilation tools, release 12.4, V12.4.131". */
    nvcc: pasted('nvcc'),
    /** Output of `python -c "import torch; print(torch.version.cuda)"`: "12.4", or None for a CPU build. */
    torch_cuda: pasted('torch_cuda'),
    /** Output of `gcc --version` (its first line is enough). */
    gcc: pasted('gcc'),
    /** Output of `g++ --version` (its first line is enough). */
    gxx: pasted('gxx'),
    /** Output of `gcc -print-prog-name=cc1plus`: a full path, or the bare name when g++ is missing. */
    cc1plus: pasted('cc1plus'),
    /** Output of `ls /usr/include/python3*\/Python.h`. */
    python_h: pasted('python_h'),
    /** Output of `ninja --version`. */
    ninja: pasted('ninja'),
  })
  .strict();

type Cell = z.output<typeof schema>;

interface Version {
  major: number;
  minor: number;
  patch?: number;
  text: string;
}

function ver(m: RegExpExecArray | null, at = 1): Version | undefined {
  if (!m) return undefined;
  const parts = m[at].split('.').map(Number);
  return { major: parts[0], minor: parts[1] ?? 0, patch: parts[2], text: m[at] };
}

const cmp = (a: Version, b: Version) => a.major - b.major || a.minor - b.minor || (a.patch ?? 0) - (b.patch ?? 0);

const NOT_FOUND = /command not found|not found|No such file|cannot access|not recognized|No module named/i;

/**
 * Minimum Linux x86_64 driver for each CUDA toolkit's GA release: NVIDIA CUDA Toolkit Release
 * Notes, "CUDA Toolkit and Corresponding Driver Versions" (Table 3), docs.nvidia.com/cuda/
 * cuda-toolkit-release-notes (read for 11.0 … 13.0). Minor-version compatibility (Table 2 of the same
 * notes) lets a 12.x runtime start on any driver ≥ 525.60.13 and an 11.x one on ≥ 450.80.02, minus
 * features that need the newer driver (PTX JIT of newer code among them).
 */
export const CUDA_MIN_DRIVER: [cuda: string, driver: string][] = [
  ['11.0', '450.51.05'],
  ['11.1', '455.23'],
  ['11.2', '460.27.03'],
  ['11.3', '465.19.01'],
  ['11.4', '470.42.01'],
  ['11.5', '495.29.05'],
  ['11.6', '510.39.01'],
  ['11.7', '515.43.04'],
  ['11.8', '520.61.05'],
  ['12.0', '525.60.13'],
  ['12.1', '530.30.02'],
  ['12.2', '535.54.03'],
  ['12.3', '545.23.06'],
  ['12.4', '550.54.14'],
  ['12.5', '555.42.02'],
  ['12.6', '560.28.03'],
  ['12.8', '570.26'],
  ['12.9', '575.51.03'],
  ['13.0', '580.65.06'],
];

/**
 * The newest GCC major nvcc accepts as host compiler, per CUDA release: the "Supported Compilers"
 * table of NVIDIA's CUDA Installation Guide for Linux for each release (docs.nvidia.com/cuda/
 * cuda-installation-guide-linux, archived per version), which is what nvcc enforces in
 * include/crt/host_config.h ("unsupported GNU version! gcc versions later than N are not
 * supported"). The oldest supported is GCC 6 throughout 11.x and 12.x (same table).
 */
export const NVCC_MAX_GCC: [cuda: string, gccMajor: number][] = [
  ['11.0', 9],
  ['11.1', 10],
  ['11.4', 11],
  ['12.0', 12],
  ['12.4', 13],
  ['12.8', 14],
  ['13.0', 15],
];
export const NVCC_MIN_GCC = 6;

const parseV = (s: string) => ver(/^(\d+(?:\.\d+)*)/.exec(s))!;

/** The newest table row at or below a version (the table's ranges hold until the next row). */
function rowFor<T>(table: [string, T][], v: Version): T | undefined {
  let best: T | undefined;
  for (const [k, val] of table) if (cmp(parseV(k), { ...v, patch: undefined }) <= 0) best = val;
  return best;
}

/** What each pasted output says, or why it says nothing. */
export function readEnvironment(cell: Partial<Record<EnvKey, string>>) {
  const smi = cell.nvidia_smi;
  const driver = smi ? ver(/Driver Version:\s*(\d+(?:\.\d+)+)/i.exec(smi)) : undefined;
  const driverCuda = smi ? ver(/CUDA Version:\s*(\d+\.\d+)/i.exec(smi)) : undefined;
  const nvcc = cell.nvcc ? ver(/release (\d+\.\d+)/i.exec(cell.nvcc)) : undefined;
  const torchRaw = cell.torch_cuda?.trim();
  const torch = torchRaw ? ver(/^(\d+\.\d+)\s*$/m.exec(torchRaw)) : undefined;
  const gccV = (s: string | undefined) =>
    s
      ? ver(
          /^\S*(?:gcc|g\+\+|c\+\+)\S*\s+\(.*\)\s+(\d+(?:\.\d+)*)/im.exec(s) ??
            /^\S*(?:gcc|g\+\+)\S*\s+(\d+(?:\.\d+)+)/im.exec(s),
        )
      : undefined;
  return {
    driver,
    driverCuda,
    nvcc,
    torch,
    torchRaw,
    gcc: gccV(cell.gcc),
    gxx: gccV(cell.gxx),
    cc1plus: cell.cc1plus?.trim(),
    pythonH: cell.python_h?.trim(),
    ninja: cell.ninja ? ver(/^\s*(\d+\.\d+(?:\.\d+)*)/m.exec(cell.ninja)) : undefined,
  };
}

const confirm = (key: EnvKey) => `run \`${ENV_COMMANDS[key]}\` again to confirm`;

function envFindings(cell: Cell): Finding[] {
  const out: Finding[] = [];
  const r = readEnvironment(cell);
  const unread = (key: EnvKey, what: string) =>
    out.push(
      finding('warning', 'env-unreadable', `${key}: no ${what} found in what was pasted`, [key], {
        fix: `paste the whole output of \`${ENV_COMMANDS[key]}\``,
      }),
    );

  // nvidia-smi
  if (cell.nvidia_smi !== undefined) {
    if (NOT_FOUND.test(cell.nvidia_smi) || /couldn't communicate with the NVIDIA driver/i.test(cell.nvidia_smi))
      out.push(
        finding(
          'error',
          'env-no-driver',
          'nvidia-smi finds no NVIDIA driver: nothing can run on the GPU',
          ['nvidia_smi'],
          {
            fix: 'install the NVIDIA driver for this GPU (on Ubuntu: `sudo ubuntu-drivers install`, then reboot); `nvidia-smi` confirms it',
          },
        ),
      );
    else if (!r.driver) unread('nvidia_smi', '"Driver Version"');
  }
  // The driver must be at least as new as the CUDA runtime torch was built with (and nvcc's).
  const runtimes: [EnvKey, Version | undefined, string][] = [
    ['torch_cuda', r.torch, "torch's CUDA runtime"],
    ['nvcc', r.nvcc, "nvcc's toolkit"],
  ];
  if (r.driver && r.driverCuda) {
    for (const [key, rt, label] of runtimes) {
      if (!rt || cmp(rt, r.driverCuda) <= 0) continue;
      const need = rowFor(CUDA_MIN_DRIVER, rt);
      const sameMajor = rt.major === r.driverCuda.major;
      out.push(
        finding(
          sameMajor ? 'warning' : 'error',
          'env-driver-older-than-runtime',
          `The driver ${r.driver.text} supports CUDA up to ${r.driverCuda.text}, older than ${label} ${rt.text}` +
            (sameMajor
              ? ': it starts by minor-version compatibility, but kernels that need the newer driver (PTX JIT) fail'
              : ': "CUDA driver version is insufficient for CUDA runtime version"'),
          [key],
          {
            cause: `nvidia-smi's "CUDA Version" is the newest CUDA its driver runs${need ? `; CUDA ${rt.text} wants driver ≥ ${need} (NVIDIA CUDA release notes)` : ''}`,
            fix: `upgrade the driver${need ? ` to ${need} or newer` : ''}, or install a build for CUDA ${r.driverCuda.text} (e.g. pip install torch --index-url https://download.pytorch.org/whl/cu${r.driverCuda.major}${r.driverCuda.minor}); \`nvidia-smi\` confirms the driver`,
            related: [{ message: `nvidia-smi: CUDA Version ${r.driverCuda.text}`, path: ['nvidia_smi'] }],
          },
        ),
      );
    }
  }
  // nvcc
  if (cell.nvcc !== undefined) {
    if (NOT_FOUND.test(cell.nvcc))
      out.push(
        finding(
          'warning',
          'env-no-nvcc',
          'nvcc is not on PATH: extensions that compile CUDA (flash-attn, custom kernels) cannot build',
          ['nvcc'],
          {
            fix: 'install the CUDA toolkit matching torch (e.g. `sudo apt install cuda-toolkit-12-4`) and add /usr/local/cuda/bin to PATH; `nvcc --version` confirms it',
          },
        ),
      );
    else if (!r.nvcc) unread('nvcc', '"release X.Y"');
  }
  // torch
  if (r.torchRaw !== undefined) {
    if (/^None$/m.test(r.torchRaw))
      out.push(
        finding('error', 'env-torch-cpu', 'torch is a CPU-only build (torch.version.cuda is None)', ['torch_cuda'], {
          fix: 'install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu124 (pick the cuXY your driver supports); `python -c "import torch; print(torch.version.cuda)"` confirms it',
        }),
      );
    else if (NOT_FOUND.test(r.torchRaw))
      out.push(
        finding('warning', 'env-no-torch', 'torch is not installed in this Python', ['torch_cuda'], {
          fix: 'pip install torch (a CUDA build); then run the command again',
        }),
      );
    else if (!r.torch) unread('torch_cuda', 'CUDA version (like 12.4)');
  }
  if (r.nvcc && r.torch && r.nvcc.major !== r.torch.major)
    out.push(
      finding(
        'error',
        'env-nvcc-torch-major',
        `nvcc is CUDA ${r.nvcc.text} but torch was built with CUDA ${r.torch.text}: extensions built here fail with "The detected CUDA version (${r.nvcc.text}) mismatches the version that was used to compile PyTorch (${r.torch.text})"`,
        ['nvcc'],
        {
          cause: "torch.utils.cpp_extension refuses a toolkit whose major version is not torch's",
          fix: `install CUDA toolkit ${r.torch.major}.x (or a torch built for CUDA ${r.nvcc.major}) and point CUDA_HOME at it; ${confirm('nvcc')} and \`${ENV_COMMANDS.torch_cuda}\``,
          related: [{ message: `torch.version.cuda: ${r.torch.text}`, path: ['torch_cuda'] }],
        },
      ),
    );
  // gcc against nvcc's supported host compilers
  const cc = r.gxx ?? r.gcc;
  const ccKey: EnvKey = r.gxx ? 'gxx' : 'gcc';
  for (const key of ['gcc', 'gxx'] as const) {
    const v = cell[key];
    if (v === undefined) continue;
    if (NOT_FOUND.test(v))
      out.push(
        finding(
          'error',
          'env-no-compiler',
          `${key === 'gxx' ? 'g++' : 'gcc'} is not installed: nothing that compiles (torch extensions, triton, flash-attn) builds`,
          [key],
          {
            fix: `sudo apt install build-essential; \`${ENV_COMMANDS[key]}\` confirms it`,
          },
        ),
      );
    else if (!r[key]) unread(key, 'version');
  }
  if (cc && r.nvcc) {
    const max = rowFor(NVCC_MAX_GCC, r.nvcc);
    if (max !== undefined && (cc.major > max || cc.major < NVCC_MIN_GCC))
      out.push(
        finding(
          'error',
          'env-gcc-unsupported-by-nvcc',
          `GCC ${cc.text} is outside what nvcc ${r.nvcc.text} supports (GCC ${NVCC_MIN_GCC}–${max}): nvcc stops with "unsupported GNU version"`,
          [ccKey],
          {
            cause:
              "NVIDIA's CUDA Installation Guide lists the host compilers each release supports; nvcc checks it in crt/host_config.h",
            fix: `install a supported one and point nvcc at it: sudo apt install g++-${Math.min(max, Math.max(cc.major, NVCC_MIN_GCC))} and export NVCC_CCBIN=/usr/bin/g++-${Math.min(max, Math.max(cc.major, NVCC_MIN_GCC))} (or CUDAHOSTCXX); ${confirm(ccKey)}`,
            related: [{ message: `nvcc --version: release ${r.nvcc.text}`, path: ['nvcc'] }],
          },
        ),
      );
  }
  // cc1plus: gcc echoes the bare name back when it has no C++ front end for its own major.
  if (r.cc1plus !== undefined && (r.cc1plus === 'cc1plus' || !r.cc1plus.includes('/'))) {
    const major = r.gcc?.major;
    out.push(
      finding(
        'error',
        'env-no-cc1plus',
        `gcc has no C++ compiler (cc1plus)${major ? ` for GCC ${major}` : ''}: \`gcc -print-prog-name=cc1plus\` echoed the bare name back, so compiling C++ fails with "cc1plus: not found"`,
        ['cc1plus'],
        {
          cause: 'the g++ package of the default gcc major is missing (gcc was upgraded without g++)',
          fix: `sudo apt install g++${major ? `-${major}` : ''}; ${confirm('cc1plus')} (it prints a full path)`,
        },
      ),
    );
  }
  if (r.pythonH !== undefined && (NOT_FOUND.test(r.pythonH) || !/Python\.h/.test(r.pythonH)))
    out.push(
      finding(
        'error',
        'env-no-python-h',
        "No Python.h: C extensions (and triton's and torch.compile's build steps) cannot compile",
        ['python_h'],
        {
          fix: `sudo apt install python3-dev (or python3.X-dev for the Python you run); ${confirm('python_h')}`,
        },
      ),
    );
  if (cell.ninja !== undefined && !r.ninja)
    out.push(
      finding(
        NOT_FOUND.test(cell.ninja) ? 'error' : 'warning',
        'env-no-ninja',
        NOT_FOUND.test(cell.ninja)
          ? 'ninja is not installed: torch.utils.cpp_extension stops with "Ninja is required to load C++ extensions"'
          : 'ninja: no version found in what was pasted',
        ['ninja'],
        { fix: `pip install ninja; ${confirm('ninja')}` },
      ),
    );
  return out;
}

function rows(cell: Cell) {
  const r = readEnvironment(cell);
  const show = (v: Version | undefined, raw: string | undefined) =>
    v
      ? v.text
      : raw === undefined
        ? 'not pasted'
        : NOT_FOUND.test(raw)
          ? 'missing'
          : raw.trim().split('\n')[0].slice(0, 60);
  return [
    { what: 'NVIDIA driver', value: show(r.driver, cell.nvidia_smi), command: ENV_COMMANDS.nvidia_smi },
    { what: 'driver supports CUDA', value: show(r.driverCuda, cell.nvidia_smi), command: ENV_COMMANDS.nvidia_smi },
    { what: 'nvcc (toolkit)', value: show(r.nvcc, cell.nvcc), command: ENV_COMMANDS.nvcc },
    { what: 'torch built with CUDA', value: show(r.torch, cell.torch_cuda), command: ENV_COMMANDS.torch_cuda },
    { what: 'gcc', value: show(r.gcc, cell.gcc), command: ENV_COMMANDS.gcc },
    { what: 'g++', value: show(r.gxx, cell.gxx), command: ENV_COMMANDS.gxx },
    { what: 'cc1plus', value: r.cc1plus ?? 'not pasted', command: ENV_COMMANDS.cc1plus },
    {
      what: 'Python.h',
      value: r.pythonH === undefined ? 'not pasted' : NOT_FOUND.test(r.pythonH) ? 'missing' : r.pythonH.split('\n')[0],
      command: ENV_COMMANDS.python_h,
    },
    { what: 'ninja', value: show(r.ninja, cell.ninja), command: ENV_COMMANDS.ninja },
  ];
}

export const auditEnvironmentKind: KindModule<Cell> = {
  key: 'audit',
  variant: 'environment',
  summary:
    'audit: environment — pasted nvidia-smi, nvcc, torch, gcc/g++, cc1plus, Python.h and ninja outputs: driver vs runtime, nvcc vs torch, gcc vs nvcc, missing pieces',
  schema,
  analyze: (cell) => envFindings(cell),
  async run(cell) {
    const r = readEnvironment(cell);
    const values: Record<string, unknown> = {};
    if (r.driver) values.driver = r.driver.text;
    if (r.driverCuda) values.driver_cuda = r.driverCuda.text;
    if (r.nvcc) values.nvcc_cuda = r.nvcc.text;
    if (r.torch) values.torch_cuda = r.torch.text;
    if (r.gcc) values.gcc = r.gcc.text;
    if (r.gxx) values.gxx = r.gxx.text;
    if (r.ninja) values.ninja = r.ninja.text;
    return {
      values,
      outputs: [
        tableOutput(
          'environment',
          [
            { key: 'what', label: 'piece', align: 'left' },
            { key: 'value', label: 'found', align: 'left' },
            { key: 'command', label: 'confirm with', align: 'left' },
          ],
          rows(cell),
        ),
      ],
    };
  },
};
