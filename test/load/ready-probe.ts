// A tight /readyz poll next to the lab's own wait, so that the timeline's "ready" is the first
// moment an apiserver answered 200 (to within the poll step), not when a slower poll noticed.
import type { Clock } from './clock.js';
import type { LoadHttp } from './http.js';

export interface ReadyProbe {
  /** The first moment /readyz answered 200, or null if it never did before stop(). */
  readonly readyAt: Promise<number | null>;
  stop(): void;
}

export function probeReady(http: LoadHttp, apiserverUrl: string, clock: Clock, stepMs = 100): ReadyProbe {
  let stopped = false;
  const readyAt = (async (): Promise<number | null> => {
    while (!stopped) {
      const at = clock();
      try {
        const res = await http.send('GET', `${apiserverUrl}/readyz`);
        if (res.status === 200) return at;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, stepMs));
    }
    return null;
  })();
  return {
    readyAt,
    stop: () => {
      stopped = true;
    },
  };
}
