// Units of the config: durations as Go writes them (a bare 0 too) and sizes as Kubernetes writes
// them (or a number of bytes). Pure.
import { z } from 'zod';

/**
 * Durations are written as Go writes them ("500ms", "5s", "1m30s", "1.5h", "2h45m"; units ns, us
 * or µs, ms, s, m, h), as Kubernetes' component configs take them. A bare number is refused but 0:
 * `interval: 5` read as 5 ms polls two hundred times a second (issue 30). Pure.
 */
const DURATION_PART = /(\d+(?:\.\d+)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go-style duration in milliseconds, or null when it is not one. */
export function parseDuration(text: string): number | null {
  const v = text.trim();
  if (v === '0') return 0;
  if (v === '') return null;
  let total = 0;
  DURATION_PART.lastIndex = 0;
  while (DURATION_PART.lastIndex < v.length) {
    const m = DURATION_PART.exec(v);
    if (!m) return null;
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  }
  return total;
}

export const duration = z
  .union([z.number().nonnegative(), z.string()])
  .meta({ description: 'a duration as Go writes it (500ms, 5s, 1m30s, 2h45m); only 0 may go without a unit' })
  .transform((v, ctx) => {
    if (typeof v === 'number') {
      if (v === 0) return 0;
      ctx.addIssue({ code: 'custom', message: `${v} has no unit: write "${v}ms" or "${v}s", whichever is meant (only 0 may go without)` });
      return z.NEVER;
    }
    const ms = parseDuration(v);
    if (ms === null) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a duration (use e.g. 500ms, 5s, 1m30s, 2h)` });
      return z.NEVER;
    }
    return ms;
  });

/** Sizes are a number of bytes or a binary quantity as Kubernetes writes them: "512Ki", "32Mi", "1Gi". */
const SIZE = /^(\d+)(Ki|Mi|Gi)$/;
const SIZE_UNIT: Record<string, number> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

export const size = z
  .union([z.number().int().nonnegative(), z.string()])
  .meta({ description: 'a number of bytes, or a binary quantity as Kubernetes writes it (512Ki, 32Mi, 1Gi)' })
  .transform((v, ctx) => {
    if (typeof v === 'number') return v;
    const m = SIZE.exec(v.trim());
    if (!m) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a size (use a number of bytes, or e.g. 512Ki, 32Mi, 1Gi)` });
      return z.NEVER;
    }
    return Number(m[1]) * (SIZE_UNIT[m[2] as string] as number);
  });

export const path = z.string().min(1, 'must be a file path');
