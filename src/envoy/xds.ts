// Filesystem xDS (docs/design.md, "the Envoy update channel"): with envoy.xds.directory set, the
// apiserver clusters and the routes leave the bootstrap for two files in that folder, which Envoy
// watches — cds.json (every member's clusters and the balanced pools) and rds.json (the route
// table) — so members can join and leave while Envoy runs. This module renders their contents
// and the bootstrap's pointers to them. Pure.
import { join } from 'node:path';
import type { ApiServerConfig, Config } from '../config/core/schema.js';
import { apiserverClusters, fastClusterName, fastPoolClusters } from './clusters.js';
import type { JsonObject, PathFn } from './json.js';
import { routeConfig, routeOptions } from './routes.js';
import { upstreamOf } from './upstreams.js';
import type { FastTable } from '../routing/fast-path.js';

export const CDS_FILE = 'cds.json';
export const RDS_FILE = 'rds.json';
/** The members last written, read back at start: the last known members when the seed is gone. */
export const MEMBERS_FILE = 'members.json';
export const ROUTE_CONFIG_NAME = 'skewgate';
const CLUSTER_TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const ROUTE_TYPE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';

/**
 * What the files describe: the members balanced and routed to; the joining ones (own clusters and
 * routes, not in the pool yet: skewgate routes to them only once Envoy can); the cordoned ones
 * (own clusters and routes, out of the pool: skewgate sends them only what nobody else serves);
 * the draining ones and those an operator drained (own clusters only: no new requests, open ones may finish).
 */
export interface XdsMembers {
  readonly routable: readonly ApiServerConfig[];
  readonly joining?: readonly ApiServerConfig[];
  readonly cordoned?: readonly ApiServerConfig[];
  readonly draining: readonly ApiServerConfig[];
  /** Members still (an operator's drain), placed as draining ones are. */
  readonly drained?: readonly ApiServerConfig[];
}

/** Members with their own routes that are not in the balanced pool. */
export function routedOutsiders(members: XdsMembers): readonly ApiServerConfig[] {
  return [...(members.joining ?? []), ...(members.cordoned ?? [])];
}

function configSource(dir: string, fileName: string, file: PathFn): JsonObject {
  return {
    // Envoy reloads the file when an entry is moved into the folder: each write is a rename.
    path_config_source: { path: file(join(dir, fileName)), watched_directory: { path: file(dir) } },
    resource_api_version: 'V3',
  };
}

/** The bootstrap's dynamic_resources: clusters from cds.json. */
export function cdsConfig(dir: string, file: PathFn): JsonObject {
  return { cds_config: configSource(dir, CDS_FILE, file) };
}

/** The connection manager's rds: the route table from rds.json. */
export function rdsConfig(dir: string, file: PathFn): JsonObject {
  return { route_config_name: ROUTE_CONFIG_NAME, config_source: configSource(dir, RDS_FILE, file) };
}

/**
 * A fast-path pool no route names any more, kept for the requests it was given (their retries
 * look the cluster up again): under its old name, over those of its members still in the current
 * pool.
 */
export interface FastRemnant {
  readonly name: string;
  readonly members: readonly string[];
}

/**
 * The cds.json resources: each member's clusters (draining ones too), the pools of the routable
 * ones, a cluster per fast-path pool named (fastPools: member names; each one among `members`),
 * and the remnants of earlier pools (those with a member left; not one a pool names again).
 */
export function renderClusters(
  config: Config,
  members: XdsMembers,
  file: PathFn,
  fastPools: readonly (readonly string[])[] = [],
  remnants: readonly FastRemnant[] = [],
): JsonObject[] {
  const outsiders = [...routedOutsiders(members), ...members.draining, ...(members.drained ?? [])];
  const outside = outsiders.map(upstreamOf);
  const all = [...members.routable, ...outsiders];
  const specsOf = (names: readonly string[]): ApiServerConfig[] =>
    names.map((n) => all.find((s) => s.name === n)).filter((s): s is ApiServerConfig => s !== undefined);
  const pools = new Map<string, readonly ApiServerConfig[]>();
  for (const names of fastPools) {
    const specs = specsOf(names);
    // All or none: a cluster of fewer members would carry another name than the routes ask for.
    if (specs.length > 0 && specs.length === names.length) pools.set(fastClusterName(names), specs);
  }
  for (const r of remnants) {
    const specs = specsOf(r.members);
    if (specs.length > 0 && !pools.has(r.name)) pools.set(r.name, specs);
  }
  return [
    ...apiserverClusters(config, members.routable.map(upstreamOf), file, outside),
    ...[...pools].flatMap(([name, specs]) => fastPoolClusters(config, specs.map(upstreamOf), file, name)),
  ].map((c) => ({ '@type': CLUSTER_TYPE, ...c }));
}

/**
 * The rds.json resource: routes to the routable, joining and cordoned members, never to a draining one;
 * with a fast-path table's routes (fast-routes.ts), those too (the caller checks that the table
 * holds for these members: fastTableFor); with the Lua for the client CA bundle skewgate has
 * loaded (cert-identity.ts), Envoy states the certificates it can itself.
 */
export function renderRoutes(config: Config, members: XdsMembers, fastRoutes: readonly JsonObject[] = [], envoyIdentityScript?: string): JsonObject {
  const routed = [...members.routable, ...routedOutsiders(members)].map(upstreamOf);
  return { '@type': ROUTE_TYPE, ...routeConfig(routed, routeOptions(config, envoyIdentityScript), fastRoutes) };
}

/**
 * The table as Envoy may run it with these members, or null: only with routing.fastPath, and its
 * pool only the routable members (one joining, cordoned, draining or gone is left out: a table stays true
 * of fewer members of its pool); none when no pool member is left.
 */
export function fastTableFor(config: Config, members: XdsMembers, fast: FastTable | null): FastTable | null {
  if (fast === null || !config.routing.fastPath || fast.groupVersions.length === 0) return null;
  const routable = new Set(members.routable.map((s) => s.name));
  const pool = fast.members.filter((m) => routable.has(m));
  if (pool.length === 0) return null;
  return pool.length === fast.members.length ? fast : Object.freeze({ ...fast, members: Object.freeze(pool), servesAll: false });
}

/** A DiscoveryResponse as Envoy reads it from a file. */
export function discoveryResponse(version: string, resources: readonly JsonObject[]): JsonObject {
  return { version_info: version, resources: [...resources] };
}

/** The seed the bootstrap starts from when no skewgate wrote the files yet: the configured apiservers. */
export function seedMembers(config: Config): XdsMembers {
  return { routable: config.apiservers, draining: [] };
}
