// kube-apiserver's identity Leases as skewgate reads them: which objects count, the table a list
// and watch events build, and which identities are live and unmatched at a moment.
import t from 'tap';
import {
  applyLeaseChange,
  EMPTY_LEASE_TABLE,
  liveUnmatched,
  membershipOf,
  parseIdentityLease,
} from '../../src/membership/identity-leases.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';

/** A Lease as kube-apiserver 1.35/1.36 writes its identity (metadata labels, spec.renewTime in RFC 3339 micro time). */
function lease(hostname: string, renewTime: string | undefined, labels: Record<string, string> = {}): unknown {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: apiserverIdentity(hostname),
      namespace: 'kube-system',
      labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver', 'kubernetes.io/hostname': hostname, ...labels },
    },
    spec: {
      holderIdentity: `${apiserverIdentity(hostname)}_0b1c`,
      leaseDurationSeconds: 3600,
      ...(renewTime === undefined ? {} : { renewTime }),
    },
  };
}

t.test('parseIdentityLease: kube-apiserver identities only', async (t) => {
  t.same(
    parseIdentityLease(lease('cp-1', '2026-12-01T09:00:00.123456Z')),
    { name: apiserverIdentity('cp-1'), hostname: 'cp-1', renewTime: Date.UTC(2026, 11, 1, 9, 0, 0, 123) },
    'micro time read to the millisecond',
  );
  t.match(parseIdentityLease(lease('cp-1', undefined)), { renewTime: null }, 'never renewed');
  t.match(parseIdentityLease(lease('cp-1', 'yesterday')), { renewTime: null }, 'an unreadable time is no renewal');
  t.equal(
    parseIdentityLease(lease('cp-1', '2026-12-01T09:00:00Z', { 'apiserver.kubernetes.io/identity': 'kube-controller-manager' })),
    null,
    "another component's identity",
  );
  t.equal(
    parseIdentityLease({ metadata: { name: 'x', namespace: 'default', labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver' } } }),
    null,
    'another namespace',
  );
  for (const bad of [null, 'lease', 7, {}, { metadata: null }, { metadata: { name: '' } }, { metadata: { name: 5 } }])
    t.equal(parseIdentityLease(bad), null, JSON.stringify(bad));
});

t.test('applyLeaseChange: a list replaces, events add, renew and delete', async (t) => {
  const a = lease('cp-1', '2026-12-01T09:00:00Z');
  const b = lease('cp-2', '2026-12-01T09:00:01Z');
  let r = applyLeaseChange(EMPTY_LEASE_TABLE, { type: 'RELIST', items: [a, b, { kind: 'Other' }] });
  t.equal(r.table.synced, true);
  t.same([...r.table.leases.keys()], [apiserverIdentity('cp-1'), apiserverIdentity('cp-2')]);
  t.equal(r.skipped, 1, 'the object that is not an identity lease is counted');
  const before = r.table;
  r = applyLeaseChange(before, { type: 'MODIFIED', object: lease('cp-1', '2026-12-01T09:00:10Z') });
  t.equal(r.table.leases.get(apiserverIdentity('cp-1'))?.renewTime, Date.UTC(2026, 11, 1, 9, 0, 10), 'a renewal');
  t.equal(before.leases.get(apiserverIdentity('cp-1'))?.renewTime, Date.UTC(2026, 11, 1, 9, 0, 0), 'the previous table is unchanged');
  r = applyLeaseChange(r.table, { type: 'DELETED', object: b });
  t.same([...r.table.leases.keys()], [apiserverIdentity('cp-1')]);
  const same = applyLeaseChange(r.table, { type: 'ADDED', object: 'garbage' });
  t.equal(same.table, r.table, 'a malformed event leaves the table as it was');
  t.equal(same.skipped, 1);
  t.equal(
    applyLeaseChange(EMPTY_LEASE_TABLE, { type: 'ADDED', object: a }).table.synced,
    false,
    'an event before any list does not make it synced',
  );
});

t.test('membershipOf and liveUnmatched', async (t) => {
  const now = Date.UTC(2026, 11, 1, 9, 1, 0);
  const { table } = applyLeaseChange(EMPTY_LEASE_TABLE, {
    type: 'RELIST',
    items: [
      lease('cp-1', '2026-12-01T09:00:55Z'),
      lease('cp-4', '2026-12-01T09:00:58Z'),
      lease('cp-5', '2026-12-01T08:58:00Z'),
      lease('cp-6', undefined),
    ],
  });
  const m = membershipOf(table, new Set([apiserverIdentity('cp-1'), apiserverIdentity('cp-2')]), 60_000);
  t.same(m.unmatched.map((l) => l.hostname).sort(), ['cp-4', 'cp-5', 'cp-6'], 'every identity no member has');
  t.same(
    liveUnmatched(m, now).map((l) => l.hostname),
    ['cp-4'],
    'live: renewed within the bound (cp-5 stopped 3 minutes ago, cp-6 never renewed)',
  );
  t.same(liveUnmatched(m, now + 60_000), [], 'a minute later cp-4 has not renewed either');
  t.same(liveUnmatched(membershipOf(table, new Set([...table.leases.keys()]), 60_000), now), [], 'all matched');
});
