// The discovery poller: one independent loop per member apiserver, a CRD/APIService watch that
// triggers immediate refreshes, the membership (the configured seed, the live sources, each learnt
// apiserver probed before it is routed to and drained before it is removed), and the swap of
// immutable snapshots that routing reads.
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { pino, type Logger } from 'pino';
import type { Config, MembershipSource } from '../config/schema.js';
import type { ServerState, ServerView, Snapshot } from './types.js';
import { type FetchLike, type ServerTarget, countedResponse, defaultFetch } from '../kube/transport.js';
import { DiscoveryClient } from './fetcher.js';
import { getText } from '../kube/requests.js';
import { type ServerCredentials, createCredentials } from '../kube/credentials.js';
import { diffViewsSteps } from './parse.js';
import { DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_DOWNLOAD_BACKOFF_MS } from '../constants.js';
import { MAX_DOCUMENT_BYTES_KEY } from '../kube/bounds.js';
import { bloatChange, bloatThreshold } from './document-bounds.js';
import { apiserverIdentity } from './apiserver-identity.js';
import { buildSnapshotSteps, initialSnapshot, unprobedState, type SnapshotOptions } from './snapshot.js';
import { runSliced, sliceBudget } from './slice-runner.js';
import { ApiWatcher, WATCHED_KINDS, type WatchCandidate, type WatchChange } from '../kube/watch.js';
import {
  applyLeaseChange,
  EMPTY_LEASE_TABLE,
  IDENTITY_LEASE_SELECTOR,
  IDENTITY_LEASES_PATH,
  liveUnmatched,
  membershipOf,
  type IdentityLeaseTable,
  type Membership,
  type ProbingMember,
} from './identity-leases.js';
import { applySourceChange, candidatesOf, emptySourceTable, sourceWatch, type SourceSettings, type SourceTable } from './member-sources.js';
import { desiredMembers, isCandidate, type MemberRole, type MemberSpec } from './members.js';

type DocumentBoundKeys = 'maxDocumentBytes' | 'maxDownloadBackoff';

/**
 * The parts of the config discovery reads (the rest of Config is not needed, handy in tests); the
 * document bounds default as in the config.
 */
export type DiscoveryConfig = Pick<Config, 'apiservers'> & {
  readonly discovery: Omit<Config['discovery'], DocumentBoundKeys> & Partial<Pick<Config['discovery'], DocumentBoundKeys>>;
} & Partial<Pick<Config, 'membership'>>;

/** One apiserver skewgate polls, and where it stands in the membership. */
export interface MemberEntry {
  readonly spec: MemberSpec;
  readonly role: MemberRole;
  /** Configured in apiservers[]. */
  readonly seed: boolean;
  /** The sources naming it ("config" for a seed no source contradicts). */
  readonly sources: readonly string[];
}

export type MembersListener = (members: readonly MemberEntry[]) => void;

export interface DiscoveryServiceOptions {
  /** Epoch ms clock for lastSuccessAt. */
  readonly now?: () => number;
  readonly logger?: Logger;
  /** Replaces undici's fetch (tests). */
  readonly fetchImpl?: FetchLike;
  /** First retry delay after a failure; doubles per failure, capped at discovery.interval. */
  readonly minRetryMs?: number;
  /**
   * How long a verified apiserver is `joining` before it is a member: Envoy is given its cluster
   * and routes first (envoy.xds), so that nothing is routed to it before Envoy can. Default 0.
   */
  readonly joinDelayMs?: number;
  /**
   * The members a previous run knew beyond the seed (envoy.xds's members.json): members from the
   * start, as the seed is, and drained like any member once the sources are listed without them.
   */
  readonly lastKnown?: readonly MemberSpec[];
  /** Longest piece of parsing or snapshot building between two turns of the event loop (slice-runner.ts). */
  readonly sliceBudgetMs?: number;
  /**
   * Awaited with each new snapshot before routing sees it (Envoy's fast-path routes withdrawn
   * where the new snapshot no longer allows them: envoy/fast-path-sync.ts). Bounded by its owner;
   * a failure is logged and the snapshot published anyway.
   */
  readonly beforePublish?: (next: Snapshot) => Promise<void>;
}

export type SnapshotListener = (snapshot: Snapshot) => void;

/** One HTTP request of a discovery round (/api, /apis, legacy group/versions, /readyz). */
export interface DiscoveryRequestRecord {
  /** URL path without query, e.g. "/apis" or "/apis/apps/v1". */
  readonly path: string;
  /** null when no response came (connect, TLS, timeout). */
  readonly status: number | null;
  /** Body bytes read (0 for a 304). */
  readonly bytes: number;
  readonly durationMs: number;
}

/**
 * What one discovery round of one apiserver did, for tracing and metrics (src/telemetry/): the
 * service itself knows nothing of OpenTelemetry.
 */
export interface DiscoveryRoundEvent {
  readonly server: string;
  /** Epoch ms when the round started. */
  readonly startedAt: number;
  readonly durationMs: number;
  readonly requests: readonly DiscoveryRequestRecord[];
  /** The server's state before and after the round; the same view object means no change. */
  readonly before: ServerState;
  readonly after: ServerState;
  /** The snapshot published after the round. */
  readonly snapshot: Snapshot;
  /**
   * Body bytes of /api, /apis and /openapi/v3 as last answered in full (a 304 keeps the size; a
   * body too large: what showed it). Always set by the service.
   */
  readonly documentBytes?: ReadonlyMap<string, number>;
}

export type RoundListener = (event: DiscoveryRoundEvent) => void;

/**
 * After a watch event, discovery is fetched at once and again after these delays: a real
 * apiserver publishes a new CRD in discovery shortly after the watch event, not with it.
 */
const WATCH_FOLLOW_UPS_MS: readonly number[] = [250, 750];

interface Poller {
  spec: MemberSpec;
  role: MemberRole;
  readonly seed: boolean;
  sources: readonly string[];
  state: ServerState;
  readonly client: DiscoveryClient;
  readonly target: ServerTarget;
  readonly credentials: ServerCredentials;
  /** Aborts this poller's requests when it is removed (and with the service). */
  readonly abort: AbortController;
  removed: boolean;
  /** The drain timer of a draining member, or the join timer of a joining one. */
  drainTimer: NodeJS.Timeout | null;
  timer: NodeJS.Timeout | null;
  running: Promise<void> | null;
  again: boolean;
  firstDone: () => void;
  readonly first: Promise<void>;
  /** Requests of the round in progress, recorded by the client's fetch. */
  requests: DiscoveryRequestRecord[];
  /** The OpenAPI v3 index problem last logged (null: readable). */
  openapiProblem: string | null;
  /** Documents above the bloat threshold, warned of once until they shrink. */
  bloated: ReadonlySet<string>;
}

export class DiscoveryService {
  private readonly now: () => number;
  private readonly log: Logger;
  /** Every apiserver polled, seeds first in config order, then learnt ones as they come. */
  private readonly pollers = new Map<string, Poller>();
  private readonly abort = new AbortController();
  private readonly seeds: readonly MemberSpec[];
  private readonly timeoutMs: number;
  private readonly fetchImpl: FetchLike | undefined;
  private readonly sources: readonly MembershipSource[];
  private readonly template: Config['membership']['template'];
  private readonly drainTimeoutMs: number;
  private readonly sourceSettings: SourceSettings;
  private readonly nodeSelector: string;
  private sourceTables: ReadonlyMap<MembershipSource, SourceTable>;
  private readonly memberListeners = new Set<MembersListener>();
  /** A member's identity changed (its hostname was learnt): the next merge must not be reused. */
  private identitiesChanged = false;
  /** A member left every source while no other was ready: reconsidered after each round. */
  private drainPostponed = false;
  private readonly joinDelayMs: number;
  private readonly listeners = new Set<SnapshotListener>();
  private readonly roundListeners = new Set<RoundListener>();
  private readonly watcher: ApiWatcher | null;
  private readonly intervalMs: number;
  private readonly minRetryMs: number;
  private readonly sliceBudgetMs: number | undefined;
  private readonly beforePublish: ((next: Snapshot) => Promise<void>) | undefined;
  private readonly maxDocumentBytes: number;
  private readonly maxDownloadBackoffMs: number;
  private snapshot: Snapshot;
  /** How snapshots are built: the /apis merge is ordered by each apiserver's identity (from its hostname). */
  private snapshotOptions: SnapshotOptions;
  /** The identity Leases as last listed and watched. */
  private readonly leaseLivenessMs: number;
  private leases: IdentityLeaseTable = EMPTY_LEASE_TABLE;
  /** Lease objects that were not identity leases: logged and counted, never fatal. */
  private leaseSkipped = 0;
  /** Names of the live unmatched identities last logged, so that a change is logged once. */
  private unmatchedLogged = '';
  private starting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  private refreshQueued = false;
  /** The snapshot build running, and the one queued after it (publish()). */
  private publishing: Promise<void> | null = null;
  private publishAgain: Promise<void> | null = null;
  private followUps: NodeJS.Timeout[] = [];

  constructor(config: DiscoveryConfig, opts: DiscoveryServiceOptions = {}) {
    // Every in-flight request listens on it (legacy servers fetch many group/versions at once).
    setMaxListeners(0, this.abort.signal);
    this.now = opts.now ?? Date.now;
    this.log = opts.logger ?? pino({ level: 'silent' });
    this.intervalMs = config.discovery.interval;
    this.timeoutMs = config.discovery.timeout;
    this.fetchImpl = opts.fetchImpl;
    this.minRetryMs = Math.min(opts.minRetryMs ?? 250, this.intervalMs);
    this.sliceBudgetMs = opts.sliceBudgetMs;
    this.beforePublish = opts.beforePublish;
    this.maxDocumentBytes = config.discovery.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES;
    this.maxDownloadBackoffMs = config.discovery.maxDownloadBackoff ?? DEFAULT_MAX_DOWNLOAD_BACKOFF_MS;
    this.joinDelayMs = opts.joinDelayMs ?? 0;
    this.seeds = config.apiservers;
    const m = config.membership;
    this.sources = m ? [...new Set(m.sources)] : [];
    this.template = m?.template ?? {};
    this.drainTimeoutMs = m?.drainTimeout ?? 30_000;
    this.sourceSettings = { nodePort: m?.port ?? 6443 };
    this.nodeSelector = m?.nodeSelector ?? 'node-role.kubernetes.io/control-plane';
    this.sourceTables = new Map(this.sources.map((src) => [src, emptySourceTable(src)] as const));
    for (const s of config.apiservers) this.addPoller(s, 'member', true, ['config']);
    for (const s of opts.lastKnown ?? []) if (!this.pollers.has(s.name)) this.addPoller(s, 'member', false, ['last-known']);
    this.leaseLivenessMs = config.discovery.identityLeaseLiveness;
    this.snapshotOptions = { identityOf: (name) => this.identityOf(name), membership: this.currentMembership() };
    this.snapshot = initialSnapshot(config.apiservers, this.snapshotOptions);
    const sourceKinds = this.sources.map((src) => ({
      ...sourceWatch(src, this.nodeSelector),
      track: (c: WatchChange) => this.onSourceChange(src, c),
    }));
    this.watcher = config.discovery.watch
      ? new ApiWatcher(
          {
            candidates: () => this.watchCandidates(),
            onChange: (kind, type) => this.onWatchEvent(kind, type),
            logger: this.log.child({ part: 'watch' }),
          },
          [
            ...WATCHED_KINDS,
            { kind: 'Lease', path: IDENTITY_LEASES_PATH, labelSelector: IDENTITY_LEASE_SELECTOR, track: (c) => this.onLeaseChange(c) },
            ...sourceKinds,
          ],
        )
      : null;
  }

  /** The identity (lease name) of a member: from its hostname, else its name. */
  private identityOf(name: string): string {
    const spec = this.pollers.get(name)?.spec;
    return apiserverIdentity(spec?.hostname ?? name);
  }

  private addPoller(spec: MemberSpec, role: MemberRole, seed: boolean, sources: readonly string[]): Poller {
    const credentials = createCredentials(spec);
    const abort = new AbortController();
    setMaxListeners(0, abort.signal);
    // The watch uses this target; the poller's client a recording copy of it.
    const target: ServerTarget = {
      name: spec.name,
      url: spec.url,
      credentials,
      timeoutMs: this.timeoutMs,
      maxDocumentBytes: this.maxDocumentBytes,
      ...(this.fetchImpl ? { fetchImpl: this.fetchImpl } : {}),
    };
    let firstDone: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (firstDone = resolve));
    const poller: Poller = {
      spec,
      role,
      seed,
      sources,
      state: unprobedState(spec),
      client: new DiscoveryClient({
        ...target,
        fetchImpl: recordingFetch(this.fetchImpl ?? defaultFetch, (r) => poller.requests.push(r)),
        ...(this.sliceBudgetMs === undefined ? {} : { sliceBudgetMs: this.sliceBudgetMs }),
        intervalMs: this.intervalMs,
        maxBackoffMs: this.maxDownloadBackoffMs,
        now: this.now,
      }),
      target,
      credentials,
      abort,
      removed: false,
      drainTimer: null,
      timer: null,
      running: null,
      again: false,
      firstDone,
      first,
      requests: [],
      openapiProblem: null,
      bloated: new Set(),
    };
    this.pollers.set(spec.name, poller);
    return poller;
  }

  /**
   * Starts polling (and the watch). Resolves when every server's first round has ended, well or
   * not, and (with the watch) the identity Leases were listed once or could not be.
   */
  start(): Promise<void> {
    if (this.closing) return Promise.reject(new Error('discovery service is closed'));
    this.starting ??= (async () => {
      for (const p of this.pollers.values()) this.kick(p);
      this.watcher?.start();
      await Promise.all([...this.pollers.values()].map((p) => p.first));
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
      for (const t of this.followUps) clearTimeout(t);
      this.followUps = [];
      const pollers = [...this.pollers.values()];
      for (const p of pollers) {
        if (p.timer) clearTimeout(p.timer);
        if (p.drainTimer) clearTimeout(p.drainTimer);
        p.timer = null;
        p.drainTimer = null;
        p.firstDone();
      }
      await this.watcher?.close();
      await Promise.all(pollers.map((p) => p.running?.catch(() => undefined)));
      await this.published();
      await Promise.all(pollers.map((p) => p.credentials.close()));
      this.listeners.clear();
      this.roundListeners.clear();
      this.memberListeners.clear();
    })();
    return this.closing;
  }

  /** The current snapshot; before the first round, every server with view null. */
  current(): Snapshot {
    return this.snapshot;
  }

  /** Called with every new snapshot; returns the unsubscribe function. */
  onChange(listener: SnapshotListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Called after every round of every server, well or not; returns the unsubscribe function. */
  onRound(listener: RoundListener): () => void {
    this.roundListeners.add(listener);
    return () => {
      this.roundListeners.delete(listener);
    };
  }

  /** The members to send a request through, healthy ones first (the kubernetes Service publisher). */
  targets(): readonly ServerTarget[] {
    return [...this.watchCandidates()]
      .sort((x, y) => (x.health === 'healthy' ? 0 : 1) - (y.health === 'healthy' ? 0 : 1))
      .map((c) => c.target);
  }

  /** Every apiserver polled and its role; the Envoy clusters follow this (src/envoy/xds-files.ts). */
  members(): readonly MemberEntry[] {
    return Object.freeze(
      [...this.pollers.values()].map((p) => Object.freeze({ spec: p.spec, role: p.role, seed: p.seed, sources: p.sources })),
    );
  }

  /** Called whenever a member is learnt, admitted, drained or removed; returns the unsubscribe function. */
  onMembers(listener: MembersListener): () => void {
    this.memberListeners.add(listener);
    return () => {
      this.memberListeners.delete(listener);
    };
  }

  private emitMembers(): void {
    const members = this.members();
    for (const l of this.memberListeners) {
      try {
        l(members);
      } catch (err) {
        this.log.error({ err: String(err) }, 'members listener threw');
      }
    }
  }

  /** Fetch every server again now (also one in failure backoff). Bursts coalesce into one round per server. */
  refresh(): void {
    if (this.closing || !this.starting || this.refreshQueued) return;
    this.refreshQueued = true;
    setImmediate(() => {
      this.refreshQueued = false;
      for (const p of this.pollers.values()) this.kick(p);
    });
  }

  private kick(p: Poller): void {
    if (this.closing || p.removed) return;
    if (p.running) {
      // Whatever the running round saw may predate the reason for this kick: run once more after it.
      p.again = true;
      return;
    }
    if (p.timer) clearTimeout(p.timer);
    p.timer = null;
    p.running = this.round(p)
      .catch((err: unknown) => this.log.error({ server: p.state.name, err: String(err) }, 'discovery round crashed'))
      .finally(() => {
        p.running = null;
        p.firstDone();
        if (this.closing || p.removed) return;
        if (p.again) {
          p.again = false;
          this.kick(p);
          return;
        }
        const f = p.state.consecutiveFailures;
        // Rounds retry fast (a restarted apiserver is back within a second); what a failing round
        // may cost is bounded in the client: a bad document is a 304, its downloads back off.
        const delay = f === 0 ? this.intervalMs : Math.min(this.intervalMs, this.minRetryMs * 2 ** Math.min(f - 1, 20));
        p.timer = setTimeout(() => {
          p.timer = null;
          this.kick(p);
        }, delay);
        p.timer.unref();
      });
  }

  private async round(p: Poller): Promise<void> {
    const signal = AbortSignal.any([this.abort.signal, p.abort.signal]);
    const startedAt = this.now();
    const t0 = performance.now();
    p.requests = [];
    const [result, ready] = await Promise.all([
      p.client.fetchView(signal).then(
        (view) => ({ view, error: null }),
        (err: unknown) => ({ view: null, error: err instanceof Error ? err.message : String(err) }),
      ),
      p.client.probeReady(signal),
    ]);
    if (this.closing || p.removed) return;
    const prev = p.state;
    const next: ServerState = Object.freeze(
      result.view
        ? { ...prev, view: result.view, lastSuccessAt: this.now(), consecutiveFailures: 0, lastError: null, ready }
        : { ...prev, consecutiveFailures: prev.consecutiveFailures + 1, lastError: result.error, ready },
    );
    p.state = next;
    this.logTransition(prev, next);
    // Only beside a good round: a server that cannot be reached at all is logged once, above.
    const openapiProblem = result.view ? p.client.openapiProblem() : p.openapiProblem;
    if (openapiProblem !== p.openapiProblem) {
      // Not a discovery failure: OpenAPI documents keep following the last good index.
      if (openapiProblem)
        this.log.warn({ server: next.name, err: openapiProblem }, 'OpenAPI v3 index unreadable; keeping the last good one');
      else this.log.info({ server: next.name }, 'OpenAPI v3 index readable again');
      p.openapiProblem = openapiProblem;
    }
    const documentBytes = p.client.documentSizes();
    this.logBloat(p, documentBytes);
    const admitted = p.role === 'probing' && this.admit(p);
    // An admitted member (or a round after a postponed drain) may let a leaving one drain now.
    const reconciled = (admitted || this.drainPostponed) && this.reconcileMembers();
    const published = reconciled ? this.published() : this.publish();
    if (admitted && !reconciled) this.emitMembers();
    await published;
    if (this.closing || p.removed) return;
    if (this.roundListeners.size === 0) return;
    const event: DiscoveryRoundEvent = {
      server: next.name,
      startedAt,
      durationMs: performance.now() - t0,
      requests: p.requests,
      before: prev,
      after: next,
      snapshot: this.snapshot,
      documentBytes,
    };
    for (const l of this.roundListeners) {
      try {
        l(event);
      } catch (err) {
        this.log.error({ err: String(err) }, 'round listener threw');
      }
    }
  }

  /**
   * A learnt apiserver becomes a member once it proved itself: its serving certificate verified
   * against the template's CA and server name (every fetch is verified), a discovery view fetched,
   * /readyz 200. Until then it is never routed to, and its identity stays unmatched.
   */
  private admit(p: Poller): boolean {
    const s = p.state;
    if (s.view === null || s.consecutiveFailures > 0 || s.ready !== true) {
      if (s.consecutiveFailures === 1 || s.ready === false)
        this.log.debug({ server: p.spec.name, url: p.spec.url, err: s.lastError, ready: s.ready }, 'learnt apiserver not verified yet');
      return false;
    }
    if (this.joinDelayMs === 0) return this.join(p);
    p.role = 'joining';
    this.log.info(
      { server: p.spec.name, url: p.spec.url, joinDelayMs: this.joinDelayMs },
      'learnt apiserver verified; joining (Envoy first)',
    );
    p.drainTimer = setTimeout(() => {
      p.drainTimer = null;
      if (p.removed || p.role !== 'joining' || this.closing) return;
      this.join(p);
      // It may let a leaving member drain now.
      if (!this.reconcileMembers()) {
        void this.publish();
        this.emitMembers();
      }
    }, this.joinDelayMs);
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

  /**
   * One list of the identity Leases through a member, ready ones first: for the one-shot commands
   * (explain, skew), which do not watch. A failure on every member leaves the membership not
   * synced (the config's list is trusted then) and says why.
   */
  listIdentityLeases(opts: { healthyOnly?: boolean } = {}): Promise<string | null> {
    return this.listThroughMembers(
      'identity leases',
      IDENTITY_LEASES_PATH,
      IDENTITY_LEASE_SELECTOR,
      (items) => this.onLeaseChange({ type: 'RELIST', items }),
      opts,
    );
  }

  /** Resolves when every apiserver being probed has ended its first round (the one-shot commands). */
  async probed(): Promise<void> {
    await Promise.all([...this.pollers.values()].filter((p) => p.role === 'probing').map((p) => p.first));
  }

  /** One list of every membership source (as the watch would), so that members are known before the first request. */
  async listSources(opts: { healthyOnly?: boolean } = {}): Promise<string | null> {
    const problems: string[] = [];
    for (const src of this.sources) {
      if (this.sourceTables.get(src)?.synced) continue;
      const w = sourceWatch(src, this.nodeSelector);
      const problem = await this.listThroughMembers(
        `source ${src}`,
        w.path,
        w.labelSelector,
        (items) => this.onSourceChange(src, { type: 'RELIST', items }),
        opts,
      );
      if (problem !== null) problems.push(problem);
    }
    return problems.length === 0 ? null : problems.join('; ');
  }

  private async listThroughMembers(
    what: string,
    path: string,
    labelSelector: string,
    apply: (items: readonly unknown[]) => void,
    opts: { healthyOnly?: boolean },
  ): Promise<string | null> {
    const order = [...this.watchCandidates()]
      .filter((c) => !opts.healthyOnly || c.health === 'healthy')
      .sort((x, y) => (x.health === 'healthy' ? 0 : 1) - (y.health === 'healthy' ? 0 : 1));
    const problems: string[] = [];
    for (const c of order) {
      try {
        const q = new URLSearchParams({ labelSelector });
        const res = await getText(c.target, `${path}?${q}`, { accept: 'application/json', signal: this.abort.signal });
        const items = (JSON.parse(res.text) as { items?: unknown } | null)?.items;
        if (!Array.isArray(items)) throw new Error('the list has no items');
        apply(items);
        return null;
      } catch (err) {
        problems.push(`${c.target.name}: ${(err as Error).message}`);
      }
    }
    return `${what} could not be listed (${problems.join('; ') || 'no apiserver'})`;
  }

  /** A membership source changed (a list, or one watch event): the members are reconciled with it. */
  private onSourceChange(source: MembershipSource, change: WatchChange): void {
    if (this.closing) return;
    const before = this.sourceTables.get(source) ?? emptySourceTable(source);
    const { table, skipped } = applySourceChange(before, change, this.sourceSettings);
    if (skipped > 0) this.log.warn({ source, skipped }, 'membership source: skipped an object that could not be read');
    if (table === before) return;
    const tables = new Map(this.sourceTables);
    tables.set(source, table);
    this.sourceTables = tables;
    this.reconcileMembers();
  }

  /**
   * Brings the pollers in line with what the seed and the sources call for: a new address gets a
   * probing poller, a member that left every source is drained for membership.drainTimeout (no
   * new request; open ones may finish), then removed; one that comes back is a member again.
   */
  private reconcileMembers(): boolean {
    this.drainPostponed = false;
    const tables = [...this.sourceTables.values()];
    const desired = desiredMembers({
      seeds: this.seeds,
      candidates: candidatesOf(tables),
      enabled: this.sources.length > 0,
      synced: tables.every((t) => t.synced),
      template: this.template,
    });
    const want = new Set(desired.map((d) => d.spec.name));
    let changed = false;
    let drained = false;
    for (const d of desired) {
      const p = this.pollers.get(d.spec.name);
      if (p === undefined) {
        const np = this.addPoller(d.spec, d.seed ? 'member' : 'probing', d.seed, d.sources);
        this.log.info(
          { server: d.spec.name, url: d.spec.url, sources: d.sources, hostname: d.spec.hostname ?? null },
          d.seed ? 'apiserver back in the members' : 'apiserver learnt; probing it',
        );
        if (this.starting) this.kick(np);
        changed = true;
        continue;
      }
      p.sources = d.sources;
      if (p.role === 'draining') {
        if (p.drainTimer) clearTimeout(p.drainTimer);
        p.drainTimer = null;
        p.role = 'member';
        this.log.info({ server: p.spec.name, sources: d.sources }, 'draining apiserver named by a source again: a member');
        changed = true;
      }
      if ((d.spec.hostname ?? null) !== (p.spec.hostname ?? null)) {
        p.spec = d.spec;
        this.identitiesChanged = true;
        changed = true;
      }
    }
    for (const p of [...this.pollers.values()]) {
      if (want.has(p.spec.name)) continue;
      if (isCandidate(p.role)) {
        this.log.info({ server: p.spec.name }, 'learnt apiserver left every source before it was a member');
        this.removePoller(p);
        changed = true;
      } else if (p.role === 'member') {
        // Never drain the last ready member: a control plane without one is a source gone wrong.
        const others = [...this.pollers.values()].some(
          (o) => o !== p && o.role === 'member' && o.state.ready === true && want.has(o.spec.name),
        );
        if (!others) {
          if (!this.drainPostponed)
            this.log.warn({ server: p.spec.name }, 'apiserver left every source, but no other member is ready: kept until one is');
          this.drainPostponed = true;
          continue;
        }
        p.role = 'draining';
        p.drainTimer = setTimeout(() => {
          p.drainTimer = null;
          this.log.info({ server: p.spec.name }, 'drained apiserver removed');
          this.removePoller(p);
          // Routing stops naming it before Envoy is told to drop its cluster.
          void this.publish().then(() => this.emitMembers());
        }, this.drainTimeoutMs);
        p.drainTimer.unref();
        this.log.warn(
          { server: p.spec.name, url: p.spec.url, drainTimeoutMs: this.drainTimeoutMs },
          'apiserver left every source: draining',
        );
        changed = true;
        drained = true;
      }
    }
    if (!changed) return false;
    // A draining member loses its Envoy route (envoy/xds.ts routes members and joiners only):
    // routing must stop naming it first, or a request routed by the snapshot still published
    // meets a route already gone (503 upstream_unknown_to_envoy instead of the drain's own 503).
    if (drained) void this.publish().then(() => this.emitMembers());
    else {
      void this.publish();
      this.emitMembers();
    }
    return true;
  }

  private removePoller(p: Poller): void {
    p.removed = true;
    if (p.timer) clearTimeout(p.timer);
    if (p.drainTimer) clearTimeout(p.drainTimer);
    p.timer = null;
    p.drainTimer = null;
    p.abort.abort();
    p.firstDone();
    this.pollers.delete(p.spec.name);
    void (p.running ?? Promise.resolve()).catch(() => undefined).then(() => p.credentials.close());
  }

  /** The membership as it stands: the lease table judged against the members, and the apiservers being probed. */
  private currentMembership(): Membership {
    const members = [...this.pollers.values()].filter((p) => !isCandidate(p.role));
    const identities = new Set(members.map((p) => apiserverIdentity(p.spec.hostname ?? p.spec.name)));
    const probing: ProbingMember[] = [...this.pollers.values()]
      .filter((p) => isCandidate(p.role))
      .map((p) => ({
        name: p.spec.name,
        url: p.spec.url,
        sources: p.sources,
        problem:
          p.role === 'joining'
            ? 'verified; Envoy is being given its routes'
            : (p.state.lastError ?? (p.state.ready === false ? '/readyz is not ok' : null)),
      }));
    return membershipOf(this.leases, identities, this.leaseLivenessMs, probing);
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
    void this.publish();
  }

  /**
   * Builds the next snapshot from the servers' states as they are now and publishes it. The build
   * runs in slices (slice-runner.ts): a change of tens of thousands of resources never holds the
   * event loop that answers Envoy, which keeps routing on the current snapshot meanwhile. Builds
   * run one at a time; requests made during one coalesce into a single build after it. Resolves
   * once a snapshot that includes the states of the moment of the call is published.
   */
  private publish(): Promise<void> {
    if (this.publishing) {
      this.publishAgain ??= this.publishing.then(() => {
        this.publishAgain = null;
        return this.publish();
      });
      return this.publishAgain;
    }
    const run = this.buildAndPublish().finally(() => {
      this.publishing = null;
    });
    this.publishing = run;
    return run;
  }

  /** Settles when every build asked for so far is done. */
  private published(): Promise<void> {
    return this.publishAgain ?? this.publishing ?? Promise.resolve();
  }

  private async buildAndPublish(): Promise<void> {
    this.snapshotOptions = { ...this.snapshotOptions, membership: this.currentMembership() };
    const servers = [...this.pollers.values()]
      .filter((p) => !isCandidate(p.role))
      .map((p) => (p.role === 'draining' ? Object.freeze({ ...p.state, draining: true as const }) : p.state));
    // A member whose identity changed reorders the merge: build it afresh.
    const previous = this.identitiesChanged ? undefined : this.snapshot;
    this.identitiesChanged = false;
    const t0 = performance.now();
    let slices = 0;
    let longest = 0;
    let snap: Snapshot;
    try {
      snap = await runSliced(buildSnapshotSteps(servers, this.snapshot.generation + 1, previous, this.snapshotOptions), {
        signal: this.abort.signal,
        ...sliceBudget(this.sliceBudgetMs),
        onSlice: (ms) => {
          slices++;
          longest = Math.max(longest, ms);
        },
      });
    } catch (err) {
      if (!this.abort.signal.aborted) this.log.error({ err: String(err) }, 'snapshot build failed; routing keeps the current snapshot');
      return;
    }
    if (this.closing) return;
    if (this.beforePublish) {
      try {
        await this.beforePublish(snap);
      } catch (err) {
        this.log.error({ err: String(err), generation: snap.generation }, 'before-publish step failed; publishing the snapshot anyway');
      }
      if (this.closing) return;
    }
    if (slices > 1)
      this.log.debug(
        { generation: snap.generation, ms: Math.round(performance.now() - t0), slices, longestSliceMs: Math.round(longest * 10) / 10 },
        'snapshot built in slices',
      );
    this.snapshot = snap;
    this.logMembership(snap);
    for (const l of this.listeners) {
      try {
        l(snap);
      } catch (err) {
        this.log.error({ err: String(err) }, 'snapshot listener threw');
      }
    }
    this.watcher?.reconsider();
  }

  /** A line when the set of live apiservers skewgate cannot see changes (never one per renewal). */
  private logMembership(snap: Snapshot): void {
    const unseen = liveUnmatched(snap.membership, this.now());
    const names = unseen.map((l) => l.name).join(',');
    if (names === this.unmatchedLogged) return;
    this.unmatchedLogged = names;
    if (unseen.length === 0) {
      this.log.info({ synced: snap.membership.synced }, 'identity leases: every live apiserver is a configured member');
      return;
    }
    this.log.warn(
      { unmatched: unseen.map((l) => ({ identity: l.name, hostname: l.hostname })) },
      'identity leases: a live apiserver matches no configured member (no 404 is proven while it runs); ' +
        'add it to apiservers, or set apiservers[].hostname to the hostname its identity Lease names',
    );
  }

  /** One line per change of state, never one per poll. */
  private logTransition(prev: ServerState, next: ServerState): void {
    const server = next.name;
    if (prev.ready !== next.ready) {
      if (next.ready) this.log.info({ server }, 'apiserver ready');
      else this.log.warn({ server }, 'apiserver not ready (/readyz)');
    }
    if (prev.consecutiveFailures === 0 && next.consecutiveFailures > 0) {
      this.log.warn({ server, err: next.lastError, keptView: next.view !== null }, 'discovery failing');
    } else if (next.consecutiveFailures > 0) {
      this.log.debug({ server, err: next.lastError, failures: next.consecutiveFailures }, 'discovery still failing');
    } else if (prev.consecutiveFailures > 0) {
      this.log.info({ server, failures: prev.consecutiveFailures }, 'discovery recovered');
    }
    if (next.view && next.view !== prev.view) this.logViewChange(server, prev.view, next.view);
  }

  /** A warning when a document grows past half of discovery.maxDocumentBytes: once, not per round. */
  private logBloat(p: Poller, sizes: ReadonlyMap<string, number>): void {
    const warnBytes = bloatThreshold(this.maxDocumentBytes);
    const change = bloatChange(p.bloated, sizes, warnBytes);
    p.bloated = change.flagged;
    const limits = { warnBytes, maxDocumentBytes: this.maxDocumentBytes };
    for (const [document, bytes] of change.grew)
      this.log.warn(
        { server: p.spec.name, document, bytes, ...limits },
        `discovery document bloated: more than half of ${MAX_DOCUMENT_BYTES_KEY}; past it, discovery of this apiserver fails`,
      );
    for (const [document, bytes] of change.shrank)
      this.log.info({ server: p.spec.name, document, bytes, ...limits }, 'discovery document no longer bloated');
  }

  private logViewChange(server: string, before: ServerView | null, after: ServerView): void {
    // The diff walks every resource: in slices, and logged when done (never in the request path's way).
    void runSliced(diffViewsSteps(before, after), {
      signal: this.abort.signal,
      ...sliceBudget(this.sliceBudgetMs),
    }).then(
      (d) => {
        const fields = {
          server,
          source: after.source,
          resources: after.resources.size,
          groupVersions: after.groupVersions.size,
          added: d.added.length,
          removed: d.removed.length,
          changed: d.changed.length,
          // A sample, so an upgrade can be followed in the log without flooding it.
          ...(before ? { addedSample: d.added.slice(0, 10), removedSample: d.removed.slice(0, 10) } : {}),
        };
        this.log.info(fields, before ? 'discovery view changed' : 'discovery synced');
      },
      () => undefined, // closed meanwhile
    );
  }

  /** Watches and lists go through members only: a probing apiserver is not verified, a draining one is leaving. */
  private watchCandidates(): readonly WatchCandidate[] {
    return [...this.pollers.values()]
      .filter((p) => p.role === 'member')
      .map((p) => {
        const { ready, consecutiveFailures } = p.state;
        const health = ready === false || consecutiveFailures > 0 ? 'unhealthy' : ready === true ? 'healthy' : 'unknown';
        return { target: p.target, health };
      });
  }

  private onWatchEvent(kind: string, type: string): void {
    if (this.closing) return;
    this.log.debug({ kind, type }, 'watch event; refreshing discovery');
    this.refresh();
    for (const t of this.followUps) clearTimeout(t);
    this.followUps = WATCH_FOLLOW_UPS_MS.map((ms) => {
      const t = setTimeout(() => this.refresh(), ms);
      t.unref();
      return t;
    });
  }
}

function sameMembership(a: Membership, b: Membership | undefined): boolean {
  if (b === undefined || a.synced !== b.synced || a.unmatched.length !== b.unmatched.length) return false;
  if (a.probing.length !== b.probing.length || a.probing.some((p, i) => p.name !== b.probing[i]?.name)) return false;
  return a.unmatched.every((l, i) => {
    const o = b.unmatched[i];
    return o !== undefined && o.name === l.name && o.hostname === l.hostname && o.renewTime === l.renewTime;
  });
}

/** Wraps a fetch so that each request's path, status, body size and duration are recorded. */
function recordingFetch(inner: FetchLike, record: (r: DiscoveryRequestRecord) => void): FetchLike {
  return async (url, init) => {
    const t0 = performance.now();
    const path = new URL(url).pathname;
    let res;
    try {
      res = await inner(url, init);
    } catch (err) {
      record({ path, status: null, bytes: 0, durationMs: performance.now() - t0 });
      throw err;
    }
    const { status } = res;
    return countedResponse(res, (bytes) => record({ path, status, bytes, durationMs: performance.now() - t0 }));
  };
}
