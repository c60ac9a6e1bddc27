// The membership as lines for a terminal (status, explain, skew).
import type { MembershipView } from '../inspect/membership-view.js';

/** Lines for a terminal; empty when the config names every live apiserver. */
export function membershipLines(m: MembershipView): string[] {
  const lines = [
    ...m.draining.map((n) => `note: ${n} left every membership source: draining (no new requests), then removed`),
    ...m.probing.map(
      (p) =>
        `note: ${p.name} (${p.url}, from ${p.sources.join(', ')}) is not a member yet: ${p.problem ?? 'being verified (TLS, /readyz, discovery)'}`,
    ),
  ];
  if (!m.synced)
    return [
      ...lines,
      `warning: membership not verified: ${m.problem ?? 'identity leases not listed'}; the configured apiservers are assumed to be all`,
    ];
  return [
    ...lines,
    ...m.unmatched.map(
      (u) =>
        `warning: a running apiserver is not in the config: identity ${u.identity}${u.hostname === null ? '' : ` (hostname ${u.hostname})`}; ` +
        'no 404 is answered for what no configured apiserver serves while it runs',
    ),
  ];
}
