// What the snapshot is built from, read off the pollers: the servers routing may see (members and
// draining ones, not candidates, each with its cordon), and the membership (the identity Leases judged against the
// members; the apiservers being probed, with why they are not members yet).
import { apiserverIdentity } from '../../membership/apiserver-identity.js';
import { membershipOf, type IdentityLeaseTable, type Membership, type ProbingMember } from '../../membership/identity-leases.js';
import { isCandidate } from '../../membership/members.js';
import type { Poller } from '../poller.js';
import type { ServerState } from './types.js';
import { NO_CORDONS, type CordonTable } from '../../cordon/core/cordons.js';

export function serversOf(pollers: Iterable<Poller>, cordons: CordonTable = NO_CORDONS): readonly ServerState[] {
  return [...pollers]
    .filter((p) => !isCandidate(p.role))
    .map((p) => {
      const cordon = cordons.get(p.spec.name)?.mode;
      if (p.role !== 'draining' && cordon === undefined) return p.state;
      return Object.freeze({ ...p.state, ...(p.role === 'draining' ? { draining: true as const } : {}), ...(cordon ? { cordon } : {}) });
    });
}

export function membershipNow(pollers: Iterable<Poller>, leases: IdentityLeaseTable, livenessMs: number): Membership {
  const all = [...pollers];
  const identities = new Set(all.filter((p) => !isCandidate(p.role)).map((p) => apiserverIdentity(p.spec.hostname ?? p.spec.name)));
  const probing: ProbingMember[] = all
    .filter((p) => isCandidate(p.role))
    .map((p) => ({
      name: p.spec.name,
      url: p.spec.url,
      sources: p.sources,
      problem:
        p.role === 'joining'
          ? 'verified; Envoy is being given its routes'
          : (p.state.lastError ?? (p.state.ready === false ? '/readyz is not ok' : null)),
    }));
  return membershipOf(leases, identities, livenessMs, probing);
}
