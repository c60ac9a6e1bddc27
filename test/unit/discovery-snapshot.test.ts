import t from 'tap';
import { buildSnapshot, initialSnapshot } from '../../src/discovery/core/snapshot.js';
import { legacyView } from '../../src/discovery/core/parse.js';
import type { ResourceCapability, ServerState, ServerView } from '../../src/discovery/core/types.js';

function cap(verbs: string[], namespaced = true): ResourceCapability {
  return { verbs: new Set(verbs), subresources: new Map(), namespaced };
}

function view(entries: Record<string, Record<string, ResourceCapability>>): ServerView {
  return legacyView(
    Object.entries(entries).map(([gv, rs]) => {
      const [group = '', version = ''] = gv.split('/');
      return { group, version, resources: new Map(Object.entries(rs)) };
    }),
  );
}

function state(name: string, v: ServerView | null, extra: Partial<ServerState> = {}): ServerState {
  return {
    name,
    url: `https://127.0.0.1/${name}`,
    view: v,
    lastSuccessAt: v ? 1000 : null,
    consecutiveFailures: 0,
    lastError: null,
    ready: true,
    ...extra,
  };
}

const OLD = view({ '/v1': { pods: cap(['get', 'list']) }, 'apps/v1': { deployments: cap(['get']) } });
const NEW = view({
  '/v1': { pods: cap(['get', 'list', 'watch']) },
  'apps/v1': { deployments: cap(['get']) },
  'admissionregistration.k8s.io/v1': { mutatingadmissionpolicies: cap(['get'], false) },
  'resource.k8s.io/v1beta2': {},
});

t.test('union across three servers, one without a view', async (t) => {
  const snap = buildSnapshot(
    [state('a', OLD), state('b', NEW), state('c', null, { consecutiveFailures: 3, lastError: 'down', ready: false })],
    7,
  );
  t.equal(snap.generation, 7);
  t.same(
    snap.servers.map((s) => s.name),
    ['a', 'b', 'c'],
    'config order',
  );
  t.same([...(snap.resources.get('/v1/pods')?.keys() ?? [])], ['a', 'b']);
  t.same([...(snap.resources.get('/v1/pods')?.get('b')?.verbs ?? [])], ['get', 'list', 'watch'], 'per-server capability kept');
  t.same([...(snap.resources.get('admissionregistration.k8s.io/v1/mutatingadmissionpolicies')?.keys() ?? [])], ['b']);
  t.equal(snap.resources.get('nope/v1/x'), undefined);
  t.same([...(snap.groupVersions.get('apps/v1') ?? [])], ['a', 'b']);
  t.same([...(snap.groupVersions.get('resource.k8s.io/v1beta2') ?? [])], ['b'], 'a group/version with no resources is still listed');
  t.equal(snap.servers[2]?.view, null);
  t.equal(snap.servers[2]?.consecutiveFailures, 3);
});

t.test('immutability', async (t) => {
  const snap = buildSnapshot([state('a', OLD), state('b', NEW)], 1);
  t.ok(Object.isFrozen(snap));
  t.ok(Object.isFrozen(snap.servers));
  t.ok(Object.isFrozen(snap.servers[0]));
  t.throws(() => (snap.resources as Map<string, unknown>).set('x', 1), TypeError);
  t.throws(() => (snap.resources.get('/v1/pods') as Map<string, unknown>).delete('a'), TypeError);
  t.throws(() => (snap.groupVersions.get('apps/v1') as Set<string>).add('z'), TypeError);
  t.throws(() => {
    (snap as { generation: number }).generation = 9;
  }, TypeError);
});

t.test('indexes are reused when no view object changed', async (t) => {
  const s1 = buildSnapshot([state('a', OLD), state('b', NEW), state('c', null)], 1);
  // Only timestamps, failures and readiness moved.
  const s2 = buildSnapshot(
    [state('a', OLD, { lastSuccessAt: 2000 }), state('b', NEW, { ready: false }), state('c', null, { consecutiveFailures: 1 })],
    2,
    s1,
  );
  t.equal(s2.generation, 2);
  t.equal(s2.resources, s1.resources, 'resources map reused');
  t.equal(s2.groupVersions, s1.groupVersions, 'groupVersions map reused');
  t.equal(s2.servers[0]?.lastSuccessAt, 2000, 'states are the new ones');
  t.equal(s2.servers[1]?.ready, false);

  // An equal-content but different view object is a change: rebuild.
  const OLD2 = view({ '/v1': { pods: cap(['get', 'list']) }, 'apps/v1': { deployments: cap(['get']) } });
  const s3 = buildSnapshot([state('a', OLD2), state('b', NEW), state('c', null)], 3, s2);
  t.not(s3.resources, s2.resources);
  t.same([...s3.resources.keys()].sort(), [...s2.resources.keys()].sort());

  // A server gaining its first view.
  const s4 = buildSnapshot([state('a', OLD2), state('b', NEW), state('c', OLD)], 4, s3);
  t.not(s4.resources, s3.resources);
  t.same([...(s4.resources.get('/v1/pods')?.keys() ?? [])], ['a', 'b', 'c']);

  // A different server list (e.g. reordered) never reuses.
  const s5 = buildSnapshot([state('b', NEW), state('a', OLD2), state('c', OLD)], 5, s4);
  t.not(s5.resources, s4.resources);
});

t.test('initial snapshot: every server, no view', async (t) => {
  const snap = initialSnapshot([
    { name: 'a', url: 'https://127.0.0.1:1' },
    { name: 'b', url: 'https://127.0.0.1:2' },
  ]);
  t.equal(snap.generation, 0);
  t.same(
    snap.servers.map((s) => [s.name, s.view, s.ready, s.lastSuccessAt, s.consecutiveFailures]),
    [
      ['a', null, null, null, 0],
      ['b', null, null, null, 0],
    ],
  );
  t.equal(snap.resources.size, 0);
  t.equal(snap.groupVersions.size, 0);
});

t.test(
  'the generation moves only for what routing can tell: a view, readiness, failures, versions, cordons, membership — not a time',
  async (t) => {
    const { routingInputsChanged } = await import('../../src/discovery/core/snapshot.js');
    const servers = [state('a', OLD), state('b', NEW)];
    const prev = buildSnapshot(servers, 7);
    const same = (over: Partial<ServerState>): readonly ServerState[] => [
      servers[0] as ServerState,
      { ...(servers[1] as ServerState), ...over },
    ];
    t.notOk(routingInputsChanged(prev, same({ lastSuccessAt: 99_999 }), prev.membership), "a round that only refreshed b's view age");
    const rows: [string, Partial<ServerState>][] = [
      ['a new view object', { view: view({ '/v1': { pods: cap(['get']) } }) }],
      ['readiness', { ready: false }],
      ['a failed round', { consecutiveFailures: 1, lastError: 'boom' }],
      ['a version read', { gitVersion: 'v1.36.3' }],
      ['draining', { draining: true }],
      ['a cordon', { cordon: 'drain' }],
      ['a first fetch', { lastSuccessAt: null }],
    ];
    for (const [what, over] of rows) t.ok(routingInputsChanged(prev, same(over), prev.membership), what);
    t.ok(routingInputsChanged(prev, [servers[0] as ServerState], prev.membership), 'a member gone');
    t.ok(routingInputsChanged(prev, servers, { synced: true, unmatched: [], livenessMs: 1, probing: [] }), 'the membership verified');
  },
);
