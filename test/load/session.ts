// The lab as the cluster tests drive it: every stop, start and ready of an apiserver goes into the
// run's timeline (the ground truth the accounting judges 404s against).
import type { LabAddresses } from '../../harness/lab/addresses.js';
import { Lab } from '../../harness/lab/lab.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import type { Clock } from './clock.js';
import { LoadHttp } from './http.js';
import { readAuditIds } from './audit.js';
import { probeReady } from './ready-probe.js';
import { TimelineRecorder } from './timeline.js';

export class LabSession {
  readonly timeline: TimelineRecorder;
  /** Straight to the apiservers (admin token), never through a gateway. */
  readonly direct: LoadHttp;
  private readonly versions = new Map<string, string>();

  private constructor(
    readonly lab: Lab,
    readonly clock: Clock,
    private readonly progress: (line: string) => void,
  ) {
    this.timeline = new TimelineRecorder(clock);
    this.direct = new LoadHttp({ caFile: lab.pki.caFile, token: lab.pki.adminToken, timeoutMs: 5000, connections: 8 });
  }

  /** A lab in `dir` with nothing left running from an earlier (crashed) run (Lab.down() stops even unrecorded ones). */
  static async open(dir: string, clock: Clock, progress: (line: string) => void, addresses: LabAddresses): Promise<LabSession> {
    const leftover = await Lab.open({ dir, addresses });
    await leftover.down({ kill: true });
    const lab = await Lab.open({ dir, log: progress, killOnExit: true, addresses });
    return new LabSession(lab, clock, progress);
  }

  /** Starts an apiserver; "ready" is the first /readyz 200 of a 100 ms probe (or the lab's own wait, if earlier). */
  async start(spec: ApiServerSpec): Promise<number> {
    const url = `https://${spec.ip}:${spec.port}`;
    const startAt = this.timeline.server(spec.name, spec.version, 'start');
    const probe = probeReady(this.direct, url, this.clock);
    try {
      await this.lab.startApiServer(spec);
    } finally {
      probe.stop();
    }
    const labReady = this.clock();
    const probed = await probe.readyAt;
    const readyAt = Math.min(probed ?? labReady, labReady);
    this.timeline.server(spec.name, spec.version, 'ready', readyAt);
    this.versions.set(spec.name, spec.version);
    this.progress(`${spec.name} v${spec.version} ready ${((readyAt - startAt) / 1000).toFixed(1)} s after start`);
    return readyAt;
  }

  async stop(name: string): Promise<void> {
    const version = this.versions.get(name) ?? '?';
    const at = this.timeline.server(name, version, 'stop');
    await this.lab.stopApiServer(name);
    this.timeline.server(name, version, 'stopped');
    this.progress(`${name} v${version} stopped in ${((this.clock() - at) / 1000).toFixed(1)} s`);
  }

  /** SIGKILL (a crash: no --shutdown-delay-duration window), recorded as a stop that ended at once. */
  async kill(name: string): Promise<void> {
    const version = this.versions.get(name) ?? '?';
    this.timeline.server(name, version, 'stop');
    await this.lab.killApiServer(name);
    this.timeline.server(name, version, 'stopped');
    this.progress(`${name} v${version} killed`);
  }

  /** Audit-ID → the apiservers that logged it, from every apiserver's audit log. */
  auditIds(): Promise<Map<string, Set<string>>> {
    return readAuditIds(this.lab.apiServerSpecs().map((s) => ({ server: s.name, file: this.lab.auditLogFile(s.name) })));
  }

  /** Lab.down({ kill }): kills everything of this run dir, including processes it has no record of. */
  async down(): Promise<void> {
    await this.direct.close().catch(() => undefined);
    await this.lab.down({ kill: true });
  }
}
