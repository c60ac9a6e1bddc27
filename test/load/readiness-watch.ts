// Every apiserver's /readyz, polled straight (never through a gateway) for a whole run, each
// change written into the timeline: `unready` when a running apiserver fails it or does not answer
// (etcd away, its packets dropped), `ready` when it passes again. The accounting then judges 404s
// and 503s against what the apiservers themselves said, not only against starts and stops.
// With a `servingPath`, each probe that passes /readyz also reads that path straight, and whether
// it answered 200 within the bound is kept apart (not in the timeline): an apiserver back from an
// etcd outage can pass /readyz while a read from its storage still hangs for seconds.
import type { Clock } from './clock.js';
import type { LoadHttp } from './http.js';
import type { TimelineRecorder } from './timeline.js';

export interface WatchedServer {
  readonly name: string;
  readonly version: string;
  readonly url: string;
}

/** A change in whether an apiserver answered `servingPath` straight. */
export interface ServingChange {
  readonly server: string;
  readonly atMs: number;
  readonly serving: boolean;
}

/**
 * When `server` began answering reads for the rest of [fromMs, toMs]: its last change in the range
 * is to serving, or it had none and served at `fromMs`. Null when it ends the range not serving.
 */
export function servingForGoodAt(changes: readonly ServingChange[], server: string, fromMs: number, toMs: number): number | null {
  const own = changes.filter((c) => c.server === server && c.atMs <= toMs);
  const last = own.filter((c) => c.atMs >= fromMs).at(-1);
  if (last !== undefined) return last.serving ? last.atMs : null;
  return own.at(-1)?.serving === true ? fromMs : null;
}

export class ReadinessWatch {
  private readonly last = new Map<string, boolean>();
  private readonly serving = new Map<string, boolean>();
  private readonly changes: ServingChange[] = [];
  private stopped = false;
  private loops: Promise<void>[] = [];

  /** `http` bounds each probe (its timeoutMs): a silent server counts as unready after that long. */
  constructor(
    private readonly o: {
      readonly http: LoadHttp;
      readonly servers: readonly WatchedServer[];
      readonly timeline: TimelineRecorder;
      readonly clock: Clock;
      readonly stepMs?: number;
      /** A read answered straight by a serving apiserver (a path, e.g. a list with `limit=1`). */
      readonly servingPath?: string;
    },
  ) {}

  /** Every watched apiserver passed its last probe. */
  allReady(): boolean {
    return this.o.servers.every((s) => this.last.get(s.name) === true);
  }

  /** Every watched apiserver answered the last read of `servingPath` (true without one). */
  allServing(): boolean {
    return this.o.servingPath === undefined || this.o.servers.every((s) => this.serving.get(s.name) === true);
  }

  /** Each change in serving, in order (the first probe of each server included). */
  servingChanges(): readonly ServingChange[] {
    return [...this.changes];
  }

  start(): void {
    this.loops = this.o.servers.map((s) => this.loop(s));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async loop(s: WatchedServer): Promise<void> {
    while (!this.stopped) {
      const at = this.o.clock();
      let ready = false;
      try {
        const res = await this.o.http.send('GET', `${s.url}/readyz`);
        ready = res.status === 200;
      } catch {
        // refused, reset or timed out: not ready
      }
      if (this.o.servingPath !== undefined) {
        let serving = false;
        if (ready) {
          try {
            serving = (await this.o.http.send('GET', `${s.url}${this.o.servingPath}`)).status === 200;
          } catch {
            // hung past the bound, refused or reset: not serving
          }
        }
        if (this.serving.get(s.name) !== serving) this.changes.push({ server: s.name, atMs: at, serving });
        this.serving.set(s.name, serving);
      }
      const before = this.last.get(s.name);
      // The first probe only sets the state: the session records a start's own `ready`.
      if (before !== undefined && before !== ready) this.o.timeline.server(s.name, s.version, ready ? 'ready' : 'unready', at);
      this.last.set(s.name, ready);
      await new Promise((r) => setTimeout(r, this.o.stepMs ?? 100));
    }
  }
}
