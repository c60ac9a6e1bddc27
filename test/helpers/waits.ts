// How long a test waits for something before it calls that a failure. A wait bounds only how long
// a failing test takes, never a verdict, so it is generous: a multiple of the configured time the
// awaited thing needs (intervals, timeouts, drains), and never under a floor that covers what no
// setting bounds (a process start, a few round trips) on a slow, busy machine.

/** Times the configured time: a 2-core CI box with a CPU-bound neighbour is several times slower. */
export const WAIT_FACTOR = 10;
/** The least any wait allows. */
export const WAIT_FLOOR_MS = 30_000;

/** The timeout for a wait on something the given configured times bound together. */
export function waitMs(...configuredMs: readonly number[]): number {
  const total = configuredMs.reduce((s, ms) => s + ms, 0);
  return Math.max(WAIT_FLOOR_MS, WAIT_FACTOR * total);
}
