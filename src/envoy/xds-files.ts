// Writes Envoy's filesystem xDS files (xds.ts renders them) as the members change, and reads back
// the members last written. Every write is atomic (a temporary file renamed into the folder, which
// is what Envoy's watch reacts to), and a change is written in an order that never leaves Envoy
// routing to a cluster it lacks: new clusters first, then the routes, then clusters that went away.
import { createHash } from 'node:crypto';
import { writeSecretsSync } from './secret-rotation.js';
import { SDS_SUBDIR } from './tls-material.js';
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ApiServerConfig, Config } from '../config.js';
import type { MemberEntry } from '../discovery/service.js';
import { renderPath, type JsonObject } from './json.js';
import { CDS_FILE, discoveryResponse, MEMBERS_FILE, RDS_FILE, renderClusters, renderRoutes, seedMembers, type XdsMembers } from './xds.js';

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
export function writeSeedXds(config: Config, relativeTo?: string): { readonly written: readonly string[]; readonly kept: readonly string[] } {
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

/** Keeps the files in line with the members; one change at a time, the latest wins. */
export class XdsWriter {
  private readonly dir: string;
  private written: { cds: string; rds: string; names: ReadonlySet<string>; members: XdsMembers } | null = null;
  private pending: readonly MemberEntry[] | null = null;
  private running: Promise<void> | null = null;
  private closed = false;

  constructor(
    private config: Config,
    private readonly log: Logger,
    private readonly settleMs = XDS_SETTLE_MS,
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

  /** Waits for the write in progress; later updates are ignored. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.running?.catch(() => undefined);
  }

  private async drain(): Promise<void> {
    while (this.pending !== null && !this.closed) {
      const entries = this.pending;
      this.pending = null;
      try {
        await this.write(entries);
      } catch (err) {
        // The files Envoy has stay as they were: it keeps balancing over the last members written.
        this.log.error({ dir: this.dir, err: (err as Error).message }, 'xds: cannot write the Envoy files; Envoy keeps the last ones');
      }
    }
  }

  private async write(entries: readonly MemberEntry[]): Promise<void> {
    const next: XdsMembers = { routable: specsOf(entries, 'member'), joining: specsOf(entries, 'joining'), draining: specsOf(entries, 'draining') };
    const nextNames = new Set([...next.routable, ...(next.joining ?? []), ...next.draining].map((s) => s.name));
    const prev = this.written;
    await mkdir(this.dir, { recursive: true });
    const identity = (p: string): string => p;
    // 1. Clusters: the new ones added (and the pool changed), the ones going away kept for now.
    const gone =
      prev === null ? [] : [...prev.members.routable, ...(prev.members.joining ?? []), ...prev.members.draining].filter((s) => !nextNames.has(s.name));
    const union: XdsMembers = { routable: next.routable, ...(next.joining ? { joining: next.joining } : {}), draining: [...next.draining, ...gone] };
    const cdsUnion = fileText(renderClusters(this.config, union, identity));
    // The first write does not know what Envoy loaded before (the seed, or another run's): all new.
    const added = [...nextNames].filter((n) => prev?.names.has(n) !== true);
    await writeAtomic(this.dir, MEMBERS_FILE, membersText(next));
    let wroteClusters = false;
    if (prev?.cds !== cdsUnion) {
      await writeAtomic(this.dir, CDS_FILE, cdsUnion);
      wroteClusters = true;
    }
    // 2. Routes, once Envoy has the clusters they name.
    const rds = fileText([renderRoutes(this.config, next)]);
    let wroteRoutes = false;
    if (prev?.rds !== rds) {
      if (wroteClusters && added.length > 0) await this.settle();
      await writeAtomic(this.dir, RDS_FILE, rds);
      wroteRoutes = true;
    }
    // 3. The clusters that went away, once no route names them.
    let cds = cdsUnion;
    if (gone.length > 0) {
      if (wroteRoutes || wroteClusters) await this.settle();
      cds = fileText(renderClusters(this.config, next, identity));
      await writeAtomic(this.dir, CDS_FILE, cds);
    }
    this.written = { cds, rds, names: nextNames, members: next };
    if (wroteClusters || wroteRoutes || gone.length > 0)
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
  }

  private settle(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, this.settleMs).unref());
  }
}

function membersText(m: XdsMembers): string {
  const known: KnownMember[] = m.routable.map((s) => ({ name: s.name, url: s.url, ...(s.hostname !== undefined ? { hostname: s.hostname } : {}) }));
  return `${JSON.stringify({ members: known }, null, 2)}\n`;
}
