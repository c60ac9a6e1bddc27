// What discovery watches (CRDs and APIServices, which trigger a refresh; the identity Leases; the
// membership sources), and one list of a collection (the identity Leases, a membership source) through the members, healthy
// ones first: at start, before the watches have listed, and for the one-shot commands, which do
// not watch. A failure on every member says why, per apiserver.
import { getText } from '../kube/requests.js';
import type { MembershipSource } from '../config/core/schema.js';
import { WATCHED_KINDS, type WatchCandidate, type WatchChange, type WatchedKind } from '../kube/watch.js';
import { IDENTITY_LEASE_SELECTOR, IDENTITY_LEASES_PATH } from '../membership/identity-leases.js';
import { sourceWatch } from '../membership/sources.js';

export function healthyFirst(candidates: readonly WatchCandidate[]): WatchCandidate[] {
  return [...candidates].sort((x, y) => (x.health === 'healthy' ? 0 : 1) - (y.health === 'healthy' ? 0 : 1));
}

/** Lists `path` (with `labelSelector`) through the first member that answers; null, or why none did. */
export async function listThroughMembers(
  what: string,
  candidates: readonly WatchCandidate[],
  path: string,
  labelSelector: string,
  apply: (items: readonly unknown[]) => void,
  o: { readonly healthyOnly?: boolean; readonly signal: AbortSignal },
): Promise<string | null> {
  const problems: string[] = [];
  for (const c of healthyFirst(candidates.filter((x) => !o.healthyOnly || x.health === 'healthy'))) {
    try {
      const q = new URLSearchParams({ labelSelector });
      const res = await getText(c.target, `${path}?${q}`, { accept: 'application/json', signal: o.signal });
      const items = (JSON.parse(res.text) as { items?: unknown } | null)?.items;
      if (!Array.isArray(items)) throw new Error('the list has no items');
      apply(items);
      return null;
    } catch (err) {
      problems.push(`${c.target.name}: ${(err as Error).message}`);
    }
  }
  return `${what} could not be listed (${problems.join('; ') || 'no apiserver'})`;
}

/** The kinds the discovery service watches: each change of a Lease or a source goes to its tracker. */
export function watchedKinds(
  sources: readonly MembershipSource[],
  nodeSelector: string,
  track: { readonly lease: (c: WatchChange) => void; readonly source: (src: MembershipSource, c: WatchChange) => void },
): WatchedKind[] {
  return [
    ...WATCHED_KINDS,
    { kind: 'Lease', path: IDENTITY_LEASES_PATH, labelSelector: IDENTITY_LEASE_SELECTOR, track: track.lease },
    ...sources.map((src) => ({ ...sourceWatch(src, nodeSelector), track: (c: WatchChange) => track.source(src, c) })),
  ];
}
