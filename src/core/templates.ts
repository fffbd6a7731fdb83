/**
 * The day templates a new lab notebook starts from: notebooks in examples/, each runnable end to end
 * against the simulated endpoint (`endpoint: sim`). "InfLab: New Lab Notebook", the README and the
 * template tests all read this list.
 */
export interface Template {
  /** File in examples/ (with the logs it reads, under examples/logs/). */
  file: string;
  title: string;
  description: string;
  /** Files beside the notebook it needs, relative to examples/. */
  needs: string[];
}

export const TEMPLATES: Template[] = [
  {
    file: 'day2.inflab',
    title: 'Day 2: serve an endpoint',
    description:
      'KV-pool and batch-1 predictions, an audit of the startup log, a record checked against the ceiling, the environment audit',
    needs: ['logs/day4-vllm.log'],
  },
  {
    file: 'day3.inflab',
    title: 'Day 3: predictions in ink, then SLOs',
    description:
      'the decode roofline and a serving curve written before the sweep, a sweep judged by SLOs, ink against measurement',
    needs: [],
  },
  {
    file: 'day4.inflab',
    title: 'Day 4: the sweep',
    description:
      'the decode roofline, a sweep and its log, compare, goodput, the prefix-cache trap shown and then avoided',
    needs: ['logs/day4-vllm.log'],
  },
  {
    file: 'day5.inflab',
    title: 'Day 5: quantization',
    description: 'fp8 weights and KV beside bf16: the KV pool, the decode roofline, a bench on an fp8 simulated server',
    needs: [],
  },
];

/** A notebook with one setup cell, for "a blank lab". */
export const BLANK_NOTEBOOK = {
  inflab: 1,
  cells: [
    {
      kind: 'markdown',
      language: 'markdown',
      source: ['# Lab notes', '', 'Ctrl+Space in a cell lists the kinds and keys.'],
    },
    {
      kind: 'code',
      language: 'inflab',
      source: ['setup: lab', 'gpu: a100-sxm4-80gb', 'model: qwen3-8b', 'endpoint: sim'],
    },
  ],
};
