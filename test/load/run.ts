// A load run over several arms at once (one per gateway): each arm's open loop plus a watch of
// each kind, all writing into one LoadLog against one clock.
import { ArmLoad } from './arm.js';
import type { Clock } from './clock.js';
import type { LoadHttp } from './http.js';
import { LoadLog } from './log.js';
import type { ResourceKind } from './types.js';
import { WatchLoop } from './watch.js';
import type { Workload } from './workload.js';

export interface ArmTarget {
  readonly arm: string;
  readonly baseUrl: string;
  /** This arm's client (another identity: a client certificate); default the run's. */
  readonly http?: LoadHttp;
}

export interface LoadRunOptions {
  readonly arms: readonly ArmTarget[];
  readonly http: LoadHttp;
  readonly workload: Workload;
  readonly ratePerSec: number;
  readonly clock: Clock;
  readonly rng: () => number;
  /** Kinds to hold a watch open on, per arm (default both). */
  readonly watch?: readonly ResourceKind[];
}

export class LoadRun {
  readonly log = new LoadLog();
  private readonly loads: ArmLoad[];
  private readonly watches: WatchLoop[];

  constructor(o: LoadRunOptions) {
    this.loads = o.arms.map(
      (a) =>
        new ArmLoad({
          arm: a.arm,
          baseUrl: a.baseUrl,
          http: a.http ?? o.http,
          workload: o.workload,
          ratePerSec: o.ratePerSec,
          clock: o.clock,
          rng: o.rng,
          log: this.log,
        }),
    );
    this.watches = o.arms.flatMap((a) =>
      (o.watch ?? ['common', 'skewed']).map(
        (kind) =>
          new WatchLoop({
            arm: a.arm,
            kind,
            baseUrl: a.baseUrl,
            http: a.http ?? o.http,
            workload: o.workload,
            clock: o.clock,
            log: this.log,
            retryMs: 1000,
          }),
      ),
    );
  }

  start(): void {
    for (const w of this.watches) w.start();
    for (const l of this.loads) l.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.loads.map((l) => l.stop()));
    // Let the watches catch the last creates before they close.
    await new Promise((r) => setTimeout(r, 1500));
    await Promise.all(this.watches.map((w) => w.stop()));
  }

  /** A one-line progress summary: requests and status codes per arm so far. */
  progress(sinceMs = 0): string {
    const by = new Map<string, Map<string, number>>();
    for (const r of this.log.requests) {
      if (r.startMs < sinceMs) continue;
      const m = by.get(r.arm) ?? new Map<string, number>();
      const k = r.status === null ? 'err' : String(r.status);
      m.set(k, (m.get(k) ?? 0) + 1);
      by.set(r.arm, m);
    }
    return [...by]
      .map(
        ([arm, m]) =>
          `${arm}: ${[...m]
            .sort()
            .map(([k, c]) => `${k}×${c}`)
            .join(' ')}`,
      )
      .join('; ');
  }
}

/** A small deterministic PRNG (mulberry32), so that runs choose the same objects. */
export function seededRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export async function freeLoopbackPort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr !== null ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}
