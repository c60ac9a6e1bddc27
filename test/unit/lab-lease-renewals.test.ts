// The node's Lease renewals from audit events and the lags between them (test/helpers/lease-renewals.ts).
import t from 'tap';
import type { AuditEvent, ServerAuditEvent } from '../../harness/lab/audit-events.js';
import { lagSummary, leaseRenewals } from '../helpers/lease-renewals.js';

const LEASE = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1';
const at = (s: number): string => new Date(Date.UTC(2026, 11, 3, 12, 0, s)).toISOString();
const base = Date.UTC(2026, 11, 3, 12, 0, 0);
function ev(server: string, sec: number, over: Partial<AuditEvent> = {}): ServerAuditEvent {
  return {
    server,
    event: {
      auditID: `${server}-${sec}`,
      stage: 'ResponseComplete',
      verb: 'update',
      requestURI: `${LEASE}?timeout=10s`,
      user: { username: 'system:node:node-1' },
      responseStatus: { code: 200 },
      stageTimestamp: at(sec),
      ...over,
    },
  };
}

t.test('renewals: successful updates of this node Lease only, in stored order', async (t) => {
  const events = [
    ev('kas-2', 20),
    ev('kas-1', 10),
    ev('kas-1', 0),
    ev('kas-3', 30, { responseStatus: { code: 409 } }),
    ev('kas-3', 31, { stage: 'ResponseStarted' }),
    ev('kas-3', 32, { verb: 'get' }),
    ev('kas-3', 33, { requestURI: `${LEASE}-other` }),
    ev('kas-3', 34, { stageTimestamp: 'not a time' }),
  ];
  const r = leaseRenewals(events, 'node-1', base);
  t.same(
    r.renewals.map((x) => [x.server, (x.at - base) / 1000]),
    [
      ['kas-1', 0],
      ['kas-1', 10],
      ['kas-2', 20],
    ],
  );
  t.equal(r.failed, 1, 'the 409 counted as a failed renewal');
  t.same(leaseRenewals(events, 'node-1', base + 5000).renewals.length, 2, 'renewals before fromMs are left out');
});

t.test('lags: between renewals, and the last one to the end of the run', async (t) => {
  const renewals = [0, 10, 20, 45, 55].map((s) => ({ at: base + s * 1000, server: 'kas-1' }));
  const s = lagSummary(renewals, 2, base + 60_000);
  t.same(s, { renewals: 5, failed: 2, p50Ms: 10_000, p90Ms: 25_000, maxMs: 25_000, maxEndedAt: base + 45_000 });
  const stopped = lagSummary(renewals.slice(0, 2), 0, base + 100_000);
  t.equal(stopped.maxMs, 90_000, 'a node that stopped renewing: the age of its last renewal at the end');
  t.same(lagSummary([], 0, base), { renewals: 0, failed: 0, p50Ms: 0, p90Ms: 0, maxMs: 0, maxEndedAt: 0 });
});
