// Which resources are not served by every apiserver: the table behind `skewgate skew`. Pure.
import { runToEnd, sortSteps, STEP_EVERY, type Sliced } from '../util/core/sliced.js';
import type { Snapshot } from '../discovery/core/types.js';

export interface SkewRow {
  readonly group: string;
  readonly version: string;
  /** "pods" or, for a subresource, "pods/resize". */
  readonly resource: string;
  readonly servedBy: readonly string[];
  readonly missingFrom: readonly string[];
}

/**
 * Rows sorted by group, version, resource. Servers without a view are left out of the comparison.
 * A pause point every few hundred resources.
 */
export function* computeSkewSteps(snap: Snapshot): Sliced<SkewRow[]> {
  const known = snap.servers.filter((s) => s.view !== null).map((s) => s.name);
  const servedBy = new Map<string, Set<string>>();
  const add = (key: string, server: string): void => {
    let set = servedBy.get(key);
    if (!set) servedBy.set(key, (set = new Set()));
    set.add(server);
  };
  let n = 0;
  for (const [key, byServer] of snap.resources) {
    for (const [server, cap] of byServer) {
      add(key, server);
      for (const sub of cap.subresources.keys()) add(`${key}/${sub}`, server);
    }
    if (++n % STEP_EVERY === 0) yield;
  }
  const rows: SkewRow[] = [];
  for (const [key, servers] of servedBy) {
    const missing = known.filter((n) => !servers.has(n));
    if (missing.length === 0) continue;
    const [group = '', version = '', ...rest] = key.split('/');
    rows.push({ group, version, resource: rest.join('/'), servedBy: known.filter((n) => servers.has(n)), missingFrom: missing });
    if (++n % STEP_EVERY === 0) yield;
  }
  // Sliced too: a quarter of a million rows take hundreds of milliseconds to sort.
  return yield* sortSteps(
    rows,
    (a, b) => a.group.localeCompare(b.group) || a.version.localeCompare(b.version) || a.resource.localeCompare(b.resource),
  );
}

export function computeSkew(snap: Snapshot): SkewRow[] {
  return runToEnd(computeSkewSteps(snap));
}
