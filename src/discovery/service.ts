// The discovery poller: one independent loop per apiserver, a CRD/APIService watch that triggers
// immediate refreshes, and the swap of immutable snapshots that routing reads.
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { pino, type Logger } from 'pino';
import type { Config } from '../config.js';
import type { ServerState, ServerView, Snapshot } from './types.js';
import { type FetchLike, type ServerTarget, DiscoveryClient, defaultFetch, getText } from './client.js';
import { type ServerCredentials, createCredentials } from './credentials.js';
import { diffViews } from './parse.js';
import { apiserverIdentity } from './apiserver-identity.js';
import { buildSnapshot, initialSnapshot, unprobedState, type SnapshotOptions } from './snapshot.js';
import { ApiWatcher, WATCHED_KINDS, type WatchCandidate, type WatchChange } from './watch.js';
import {
  applyLeaseChange,
  EMPTY_LEASE_TABLE,
  IDENTITY_LEASE_SELECTOR,
  IDENTITY_LEASES_PATH,
  liveUnmatched,
  membershipOf,
  type IdentityLeaseTable,
  type Membership,
} from './identity-leases.js';

/** The parts of the config discovery reads (the rest of Config is not needed, handy in tests). */
export type DiscoveryConfig = Pick<Config, 'apiservers' | 'discovery'>;

export interface DiscoveryServiceOptions {
  /** Epoch ms clock for lastSuccessAt. */
  readonly now?: () => number;
  readonly logger?: Logger;
  /** Replaces undici's fetch (tests). */
  readonly fetchImpl?: FetchLike;
  /** First retry delay after a failure; doubles per failure, capped at discovery.interval. */
  readonly minRetryMs?: number;
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
}

export type RoundListener = (event: DiscoveryRoundEvent) => void;

/**
 * After a watch event, discovery is fetched at once and again after these delays: a real
 * apiserver publishes a new CRD in discovery shortly after the watch event, not with it.
 */
const WATCH_FOLLOW_UPS_MS: readonly number[] = [250, 750];

interface Poller {
  state: ServerState;
  readonly client: DiscoveryClient;
  readonly target: ServerTarget;
  timer: NodeJS.Timeout | null;
  running: Promise<void> | null;
  again: boolean;
  firstDone: () => void;
  readonly first: Promise<void>;
  /** Requests of the round in progress, recorded by the client's fetch. */
  requests: DiscoveryRequestRecord[];
}

export class DiscoveryService {
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly pollers: Poller[];
  private readonly credentials: ServerCredentials[];
  private readonly abort = new AbortController();
  private readonly listeners = new Set<SnapshotListener>();
  private readonly roundListeners = new Set<RoundListener>();
  private readonly watcher: ApiWatcher | null;
  private readonly intervalMs: number;
  private readonly minRetryMs: number;
  private snapshot: Snapshot;
  /** How snapshots are built: the /apis merge is ordered by each apiserver's identity (from its hostname). */
  private snapshotOptions: SnapshotOptions;
  /** The members' identities (lease names), and the identity Leases as last listed and watched. */
  private readonly memberIdentities: ReadonlySet<string>;
  private readonly leaseLivenessMs: number;
  private leases: IdentityLeaseTable = EMPTY_LEASE_TABLE;
  /** Lease objects that were not identity leases: logged and counted, never fatal. */
  private leaseSkipped = 0;
  /** Names of the live unmatched identities last logged, so that a change is logged once. */
  private unmatchedLogged = '';
  private starting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  private refreshQueued = false;
  private followUps: NodeJS.Timeout[] = [];

  constructor(config: DiscoveryConfig, opts: DiscoveryServiceOptions = {}) {
    // Every in-flight request listens on it (legacy servers fetch many group/versions at once).
    setMaxListeners(0, this.abort.signal);
    this.now = opts.now ?? Date.now;
    this.log = opts.logger ?? pino({ level: 'silent' });
    this.intervalMs = config.discovery.interval;
    this.minRetryMs = Math.min(opts.minRetryMs ?? 250, this.intervalMs);
    this.credentials = config.apiservers.map((s) => createCredentials(s));
    this.pollers = config.apiservers.map((s, i) => {
      // The watch uses this target; the poller's client a recording copy of it.
      const target: ServerTarget = {
        name: s.name,
        url: s.url,
        credentials: this.credentials[i] as ServerCredentials,
        timeoutMs: config.discovery.timeout,
        ...(opts.fetchImpl ? { fetchImpl: opts.fetchImpl } : {}),
      };
      let firstDone: () => void = () => undefined;
      const first = new Promise<void>((resolve) => (firstDone = resolve));
      const poller: Poller = {
        state: unprobedState(s),
        client: new DiscoveryClient({
          ...target,
          fetchImpl: recordingFetch(opts.fetchImpl ?? defaultFetch, (r) => poller.requests.push(r)),
        }),
        target,
        timer: null,
        running: null,
        again: false,
        firstDone,
        first,
        requests: [],
      };
      return poller;
    });
    const hostnames = new Map(config.apiservers.map((s) => [s.name, s.hostname ?? s.name]));
    const identityOf = (name: string): string => apiserverIdentity(hostnames.get(name) ?? name);
    this.memberIdentities = new Set(config.apiservers.map((s) => identityOf(s.name)));
    this.leaseLivenessMs = config.discovery.identityLeaseLiveness;
    this.snapshotOptions = { identityOf, membership: membershipOf(this.leases, this.memberIdentities, this.leaseLivenessMs) };
    this.snapshot = initialSnapshot(config.apiservers, this.snapshotOptions);
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
          ],
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
      for (const p of this.pollers) this.kick(p);
      this.watcher?.start();
      await Promise.all(this.pollers.map((p) => p.first));
      // With the watch on, know the membership before the first request: until the leases are
      // listed, the configured list is trusted, and an apiserver it lacks could get a false 404.
      if (this.watcher !== null && !this.leases.synced && !this.closing) {
        // Only through apiservers that just answered: a dead one would hold the start for its timeout.
        const problem = await this.listIdentityLeases({ healthyOnly: true });
        if (problem !== null)
          this.log.warn({ problem }, 'identity leases: membership not verified at start; the configured apiservers are assumed to be all');
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
      for (const p of this.pollers) {
        if (p.timer) clearTimeout(p.timer);
        p.timer = null;
        p.firstDone();
      }
      await this.watcher?.close();
      await Promise.all(this.pollers.map((p) => p.running?.catch(() => undefined)));
      await Promise.all(this.credentials.map((c) => c.close()));
      this.listeners.clear();
      this.roundListeners.clear();
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

  /** Fetch every server again now (also one in failure backoff). Bursts coalesce into one round per server. */
  refresh(): void {
    if (this.closing || !this.starting || this.refreshQueued) return;
    this.refreshQueued = true;
    setImmediate(() => {
      this.refreshQueued = false;
      for (const p of this.pollers) this.kick(p);
    });
  }

  private kick(p: Poller): void {
    if (this.closing) return;
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
        if (this.closing) return;
        if (p.again) {
          p.again = false;
          this.kick(p);
          return;
        }
        const f = p.state.consecutiveFailures;
        const delay = f === 0 ? this.intervalMs : Math.min(this.intervalMs, this.minRetryMs * 2 ** Math.min(f - 1, 20));
        p.timer = setTimeout(() => {
          p.timer = null;
          this.kick(p);
        }, delay);
        p.timer.unref();
      });
  }

  private async round(p: Poller): Promise<void> {
    const signal = this.abort.signal;
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
    if (this.closing) return;
    const prev = p.state;
    const next: ServerState = Object.freeze(
      result.view
        ? { ...prev, view: result.view, lastSuccessAt: this.now(), consecutiveFailures: 0, lastError: null, ready }
        : { ...prev, consecutiveFailures: prev.consecutiveFailures + 1, lastError: result.error, ready },
    );
    p.state = next;
    this.logTransition(prev, next);
    this.publish();
    if (this.roundListeners.size === 0) return;
    const event: DiscoveryRoundEvent = {
      server: next.name,
      startedAt,
      durationMs: performance.now() - t0,
      requests: p.requests,
      before: prev,
      after: next,
      snapshot: this.snapshot,
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
   * One list of the identity Leases through a member, ready ones first: for the one-shot commands
   * (explain, skew), which do not watch. A failure on every member leaves the membership not
   * synced (the config's list is trusted then) and says why.
   */
  async listIdentityLeases(opts: { healthyOnly?: boolean } = {}): Promise<string | null> {
    const order = [...this.watchCandidates()]
      .filter((c) => !opts.healthyOnly || c.health === 'healthy')
      .sort((x, y) => (x.health === 'healthy' ? 0 : 1) - (y.health === 'healthy' ? 0 : 1));
    const problems: string[] = [];
    for (const c of order) {
      try {
        const q = new URLSearchParams({ labelSelector: IDENTITY_LEASE_SELECTOR });
        const res = await getText(c.target, `${IDENTITY_LEASES_PATH}?${q}`, { accept: 'application/json', signal: this.abort.signal });
        const items = (JSON.parse(res.text) as { items?: unknown } | null)?.items;
        if (!Array.isArray(items)) throw new Error('the list has no items');
        this.onLeaseChange({ type: 'RELIST', items });
        return null;
      } catch (err) {
        problems.push(`${c.target.name}: ${(err as Error).message}`);
      }
    }
    return `identity leases could not be listed (${problems.join('; ') || 'no apiserver'})`;
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
    const membership = membershipOf(table, this.memberIdentities, this.leaseLivenessMs);
    // Every apiserver renews its lease every 10 s: a member's renewal changes no decision, so it
    // publishes no snapshot. An unmatched one's does (its liveness moves with it).
    if (sameMembership(membership, this.snapshotOptions.membership)) return;
    this.snapshotOptions = { ...this.snapshotOptions, membership };
    this.publish();
  }

  private publish(): void {
    const snap = buildSnapshot(
      this.pollers.map((p) => p.state),
      this.snapshot.generation + 1,
      this.snapshot,
      this.snapshotOptions,
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

  private logViewChange(server: string, before: ServerView | null, after: ServerView): void {
    const d = diffViews(before, after);
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
  }

  private watchCandidates(): readonly WatchCandidate[] {
    return this.pollers.map((p) => {
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
    return {
      status,
      statusText: res.statusText,
      headers: res.headers,
      body: res.body,
      async text() {
        let bytes = 0;
        try {
          const text = await res.text();
          bytes = Buffer.byteLength(text);
          return text;
        } finally {
          record({ path, status, bytes, durationMs: performance.now() - t0 });
        }
      },
    };
  };
}
