/** The part of jstat (1.9.6, CommonJS, no types of its own) that InfLab calls. */
declare module 'jstat' {
  const jStat: {
    studentt: {
      /** Quantile of Student's t with `dof` degrees of freedom (dof may be fractional): P(T ≤ x) = p. */
      inv(p: number, dof: number): number;
      cdf(x: number, dof: number): number;
    };
  };
  export default jStat;
}
