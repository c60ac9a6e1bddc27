// The discovery service, the facade the rest of skewgate holds: a poller per apiserver (poller.ts,
// member-pollers.ts), a CRD/APIService watch that triggers immediate refreshes, the membership as
// src/membership/ decides it (the configured seed, the live sources, each learnt apiserver probed
// before it is routed to and drained before it is removed; the identity Leases), and the
// snapshots routing reads (publisher.ts).
import { setMaxListeners } from 'node:events';
import { pino, type Logger } from 'pino';
import { MEMBERSHIP_DEFAULTS } from '../config/core/sections.js';
import type { MembershipSource } from '../config/core/schema.js';
import { DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_DOWNLOAD_BACKOFF_MS, DEFAULT_MAX_RESOURCES } from '../constants.js';
import type { ServerTarget } from '../kube/transport.js';
import { ApiWatcher, type WatchChange } from '../kube/watch.js';
import { apiserverIdentity } from '../membership/apiserver-identity.js';
import {
  applyLeaseChange,
  EMPTY_LEASE_TABLE,
  IDENTITY_LEASE_SELECTOR,
  IDENTITY_LEASES_PATH,
  sameMembership,
  type IdentityLeaseTable,
  type Membership,
} from '../membership/identity-leases.js';
import { reconcile } from '../membership/lifecycle.js';
import { desiredMembers, membershipInput, type MemberEntry, type MembersListener } from '../membership/members.js';
import { emptySourceTable, sourceWatch, withSourceChange, type SourceSettings, type SourceTable } from '../membership/sources.js';
import type { DiscoveryRoundEvent, RoundListener, SnapshotListener } from './core/events.js';
import { Listeners } from './listeners.js';
import { healthyFirst, listThroughMembers, watchedKinds } from './lists.js';
import { logBloat, logOpenApiProblem, logTransition, logUnmatched, logViewChange } from './log-lines.js';
import { MemberPollers } from './member-pollers.js';
import { membershipNow, serversOf } from './core/members-view.js';
import type { DiscoveryConfig, DiscoveryServiceOptions } from './options.js';
import { kickPoller, nextRoundDelay, pollOnce, stopPoller, type Poller, type PollerSettings } from './poller.js';
import { SnapshotPublisher } from './publisher.js';
import { initialSnapshot, type SnapshotOptions } from './core/snapshot.js';
import type { Snapshot } from './core/types.js';
import type { CordonTable } from '../cordon/core/cordons.js';
import { CordonSides } from './cordon-sides.js';
import { Refresher } from './refresher.js';

export class DiscoveryService {
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly pollers: MemberPollers;
  private readonly abort = new AbortController();
  private readonly seeds: DiscoveryConfig['apiservers'];
  private readonly settings: PollerSettings;
  private readonly membership: NonNullable<DiscoveryConfig['membership']>;
  private readonly sources: readonly MembershipSource[];
  private readonly sourceSettings: SourceSettings;
  private sourceTables: ReadonlyMap<MembershipSource, SourceTable>;
  /** A member left every source while no other was ready: reconsidered after each round. */
  private drainPostponed = false;
  private readonly snapshots: Listeners<Snapshot>;
  private readonly rounds: Listeners<DiscoveryRoundEvent>;
  private readonly memberships: Listeners<readonly MemberEntry[]>;
  private readonly watcher: ApiWatcher | null;
  private readonly minRetryMs: number;
  private readonly publisher: SnapshotPublisher;
  /** How snapshots are built: the /apis merge is ordered by each apiserver's identity (from its hostname). */
  private snapshotOptions: SnapshotOptions;
  private readonly leaseLivenessMs: number;
  /** The identity Leases as last listed and watched. */
  private leases: IdentityLeaseTable = EMPTY_LEASE_TABLE;
  /** Lease objects that were not identity leases: logged and counted, never fatal. */
  private leaseSkipped = 0;
  /** Names of the live unmatched identities last logged, so that a change is logged once. */
  private unmatchedLogged = '';
  private starting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  private readonly refresher = new Refresher(
    () => {
      for (const p of this.pollers.all()) this.kick(p);
    },
    () => this.closing === null && this.starting !== null,
  );
  /** The operator's cordons, as routing and as Envoy have them. */
  private readonly cordons: CordonSides;

  constructor(config: DiscoveryConfig, opts: DiscoveryServiceOptions = {}) {
    // Every in-flight request listens on it (legacy servers fetch many group/versions at once).
    setMaxListeners(0, this.abort.signal);
    this.now = opts.now ?? Date.now;
    this.log = opts.logger ?? pino({ level: 'silent' });
    this.snapshots = new Listeners(this.log, 'snapshot');
    this.rounds = new Listeners(this.log, 'round');
    this.memberships = new Listeners(this.log, 'members');
    const intervalMs = config.discovery.interval;
    this.settings = {
      timeoutMs: config.discovery.timeout,
      intervalMs,
      maxDocumentBytes: config.discovery.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES,
      maxResources: config.discovery.maxResources ?? DEFAULT_MAX_RESOURCES,
      maxDownloadBackoffMs: config.discovery.maxDownloadBackoff ?? DEFAULT_MAX_DOWNLOAD_BACKOFF_MS,
      sliceBudgetMs: opts.sliceBudgetMs,
      fetchImpl: opts.fetchImpl,
      now: this.now,
    };
    this.minRetryMs = Math.min(opts.minRetryMs ?? 250, intervalMs);
    this.cordons = new CordonSides(opts.cordons, opts.joinDelayMs ?? 0, {
      publish: () => this.publisher.request(),
      emitMembers: () => this.memberships.emit(this.members()),
      closed: () => this.closing !== null,
    });
    this.seeds = config.apiservers;
    this.membership = config.membership ?? MEMBERSHIP_DEFAULTS;
    this.pollers = new MemberPollers(
      this.log,
      this.settings,
      { joinDelayMs: opts.joinDelayMs ?? 0, now: this.now, drainTimeoutMs: this.membership.drainTimeout },
      {
        kick: (p) => this.kick(p),
        // It may let a leaving member drain now.
        joined: () => {
          if (!this.reconcileMembers()) this.announce('together');
        },
        removed: () => this.announce('routing first'),
      },
    );
    this.sources = [...new Set(this.membership.sources)];
    this.sourceSettings = { nodePort: this.membership.port };
    this.sourceTables = new Map(this.sources.map((src) => [src, emptySourceTable(src)] as const));
    for (const s of config.apiservers) this.pollers.add(s, 'member', true, ['config']);
    for (const s of opts.lastKnown ?? []) if (!this.pollers.has(s.name)) this.pollers.add(s, 'member', false, ['last-known']);
    this.leaseLivenessMs = config.discovery.identityLeaseLiveness;
    // A member's identity (its lease name): from its hostname, else its name.
    const identityOf = (name: string): string => apiserverIdentity(this.pollers.get(name)?.spec.hostname ?? name);
    this.snapshotOptions = { identityOf, membership: this.currentMembership() };
    this.publisher = new SnapshotPublisher(initialSnapshot(config.apiservers, this.snapshotOptions), {
      log: this.log,
      signal: this.abort.signal,
      sliceBudgetMs: opts.sliceBudgetMs,
      beforePublish: opts.beforePublish,
      closed: () => this.closing !== null,
      inputs: () => {
        this.snapshotOptions = { ...this.snapshotOptions, membership: this.currentMembership() };
        const rebuild = this.pollers.identitiesChanged;
        this.pollers.identitiesChanged = false;
        return { servers: serversOf(this.pollers.all(), this.cordons.routing()), options: this.snapshotOptions, rebuild };
      },
      publish: (snap) => this.published(snap),
    });
    this.watcher = config.discovery.watch
      ? new ApiWatcher(
          {
            candidates: () => this.pollers.watchCandidates(),
            onChange: (kind, type) => this.onWatchEvent(kind, type),
            logger: this.log.child({ part: 'watch' }),
          },
          watchedKinds(this.sources, this.membership.nodeSelector, {
            lease: (c) => this.onLeaseChange(c),
            source: (src, c) => this.onSourceChange(src, c),
          }),
        )
      : null;
  }

  /**
   * Starts polling (and the watch). Resolves when every server's first round has ended, well or
   * not, and (with the watch) the identity Leases were listed once or could not be.
   */
  start(): Promise<void> {
    if (this.closing) return Promise.reject(new Error('discovery service is closed'));
    this.starting ??= (async () => {
      for (const p of this.pollers.all()) this.kick(p);
      this.watcher?.start();
      await Promise.all(this.pollers.all().map((p) => p.first));
      // With the watch on, know the membership before the first request: until the leases are
      // listed, the configured list is trusted, and an apiserver it lacks could get a false 404.
      if (this.watcher !== null && !this.leases.synced && !this.closing) {
        // Only through apiservers that just answered: a dead one would hold the start for its timeout.
        const problem = await this.listIdentityLeases({ healthyOnly: true });
        if (problem !== null)
          this.log.warn({ problem }, 'identity leases: membership not verified at start; the configured apiservers are assumed to be all');
      }
      if (this.watcher !== null && !this.closing) {
        const problem = await this.listSources({ healthyOnly: true });
        if (problem !== null)
          this.log.warn({ problem }, 'membership sources: not listed at start; the configured apiservers are the members until they are');
      }
    })();
    return this.starting;
  }

  /** Stops everything: in-flight fetches are aborted, timers cleared, agents and watches closed. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.abort.abort();
      this.refresher.cancel();
      this.cordons.cancel();
      const pollers = this.pollers.all();
      for (const p of pollers) stopPoller(p);
      await this.watcher?.close();
      await Promise.all(pollers.map((p) => p.running?.catch(() => undefined)));
      await this.publisher.settled();
      await Promise.all(pollers.map((p) => p.credentials.close()));
      this.snapshots.clear();
      this.rounds.clear();
      this.memberships.clear();
    })();
    return this.closing;
  }

  /** The current snapshot; before the first round, every server with view null. */
  current(): Snapshot {
    return this.publisher.current();
  }

  /** Called with every new snapshot; returns the unsubscribe function. */
  onChange(listener: SnapshotListener): () => void {
    return this.snapshots.add(listener);
  }

  /** Called after every round of every server, well or not; returns the unsubscribe function. */
  onRound(listener: RoundListener): () => void {
    return this.rounds.add(listener);
  }

  /** The members to send a request through, healthy ones first (the kubernetes Service publisher). */
  targets(): readonly ServerTarget[] {
    return healthyFirst(this.pollers.watchCandidates()).map((c) => c.target);
  }

  /** Every apiserver polled and its role; the Envoy clusters follow this (src/envoy-runtime/xds-files.ts). */
  members(): readonly MemberEntry[] {
    return this.pollers.entries(this.cordons.envoy());
  }

  /** The operator's cordons changed (src/cordon/): routing and Envoy hear of it in turn (cordon-sides.ts); resolves once both have. */
  setCordons(table: CordonTable): Promise<void> {
    return this.cordons.set(table);
  }

  /** Called whenever a member is learnt, admitted, drained or removed; returns the unsubscribe function. */
  onMembers(listener: MembersListener): () => void {
    return this.memberships.add(listener);
  }

  /**
   * A membership change: a new snapshot, and the members' listeners (Envoy's clusters and routes).
   * `routing first` when a member leaves the routes: routing must stop naming it before Envoy
   * drops its route, or a request routed by the snapshot still published meets a route already
   * gone (503 upstream_unknown_to_envoy instead of the drain's own 503).
   */
  private announce(order: 'together' | 'routing first'): void {
    if (order === 'routing first') {
      void this.publisher.request().then(() => this.memberships.emit(this.members()));
      return;
    }
    void this.publisher.request();
    this.memberships.emit(this.members());
  }

  /** Fetch every server again now (also one in failure backoff). Bursts coalesce into one round per server. */
  refresh(): void {
    this.refresher.refresh();
  }

  private kick(p: Poller): void {
    kickPoller(p, {
      round: () => this.round(p),
      closed: () => this.closing !== null,
      nextDelay: () => nextRoundDelay(p.state.consecutiveFailures, this.settings.intervalMs, this.minRetryMs),
      log: this.log,
    });
  }

  private async round(p: Poller): Promise<void> {
    const r = await pollOnce(p, AbortSignal.any([this.abort.signal, p.abort.signal]), this.now);
    if (this.closing || p.removed) return;
    const { before: prev, after: next } = r;
    p.state = next;
    const slicing = { signal: this.abort.signal, sliceBudgetMs: this.settings.sliceBudgetMs };
    logTransition(this.log, prev, next, (before, after) => logViewChange(this.log, next.name, before, after, slicing));
    // Only beside a good round: a server that cannot be reached at all is logged once, above.
    if (next.consecutiveFailures === 0)
      p.openapiProblem = logOpenApiProblem(this.log, next.name, p.openapiProblem, p.client.openapiProblem());
    const documentBytes = p.client.documentSizes();
    p.bloated = logBloat(this.log, p.spec.name, p.bloated, documentBytes, this.settings.maxDocumentBytes);
    const admitted = this.pollers.admit(p, () => this.closing !== null);
    // An admitted member (or a round after a postponed drain) may let a leaving one drain now.
    const reconciled = (admitted || this.drainPostponed) && this.reconcileMembers();
    const published = reconciled ? this.publisher.settled() : this.publisher.request();
    if (admitted && !reconciled) this.memberships.emit(this.members());
    await published;
    if (this.closing || p.removed || this.rounds.size === 0) return;
    this.rounds.emit({
      server: next.name,
      startedAt: r.startedAt,
      durationMs: r.durationMs,
      requests: p.requests,
      before: prev,
      after: next,
      snapshot: this.current(),
      documentBytes,
    });
  }

  /**
   * One list of the identity Leases through a member, ready ones first: for the one-shot commands
   * (explain, skew), which do not watch. A failure on every member leaves the membership not
   * synced (the config's list is trusted then) and says why.
   */
  listIdentityLeases(opts: { healthyOnly?: boolean } = {}): Promise<string | null> {
    return listThroughMembers(
      'identity leases',
      this.pollers.watchCandidates(),
      IDENTITY_LEASES_PATH,
      IDENTITY_LEASE_SELECTOR,
      (items) => this.onLeaseChange({ type: 'RELIST', items }),
      { ...opts, signal: this.abort.signal },
    );
  }

  /** Resolves when every apiserver being probed has ended its first round (the one-shot commands). */
  async probed(): Promise<void> {
    await Promise.all(this.pollers.probing().map((p) => p.first));
  }

  /** One list of every membership source (as the watch would), so that members are known before the first request. */
  async listSources(opts: { healthyOnly?: boolean } = {}): Promise<string | null> {
    const problems: string[] = [];
    for (const src of this.sources) {
      if (this.sourceTables.get(src)?.synced) continue;
      const w = sourceWatch(src, this.membership.nodeSelector);
      const problem = await listThroughMembers(
        `source ${src}`,
        this.pollers.watchCandidates(),
        w.path,
        w.labelSelector,
        (items) => this.onSourceChange(src, { type: 'RELIST', items }),
        { ...opts, signal: this.abort.signal },
      );
      if (problem !== null) problems.push(problem);
    }
    return problems.length === 0 ? null : problems.join('; ');
  }

  /** A membership source changed (a list, or one watch event): the members are reconciled with it. */
  private onSourceChange(source: MembershipSource, change: WatchChange): void {
    if (this.closing) return;
    const r = withSourceChange(this.sourceTables, source, change, this.sourceSettings);
    if (r.skipped > 0) this.log.warn({ source, skipped: r.skipped }, 'membership source: skipped an object that could not be read');
    if (r.tables === this.sourceTables) return;
    this.sourceTables = r.tables;
    this.reconcileMembers();
  }

  /** Brings the pollers in line with what the seed and the sources call for (membership/lifecycle.ts); true when routing and Envoy were told. */
  private reconcileMembers(): boolean {
    const desired = desiredMembers(membershipInput(this.sourceTables, this.seeds, this.membership.template));
    const plan = reconcile(this.pollers.records(), desired, this.now(), this.membership.drainTimeout);
    for (const a of plan.actions)
      if (a.kind === 'keep' && !this.drainPostponed)
        this.log.warn({ server: a.name }, 'apiserver left every source, but no other member is ready: kept until one is');
    this.drainPostponed = plan.postponed;
    for (const a of plan.actions) this.pollers.apply(a, this.starting !== null);
    if (!plan.changed) return false;
    this.announce(plan.drained ? 'routing first' : 'together');
    return true;
  }

  /** The membership as it stands: the lease table judged against the members, and the apiservers being probed. */
  private currentMembership(): Membership {
    return membershipNow(this.pollers.all(), this.leases, this.leaseLivenessMs);
  }

  /** The identity Leases changed (a list, or one watch event): a new snapshot with the new membership. */
  private onLeaseChange(change: WatchChange): void {
    if (this.closing) return;
    const { table, skipped } = applyLeaseChange(this.leases, change);
    if (skipped > 0) {
      this.leaseSkipped += skipped;
      this.log.warn({ skipped: this.leaseSkipped }, 'identity leases: skipped an object that is not a kube-apiserver identity Lease');
    }
    if (table === this.leases) return;
    this.leases = table;
    // Every apiserver renews its lease every 10 s: a member's renewal changes no decision, so it
    // publishes no snapshot. An unmatched one's does (its liveness moves with it).
    if (sameMembership(this.currentMembership(), this.snapshotOptions.membership)) return;
    void this.publisher.request();
  }

  /** A snapshot built: routing and every listener see it. */
  private published(snap: Snapshot): void {
    this.unmatchedLogged = logUnmatched(this.log, snap, this.now(), this.unmatchedLogged);
    this.snapshots.emit(snap);
    this.watcher?.reconsider();
  }

  private onWatchEvent(kind: string, type: string): void {
    if (this.closing) return;
    this.log.debug({ kind, type }, 'watch event; refreshing discovery');
    this.refresher.afterWatchEvent();
  }
}
