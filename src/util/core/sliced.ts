// Pure: computations that can pause. A big discovery change (tens of thousands of resources) costs
// hundreds of milliseconds to parse, merge and index; run in one go on the event loop that answers
// Envoy, that is a stall longer than Envoy's ext_proc message timeout. Written as generators that
// `yield` between pieces of work, the same code runs to the end at once (CLI, tests, explain) or in
// slices between which the request path answers from the current snapshot (slice-runner.ts).

/** A computation that yields (nothing) at safe points and returns its result. */
export type Sliced<T> = Generator<undefined, T, undefined>;

/** Runs a sliced computation to its end without pausing. */
export function runToEnd<T>(work: Sliced<T>): T {
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
  }
}

/** How many cheap loop iterations go between two pause points (a clock read costs more than one). */
export const STEP_EVERY = 256;

/**
 * `items` sorted into a new array exactly as Array.prototype.sort sorts them (stable), pausing
 * every STEP_EVERY comparisons: a sort of a quarter of a million labels takes hundreds of
 * milliseconds. Insertion-sorted runs of 32, then merged bottom-up.
 */
export function* sortSteps<T>(items: readonly T[], compare: (a: T, b: T) => number): Sliced<T[]> {
  const n = items.length;
  let src = items.slice();
  let dst = new Array<T>(n);
  let ops = 0;
  const RUN = 32;
  for (let lo = 0; lo < n; lo += RUN) {
    const hi = Math.min(lo + RUN, n);
    for (let i = lo + 1; i < hi; i++) {
      const x = src[i] as T;
      let j = i - 1;
      // Moves only past a strictly greater item: equal ones keep their order.
      while (j >= lo && compare(src[j] as T, x) > 0) {
        src[j + 1] = src[j] as T;
        j--;
      }
      src[j + 1] = x;
    }
    ops += (hi - lo) * 4;
    if (ops >= STEP_EVERY) {
      ops = 0;
      yield;
    }
  }
  for (let width = RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid && j < hi) {
        // The right one first only when strictly smaller: stable.
        dst[k++] = compare(src[j] as T, src[i] as T) < 0 ? (src[j++] as T) : (src[i++] as T);
        if (++ops >= STEP_EVERY) {
          ops = 0;
          yield;
        }
      }
      while (i < mid) dst[k++] = src[i++] as T;
      while (j < hi) dst[k++] = src[j++] as T;
    }
    [src, dst] = [dst, src];
  }
  return src;
}
