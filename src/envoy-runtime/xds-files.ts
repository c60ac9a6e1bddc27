// Writes Envoy's filesystem xDS files (xds.ts renders them, xds-disk.ts puts them on disk) as the
// members and the fast-path table change, in an order that never leaves Envoy routing to a cluster
// it lacks — new clusters first, then the routes, then clusters that went away — and that takes
// fast-path routes, or members of their pool, away before anything else changes. A fast pool no
// route names any more stays a while for the requests already sent to it (FastRemnant).
import { mkdir } from 'node:fs/promises';
import type { Logger } from 'pino';
import { REQUEST_TIMEOUT_MS, type ApiServerConfig, type Config } from '../config/core/schema.js';
import type { MemberEntry } from '../membership/members.js';
import { fastClusterName, fastPoolClusterNames } from '../envoy/clusters.js';
import type { ClientTrust } from '../identity/core/client-identity.js';
import {
  CDS_FILE,
  fastTableFor,
  MEMBERS_FILE,
  RDS_FILE,
  renderClusters,
  renderRoutes,
  type FastRemnant,
  type XdsMembers,
} from '../envoy/xds.js';
import { fastClaimsCover, fastResourceCount, fastTableCovers, intersectFastTables, sameFastRequests } from '../routing/fast-table.js';
import { type FastTable } from '../routing/fast-path.js';
import { fileText, membersText, rdsFile } from './xds-disk.js';
import { writeAtomic } from '../util/atomic-file.js';
import { RouteRenders } from './route-renders.js';

/** Between the steps of one change: Envoy's file watch and cluster warming take milliseconds. */
export const XDS_SETTLE_MS = 250;
/**
 * How long a verified apiserver stays joining: its cluster written, XDS_SETTLE_MS, its routes
 * written, and Envoy's reload of them, with room to spare.
 */
export const XDS_JOIN_DELAY_MS = 1000;

function specsOf(entries: readonly MemberEntry[], role: MemberEntry['role'], cordon?: MemberEntry['cordon']): ApiServerConfig[] {
  return entries.filter((e) => e.role === role && e.cordon === cordon).map((e) => e.spec);
}

/** The members as Envoy's files place them; an operator's cordon takes a member out of the pool, a drain out of the routes too. */
export function xdsMembersOf(entries: readonly MemberEntry[]): XdsMembers {
  return {
    routable: specsOf(entries, 'member'),
    joining: entries.filter((e) => e.role === 'joining').map((e) => e.spec),
    cordoned: specsOf(entries, 'member', 'cordon'),
    draining: entries.filter((e) => e.role === 'draining').map((e) => e.spec),
    drained: specsOf(entries, 'member', 'drain'),
  };
}

/** Every member the files name, pool or not. */
function allOf(m: XdsMembers): readonly ApiServerConfig[] {
  return [...m.routable, ...(m.joining ?? []), ...(m.cordoned ?? []), ...m.draining, ...(m.drained ?? [])];
}

/**
 * Asks Envoy whether it runs the route table of this version (envoy/admin-routes.ts): true once
 * it does, false when that could not be seen in time.
 */
export type RoutesConfirm = (version: string) => Promise<boolean>;

/** Asks Envoy whether it runs (warmed) every one of these clusters: true once it does, false when not seen in time. */
export type ClustersConfirm = (names: readonly string[]) => Promise<boolean>;

export interface XdsWriterOptions {
  /** Between steps when Envoy cannot be asked (default XDS_SETTLE_MS). */
  readonly settleMs?: number;
  readonly confirm?: RoutesConfirm | null;
  readonly clustersConfirm?: ClustersConfirm | null;
  readonly now?: () => number;
  /** The client CA bundle skewgate verifies against: Envoy's Lua states certificates of these CAs (cert-identity.ts). */
  readonly clientTrust?: () => ClientTrust | null;
}

interface Written {
  readonly cds: string;
  readonly rds: string;
  readonly names: ReadonlySet<string>;
  readonly members: XdsMembers;
  /** The fast-path table in the routes written (null: none). */
  readonly fast: FastTable | null;
}

/**
 * Keeps the files in line with the members and the fast-path table; one change at a time, the
 * latest wins. A change that takes fast-path routes away is written first and on its own, and
 * waited for (confirmed by Envoy's admin where it can be asked, else XDS_SETTLE_MS), before
 * anything else changes: the pool never grows, and skewgate never routes by a snapshot, while
 * Envoy still balances by a table that does not hold any more.
 */
export class XdsWriter {
  private readonly dir: string;
  private written: Written | null = null;
  private pending: readonly MemberEntry[] | null = null;
  private last: readonly MemberEntry[] | null = null;
  private fast: FastTable | null = null;
  private readonly renders: RouteRenders;
  private running: Promise<void> | null = null;
  private closed = false;
  private readonly settleMs: number;
  private readonly confirm: RoutesConfirm | null;
  private readonly clustersConfirm: ClustersConfirm | null;
  private readonly now: () => number;
  /** Earlier fast tables by their pool's cluster name, and until when the cluster stays. */
  private readonly remnants = new Map<string, { readonly table: FastTable; readonly until: number }>();
  private remnantTimer: NodeJS.Timeout | null = null;

  constructor(
    private config: Config,
    private readonly log: Logger,
    opts: XdsWriterOptions = {},
  ) {
    const dir = config.envoy.xds?.directory;
    if (dir === undefined) throw new Error('XdsWriter needs envoy.xds.directory');
    this.dir = dir;
    this.settleMs = opts.settleMs ?? XDS_SETTLE_MS;
    this.confirm = opts.confirm ?? null;
    this.clustersConfirm = opts.clustersConfirm ?? null;
    this.now = opts.now ?? Date.now;
    this.renders = new RouteRenders(config, opts.clientTrust ?? (() => null));
  }

  /** A reloaded config (routing.retryAfterSeconds, the template): the next write renders with it. */
  reconfigure(config: Config): void {
    this.config = config;
    this.renders.reconfigure(config);
  }

  /** The client CA bundle changed: the routes are written again with Envoy's Lua for the new one. */
  trustChanged(): Promise<void> {
    const members = this.pending ?? this.last;
    return members === null || this.closed ? Promise.resolve() : this.update(members);
  }

  /** Schedules a write of these members; resolves when it (or a later one) is on disk. */
  update(members: readonly MemberEntry[]): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.pending = members;
    this.running ??= this.drain().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /**
   * The fast-path table to render from now on (null: none); resolves once the routes on disk
   * follow it, and, when it takes routes away, once Envoy runs them. Before the first members are
   * written there is nothing to change.
   */
  setFastPath(table: FastTable | null): Promise<void> {
    // The same requests: the routes (and the generation they carry) stay as written.
    if (table !== null && this.fast !== null && sameFastRequests(table, this.fast)) return this.idle();
    this.fast = table;
    const members = this.pending ?? this.last;
    return members === null ? Promise.resolve() : this.update(members);
  }

  /** Settles when every write asked for so far is on disk. */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  fastPathRequested(): FastTable | null {
    return this.fast;
  }

  /** The table in the routes last written (null: none). */
  fastPathWritten(): FastTable | null {
    return this.written?.fast ?? null;
  }

  /** Waits for the write in progress; later updates are ignored. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.remnantTimer !== null) clearTimeout(this.remnantTimer);
    this.remnantTimer = null;
    await this.running?.catch(() => undefined);
  }

  private async drain(): Promise<void> {
    while (this.pending !== null && !this.closed) {
      const entries = this.pending;
      this.pending = null;
      this.last = entries;
      try {
        await this.write(entries);
      } catch (err) {
        // The files Envoy has stay as they were: it keeps balancing over the last members written.
        this.log.error({ dir: this.dir, err: (err as Error).message }, 'xds: cannot write the Envoy files; Envoy keeps the last ones');
      }
    }
    this.armRemnantTimer();
  }

  private async write(entries: readonly MemberEntry[]): Promise<void> {
    const next = xdsMembersOf(entries);
    const nextNames = new Set(allOf(next).map((s) => s.name));
    await mkdir(this.dir, { recursive: true });
    const fast = fastTableFor(this.config, next, this.fast);
    for (const [name, r] of this.remnants) if (r.until <= this.now()) this.remnants.delete(name);
    // 0. Fast-path routes that no longer hold, or that send to an apiserver the new pool leaves
    //    out, go first, alone, and Envoy is waited for.
    await this.withdraw(fast);
    const was = this.written;
    // 1. Clusters: the new ones added (and the pools changed), the ones going away kept for now.
    const gone = was === null ? [] : allOf(was.members).filter((s) => !nextNames.has(s.name));
    const union: XdsMembers = { ...next, draining: [...next.draining, ...gone] };
    const cdsUnion = fileText(renderClusters(this.config, union, identity, poolsOf(was?.fast ?? null, fast), this.remnantsIn(fast)));
    // The first write does not know what Envoy loaded before (the seed, or another run's): all new.
    const added = [...nextNames].filter((n) => was?.names.has(n) !== true);
    if (fast !== null && was?.fast?.members.join() !== fast.members.join()) added.push(...fastPoolClusterNames(this.config, fast.members));
    await writeAtomic(this.dir, MEMBERS_FILE, membersText(next));
    let wroteClusters = false;
    if (was?.cds !== cdsUnion) {
      await writeAtomic(this.dir, CDS_FILE, cdsUnion);
      wroteClusters = true;
    }
    // 2. Routes, once Envoy runs the clusters they name.
    const rds = rdsFile(renderRoutes(this.config, next, await this.renders.fastRoutes(fast), this.renders.script()));
    let wroteRoutes = false;
    if (was?.rds !== rds.text) {
      if (wroteClusters && added.length > 0) await this.clustersRun(added);
      await writeAtomic(this.dir, RDS_FILE, rds.text);
      wroteRoutes = true;
      this.retire(was?.fast ?? null, fast);
    }
    // 3. The clusters that went away (members; an earlier fast pool, but for its remnant), once no route names them.
    const cds = fileText(renderClusters(this.config, next, identity, poolsOf(fast), this.remnantsIn(fast)));
    if (cds !== cdsUnion) {
      if (wroteRoutes || wroteClusters) await this.settle();
      await writeAtomic(this.dir, CDS_FILE, cds);
    }
    this.written = { cds, rds: rds.text, names: nextNames, members: next, fast };
    if (wroteClusters || gone.length > 0 || (wroteRoutes && (was === null || !sameNames(was.members, next))))
      this.log.info(
        {
          dir: this.dir,
          routable: next.routable.map((s) => s.name),
          joining: (next.joining ?? []).map((s) => s.name),
          cordoned: (next.cordoned ?? []).map((s) => s.name),
          drained: (next.drained ?? []).map((s) => s.name),
          draining: next.draining.map((s) => s.name),
          removed: gone.map((s) => s.name),
        },
        'xds: Envoy clusters and routes written',
      );
    if (wroteRoutes && !sameFast(was?.fast ?? null, fast)) this.logFast(fast);
  }

  /**
   * Before anything else changes: Envoy keeps, of the fast-path routes written, only what `fast`
   * allows too, sent to the members both pools hold — a pool that shrinks is a new cluster, run by
   * Envoy before the routes name it — and runs them before this resolves. Nothing to do when
   * `fast` covers what is written.
   */
  private async withdraw(fast: FastTable | null): Promise<void> {
    const prev = this.written;
    if (prev === null || prev.fast === null || (fast !== null && fastTableCovers(fast, prev.fast))) return;
    const kept = fastTableFor(this.config, prev.members, fast === null ? null : intersectFastTables(prev.fast, fast));
    let cds = prev.cds;
    if (kept !== null && kept.members.join() !== prev.fast.members.join()) {
      cds = fileText(renderClusters(this.config, prev.members, identity, poolsOf(prev.fast, kept), this.remnantsIn(kept)));
      await writeAtomic(this.dir, CDS_FILE, cds);
      await this.clustersRun(fastPoolClusterNames(this.config, kept.members));
    }
    const demoted = rdsFile(renderRoutes(this.config, prev.members, await this.renders.fastRoutes(kept), this.renders.script()));
    if (demoted.text !== prev.rds) {
      await writeAtomic(this.dir, RDS_FILE, demoted.text);
      this.written = { ...prev, cds, rds: demoted.text, fast: kept };
      this.retire(prev.fast, kept);
      await this.envoyRuns(demoted.version, 'fast-path routes withdrawn');
    } else this.written = { ...prev, cds };
  }

  /**
   * The routes no longer send to `was`'s pool: its cluster stays, as a remnant, for the requests
   * Envoy already sent to it. A retry looks the cluster up again by name, and one that is gone
   * fails the request with 503 (no healthy upstream); a request on a bounded route retries within
   * its route's timeout (with none, kube-apiserver's default and a margin), and Envoy may take up
   * to a settle period to run the new routes. A pool that is routed to again is no remnant.
   */
  private retire(was: FastTable | null, now: FastTable | null): void {
    const current = now === null ? null : fastClusterName(now.members);
    if (current !== null) this.remnants.delete(current);
    if (was === null) return;
    const name = fastClusterName(was.members);
    if (name === current) return;
    const lingerMs = (this.config.envoy.requestTimeout || REQUEST_TIMEOUT_MS) + this.settleMs;
    this.remnants.set(name, { table: was, until: this.now() + lingerMs });
  }

  /**
   * The remnants to write with `now`'s routes, each over those of its members in the pool `now`
   * routes to, and only while `now` still matches every request the remnant's table did: a retry
   * reaches no apiserver the routes would not send the request to anew. One that no longer holds
   * is forgotten (Envoy drops its cluster with this write; a retry then fails: 503, never a
   * request where the ladder would not send it); one with no member left is not written.
   */
  private remnantsIn(now: FastTable | null): FastRemnant[] {
    const inPool = new Set(now?.members ?? []);
    const kept: FastRemnant[] = [];
    for (const [name, r] of this.remnants) {
      if (now === null || !fastClaimsCover(now, r.table)) this.remnants.delete(name);
      else kept.push({ name, members: r.table.members.filter((m) => inPool.has(m)) });
    }
    return kept;
  }

  /** A rewrite when the first remnant expires, to take it out of cds.json. */
  private armRemnantTimer(): void {
    if (this.remnantTimer !== null) clearTimeout(this.remnantTimer);
    this.remnantTimer = null;
    if (this.closed || this.remnants.size === 0) return;
    const first = Math.min(...[...this.remnants.values()].map((r) => r.until));
    this.remnantTimer = setTimeout(
      () => {
        this.remnantTimer = null;
        if (this.last !== null) void this.update(this.last);
      },
      Math.max(0, first - this.now()) + 1,
    );
    this.remnantTimer.unref();
  }

  private logFast(fast: FastTable | null): void {
    const gvs = fast?.groupVersions ?? [];
    if (gvs.length === 0) {
      this.log.info(
        { why: this.fast?.why || (this.config.routing.fastPath ? 'the pool is changing' : 'routing.fastPath is off') },
        'fast path: none; every request goes through ext_proc',
      );
      return;
    }
    this.log.info(
      {
        generation: fast?.generation,
        groupVersions: gvs.length,
        resources: fastResourceCount(fast as FastTable),
        ...(fast?.why ? { notFast: fast.why } : {}),
      },
      'fast path: routes written; these group/versions go straight to the balanced pool',
    );
  }

  /** Waits until Envoy runs the routes of this version (or, unasked, a settle period). */
  private async envoyRuns(version: string, what: string): Promise<void> {
    if (this.confirm === null) {
      await this.settle();
      return;
    }
    if (!(await this.confirm(version))) {
      this.log.warn(
        { dir: this.dir, version, what },
        'xds: Envoy did not confirm the routes in time (admin unreachable, or the file refused); going on',
      );
    }
  }

  /** Waits until Envoy runs these clusters (or, unasked, a settle period). */
  private async clustersRun(names: readonly string[]): Promise<void> {
    if (this.clustersConfirm === null) {
      await this.settle();
      return;
    }
    if (!(await this.clustersConfirm(names)))
      this.log.warn(
        { dir: this.dir, clusters: names },
        'xds: Envoy did not confirm the new clusters in time (admin unreachable, or the file refused); going on',
      );
  }

  private settle(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.settleMs).unref());
  }
}

const identity = (p: string): string => p;

/** The fast-path pools whose clusters cds.json must hold for these tables. */
function poolsOf(...tables: (FastTable | null)[]): (readonly string[])[] {
  return tables.flatMap((t) => (t === null ? [] : [t.members]));
}

function sameNames(a: XdsMembers, b: XdsMembers): boolean {
  const key = (m: XdsMembers): string =>
    [m.routable, m.joining ?? [], m.cordoned ?? [], m.draining, m.drained ?? []].map((l) => l.map((s) => s.name).join(',')).join('|');
  return key(a) === key(b);
}

function sameFast(a: FastTable | null, b: FastTable | null): boolean {
  if (a === null || b === null) return a === b;
  return a.generation === b.generation && sameFastRequests(a, b);
}
