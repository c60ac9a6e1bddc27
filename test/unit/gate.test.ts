// The gate's pure parts (src/gate/core/): the decision window, the usage table, Envoy's counters,
// the removal report, and the verdict as a table — one row per reason to hold, and the proceeds.
import t from 'tap';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import {
  gvKey,
  gvrKey,
  type ResourceCapability,
  type ServerState,
  type ServerView,
  type Snapshot,
} from '../../src/discovery/core/types.js';
import { countersSince, parseEnvoyCounters, type EnvoyCounters } from '../../src/gate/core/envoy-counters.js';
import { removalReport } from '../../src/gate/core/removal.js';
import { MAX_CLIENTS, requesterOf, UsageTable, type ClientUsage } from '../../src/gate/core/usage.js';
import {
  findMember,
  gateVerdict,
  type GateInput,
  type GateMember,
  type GateReason,
  type GateSettings,
} from '../../src/gate/core/verdict.js';
import { BUCKET_MS, DecisionWindow, type WindowSummary } from '../../src/gate/core/window.js';
import { NO_MEMBERSHIP, type Membership } from '../../src/membership/identity-leases.js';
import { readyState } from '../helpers/server-states.js';

const NOW = 10_000_000;

t.test('window: counts, errors, p99 and upstreams over the last window; older buckets dropped', async (t) => {
  const w = new DecisionWindow(NOW - 600_000, 300_000);
  w.add(NOW - 200_000, { outcome: 'rejected', seconds: 9, upstream: 'old' });
  for (let i = 0; i < 98; i++) w.add(NOW - 1000, { outcome: 'default', seconds: 0.0008, upstream: null });
  w.add(NOW - 1000, { outcome: 'unavailable', seconds: 0.03, upstream: null });
  w.add(NOW - 1000, { outcome: 'routed', seconds: 0.03, upstream: 'kas-c' });
  w.addRouteErrors(NOW - 1000, 2);
  const s = w.summary(NOW, 120_000);
  w.add(NOW - 200_000, { outcome: 'default', seconds: 0.001, upstream: 'late' });
  t.match(s, { decisions: 100, errors: 1, routeErrors: 2, p99Ms: 50, coveredMs: 120_000 });
  t.notOk(s.routedTo.has('old'), 'the bucket 200 s ago is out of a 120 s window');
  t.same(s.routedTo.get('kas-c'), 1);
  t.equal(w.summary(NOW, 300_000).decisions, 102, 'a longer window sees the older bucket');
  t.equal(w.summary(NOW, 300_000).p99Ms, 50, 'one slow decision in 102 is within the 1 %');
  t.equal(w.summary(NOW, 120_000).routedTo.get('late'), 1, 'a clock that stepped back lands in the newest bucket');
  const young = new DecisionWindow(NOW - 30_000, 120_000);
  t.equal(young.summary(NOW, 120_000).coveredMs, 30_000, 'a young gateway covers less');
  t.equal(young.summary(NOW, 120_000).p99Ms, null, 'no decision: no p99');
  // Buckets past keepMs go: a decision 10 minutes later leaves only the new one.
  w.add(NOW + 600_000, { outcome: 'default', seconds: 120, upstream: null });
  const later = w.summary(NOW + 600_000, 3_600_000);
  t.equal(later.decisions, 1, 'kept only keepMs');
  t.equal(later.p99Ms, 60_000, 'past the last bound counts as the last');
  t.ok(BUCKET_MS > 0);
});

t.test('usage: bounded per resource, least recently seen dropped; users since a time, newest first', async (t) => {
  const u = new UsageTable();
  const R = 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
  u.record(NOW - 5000, { resource: R, user: 'alice', userAgent: 'kubectl/v1.36' });
  u.record(NOW - 4000, { resource: R, user: 'bob', userAgent: 'controller' });
  u.record(NOW - 3000, { resource: R, user: 'alice', userAgent: 'kubectl/v1.36' });
  t.same(
    u.usersOf(R, NOW - 10_000).map((c: ClientUsage) => [c.user, c.count, c.lastSeen]),
    [
      ['alice', 2, NOW - 3000],
      ['bob', 1, NOW - 4000],
    ],
  );
  t.same(
    u.usersOf(R, NOW - 3500).map((c) => c.user),
    ['alice'],
    'only since the time asked',
  );
  for (let i = 0; i < MAX_CLIENTS + 3; i++) u.record(NOW + i, { resource: R, user: `u${i}`, userAgent: '' });
  t.equal(u.usersOf(R, 0).length, MAX_CLIENTS, 'at most MAX_CLIENTS per resource');
  t.equal(u.dropped(), 5, 'alice, bob and the three oldest newcomers forgotten, and counted');
  t.same(u.usersOf('nothing/v1/here', 0), []);
});

t.test('requester: the certificate user; a token subject, unverified; else what the request carries', async (t) => {
  const jwt = (claims: object): string => ['e30', Buffer.from(JSON.stringify(claims)).toString('base64url'), 'sig'].join('.');
  t.equal(requesterOf('system:kube-controller-manager', 'Bearer x'), 'system:kube-controller-manager');
  t.equal(requesterOf(null, `Bearer ${jwt({ sub: 'system:serviceaccount:ns:app' })}`), 'system:serviceaccount:ns:app (token, unverified)');
  t.equal(requesterOf(null, 'Bearer opaque-token'), 'a bearer token');
  t.equal(requesterOf(null, `Bearer ${jwt({ iss: 'x' })}`), 'a bearer token', 'no subject');
  t.equal(requesterOf(null, 'Basic dTpw'), 'unknown credentials');
  t.equal(requesterOf(null, undefined), 'anonymous');
  t.equal(requesterOf('x'.repeat(500), undefined).length, 160, 'clipped');
});

const statsDoc = (failOpen: number, r503: number, cx: number): unknown => ({
  stats: [
    { name: 'http.skewgate.ext_proc.failure_mode_allowed', value: failOpen },
    { name: 'http.skewgate.ext_proc.streams_failed', value: 0 },
    { name: 'cluster.kas-a.upstream_rq_503', value: r503 },
    { name: 'cluster.skewgate-extproc.upstream_rq_503', value: 1000 },
    { name: 'cluster.default.upstream_cx_none_healthy', value: cx },
    { name: 'cluster.kas-a.upstream_rq_200', value: 5 },
  ],
});
const clustersDoc = (a: number, c: string | number): unknown => ({
  cluster_statuses: [
    {
      name: 'skewgate-extproc',
      host_statuses: [{ address: { socket_address: { address: '127.0.0.1', port_value: 1 } }, stats: [{ name: 'rq_total', value: '99' }] }],
    },
    {
      name: 'default',
      host_statuses: [
        { address: { socket_address: { address: '10.0.0.1', port_value: 6443 } }, stats: [{ name: 'rq_total', value: String(a) }] },
        {
          address: { socket_address: { address: '10.0.0.3', port_value: 6443 } },
          hostname: 'kas-c.example',
          stats: [{ name: 'rq_total', value: c }],
        },
      ],
    },
    {
      name: 'kas-c',
      host_statuses: [
        { address: { socket_address: { address: '10.0.0.3', port_value: 6443 } }, stats: [{ name: 'rq_total', value: '2' }] },
      ],
    },
  ],
});

t.test("Envoy's counters: parsed from /stats and /clusters, the ext_proc cluster left out; differences between readings", async (t) => {
  const a = parseEnvoyCounters(1, statsDoc(1, 2, 0), clustersDoc(10, '3'), 'skewgate-extproc');
  t.same(Object.fromEntries(a.extproc), { streams_failed: 0, failure_mode_allowed: 1, message_timeouts: 0 });
  t.same(Object.fromEntries(a.unexplained503), { upstream_rq_503: 2, upstream_cx_none_healthy: 0 });
  t.same(Object.fromEntries(a.hostRequests), { '10.0.0.1:6443': 10, '10.0.0.3:6443': 5, 'kas-c.example:6443': 3 });
  const b = parseEnvoyCounters(2, statsDoc(4, 2, 7), clustersDoc(15, 'junk'), 'skewgate-extproc');
  const d = countersSince(a, b);
  t.same(Object.fromEntries(d.extproc), { streams_failed: 0, failure_mode_allowed: 3, message_timeouts: 0 });
  t.same(Object.fromEntries(d.unexplained503), { upstream_rq_503: 0, upstream_cx_none_healthy: 7 });
  t.equal(d.hostRequests.get('10.0.0.1:6443'), 5);
  t.equal(d.hostRequests.get('10.0.0.3:6443'), 2, 'a counter that went back (here: unreadable, so 0 — an Envoy restarted) counts from 0');
  const empty = parseEnvoyCounters(3, { nope: 1 }, null, 'x');
  t.equal(empty.hostRequests.size, 0, 'another shape reads as nothing seen');
});

// A control plane mid-upgrade: a, b old, c new (it alone serves the policies).
const VERBS = new Set(['get', 'list']);
function view(gvrs: string[]): ServerView {
  const resources = new Map<string, ResourceCapability>();
  const gvs = new Set<string>();
  for (const g of gvrs) {
    const [group = '', version = '', resource = ''] = g.split('/');
    resources.set(gvrKey(group, version, resource), { verbs: VERBS, subresources: new Map(), namespaced: true });
    gvs.add(gvKey(group, version));
  }
  return { source: 'aggregated', resources, groupVersions: gvs };
}
const OLD = ['/v1/pods', 'apps/v1/deployments'];
const NEW = [...OLD, 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies'];
const POLICIES = 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const state = (name: string, gvrs: string[], over: Partial<ServerState> = {}): ServerState =>
  readyState(name, view(gvrs), NOW, { url: `https://10.0.0.${name.at(-1) === 'a' ? 1 : name.at(-1) === 'b' ? 2 : 3}:6443`, ...over });
const snap = (servers: ServerState[], membership: Membership = NO_MEMBERSHIP): Snapshot =>
  buildSnapshot(servers, 1, undefined, { membership });
const members = (s: Snapshot): GateMember[] =>
  s.servers.map((x) => ({ name: x.name, url: x.url, role: x.draining ? 'draining' : 'member' }));
const settings: GateSettings = {
  windowMs: 120_000,
  usageWindowMs: 900_000,
  maxErrorRate: 0.01,
  maxDecisionLatencyMs: 100,
  minDecisions: 20,
};
const quiet: WindowSummary = {
  windowMs: 120_000,
  coveredMs: 120_000,
  decisions: 500,
  errors: 0,
  routeErrors: 0,
  p99Ms: 2,
  routedTo: new Map(),
};
const counters = (
  extproc: Record<string, number> = {},
  u503: Record<string, number> = {},
  hosts: Record<string, number> = {},
): EnvoyCounters => ({
  at: NOW,
  extproc: new Map(Object.entries(extproc)),
  unexplained503: new Map(Object.entries(u503)),
  hostRequests: new Map(Object.entries(hosts)),
});
const base = (over: Partial<GateInput> = {}): GateInput => {
  const s = over.snapshot ?? snap([state('kas-a', OLD), state('kas-b', OLD), state('kas-c', NEW)]);
  return {
    now: NOW,
    snapshot: s,
    members: members(s),
    staleAfterMs: 3000,
    window: quiet,
    envoy: { ok: true, since: counters({}, {}, { '10.0.0.3:6443': 4 }), spanMs: 120_000 },
    usageOf: () => [],
    settings,
    question: {},
    ...over,
  };
};
const used = (resource: string): ClientUsage[] =>
  resource === POLICIES
    ? [{ user: 'system:serviceaccount:ns:app (token, unverified)', userAgent: 'app/1.0', count: 3, lastSeen: NOW - 60_000 }]
    : [];

t.test('verdict: every reason to hold, one row each; nothing else holds in that row', async (t) => {
  const rows: [string, Partial<GateInput>, GateReason][] = [
    ['a member not ready', { snapshot: snap([state('kas-a', OLD), state('kas-b', OLD, { ready: false })]) }, 'member_not_ready'],
    ['a view not current', { snapshot: snap([state('kas-a', OLD), state('kas-b', OLD, { consecutiveFailures: 1 })]) }, 'view_not_current'],
    ['a member draining', { snapshot: snap([state('kas-a', OLD), state('kas-b', OLD, { draining: true })]) }, 'member_leaving'],
    [
      'an apiserver being verified',
      {
        snapshot: snap([state('kas-a', OLD)], {
          ...NO_MEMBERSHIP,
          probing: [{ name: 'learnt-x', url: 'https://10.0.0.9:6443', sources: ['node'], problem: null }],
        }),
      },
      'member_not_verified',
    ],
    [
      'a live identity no member matches',
      {
        snapshot: snap([state('kas-a', OLD)], {
          synced: true,
          unmatched: [{ name: 'apiserver-zz', hostname: 'cp-9', renewTime: NOW - 1000 }],
          livenessMs: 60_000,
          probing: [],
        }),
      },
      'unmatched_identity',
    ],
    ['a gateway younger than the window', { window: { ...quiet, coveredMs: 30_000 } }, 'window_not_covered'],
    ['routing failures', { window: { ...quiet, routeErrors: 1 } }, 'ext_proc_failures'],
    ['Envoy failed open', { envoy: { ok: true, since: counters({ failure_mode_allowed: 2 }), spanMs: 60_000 } }, 'ext_proc_failures'],
    ['an apiserver answered 503', { envoy: { ok: true, since: counters({}, { upstream_rq_503: 1 }), spanMs: 60_000 } }, 'unexplained_503'],
    ['errors above the rate', { window: { ...quiet, decisions: 100, errors: 2 } }, 'error_rate'],
    ['decisions slow', { window: { ...quiet, p99Ms: 200 } }, 'decision_latency'],
    [
      'a member not at the version asked',
      {
        snapshot: snap([state('kas-a', OLD, { gitVersion: 'v1.36.3' }), state('kas-b', OLD, { gitVersion: 'v1.35.4' })]),
        question: { version: 'v1.36.3' },
      },
      'version_not_reached',
    ],
    ['the expected member unknown', { question: { expect: 'kas-z' } }, 'expected_member_missing'],
    [
      'the expected member not current',
      { snapshot: snap([state('kas-a', OLD), state('kas-c', NEW, { ready: false })]), question: { expect: 'kas-c' } },
      'expected_member_not_current',
    ],
    [
      'the expected member never sent a request',
      { envoy: { ok: true, since: counters(), spanMs: 60_000 }, question: { expect: 'kas-c' } },
      'expected_member_not_routed',
    ],
    ['removing an unknown apiserver', { question: { removing: 'kas-z' } }, 'removal_unknown_member'],
    [
      'removing the last ready member',
      { snapshot: snap([state('kas-a', OLD), state('kas-b', OLD, { ready: false })]), question: { removing: 'kas-a' } },
      'removal_last_member',
    ],
    ['removing the only server of something in use', { usageOf: used, question: { removing: 'kas-c' } }, 'removal_in_use'],
  ];
  for (const [what, over, reason] of rows) {
    const g = gateVerdict(base(over));
    t.equal(g.verdict, 'hold', `${what}: hold`);
    t.ok(
      g.holds.some((h) => h.reason === reason),
      `${what}: ${reason} (${g.holds.map((h) => `${h.reason}: ${h.detail}`).join('; ')})`,
    );
    // A removal of the last member also fails the members check; everything else holds for one reason only.
    if (!['removal_last_member', 'member_not_ready', 'expected_member_not_current'].includes(reason))
      t.same([...new Set(g.holds.map((h) => h.reason))], [reason], `${what}: nothing else holds`);
  }
});

t.test('verdict: proceed, with what passed, what was not checked, the removal report and a retry hint', async (t) => {
  const g = gateVerdict(base({ question: { expect: '10.0.0.3', removing: 'kas-a' }, usageOf: used }));
  t.equal(g.verdict, 'proceed', g.holds.map((h) => h.detail).join('; '));
  t.equal(g.passed.length, 4, g.passed.join(' | '));
  t.match(g.passed[2], /kas-c joined, discovered and sent 4 requests/, 'the expected member found by its address');
  t.match(g.passed[3], /every resource kas-a serves is served by another member/);
  t.same(g.removal?.resources, []);
  t.equal(g.retryAfterSeconds, 12);
  const blind = gateVerdict(
    base({
      envoy: { ok: false, why: 'no admin' },
      window: { ...quiet, decisions: 3, routedTo: new Map([['kas-c', 1]]) },
      question: { expect: 'kas-c' },
    }),
  );
  t.equal(blind.verdict, 'proceed', 'Envoy unread and too few decisions: said, not held');
  t.match(blind.unchecked, [/error rate: 3 decisions/, /Envoy's counters.*no admin/]);
  t.equal(blind.window.extprocFailures, null);
  const upgraded = gateVerdict(
    base({
      snapshot: snap([state('kas-a', OLD, { gitVersion: 'v1.36.3' }), state('kas-b', OLD, { gitVersion: 'v1.36.3+k3s1' })]),
      question: { version: '1.36.3' },
    }),
  );
  t.equal(upgraded.verdict, 'proceed', 'every member at the version (build metadata and a missing v aside)');
  t.match(upgraded.passed, [/ready/, /window|last/, 'every member runs 1.36.3']);
  const unused = gateVerdict(base({ question: { removing: 'kas-c' } }));
  t.equal(unused.verdict, 'proceed', 'removing the only server of something nobody uses: proceed');
  t.same(
    unused.removal?.resources.map((r) => r.resource),
    [POLICIES],
    '… and the report names it',
  );
});

t.test(
  'removal report: only what no other member lists; a member with a stale view is a doubt, a draining one does not count',
  async (t) => {
    const s = snap([state('kas-a', OLD), state('kas-b', NEW, { draining: true }), state('kas-c', NEW, { consecutiveFailures: 2 })]);
    const r = removalReport(s, 'kas-c', { now: NOW, staleAfterMs: 3000, usageWindowMs: 60_000, usageOf: used });
    t.same(
      r.resources.map((x) => x.resource),
      [POLICIES],
      'kas-b is leaving: it does not keep the policies served',
    );
    t.equal(r.resources[0]?.users.length, 1);
    t.equal(r.doubt, null, 'kas-c itself stale is no doubt about the others');
    const doubted = removalReport(s, 'kas-a', { now: NOW, staleAfterMs: 3000, usageWindowMs: 60_000, usageOf: used });
    t.match(doubted.doubt, /kas-c are not current/);
  },
);

t.test('members are found by name, hostname, host:port or host', async (t) => {
  const ms: GateMember[] = [
    { name: 'kas-a', url: 'https://10.0.0.1:6443', hostname: 'cp-1', role: 'member' },
    { name: 'learnt-10-0-0-4-6443', url: 'https://10.0.0.4:6443', role: 'member' },
  ];
  t.equal(findMember(ms, 'kas-a')?.name, 'kas-a');
  t.equal(findMember(ms, 'cp-1')?.name, 'kas-a');
  t.equal(findMember(ms, '10.0.0.4:6443')?.name, 'learnt-10-0-0-4-6443');
  t.equal(findMember(ms, '10.0.0.4')?.name, 'learnt-10-0-0-4-6443');
  t.equal(findMember(ms, '10.0.0.5'), undefined);
});
