// Pure: what `skewgate skew` reports, from one snapshot: the resources not every apiserver serves,
// the apiservers compared, and those that could not be (named: a missing view would make "no skew"
// a guess). The admin endpoint's GET /v1/skew and `skew -o json` are this object.
import { computeSkew, type SkewRow } from '../routing/skew.js';
import type { Snapshot } from '../discovery/core/types.js';
import { membershipView, type MembershipView } from './membership-view.js';

/** The verdict, as a literal: exit 0 only for no_skew. */
export type SkewVerdictKind = 'no_skew' | 'skew' | 'not_compared' | 'cannot_compare';

export interface NotCompared {
  readonly name: string;
  readonly error: string;
  /** A configured or learnt member (else a running apiserver no member matches). */
  readonly member: boolean;
}

export interface SkewVerdict {
  readonly verdict: SkewVerdictKind;
  readonly skew: readonly SkewRow[];
  readonly compared: readonly string[];
  /** Apiservers without a discovery view, and why. */
  readonly notCompared: readonly NotCompared[];
  /** The one-line summary for a terminal. */
  readonly summary: string;
}

export interface SkewReport extends SkewVerdict {
  readonly membership: MembershipView;
  /** The snapshot the report was made from. */
  readonly generation: number;
}

/**
 * The verdict from a snapshot and the live apiservers no member matches (running, so part of the
 * cluster, but never compared).
 */
export function skewVerdict(snapshot: Snapshot, unmatched: readonly string[] = []): SkewVerdict {
  const skew = computeSkew(snapshot);
  const compared = snapshot.servers.filter((s) => s.view !== null).map((s) => s.name);
  const notCompared: NotCompared[] = snapshot.servers
    .filter((s) => s.view === null)
    .map((s) => ({ name: s.name, error: s.lastError ?? 'no discovery yet', member: true }))
    .concat(unmatched.map((name) => ({ name, error: 'a running apiserver that is not in the config', member: false })));
  const missing = notCompared.map((s) => s.name).join(', ');
  let verdict: SkewVerdictKind;
  let summary: string;
  if (compared.length === 0) {
    verdict = 'cannot_compare';
    summary = `cannot compare: no apiserver answered discovery (${missing || 'none configured'})`;
  } else if (skew.length > 0) {
    verdict = 'skew';
    summary = `skew: ${skew.length} resource${skew.length === 1 ? '' : 's'} not served by all ${compared.length} apiservers compared${missing ? `; not compared: ${missing}` : ''}`;
  } else if (notCompared.length > 0) {
    verdict = 'not_compared';
    summary = `no skew among the ${compared.length} apiservers compared, but not compared: ${missing}`;
  } else {
    verdict = 'no_skew';
    summary = `no skew: every resource is served by all ${compared.length} apiservers`;
  }
  return { verdict, skew, compared, notCompared, summary };
}

/** The whole report: the verdict with the membership behind it. */
export function skewReport(snapshot: Snapshot, now: number, membershipProblem: string | null): SkewReport {
  const membership = membershipView(snapshot, now, membershipProblem);
  const unmatched = membership.unmatched.map((u) => (u.hostname === null ? u.identity : `${u.identity} (hostname ${u.hostname})`));
  return { ...skewVerdict(snapshot, unmatched), membership, generation: snapshot.generation };
}
