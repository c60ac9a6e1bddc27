// The membership as Jaeger shows it: a span (its own trace) each time the members change (one
// learnt, admitted, drained or removed) or the set of live apiserver identities that match no
// member changes — a machine added at a new address, or the members catching up — with the sets
// before and after.
import { SpanKind, type Tracer } from '@opentelemetry/api';
import { liveUnmatched } from '../membership/identity-leases.js';
import type { Snapshot } from '../discovery/core/types.js';
import { ATTR, ATTR_MEMBERSHIP, EVENT_MEMBERSHIP_CHANGED, SPAN_MEMBERSHIP } from './core/names.js';

function same(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}

/** "kas-1", "learnt-10-0-0-4-6443 (draining)". */
function memberNames(snap: Snapshot): string[] {
  return snap.servers.map((s) => (s.draining ? `${s.name} (draining)` : s.name));
}

/** Remembers the last sets seen; record() writes a span only when one changed. */
export class MembershipSpans {
  private last: { readonly unmatched: readonly string[]; readonly members: readonly string[]; readonly probing: readonly string[] } | null =
    null;

  constructor(private readonly tracer: Tracer) {}

  record(snap: Snapshot, now: number): boolean {
    const unmatched = liveUnmatched(snap.membership, now).map((l) => (l.hostname === null ? l.name : `${l.name} (${l.hostname})`));
    const members = memberNames(snap);
    const probing = snap.membership.probing.map((p) => p.name);
    const before = this.last;
    if (before !== null && same(before.unmatched, unmatched) && same(before.members, members) && same(before.probing, probing))
      return false;
    this.last = { unmatched, members, probing };
    // The first sight (the configured members, nothing unmatched) is no change worth a span.
    if (before === null && unmatched.length === 0 && probing.length === 0) return false;
    const span = this.tracer.startSpan(SPAN_MEMBERSHIP, { kind: SpanKind.INTERNAL, root: true, startTime: now });
    span.setAttributes({ [ATTR.generation]: snap.generation, [ATTR_MEMBERSHIP.synced]: snap.membership.synced });
    span.addEvent(
      EVENT_MEMBERSHIP_CHANGED,
      {
        [ATTR_MEMBERSHIP.unmatchedBefore]: [...(before?.unmatched ?? [])],
        [ATTR_MEMBERSHIP.unmatched]: unmatched,
        [ATTR_MEMBERSHIP.membersBefore]: [...(before?.members ?? members)],
        [ATTR_MEMBERSHIP.members]: members,
        [ATTR_MEMBERSHIP.probing]: probing,
      },
      now,
    );
    span.end(now);
    return true;
  }
}
