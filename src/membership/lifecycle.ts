// Where apiservers join and leave (docs/design.md, membership): the members as they stand and what
// the seed and the sources call for now (members.ts desiredMembers) in, the actions that bring
// one to the other out. A new address is probed before it is routed to; a member that left every
// source drains (no new request, open ones may finish) until `until`, then is removed; one named
// again is a member again; the last ready member is never drained. The discovery service applies
// the actions and arms the timers. Pure: the clock comes in as `now`.
import type { DesiredMember, MemberRole, MemberSpec } from './members.js';
import { isCandidate } from './members.js';

/** One apiserver as the membership holds it now. */
export interface MemberRecord {
  readonly spec: MemberSpec;
  readonly role: MemberRole;
  readonly seed: boolean;
  readonly sources: readonly string[];
  /** Its /readyz as last probed (null: not probed yet). */
  readonly ready: boolean | null;
}

export type MembershipAction =
  /** A new address: a seed is a member at once ("back in the members"), a learnt one is probed first. */
  | {
      readonly kind: 'add';
      readonly spec: MemberSpec;
      readonly role: 'member' | 'probing';
      readonly seed: boolean;
      readonly sources: readonly string[];
    }
  /** The sources that name a member changed (no routing change of its own). */
  | { readonly kind: 'sources'; readonly name: string; readonly sources: readonly string[] }
  /** A draining member named by a source again: a member, its drain cancelled. */
  | { readonly kind: 'undrain'; readonly name: string; readonly sources: readonly string[] }
  /** A member's hostname (its identity, which orders the merge) was learnt or changed. */
  | { readonly kind: 'respec'; readonly name: string; readonly spec: MemberSpec }
  /** A learnt apiserver that left every source before it was a member: dropped. */
  | { readonly kind: 'forget'; readonly name: string }
  /** A member that left every source: drained until `until`, then removed. */
  | { readonly kind: 'drain'; readonly name: string; readonly until: number }
  /** A member that left every source while no other member is ready: kept until one is. */
  | { readonly kind: 'keep'; readonly name: string };

export interface Reconciliation {
  readonly actions: readonly MembershipAction[];
  /** Routing or Envoy must hear of it (a change of sources alone is not). */
  readonly changed: boolean;
  /** A member began draining: routing must stop naming it before Envoy drops its route. */
  readonly drained: boolean;
  /** A leaving member was kept (no other ready): to be reconsidered after the next round. */
  readonly postponed: boolean;
}

/** The actions that bring `members` in line with `desired`, at `now`, each drain lasting `drainTimeoutMs`. */
export function reconcile(
  members: readonly MemberRecord[],
  desired: readonly DesiredMember[],
  now: number,
  drainTimeoutMs: number,
): Reconciliation {
  const actions: MembershipAction[] = [];
  const byName = new Map(members.map((m) => [m.spec.name, m]));
  const want = new Set(desired.map((d) => d.spec.name));
  let changed = false;
  let drained = false;
  let postponed = false;
  // Roles once the first pass is applied: an undrained member counts as a member for the second.
  const role = new Map(members.map((m) => [m.spec.name, m.role]));
  for (const d of desired) {
    const m = byName.get(d.spec.name);
    if (m === undefined) {
      actions.push({ kind: 'add', spec: d.spec, role: d.seed ? 'member' : 'probing', seed: d.seed, sources: d.sources });
      changed = true;
      continue;
    }
    if (m.role === 'draining') {
      actions.push({ kind: 'undrain', name: m.spec.name, sources: d.sources });
      role.set(m.spec.name, 'member');
      changed = true;
    } else if (!sameList(m.sources, d.sources)) actions.push({ kind: 'sources', name: m.spec.name, sources: d.sources });
    if ((d.spec.hostname ?? null) !== (m.spec.hostname ?? null)) {
      actions.push({ kind: 'respec', name: m.spec.name, spec: d.spec });
      changed = true;
    }
  }
  for (const m of members) {
    if (want.has(m.spec.name)) continue;
    if (isCandidate(m.role)) {
      actions.push({ kind: 'forget', name: m.spec.name });
      changed = true;
    } else if (m.role === 'member') {
      // Never drain the last ready member: a control plane without one is a source gone wrong.
      const others = members.some((o) => o !== m && role.get(o.spec.name) === 'member' && o.ready === true && want.has(o.spec.name));
      if (!others) {
        actions.push({ kind: 'keep', name: m.spec.name });
        postponed = true;
        continue;
      }
      actions.push({ kind: 'drain', name: m.spec.name, until: now + drainTimeoutMs });
      changed = true;
      drained = true;
    }
  }
  return Object.freeze({ actions: Object.freeze(actions), changed, drained, postponed });
}

/** What a probed candidate's round means: not verified yet, verified (joining for `joinDelayMs` first, if any), or nothing to do. */
export function admission(
  record: Pick<MemberRecord, 'role'>,
  state: { readonly viewed: boolean; readonly consecutiveFailures: number; readonly ready: boolean | null },
  joinDelayMs: number,
): 'not-verified' | 'join' | 'joining' | 'none' {
  if (record.role !== 'probing') return 'none';
  // Verified: its serving certificate (every fetch is verified), a discovery view, /readyz 200.
  if (!state.viewed || state.consecutiveFailures > 0 || state.ready !== true) return 'not-verified';
  return joinDelayMs === 0 ? 'join' : 'joining';
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
