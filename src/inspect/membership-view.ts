// Pure: how status, explain and skew describe the membership: the members learnt and draining,
// the apiservers being probed, and the live apiservers no member matches. The same object on the
// admin endpoint and in `-o json`.
import { liveUnmatched } from '../membership/identity-leases.js';
import type { Snapshot } from '../discovery/core/types.js';

export interface MembershipView {
  /** The identity Leases were listed: the judgement below is the cluster's, not the config's alone. */
  readonly synced: boolean;
  readonly problem: string | null;
  /** Live identities that match no configured apiserver. */
  readonly unmatched: readonly { readonly identity: string; readonly hostname: string | null; readonly renewedAgoMs: number | null }[];
  /** Members that left every source (no new requests), and apiservers a source names that are not verified yet. */
  readonly draining: readonly string[];
  readonly probing: readonly {
    readonly name: string;
    readonly url: string;
    readonly sources: readonly string[];
    readonly problem: string | null;
  }[];
}

export function membershipView(snap: Snapshot, now: number, problem: string | null): MembershipView {
  return {
    synced: snap.membership.synced,
    problem,
    unmatched: liveUnmatched(snap.membership, now).map((l) => ({
      identity: l.name,
      hostname: l.hostname,
      renewedAgoMs: l.renewTime === null ? null : now - l.renewTime,
    })),
    draining: snap.servers.filter((s) => s.draining).map((s) => s.name),
    probing: snap.membership.probing.map((p) => ({ name: p.name, url: p.url, sources: p.sources, problem: p.problem })),
  };
}
