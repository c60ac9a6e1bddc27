// An open-loop sender: request i is due at start + i / rate whatever happened to the earlier
// ones. Callers measure latency from the due time, so a stall shows up in every request it
// delays (no coordinated omission).
import { setTimeout as sleep } from 'node:timers/promises';
import { nowNs } from './stats.js';

/**
 * Calls `fire(i, dueNs)` for i = 0..total-1 at `rate` per second, then waits for every returned
 * promise (at most `drainTimeoutMs`). Returns the start time (the due time of request 0).
 */
export async function openLoop(
  total: number,
  rate: number,
  fire: (i: number, dueNs: number) => Promise<unknown>,
  drainTimeoutMs = 15_000,
): Promise<number> {
  const intervalNs = 1e9 / rate;
  const start = nowNs() + 1e6;
  const inflight = new Set<Promise<unknown>>();
  let i = 0;
  while (i < total) {
    const now = nowNs();
    while (i < total && start + i * intervalNs <= now) {
      const p: Promise<unknown> = fire(i, start + i * intervalNs)
        .catch(() => undefined)
        .finally(() => inflight.delete(p));
      inflight.add(p);
      i++;
    }
    if (i >= total) break;
    // Timers (≈1 ms granularity), not a busy loop: the sender must leave the CPU to the system under test.
    await sleep(Math.max(0, Math.floor((start + i * intervalNs - nowNs()) / 1e6)));
  }
  await Promise.race([Promise.all(inflight), sleep(drainTimeoutMs, undefined, { ref: false })]);
  return start;
}
