// How explain and skew describe the membership: the live apiservers the config does not name.
import { liveUnmatched } from '../discovery/identity-leases.js';
import type { Snapshot } from '../discovery/types.js';

export interface MembershipView {
  /** The identity Leases were listed: the judgement below is the cluster's, not the config's alone. */
  readonly synced: boolean;
  readonly problem: string | null;
  /** Live identities that match no configured apiserver. */
  readonly unmatched: readonly { readonly identity: string; readonly hostname: string | null; readonly renewedAgoMs: number | null }[];
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
  };
}

/** Lines for a terminal; empty when the config names every live apiserver. */
export function membershipLines(m: MembershipView): string[] {
  if (!m.synced)
    return [
      `warning: membership not verified: ${m.problem ?? 'identity leases not listed'}; the configured apiservers are assumed to be all`,
    ];
  return m.unmatched.map(
    (u) =>
      `warning: a running apiserver is not in the config: identity ${u.identity}${u.hostname === null ? '' : ` (hostname ${u.hostname})`}; ` +
      'no 404 is answered for what no configured apiserver serves while it runs',
  );
}
