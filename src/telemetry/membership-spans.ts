// The membership as Jaeger shows it: a span (its own trace) each time the set of live apiserver
// identities that match no configured apiserver changes — a machine added at a new address, or
// the configured list catching up — with the identities before and after.
import { SpanKind, type Tracer } from '@opentelemetry/api';
import { liveUnmatched } from '../discovery/identity-leases.js';
import type { Snapshot } from '../discovery/types.js';
import { ATTR, ATTR_MEMBERSHIP, EVENT_MEMBERSHIP_CHANGED, SPAN_MEMBERSHIP } from './names.js';

/** Remembers the last set seen; record() writes a span only when it changed. */
export class MembershipSpans {
  private last: readonly string[] | null = null;

  constructor(private readonly tracer: Tracer) {}

  record(snap: Snapshot, now: number): boolean {
    const names = liveUnmatched(snap.membership, now).map((l) => (l.hostname === null ? l.name : `${l.name} (${l.hostname})`));
    const before = this.last;
    if (before !== null && before.length === names.length && before.every((n, i) => n === names[i])) return false;
    this.last = names;
    // The first sight of an empty set is no change worth a span.
    if (before === null && names.length === 0) return false;
    const span = this.tracer.startSpan(SPAN_MEMBERSHIP, { kind: SpanKind.INTERNAL, root: true, startTime: now });
    span.setAttributes({ [ATTR.generation]: snap.generation, [ATTR_MEMBERSHIP.synced]: snap.membership.synced });
    span.addEvent(
      EVENT_MEMBERSHIP_CHANGED,
      { [ATTR_MEMBERSHIP.unmatchedBefore]: [...(before ?? [])], [ATTR_MEMBERSHIP.unmatched]: names },
      now,
    );
    span.end(now);
    return true;
  }
}
