// The xDS files on disk (xds.ts renders their contents): each a DiscoveryResponse whose version is
// its content's digest, written atomically (a temporary file renamed into the folder, which is
// what Envoy's watch reacts to); the seed `envoy-config` writes; and members.json, the members
// last written, read back at start.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import { renderPath, type JsonObject } from '../envoy/json.js';
import { SDS_SUBDIR } from '../envoy/tls-material.js';
import {
  CDS_FILE,
  discoveryResponse,
  MEMBERS_FILE,
  RDS_FILE,
  renderClusters,
  renderRoutes,
  seedMembers,
  type XdsMembers,
} from '../envoy/xds.js';
import { writeSecretsSync } from './secret-rotation.js';
import { writeAtomicSync } from '../util/atomic-file.js';

/** What members.json keeps of a member: enough to find it again, reached with the template. */
export interface KnownMember {
  readonly name: string;
  readonly url: string;
  readonly hostname?: string;
}

function versionOf(resources: readonly JsonObject[]): string {
  return createHash('sha256').update(JSON.stringify(resources)).digest('hex').slice(0, 16);
}

export function fileText(resources: readonly JsonObject[]): string {
  return `${JSON.stringify(discoveryResponse(versionOf(resources), resources), null, 2)}\n`;
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

export function rdsFile(routes: JsonObject): { readonly text: string; readonly version: string } {
  const version = versionOf([routes]);
  return { text: `${JSON.stringify(discoveryResponse(version, [routes]), null, 2)}\n`, version };
}

export function membersText(m: XdsMembers): string {
  // Cordoned and drained ones too: an operator's cordon leaves them members.
  const known: KnownMember[] = [...m.routable, ...(m.cordoned ?? []), ...(m.drained ?? [])].map((s) => ({
    name: s.name,
    url: s.url,
    ...(s.hostname !== undefined ? { hostname: s.hostname } : {}),
  }));
  return `${JSON.stringify({ members: known }, null, 2)}\n`;
}
