// Runs sliced computations (sliced.ts) on the event loop in slices of a few milliseconds, with a
// macrotask between slices so that ext_proc streams, timers and I/O are served in between.
import { setImmediate as nextMacrotask } from 'node:timers/promises';
import type { Sliced } from './core/sliced.js';

export interface SliceOptions {
  /** Longest run of work before giving the event loop a turn. Default 5 ms. */
  readonly budgetMs?: number;
  /** Monotonic milliseconds; injected for tests. */
  readonly now?: () => number;
  /** Gives the event loop a turn; injected for tests. */
  readonly pause?: () => Promise<unknown>;
  /** Each slice's duration, for the bench and metrics. */
  readonly onSlice?: (ms: number) => void;
  /** Stops between slices: the promise rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

export const DEFAULT_SLICE_BUDGET_MS = 5;

/** Options with this budget, or the default when none is given. */
export function sliceBudget(budgetMs: number | undefined): SliceOptions {
  return budgetMs === undefined ? {} : { budgetMs };
}

export async function runSliced<T>(work: Sliced<T>, opts: SliceOptions = {}): Promise<T> {
  const budget = opts.budgetMs ?? DEFAULT_SLICE_BUDGET_MS;
  const now = opts.now ?? (() => performance.now());
  const pause = opts.pause ?? (() => nextMacrotask());
  for (;;) {
    opts.signal?.throwIfAborted();
    const started = now();
    let step = work.next();
    while (step.done !== true && now() - started < budget) step = work.next();
    opts.onSlice?.(now() - started);
    if (step.done === true) return step.value;
    await pause();
  }
}
