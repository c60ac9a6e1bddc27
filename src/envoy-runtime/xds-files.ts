// Writes Envoy's filesystem xDS files (xds.ts renders them) as the members change, and reads back
// the members last written. Every write is atomic (a temporary file renamed into the folder, which
// is what Envoy's watch reacts to), and a change is written in an order that never leaves Envoy
// routing to a cluster it lacks: new clusters first, then the routes, then clusters that went away.
import { createHash } from 'node:crypto';
import { writeSecretsSync } from './secret-rotation.js';
import { SDS_SUBDIR } from '../envoy/tls-material.js';
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ApiServerConfig, Config } from '../config/core/schema.js';
import type { MemberEntry } from '../membership/members.js';
import { renderPath, type JsonObject } from '../envoy/json.js';
import {
  CDS_FILE,
  discoveryResponse,
  fastTableFor,
  MEMBERS_FILE,
  RDS_FILE,
  renderClusters,
  renderRoutes,
  seedMembers,
  type XdsMembers,
} from '../envoy/xds.js';
import { fastResourceCount, fastTableCovers, intersectFastTables, sameFastRequests, type FastTable } from '../routing/fast-path.js';
import { runSliced, sliceBudget } from '../util/slice-runner.js';
import { fastPathRoutesSteps } from '../envoy/fast-routes.js';

/** Between the steps of one change: Envoy's file watch and cluster warming take milliseconds. */
export const XDS_SETTLE_MS = 250;
/**
 * How long a verified apiserver stays joining: its cluster written, XDS_SETTLE_MS, its routes
 * written, and Envoy's reload of them, with room to spare.
 */
export const XDS_JOIN_DELAY_MS = 1000;

/** What members.json keeps of a member: enough to find it again, reached with the template. */
export interface KnownMember {
  readonly name: string;
  readonly url: string;
  readonly hostname?: string;
}

function versionOf(resources: readonly JsonObject[]): string {
  return createHash('sha256').update(JSON.stringify(resources)).digest('hex').slice(0, 16);
}

function fileText(resources: readonly JsonObject[]): string {
  return `${JSON.stringify(discoveryResponse(versionOf(resources), resources), null, 2)}\n`;
}

function writeAtomicSync(dir: string, name: string, text: string): void {
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, join(dir, name));
}

async function writeAtomic(dir: string, name: string, text: string): Promise<void> {
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, join(dir, name));
}

/**
 * The seed files for `envoy-config`: the configured apiservers, written only where no file is yet
 * (a file skewgate wrote holds the last known members, which may be all that is left).
 */
export function writeSeedXds(
  config: Config,
  relativeTo?: string,
): { readonly written: readonly string[]; readonly kept: readonly string[] } {
  const dir = config.envoy.xds?.directory;
  if (dir === undefined) return { written: [], kept: [] };
  mkdirSync(dir, { recursive: true });
  const file = (p: string): string => renderPath(p, relativeTo);
  const seed = seedMembers(config);
  const files: [string, string][] = [
    [CDS_FILE, fileText(renderClusters(config, seed, file))],
    [RDS_FILE, fileText([renderRoutes(config, seed)])],
  ];
  const written: string[] = [];
  const kept: string[] = [];
  for (const [name, text] of files) {
    if (existsSync(join(dir, name))) kept.push(name);
    else {
      writeAtomicSync(dir, name, text);
      written.push(name);
    }
  }
  // The certificates always as they are now: the files are the truth, whatever skewgate last wrote.
  written.push(...writeSecretsSync(config, relativeTo).map((n) => `${SDS_SUBDIR}/${n}`));
  return { written, kept };
}

/** Reads members.json: the members skewgate last wrote (none when absent; a broken file is logged and ignored). */
export function readKnownMembers(dir: string, logger: Logger): readonly KnownMember[] {
  const path = join(dir, MEMBERS_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  try {
    const doc = JSON.parse(text) as { members?: unknown };
    if (!Array.isArray(doc.members)) throw new Error('no members list');
    return doc.members.flatMap((m: unknown) => {
      const o = m as Partial<KnownMember> | null;
      if (typeof o?.name !== 'string' || typeof o.url !== 'string') return [];
      return [{ name: o.name, url: o.url, ...(typeof o.hostname === 'string' ? { hostname: o.hostname } : {}) }];
    });
  } catch (err) {
    logger.warn({ file: path, err: (err as Error).message }, 'xds: cannot read the last known members; starting from the configured ones');
    return [];
  }
}

function specsOf(entries: readonly MemberEntry[], role: MemberEntry['role']): ApiServerConfig[] {
  return entries.filter((e) => e.role === role).map((e) => e.spec);
}

/**
 * Asks Envoy whether it runs the route table of this version (envoy/admin-routes.ts): true once
 * it does, false when that could not be seen in time.
 */
export type RoutesConfirm = (version: string) => Promise<boolean>;

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
  private readonly rendered = new WeakMap<FastTable, readonly JsonObject[]>();
  private running: Promise<void> | null = null;
  private closed = false;

  constructor(
    private config: Config,
    private readonly log: Logger,
    private readonly settleMs = XDS_SETTLE_MS,
    private readonly confirm: RoutesConfirm | null = null,
  ) {
    const dir = config.envoy.xds?.directory;
    if (dir === undefined) throw new Error('XdsWriter needs envoy.xds.directory');
    this.dir = dir;
  }

  /** A reloaded config (routing.retryAfterSeconds, the template): the next write renders with it. */
  reconfigure(config: Config): void {
    this.config = config;
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
  }

  private async write(entries: readonly MemberEntry[]): Promise<void> {
    const next: XdsMembers = {
      routable: specsOf(entries, 'member'),
      joining: specsOf(entries, 'joining'),
      draining: specsOf(entries, 'draining'),
    };
    const nextNames = new Set([...next.routable, ...(next.joining ?? []), ...next.draining].map((s) => s.name));
    const prev = this.written;
    await mkdir(this.dir, { recursive: true });
    const identity = (p: string): string => p;
    const fast = fastTableFor(this.config, next, this.fast);
    // 0. Fast-path routes that no longer hold go first, alone, and Envoy is waited for.
    if (prev !== null && prev.fast !== null && (fast === null || !fastTableCovers(fast, prev.fast))) {
      const kept = fastTableFor(this.config, prev.members, fast === null ? null : intersectFastTables(prev.fast, fast));
      const demoted = rdsFile(renderRoutes(this.config, prev.members, await this.fastRoutes(kept)));
      if (demoted.text !== prev.rds) {
        await writeAtomic(this.dir, RDS_FILE, demoted.text);
        this.written = { ...prev, rds: demoted.text, fast: kept };
        await this.envoyRuns(demoted.version, 'fast-path routes withdrawn');
      }
    }
    const was = this.written;
    // 1. Clusters: the new ones added (and the pool changed), the ones going away kept for now.
    const gone =
      was === null
        ? []
        : [...was.members.routable, ...(was.members.joining ?? []), ...was.members.draining].filter((s) => !nextNames.has(s.name));
    const union: XdsMembers = {
      routable: next.routable,
      ...(next.joining ? { joining: next.joining } : {}),
      draining: [...next.draining, ...gone],
    };
    const cdsUnion = fileText(renderClusters(this.config, union, identity));
    // The first write does not know what Envoy loaded before (the seed, or another run's): all new.
    const added = [...nextNames].filter((n) => was?.names.has(n) !== true);
    await writeAtomic(this.dir, MEMBERS_FILE, membersText(next));
    let wroteClusters = false;
    if (was?.cds !== cdsUnion) {
      await writeAtomic(this.dir, CDS_FILE, cdsUnion);
      wroteClusters = true;
    }
    // 2. Routes, once Envoy has the clusters they name.
    const rds = rdsFile(renderRoutes(this.config, next, await this.fastRoutes(fast)));
    let wroteRoutes = false;
    if (was?.rds !== rds.text) {
      if (wroteClusters && added.length > 0) await this.settle();
      await writeAtomic(this.dir, RDS_FILE, rds.text);
      wroteRoutes = true;
    }
    // 3. The clusters that went away, once no route names them.
    let cds = cdsUnion;
    if (gone.length > 0) {
      if (wroteRoutes || wroteClusters) await this.settle();
      cds = fileText(renderClusters(this.config, next, identity));
      await writeAtomic(this.dir, CDS_FILE, cds);
    }
    this.written = { cds, rds: rds.text, names: nextNames, members: next, fast };
    if (wroteClusters || gone.length > 0 || (wroteRoutes && (was === null || !sameNames(was.members, next))))
      this.log.info(
        {
          dir: this.dir,
          routable: next.routable.map((s) => s.name),
          joining: (next.joining ?? []).map((s) => s.name),
          draining: next.draining.map((s) => s.name),
          removed: gone.map((s) => s.name),
        },
        'xds: Envoy clusters and routes written',
      );
    if (wroteRoutes && !sameFast(was?.fast ?? null, fast)) this.logFast(fast);
  }

  /**
   * A table's routes, rendered in slices (a table of tens of thousands of resources never holds the
   * event loop that answers Envoy) and kept for the table: a withdrawal and the write after it
   * render it once.
   */
  private async fastRoutes(fast: FastTable | null): Promise<readonly JsonObject[]> {
    if (fast === null) return [];
    const known = this.rendered.get(fast);
    if (known !== undefined) return known;
    const routes = await runSliced(fastPathRoutesSteps(fast, this.config.envoy.requestTimeout), sliceBudget(undefined));
    this.rendered.set(fast, routes);
    return routes;
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

  private settle(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.settleMs).unref());
  }
}

function sameNames(a: XdsMembers, b: XdsMembers): boolean {
  const key = (m: XdsMembers): string => [m.routable, m.joining ?? [], m.draining].map((l) => l.map((s) => s.name).join(',')).join('|');
  return key(a) === key(b);
}

function sameFast(a: FastTable | null, b: FastTable | null): boolean {
  if (a === null || b === null) return a === b;
  return a.generation === b.generation && sameFastRequests(a, b);
}

function rdsFile(routes: JsonObject): { readonly text: string; readonly version: string } {
  const version = versionOf([routes]);
  return { text: `${JSON.stringify(discoveryResponse(version, [routes]), null, 2)}\n`, version };
}

function membersText(m: XdsMembers): string {
  const known: KnownMember[] = m.routable.map((s) => ({
    name: s.name,
    url: s.url,
    ...(s.hostname !== undefined ? { hostname: s.hostname } : {}),
  }));
  return `${JSON.stringify({ members: known }, null, 2)}\n`;
}
