// The verdicts test/cluster/membership.test.ts draws from its record of an apiserver no source
// names coming up (test/unit/lab-membership-record.test.ts). Pure. Each round of the record reads
// skewgate's log, then lists the stranger's identity Lease, then sends a request: so an answer
// marked afterTransition was sent after skewgate had logged that the stranger matches no member,
// and that round's Lease was read after it too.

/** The stranger's identity Lease as one round listed it. */
export interface LeaseSeen {
  /** spec.renewTime, epoch ms. */
  readonly renewTime: number;
  /** metadata.creationTimestamp, epoch ms (whole seconds). */
  readonly createdAt: number;
}

export interface MembershipRound {
  readonly afterTransition: boolean;
  readonly lease: LeaseSeen | null;
  readonly status: number;
  readonly reason: string | undefined;
}

export interface MembershipFindings {
  /** Answers sent after skewgate logged the transition, and those of them that were not its refusal. */
  readonly afterTransition: number;
  readonly notRefused: readonly string[];
  /**
   * Whether the stranger's Lease had been renewed by the first read after the transition (null:
   * no such read showed it). kube-apiserver creates its identity Lease and renews it every
   * renewIntervalMs: not yet renewed means skewgate acted on the Lease's creation, not on a later
   * event or a periodic relist.
   */
  readonly renewedByTransition: boolean | null;
  /** 404s answered once the Lease was listable but before skewgate's transition (its watch had not told it yet): a figure. */
  readonly notFoundBeforeTransition: number;
}

/** A Lease counts as renewed once its renewTime is half an interval past its creation (created and first renewed 10 s apart). */
export function membershipFindings(rounds: readonly MembershipRound[], refusal: string, renewIntervalMs: number): MembershipFindings {
  const after = rounds.filter((r) => r.afterTransition);
  const first = after[0]?.lease ?? null;
  return {
    afterTransition: after.length,
    notRefused: after.flatMap((r, i) =>
      r.status === 503 && r.reason === refusal ? [] : [`answer ${i + 1} after the transition: ${r.status} ${r.reason ?? 'no reason'}`],
    ),
    renewedByTransition: first === null ? null : first.renewTime - first.createdAt >= renewIntervalMs / 2,
    notFoundBeforeTransition: rounds.filter((r) => !r.afterTransition && r.lease !== null && r.status === 404).length,
  };
}
