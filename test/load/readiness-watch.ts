// Every apiserver's /readyz, polled straight (never through a gateway) for a whole run, each
// change written into the timeline: `unready` when a running apiserver fails it or does not answer
// (etcd away, its packets dropped), `ready` when it passes again. The accounting then judges 404s
// and 503s against what the apiservers themselves said, not only against starts and stops.
import type { Clock } from './clock.js';
import type { LoadHttp } from './http.js';
import type { TimelineRecorder } from './timeline.js';

export interface WatchedServer {
  readonly name: string;
  readonly version: string;
  readonly url: string;
}

export class ReadinessWatch {
  private readonly last = new Map<string, boolean>();
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
    },
  ) {}

  /** Every watched apiserver passed its last probe. */
  allReady(): boolean {
    return this.o.servers.every((s) => this.last.get(s.name) === true);
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
      const before = this.last.get(s.name);
      // The first probe only sets the state: the session records a start's own `ready`.
      if (before !== undefined && before !== ready) this.o.timeline.server(s.name, s.version, ready ? 'ready' : 'unready', at);
      this.last.set(s.name, ready);
      await new Promise((r) => setTimeout(r, this.o.stepMs ?? 100));
    }
  }
}
