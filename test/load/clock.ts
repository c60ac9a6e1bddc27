// The one clock of a run: wall-clock milliseconds with sub-millisecond resolution, so that the
// timeline and request records compare directly and latencies are exact.
import { performance } from 'node:perf_hooks';

export type Clock = () => number;

export const wallClockMs: Clock = () => performance.timeOrigin + performance.now();
