/** What a calibrated `predict: serving` shows: the fitted parameters with their uncertainty, and the residual at every measured point. */
import { tableOutput } from '../engine/outputs';
import type { CellOutput, Setup } from '../engine/types';
import { fmtNum } from '../units';
import type { CalibrationResult } from './calibrate';

const val = (v: number | undefined, unit?: 's') =>
  v === undefined ? '—' : unit === 's' ? `${fmtNum(v * 1e3, 3)} ms` : fmtNum(v, 4);

const setupWords = (s: Setup) => `${s.model.id} on ${s.gpu.id}, ${s.weights} weights`;

export function calibrationOutputs(
  r: CalibrationResult,
  cell: string,
  measuredOn: Setup,
  predicted: Setup,
): CellOutput[] {
  const same = setupWords(measuredOn) === setupWords(predicted);
  const params = tableOutput(
    `Calibrated on "${cell}": ${r.residuals.length} observations at ${new Set(r.residuals.map((x) => x.point)).size} points, ${r.fitted.length} parameters fitted`,
    [
      { key: 'name', label: 'parameter' },
      { key: 'value', label: 'fitted', align: 'right' },
      { key: 'sigma', label: '± σ', align: 'right' },
      { key: 'ci', label: '95% interval', align: 'right' },
      { key: 'initial', label: 'started from', align: 'right' },
      { key: 'carried', label: 'carried over' },
      { key: 'words', label: 'what it is' },
    ],
    [
      ...r.fitted.map((f) => ({
        name: f.name,
        value: val(f.value, f.unit),
        sigma: f.sigma === undefined ? '— (no degree of freedom left)' : val(f.sigma, f.unit),
        ci:
          f.ci95 === undefined
            ? '—'
            : `${val(Math.max(0, f.value - f.ci95), f.unit)} … ${val(f.value + f.ci95, f.unit)}`,
        initial: `${val(f.initial, f.unit)} (default)`,
        carried: same ? 'yes' : `yes, from ${setupWords(measuredOn)} (an assumption)`,
        words: f.words,
      })),
      ...r.fixed.map((f) => ({
        name: f.name,
        value: val(f.value, f.unit),
        sigma: 'held (given in this cell)',
        ci: '—',
        initial: '—',
        carried: '—',
        words: '',
      })),
    ],
    `Least squares on log(measured / predicted) of output tok/s, TTFT median and TPOT median at each point (Levenberg-Marquardt, ml-levenberg-marquardt); σ from s²·(JᵀJ)⁻¹ with s² = RSS / (m − n) = ${fmtNum(r.rss, 6)} / ${r.dof}${r.correlation !== undefined ? `, correlation ${fmtNum(r.correlation, 2)}` : ''}; 95% interval ± t(${r.dof})·σ. ${r.iterations} steps, ${r.evaluations} simulations of the ${r.residuals.length / 3 >= 1 ? 'measured points' : 'points'} (${r.input} in / ${r.output} out, ${r.requests} requests each), ${fmtNum(r.ms / 1000, 2)} s. ` +
      `Carried over to this prediction: ${r.fitted.map((f) => f.name).join(', ')}${same ? '' : `, fitted on ${setupWords(measuredOn)} and assumed to hold for ${setupWords(predicted)}`}; everything else comes from this cell and its setup.`,
  );
  const residuals = tableOutput(
    `Residuals of the fit at every measured point of "${cell}"`,
    [
      { key: 'point', label: 'point' },
      { key: 'quantity', label: 'quantity' },
      { key: 'measured', label: 'measured', align: 'right', fmt: (v) => fmtNum(v, v >= 100 ? 0 : 2) },
      { key: 'fitted', label: 'fitted model', align: 'right', fmt: (v) => fmtNum(v, v >= 100 ? 0 : 2) },
      {
        key: 'residual',
        label: 'residual',
        align: 'right',
        fmt: (v: number) => `${v >= 0 ? '+' : ''}${fmtNum(100 * v, 2)}%`,
      },
    ],
    r.residuals,
    'residual = measured / fitted model − 1; tok/s and ms.',
  );
  return [params, residuals];
}
