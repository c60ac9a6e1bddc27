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
