// Runs a sliced computation (src/util/core/sliced.ts) to its end, counting its pause points.
import type { Sliced } from '../../src/util/core/sliced.js';

export function runCountingPauses<T>(work: Sliced<T>): { value: T; pauses: number } {
  let pauses = 0;
  for (;;) {
    const step = work.next();
    if (step.done === true) return { value: step.value, pauses };
    pauses++;
  }
}
