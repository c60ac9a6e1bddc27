// Percentiles and number formatting shared by the benchmarks. Pure.

import { percentileOf, summariseLatency, type LatencySummary } from '../test/load/latency.js';

/** Nearest-rank percentile of an ascending array; NaN when empty (one definition, shared with the cluster tests). */
export const percentile = percentileOf;

export interface Summary extends LatencySummary {
  readonly mean: number;
}

export function summarise(values: readonly number[] | Float64Array): Summary {
  let sum = 0;
  for (const v of values) sum += v;
  return { ...summariseLatency(values), mean: values.length > 0 ? sum / values.length : Number.NaN };
}

/** A number with a sensible count of significant digits for a table. */
export function fmt(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return 'n/a';
  if (v === 0) return '0';
  const abs = Math.abs(v);
  if (abs >= 1000) return Math.round(v).toLocaleString('en-US');
  return Number(v.toPrecision(digits)).toString();
}

export function countInto(map: Map<string, number>, key: string, by = 1): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

/** "200 × 1,234, 404 × 5" in descending count order. */
export function formatCounts(map: ReadonlyMap<string, number>): string {
  if (map.size === 0) return '—';
  return [...map]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([k, n]) => `${k} × ${n.toLocaleString('en-US')}`)
    .join(', ');
}

export const nsToUs = (ns: number): number => ns / 1e3;
export const nsToMs = (ns: number): number => ns / 1e6;

/** Monotonic nanoseconds as a double (exact far beyond any run length). */
export function nowNs(): number {
  return Number(process.hrtime.bigint());
}
