// The node's traffic mix from audit events (test/helpers/traffic-mix.ts).
import t from 'tap';
import type { AuditEvent, ServerAuditEvent } from '../../harness/lab/audit-events.js';
import { identityType, resourceOf, trafficMix } from '../helpers/traffic-mix.js';

const base = Date.UTC(2026, 11, 3, 12, 0, 0);
const ts = (s: number): string => new Date(base + s * 1000).toISOString();
const cert = { username: 'system:node:n1', extra: { 'authentication.kubernetes.io/credential-id': ['X509SHA256=ab'] } };
let n = 0;
function req(o: {
  user?: AuditEvent['user'];
  verb: string;
  at: number;
  end?: number;
  ref?: AuditEvent['objectRef'];
  uri?: string;
}): ServerAuditEvent[] {
  const id = `a${++n}`;
  const common = {
    auditID: id,
    verb: o.verb,
    user: o.user ?? cert,
    requestURI: o.uri ?? '/x',
    requestReceivedTimestamp: ts(o.at),
    ...(o.ref === undefined ? {} : { objectRef: o.ref }),
  };
  const events: ServerAuditEvent[] = [{ server: 'kas-1', event: { ...common, stage: 'ResponseStarted', stageTimestamp: ts(o.at) } }];
  if (o.end !== undefined) events.push({ server: 'kas-1', event: { ...common, stage: 'ResponseComplete', stageTimestamp: ts(o.end) } });
  return events;
}

t.test('identity type and resource, from what kube-apiserver records', async (t) => {
  t.equal(identityType({ auditID: '', stage: '', user: cert }), 'certificate');
  t.equal(
    identityType({
      auditID: '',
      stage: '',
      user: { username: 'system:serviceaccount:a:b', extra: { 'authentication.kubernetes.io/credential-id': ['JTI=x'] } },
    }),
    'service-account token',
  );
  t.equal(identityType({ auditID: '', stage: '', user: { username: 'admin' } }), 'token');
  t.equal(identityType({ auditID: '', stage: '', user: {} }), 'unknown');
  t.equal(
    resourceOf({ auditID: '', stage: '', user: {}, objectRef: { resource: 'leases', apiGroup: 'coordination.k8s.io', apiVersion: 'v1' } }),
    'coordination.k8s.io/v1/leases',
  );
  t.equal(
    resourceOf({ auditID: '', stage: '', user: {}, objectRef: { resource: 'nodes', subresource: 'status', apiVersion: 'v1' } }),
    'core/v1/nodes/status',
  );
  t.equal(resourceOf({ auditID: '', stage: '', user: {}, requestURI: '/api?timeout=32s' }), '/api');
});

t.test('counts and rates per window; watches started, and open at the end', async (t) => {
  const lease = { resource: 'leases', apiGroup: 'coordination.k8s.io', apiVersion: 'v1' };
  const events = [
    ...req({ verb: 'update', at: 5, end: 5, ref: lease }),
    ...req({ verb: 'update', at: 15, end: 15, ref: lease }),
    ...req({ verb: 'update', at: 65, end: 65, ref: lease }),
    ...req({ verb: 'watch', at: 1, ref: { resource: 'pods', apiVersion: 'v1' } }),
    ...req({ verb: 'watch', at: 2, end: 50, ref: { resource: 'services', apiVersion: 'v1' } }),
    ...req({ verb: 'get', at: 10, end: 10, user: { username: 'someone-else' } }),
  ];
  const [steady, later] = trafficMix(
    events,
    [{ name: 'kubelet', matches: (e) => e.user.username === 'system:node:n1' }],
    [
      { name: 'steady', fromMs: base, toMs: base + 60_000 },
      { name: 'later', fromMs: base + 60_000, toMs: base + 120_000 },
    ],
  );
  t.same(
    steady?.rows.map((r) => [r.client, r.identity, r.verb, r.resource, r.count, r.perMinute]),
    [
      ['kubelet', 'certificate', 'update', 'coordination.k8s.io/v1/leases', 2, 2],
      ['kubelet', 'certificate', 'watch', 'core/v1/pods', 1, 1],
      ['kubelet', 'certificate', 'watch', 'core/v1/services', 1, 1],
    ],
    "only the client's requests, received in the window",
  );
  t.same(steady?.watchesStarted, { kubelet: 2 });
  t.same(steady?.watchesOpenAtEnd, { kubelet: 1 }, 'the services watch ended at 50 s');
  t.same(
    later?.rows.map((r) => r.count),
    [1],
  );
  t.same(later?.watchesOpenAtEnd, { kubelet: 1 }, 'the pods watch never ended');
});
