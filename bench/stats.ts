// Statistics of the benchmarks' samples: one definition, so every figure in docs/PERFORMANCE.md
// means the same by p50 and p99.

/** The `q`-quantile of `xs` by nearest rank from below: the sample at floor(q·n) of the n sorted
 *  ones (the largest for q = 1); NaN for no samples. `xs` is left as it was. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.min(s.length - 1, Math.floor(q * s.length))] as number);
}

export const p50 = (xs: readonly number[]): number => quantile(xs, 0.5);
export const p99 = (xs: readonly number[]): number => quantile(xs, 0.99);
