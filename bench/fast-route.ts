// The cluster a fast-path route of skewgate's Envoy sends to, read from the xDS files skewgate
// wrote, counted only once the Envoy runs that version of the routes: what a benchmark waits on
// before a phase's pool is in effect.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runningRoutesVersion } from '../src/envoy-runtime/admin-routes.js';
import { RDS_FILE } from '../src/envoy/xds.js';

/** The cluster of route `name` Envoy runs (null: none written, or not running yet). */
export async function fastRouteCluster(xdsDir: string, adminUrl: string, name: string): Promise<string | null> {
  const text = await readFile(join(xdsDir, RDS_FILE), 'utf8').catch(() => '');
  type Rds = { version_info?: string; resources?: { virtual_hosts?: { routes?: { name?: string; route?: { cluster?: string } }[] }[] }[] };
  let file: Rds;
  try {
    file = JSON.parse(text) as Rds;
  } catch {
    return null;
  }
  const route = (file.resources ?? [])
    .flatMap((r) => r.virtual_hosts ?? [])
    .flatMap((v) => v.routes ?? [])
    .find((r) => r.name === name);
  const running = await runningRoutesVersion(adminUrl, AbortSignal.timeout(2000)).catch(() => null);
  return route?.route?.cluster !== undefined && running === file.version_info ? route.route.cluster : null;
}
