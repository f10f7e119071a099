/** Nearest-rank percentile of `values` (0 < p ≤ 100); null when there are none. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export interface Summary {
  n: number;
  min: number | null;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  max: number | null;
  mean: number | null;
}

export function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const at = (p: number) => (n ? sorted[Math.min(n, Math.max(1, Math.ceil((p / 100) * n))) - 1]! : null);
  return { n, min: n ? sorted[0]! : null, p50: at(50), p90: at(90), p99: at(99), max: n ? sorted[n - 1]! : null, mean: n ? sorted.reduce((a, b) => a + b, 0) / n : null };
}

/** a − b, or null when either is missing. */
export const minus = (a: number | null, b: number | null) => (a === null || b === null ? null : a - b);

/** Rounds to `digits` decimals, keeping null. */
export const round = (v: number | null | undefined, digits = 2) => (v === null || v === undefined ? null : Math.round(v * 10 ** digits) / 10 ** digits);
