// Asks the local Envoy's admin interface which route table and which clusters it runs: a fast-path
// route withdrawn from rds.json counts as withdrawn only once Envoy says it loaded the file, and
// routes naming a new cluster are written only once Envoy runs it (xds-files.ts). A file Envoy
// refused, or an admin it cannot reach, shows as "not confirmed", never as done.
import { request } from 'undici';
import type { Config } from '../config/core/schema.js';
import { ROUTE_CONFIG_NAME } from '../envoy/xds.js';
import type { ClustersConfirm, RoutesConfirm } from './xds-files.js';

/** How long a withdrawal may wait for Envoy; below the fast path's margin, so it lands in time. */
export const ROUTES_CONFIRM_TIMEOUT_MS = 750;
const POLL_MS = 10;

/** The admin's base URL from envoy.admin, or null when it cannot be known (port 0: chosen by Envoy). */
export function adminUrlOf(config: Config): string | null {
  const { address, port } = config.envoy.admin;
  if (port === 0) return null;
  const host = address === '0.0.0.0' ? '127.0.0.1' : address === '::' ? '::1' : address;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The version_info of the route table Envoy runs, or null when it cannot tell. */
export async function runningRoutesVersion(adminUrl: string, signal: AbortSignal): Promise<string | null> {
  const res = await request(`${adminUrl}/config_dump?resource=dynamic_route_configs`, { signal });
  if (res.statusCode !== 200) {
    await res.body.dump();
    return null;
  }
  const doc = (await res.body.json()) as { configs?: { version_info?: unknown; route_config?: { name?: unknown } }[] };
  const mine = doc.configs?.find((c) => c.route_config?.name === ROUTE_CONFIG_NAME);
  return typeof mine?.version_info === 'string' ? mine.version_info : null;
}

/** The names of the clusters Envoy runs from cds.json (warmed: warming ones are not yet), or null when it cannot tell. */
export async function activeClusters(adminUrl: string, signal: AbortSignal): Promise<ReadonlySet<string> | null> {
  const res = await request(`${adminUrl}/config_dump?resource=dynamic_active_clusters`, { signal });
  if (res.statusCode !== 200) {
    await res.body.dump();
    return null;
  }
  const doc = (await res.body.json()) as { configs?: { cluster?: { name?: unknown } }[] };
  return new Set((doc.configs ?? []).flatMap((c) => (typeof c.cluster?.name === 'string' ? [c.cluster.name] : [])));
}

/** A ClustersConfirm that polls the admin until Envoy runs every one of the clusters, for at most timeoutMs. */
export function adminClustersConfirm(adminUrl: string, timeoutMs = ROUTES_CONFIRM_TIMEOUT_MS): ClustersConfirm {
  return (names) =>
    untilTrue(timeoutMs, async (signal) => {
      const running = await activeClusters(adminUrl, signal);
      return running !== null && names.every((n) => running.has(n));
    });
}

/** Asks `check` every POLL_MS until it says true (true) or the time is up (false); a failed ask is asked again. */
async function untilTrue(timeoutMs: number, check: (signal: AbortSignal) => Promise<boolean>): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      if (await check(AbortSignal.timeout(Math.max(1, Math.ceil(deadline - performance.now()))))) return true;
    } catch {
      // Not up yet, or gone: asked again until the deadline.
    }
    await new Promise((r) => setTimeout(r, POLL_MS).unref());
  }
  return false;
}

/** A RoutesConfirm that polls the admin until Envoy runs the version, for at most timeoutMs. */
export function adminRoutesConfirm(adminUrl: string, timeoutMs = ROUTES_CONFIRM_TIMEOUT_MS): RoutesConfirm {
  return (version) => untilTrue(timeoutMs, async (signal) => (await runningRoutesVersion(adminUrl, signal)) === version);
}
