// The verdicts test/cluster/membership.test.ts draws from its record (test/helpers/membership-record.ts).
import t from 'tap';
import { membershipFindings, type MembershipRound } from '../helpers/membership-record.js';

const REFUSAL = 'unmatched_apiserver_identity';
const created = 1_800_000_000_000;
const fresh = { renewTime: created + 400, createdAt: created };
const renewed = { renewTime: created + 10_400, createdAt: created };
const round = (afterTransition: boolean, lease: MembershipRound['lease'], status: number, reason?: string): MembershipRound => ({
  afterTransition,
  lease,
  status,
  reason,
});

t.test('membershipFindings: refused from the transition on, before the Lease was renewed', async (t) => {
  const f = membershipFindings(
    [
      round(false, null, 404, 'resource_not_served'),
      round(false, fresh, 404, 'resource_not_served'),
      round(true, fresh, 503, REFUSAL),
      round(true, fresh, 503, REFUSAL),
    ],
    REFUSAL,
    10_000,
  );
  t.same(f, { afterTransition: 2, notRefused: [], renewedByTransition: false, notFoundBeforeTransition: 1 });
});

t.test('membershipFindings: a 404 after the transition, a late transition, and no transition are found', async (t) => {
  const late = membershipFindings([round(true, renewed, 404, 'resource_not_served'), round(true, renewed, 503, REFUSAL)], REFUSAL, 10_000);
  t.same(late.notRefused, ['answer 1 after the transition: 404 resource_not_served']);
  t.equal(late.renewedByTransition, true, 'the Lease had been renewed: the creation did not do it');
  const none = membershipFindings([round(false, fresh, 404)], REFUSAL, 10_000);
  t.same([none.afterTransition, none.renewedByTransition], [0, null]);
  t.equal(membershipFindings([round(true, null, 503, REFUSAL)], REFUSAL, 10_000).renewedByTransition, null, 'no Lease read');
  t.same(membershipFindings([round(true, fresh, 503, 'other')], REFUSAL, 10_000).notRefused, ['answer 1 after the transition: 503 other']);
});
