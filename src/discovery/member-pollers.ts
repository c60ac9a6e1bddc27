// The pollers of the apiservers skewgate knows and each one's place in the membership: the actions
// membership/lifecycle.ts decides applied (a poller added, drained with its timer, brought back,
// forgotten) and a learnt apiserver admitted once it proved itself. The discovery service runs the
// rounds and is told, through the hooks, when routing and Envoy must hear of a change.
import type { Logger } from 'pino';
import type { WatchCandidate } from '../kube/watch.js';
import { admission, type MemberRecord, type MembershipAction } from '../membership/lifecycle.js';
import type { MemberEntry, MemberRole, MemberSpec } from '../membership/members.js';
import type { CordonTable } from '../cordon/core/cordons.js';
import { createPoller, stopPoller, type Poller, type PollerSettings } from './poller.js';

export interface MemberPollersHooks {
  /** A new poller, once the service has started: its first round. */
  readonly kick: (p: Poller) => void;
  /** A joining apiserver's delay ended: it is a member now. */
  readonly joined: () => void;
  /** A drained apiserver was removed: routing stops naming it before Envoy drops its cluster. */
  readonly removed: () => void;
}

export class MemberPollers {
  /** Every apiserver polled, seeds first in config order, then learnt ones as they come. */
  private readonly pollers = new Map<string, Poller>();
  /** A member's identity changed (its hostname was learnt): the next merge must not be reused. */
  identitiesChanged = false;

  constructor(
    private readonly log: Logger,
    private readonly settings: PollerSettings,
    private readonly timing: { readonly joinDelayMs: number; readonly now: () => number; readonly drainTimeoutMs: number },
    private readonly hooks: MemberPollersHooks,
  ) {}

  add(spec: MemberSpec, role: MemberRole, seed: boolean, sources: readonly string[]): Poller {
    const poller = createPoller(spec, role, seed, sources, this.settings);
    this.pollers.set(spec.name, poller);
    return poller;
  }

  has(name: string): boolean {
    return this.pollers.has(name);
  }

  get(name: string): Poller | undefined {
    return this.pollers.get(name);
  }

  all(): Poller[] {
    return [...this.pollers.values()];
  }

  /** The learnt apiservers not yet verified. */
  probing(): Poller[] {
    return this.all().filter((p) => p.role === 'probing');
  }

  /** The membership as lifecycle.ts sees it. */
  records(): MemberRecord[] {
    return this.all().map((p) => ({ spec: p.spec, role: p.role, seed: p.seed, sources: p.sources, ready: p.state.ready }));
  }

  /** Every apiserver polled and its role; the Envoy clusters follow this (src/envoy-runtime/xds-files.ts). */
  entries(cordons: CordonTable): readonly MemberEntry[] {
    return Object.freeze(
      this.all().map((p) => {
        const cordon = cordons.get(p.spec.name)?.mode;
        return Object.freeze({ spec: p.spec, role: p.role, seed: p.seed, sources: p.sources, ...(cordon ? { cordon } : {}) });
      }),
    );
  }

  /** Watches and lists go through members only: a probing apiserver is not verified, a draining one is leaving. */
  watchCandidates(): WatchCandidate[] {
    return this.all()
      .filter((p) => p.role === 'member')
      .map((p) => {
        const { ready, consecutiveFailures } = p.state;
        const health = ready === false || consecutiveFailures > 0 ? 'unhealthy' : ready === true ? 'healthy' : 'unknown';
        return { target: p.target, health };
      });
  }

  /** One action of membership/lifecycle.ts reconcile(). */
  apply(a: MembershipAction, started: boolean): void {
    if (a.kind === 'add') {
      const p = this.add(a.spec, a.role, a.seed, a.sources);
      this.log.info(
        { server: a.spec.name, url: a.spec.url, sources: a.sources, hostname: a.spec.hostname ?? null },
        a.seed ? 'apiserver back in the members' : 'apiserver learnt; probing it',
      );
      if (started) this.hooks.kick(p);
      return;
    }
    const p = this.pollers.get(a.name);
    if (p === undefined) return;
    switch (a.kind) {
      case 'keep':
        return;
      case 'sources':
        p.sources = a.sources;
        return;
      case 'undrain':
        if (p.drainTimer) clearTimeout(p.drainTimer);
        p.drainTimer = null;
        p.role = 'member';
        p.sources = a.sources;
        this.log.info({ server: p.spec.name, sources: a.sources }, 'draining apiserver named by a source again: a member');
        return;
      case 'respec':
        p.spec = a.spec;
        this.identitiesChanged = true;
        return;
      case 'forget':
        this.log.info({ server: p.spec.name }, 'learnt apiserver left every source before it was a member');
        this.remove(p);
        return;
      case 'drain':
        p.role = 'draining';
        p.drainTimer = setTimeout(
          () => {
            p.drainTimer = null;
            this.log.info({ server: p.spec.name }, 'drained apiserver removed');
            this.remove(p);
            this.hooks.removed();
          },
          Math.max(0, a.until - this.timing.now()),
        );
        p.drainTimer.unref();
        this.log.warn(
          { server: p.spec.name, url: p.spec.url, drainTimeoutMs: this.timing.drainTimeoutMs },
          'apiserver left every source: draining',
        );
        return;
    }
  }

  /**
   * After a round of a learnt apiserver: a member once it proved itself (lifecycle.ts admission);
   * with a join delay, `joining` first (Envoy given its cluster and routes before the pool).
   * True when its role changed.
   */
  admit(p: Poller, closed: () => boolean): boolean {
    const s = p.state;
    const { joinDelayMs } = this.timing;
    const step = admission(p, { viewed: s.view !== null, consecutiveFailures: s.consecutiveFailures, ready: s.ready }, joinDelayMs);
    if (step === 'none') return false;
    if (step === 'not-verified') {
      if (s.consecutiveFailures === 1 || s.ready === false)
        this.log.debug({ server: p.spec.name, url: p.spec.url, err: s.lastError, ready: s.ready }, 'learnt apiserver not verified yet');
      return false;
    }
    if (step === 'join') return this.join(p);
    p.role = 'joining';
    this.log.info({ server: p.spec.name, url: p.spec.url, joinDelayMs }, 'learnt apiserver verified; joining (Envoy first)');
    p.drainTimer = setTimeout(() => {
      p.drainTimer = null;
      if (p.removed || p.role !== 'joining' || closed()) return;
      this.join(p);
      this.hooks.joined();
    }, joinDelayMs);
    p.drainTimer.unref();
    return true;
  }

  private join(p: Poller): true {
    p.role = 'member';
    this.log.info(
      { server: p.spec.name, url: p.spec.url, sources: p.sources, hostname: p.spec.hostname ?? null },
      'apiserver admitted as a member',
    );
    return true;
  }

  private remove(p: Poller): void {
    p.removed = true;
    stopPoller(p);
    p.abort.abort();
    this.pollers.delete(p.spec.name);
    void (p.running ?? Promise.resolve()).catch(() => undefined).then(() => p.credentials.close());
  }
}
