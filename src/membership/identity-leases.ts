// kube-apiserver's identity Leases (kube-system, label apiserver.kubernetes.io/identity=
// kube-apiserver; 1.26+): one per running apiserver, renewed every 10 s by default. skewgate reads
// them to learn whether its member list is complete: a live identity that matches no configured
// apiserver is a server skewgate cannot see, so no absence is proven while it lives (docs/design.md,
// invariant 1). Pure: parsing, the table's updates and the judgement at a given time.

export const IDENTITY_LEASES_PATH = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases';
export const IDENTITY_LEASE_LABEL = 'apiserver.kubernetes.io/identity';
export const IDENTITY_LEASE_SELECTOR = `${IDENTITY_LEASE_LABEL}=kube-apiserver`;
const HOSTNAME_LABEL = 'kubernetes.io/hostname';

/** What skewgate keeps of one identity Lease. */
export interface IdentityLease {
  /** The lease name: the apiserver's identity (apiserverIdentity(hostname)). */
  readonly name: string;
  /** Its kubernetes.io/hostname label, when set (kube-apiserver sets it). */
  readonly hostname: string | null;
  /** spec.renewTime in epoch ms; null when absent or unreadable. */
  readonly renewTime: number | null;
}

/** The leases as last listed and watched; synced once a list succeeded. */
export interface IdentityLeaseTable {
  readonly synced: boolean;
  readonly leases: ReadonlyMap<string, IdentityLease>;
}

export const EMPTY_LEASE_TABLE: IdentityLeaseTable = Object.freeze({ synced: false, leases: new Map() });

/** The lease object as kube-apiserver writes it, or null for anything else (counted as skipped by the caller). */
export function parseIdentityLease(o: unknown): IdentityLease | null {
  if (o === null || typeof o !== 'object') return null;
  const meta = (o as { metadata?: unknown }).metadata;
  if (meta === null || typeof meta !== 'object') return null;
  const { name, namespace, labels } = meta as { name?: unknown; namespace?: unknown; labels?: unknown };
  if (typeof name !== 'string' || name === '') return null;
  if (namespace !== undefined && namespace !== 'kube-system') return null;
  const labelMap = labels !== null && typeof labels === 'object' ? (labels as Record<string, unknown>) : {};
  if (labelMap[IDENTITY_LEASE_LABEL] !== 'kube-apiserver') return null;
  const hostname = typeof labelMap[HOSTNAME_LABEL] === 'string' ? (labelMap[HOSTNAME_LABEL] as string) : null;
  const spec = (o as { spec?: unknown }).spec;
  const rawRenew = spec !== null && typeof spec === 'object' ? (spec as { renewTime?: unknown }).renewTime : undefined;
  const renew = typeof rawRenew === 'string' ? Date.parse(rawRenew) : Number.NaN;
  return Object.freeze({ name, hostname, renewTime: Number.isFinite(renew) ? renew : null });
}

export type LeaseChange =
  | { readonly type: 'RELIST'; readonly items: readonly unknown[] }
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: unknown };

/** The table after one list or watch event, and how many objects were not identity leases. */
export function applyLeaseChange(table: IdentityLeaseTable, change: LeaseChange): { table: IdentityLeaseTable; skipped: number } {
  if (change.type === 'RELIST') {
    const leases = new Map<string, IdentityLease>();
    let skipped = 0;
    for (const item of change.items) {
      const l = parseIdentityLease(item);
      if (l === null) skipped++;
      else leases.set(l.name, l);
    }
    return { table: Object.freeze({ synced: true, leases }), skipped };
  }
  const l = parseIdentityLease(change.object);
  if (l === null) return { table, skipped: 1 };
  const leases = new Map(table.leases);
  if (change.type === 'DELETED') leases.delete(l.name);
  else leases.set(l.name, l);
  return { table: Object.freeze({ synced: table.synced, leases }), skipped: 0 };
}

/** What a snapshot carries: the identities that match no configured apiserver. */
export interface Membership {
  /** False until the leases were listed once (no RBAC, an old apiserver, watch off): the config's list is trusted then. */
  readonly synced: boolean;
  /** Leases whose name is no member's identity, by name. */
  readonly unmatched: readonly IdentityLease[];
  /** A lease renewed longer ago than this is a server that stopped (kube-apiserver renews every 10 s). */
  readonly livenessMs: number;
  /** Apiservers a source names that are not verified yet (TLS, /readyz, discovery): not routed to. */
  readonly probing: readonly ProbingMember[];
}

/** A learnt apiserver on its way to membership. */
export interface ProbingMember {
  readonly name: string;
  readonly url: string;
  readonly sources: readonly string[];
  /** Why it is not a member yet; null before its first round ended. */
  readonly problem: string | null;
}

const NONE: readonly never[] = Object.freeze([]);

export const NO_MEMBERSHIP: Membership = Object.freeze({ synced: false, unmatched: NONE, livenessMs: 0, probing: NONE });

export function membershipOf(
  table: IdentityLeaseTable,
  memberIdentities: ReadonlySet<string>,
  livenessMs: number,
  probing: readonly ProbingMember[] = NONE,
): Membership {
  const unmatched = [...table.leases.values()].filter((l) => !memberIdentities.has(l.name)).sort((a, b) => (a.name < b.name ? -1 : 1));
  return Object.freeze({ synced: table.synced, unmatched: Object.freeze(unmatched), livenessMs, probing: Object.freeze([...probing]) });
}

/** The unmatched identities alive at `now`: apiservers that may serve what skewgate cannot see. */
export function liveUnmatched(m: Membership, now: number): readonly IdentityLease[] {
  if (m.unmatched.length === 0) return m.unmatched;
  return m.unmatched.filter((l) => l.renewTime !== null && now - l.renewTime <= m.livenessMs);
}

/** Whether two memberships would decide alike (a member's lease renewal changes nothing; an unmatched one's does). */
export function sameMembership(a: Membership, b: Membership | undefined): boolean {
  if (b === undefined || a.synced !== b.synced || a.unmatched.length !== b.unmatched.length) return false;
  if (a.probing.length !== b.probing.length || a.probing.some((p, i) => p.name !== b.probing[i]?.name)) return false;
  return a.unmatched.every((l, i) => {
    const o = b.unmatched[i];
    return o !== undefined && o.name === l.name && o.hostname === l.hostname && o.renewTime === l.renewTime;
  });
}
