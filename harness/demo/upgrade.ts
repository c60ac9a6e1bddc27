// The demo's playable upgrade: its old fake apiservers moved to the new version one at a time (u),
// and the last one moved back (r), each as a restart: not ready for a moment, then back with the
// other version's API set and /version. skewgate's status, skew and the self-check follow live.
import { setTimeout as sleep } from 'node:timers/promises';
import type { FakeApiServer, FakeResource } from '../fake/index.js';

export interface DemoVersion {
  readonly gitVersion: string;
  readonly builtins: readonly FakeResource[];
}

const key = (r: FakeResource): string => `${r.group}/${r.version}/${r.resource}`;

export class DemoUpgrade {
  /** The servers upgraded by u, in order (the last is the one r rolls back). */
  private readonly upgraded: FakeApiServer[] = [];
  private busy = false;

  constructor(
    /** The servers that start at the old version, in the order u upgrades them. */
    private readonly old: readonly FakeApiServer[],
    private readonly from: DemoVersion,
    private readonly to: DemoVersion,
    /** How long a "restart" keeps the server not ready. */
    private readonly restartMs = 1000,
  ) {}

  /** u: the next old server restarted as the new version; what happened, in a line. */
  async upgrade(): Promise<string> {
    const next = this.old.find((s) => !this.upgraded.includes(s));
    if (next === undefined) return `every apiserver runs ${this.to.gitVersion} already (r rolls one back)`;
    return this.once(async () => {
      await this.restart(next, this.from, this.to);
      this.upgraded.push(next);
      const left = this.old.length - this.upgraded.length;
      return `${next.name} restarted as ${this.to.gitVersion}${left === 0 ? ': every apiserver runs it now' : ` (${left} still at ${this.from.gitVersion})`}`;
    });
  }

  /** r: the last server upgraded restarted as the old version again. */
  async rollBack(): Promise<string> {
    const last = this.upgraded.at(-1);
    if (last === undefined) return 'nothing to roll back (u upgrades the next apiserver)';
    return this.once(async () => {
      await this.restart(last, this.to, this.from);
      this.upgraded.pop();
      return `${last.name} rolled back to ${this.from.gitVersion}`;
    });
  }

  private async once(step: () => Promise<string>): Promise<string> {
    if (this.busy) return 'one step at a time: the previous one is still restarting';
    this.busy = true;
    try {
      return await step();
    } finally {
      this.busy = false;
    }
  }

  private async restart(s: FakeApiServer, from: DemoVersion, to: DemoVersion): Promise<void> {
    s.setReady(false);
    await sleep(this.restartMs);
    const target = new Set(to.builtins.map(key));
    for (const r of from.builtins) if (!target.has(key(r))) s.removeBuiltin(r.group, r.version, r.resource);
    const had = new Set(from.builtins.map(key));
    for (const r of to.builtins) if (!had.has(key(r))) s.addBuiltin(r);
    s.setGitVersion(to.gitVersion);
    s.setReady(true);
  }
}
