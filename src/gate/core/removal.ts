// What stops being served if one apiserver leaves: every group/version/resource that, among the
// members (a draining one is leaving already), only it lists — and who used each lately, from the
// usage skewgate recorded. `skewgate skew --if-removed` prints it; the gate holds a removal while
// something in it is in use. Pure: the snapshot, the usage and the clock come in.
import { isFresh } from '../../routing/freshness.js';
import type { Snapshot } from '../../discovery/core/types.js';
import type { ClientUsage } from './usage.js';

export interface OrphanedResource {
  /** group/version/resource ("" group: the core group). */
  readonly resource: string;
  /** The clients that used it since the usage window began, most recent first. */
  readonly users: readonly ClientUsage[];
}

export interface RemovalReport {
  readonly apiserver: string;
  /** Resources no other member would serve, in order. */
  readonly resources: readonly OrphanedResource[];
  /** Why the report may be incomplete (a member whose view is not current); null when it is not. */
  readonly doubt: string | null;
  /** The usage window (ms) the users were taken over. */
  readonly usageWindowMs: number;
}

export type UsageOf = (resource: string, since: number) => readonly ClientUsage[];

export function removalReport(
  snap: Snapshot,
  apiserver: string,
  o: { readonly now: number; readonly staleAfterMs: number; readonly usageWindowMs: number; readonly usageOf: UsageOf },
): RemovalReport {
  const others = snap.servers.filter((s) => s.name !== apiserver && s.draining !== true);
  const stale = others.filter((s) => !isFresh(s, o.now, o.staleAfterMs)).map((s) => s.name);
  const resources: OrphanedResource[] = [];
  for (const [key, byServer] of snap.resources) {
    if (!byServer.has(apiserver)) continue;
    // Served by another member whose view lists it: not orphaned (a stale view still listed it last).
    if (others.some((s) => byServer.has(s.name))) continue;
    resources.push({ resource: key, users: o.usageOf(key, o.now - o.usageWindowMs) });
  }
  resources.sort((a, b) => (a.resource < b.resource ? -1 : a.resource > b.resource ? 1 : 0));
  return {
    apiserver,
    resources,
    doubt: stale.length === 0 ? null : `the views of ${stale.join(', ')} are not current: what they serve now is not known`,
    usageWindowMs: o.usageWindowMs,
  };
}

/** "15s", "15m", "2h": a window as people say it. */
export function spanText(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)}s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)}m`;
  return `${Math.round(ms / 3_600_000)}h`;
}
