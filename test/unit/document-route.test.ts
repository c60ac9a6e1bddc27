// Discovery-like documents (legacy discovery, OpenAPI): which apiserver answers, as a table over
// the whole ladder (decide()), on snapshots built by the real buildSnapshot().
import t from 'tap';
import { buildDocumentIndex, groupVersionScope, SCOPE_ALL } from '../../src/discovery/core/document-index.js';
import type { Membership } from '../../src/membership/identity-leases.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import { gvKey, gvrKey, type ResourceCapability, type ServerState, type ServerView } from '../../src/discovery/core/types.js';
import { classifyRequest } from '../../src/k8s/classify.js';
import { decide } from '../../src/routing/decide.js';
import type { Decision } from '../../src/routing/decision.js';
import { documentOf } from '../../src/routing/document-route.js';
import { readyState } from '../helpers/server-states.js';

const NOW = 1_000_000;
const VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
const AGGREGATED_JSON = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
const AGGREGATED_PB = 'application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
const NOPEER = `${AGGREGATED_JSON};profile=nopeer`;

interface Res {
  gvr: string;
  verbs?: string[];
  sub?: Record<string, string[]>;
}

function view(resources: Res[], openapi?: Record<string, string>, extraGvs: string[] = []): ServerView {
  const map = new Map<string, ResourceCapability>();
  const gvs = new Set<string>(extraGvs);
  for (const r of resources) {
    const [g = '', v = '', res = ''] = r.gvr.split('/');
    map.set(gvrKey(g, v, res), {
      verbs: new Set(r.verbs ?? VERBS),
      subresources: new Map(Object.entries(r.sub ?? {}).map(([k, vs]) => [k, new Set(vs)])),
      namespaced: true,
    });
    gvs.add(gvKey(g, v));
  }
  return { source: 'aggregated', resources: map, groupVersions: gvs, ...(openapi ? { openapiV3: new Map(Object.entries(openapi)) } : {}) };
}

const server = (name: string, v: ServerView | null, over: Partial<ServerState> = {}): ServerState => readyState(name, v, NOW, over);

const OLD: Res[] = [
  { gvr: '/v1/pods', sub: { status: ['get', 'patch'], log: ['get'] } },
  { gvr: 'apps/v1/deployments', sub: { scale: ['get', 'patch'] } },
  { gvr: 'admissionregistration.k8s.io/v1/validatingadmissionpolicies' },
];
const NEW: Res[] = [
  ...OLD.map((r) => (r.gvr === '/v1/pods' ? { ...r, sub: { ...r.sub, resize: ['get', 'patch'] } } : r)),
  { gvr: 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies' },
];
// OpenAPI v3 indexes: core v1's schema differs between the versions although its resources barely do.
const OA_OLD = { 'api/v1': 'H1OLD', 'apis/apps/v1': 'HAPPS', 'apis/admissionregistration.k8s.io/v1': 'HAR1', version: 'HV' };
const OA_NEW = { 'api/v1': 'H1NEW', 'apis/apps/v1': 'HAPPS', 'apis/admissionregistration.k8s.io/v1': 'HAR2', version: 'HV' };
const old = (name: string, over: Partial<ServerState> = {}): ServerState => server(name, view(OLD, OA_OLD), over);
const neu = (name: string, over: Partial<ServerState> = {}): ServerState => server(name, view(NEW, OA_NEW), over);
const mixed = (): ServerState[] => [old('a'), old('b'), neu('c')];

const unseen: Membership = {
  synced: true,
  unmatched: [{ name: 'apiserver-unseen', hostname: 'cp-4', renewTime: NOW - 1_000 }],
  livenessMs: 60_000,
  probing: [],
};

interface Row {
  name: string;
  path: string;
  method?: string;
  accept?: string;
  servers: ServerState[];
  membership?: Membership;
  want: Partial<Decision> & { outcome: Decision['outcome'] };
}

const rows: Row[] = [
  // Legacy discovery
  {
    name: 'a group/version only the new server lists whole: routed to it',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c', candidates: ['c'] },
  },
  {
    name: 'a group/version every server lists alike: balanced',
    path: '/apis/apps/v1',
    servers: mixed(),
    want: { outcome: 'default', reason: 'served_by_all', candidates: ['a', 'b', 'c'] },
  },
  {
    name: '/api/v1 where the new server adds a subresource: routed to it',
    path: '/api/v1',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: '/api/v1/ (trailing slash) is the same document',
    path: '/api/v1/',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: 'a document two servers hold whole, one cordoned: the open one, whatever the pick',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), neu('b', { cordon: 'cordon' }), neu('c')],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c', candidates: ['b', 'c'] },
  },
  {
    name: 'a document only a cordoned server holds whole: routed to it',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), neu('c', { cordon: 'cordon' })],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c', candidates: ['c'] },
  },
  {
    name: 'a document only a drained server serves: 503, nothing new goes to it',
    path: '/apis/new.example/v1',
    servers: [old('a'), old('b'), server('c', view([...OLD, { gvr: 'new.example/v1/widgets' }]), { cordon: 'drain' })],
    want: { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['c'] },
  },
  {
    name: '/apis/<group> with the same versions everywhere: balanced',
    path: '/apis/admissionregistration.k8s.io',
    servers: mixed(),
    want: { outcome: 'default', reason: 'served_by_all' },
  },
  {
    name: 'the legacy /apis with a group only one server serves: routed to it',
    path: '/apis',
    servers: [old('a'), server('b', view([...OLD, { gvr: 'new.example/v1/widgets' }]))],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'b', candidates: ['b'] },
  },
  {
    name: 'the legacy /apis with the same groups everywhere: balanced',
    path: '/apis',
    servers: mixed(),
    want: { outcome: 'default', reason: 'served_by_all' },
  },
  {
    name: '/apis as aggregated protobuf (not merged at the edge): a server listing every resource',
    path: '/apis',
    accept: AGGREGATED_PB,
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: "/apis asking for one server's own view (profile=nopeer): any",
    path: '/apis',
    accept: NOPEER,
    servers: mixed(),
    want: { outcome: 'passthrough', reason: 'non_resource' },
  },
  {
    name: '/api as APIVersions is the same everywhere',
    path: '/api',
    servers: mixed(),
    want: { outcome: 'passthrough', reason: 'non_resource' },
  },
  {
    name: '/api as aggregated discovery lists the core resources',
    path: '/api',
    accept: AGGREGATED_JSON,
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: 'not a GET: the apiserver answers it',
    path: '/apis/admissionregistration.k8s.io/v1',
    method: 'POST',
    servers: mixed(),
    want: { outcome: 'passthrough', reason: 'non_resource' },
  },
  {
    name: "a group/version nobody serves: any apiserver's 404 is true",
    path: '/apis/nothing.example/v1',
    servers: mixed(),
    want: { outcome: 'passthrough', reason: 'non_resource' },
  },
  {
    name: 'a group/version nobody serves while an unseen apiserver lives: 503',
    path: '/apis/nothing.example/v1',
    servers: mixed(),
    membership: unseen,
    want: { outcome: 'unavailable', reason: 'unmatched_apiserver_identity', candidates: ['apiserver-unseen'] },
  },
  {
    name: 'a server that is not ready takes no part',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), server('c', view([{ gvr: 'new.example/v1/widgets' }]), { ready: false })],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'a', candidates: ['a'] },
  },
  {
    name: 'a group only a server that is not ready serves: 503, never its absence',
    path: '/apis/new.example/v1',
    servers: [old('a'), server('c', view([...OLD, { gvr: 'new.example/v1/widgets' }]), { ready: false })],
    want: { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['c'] },
  },
  {
    name: "the new server not ready: the union is the ready servers' (as the merged /apis)",
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), old('b'), neu('c', { ready: false })],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'a', candidates: ['a', 'b'] },
  },
  {
    name: 'a draining member is not asked',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), neu('b'), neu('c', { draining: true })],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'b', candidates: ['b'] },
  },
  {
    name: 'no server holds the union: the fullest answers',
    path: '/apis/mixed.example/v1',
    servers: [
      server('a', view([{ gvr: 'mixed.example/v1/one' }])),
      server('b', view([{ gvr: 'mixed.example/v1/two' }, { gvr: 'mixed.example/v1/three' }])),
    ],
    want: { outcome: 'routed', reason: 'no_complete_document', upstream: 'b', candidates: ['a', 'b'] },
  },
  {
    name: 'fewer verbs is not whole',
    path: '/apis/apps/v1',
    servers: [server('a', view([{ gvr: 'apps/v1/deployments', verbs: ['get'] }])), server('b', view([{ gvr: 'apps/v1/deployments' }]))],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'b' },
  },
  {
    name: 'an empty group/version is still served',
    path: '/apis/empty.example/v1',
    servers: [server('a', view([], undefined, ['empty.example/v1'])), server('b', view([]))],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'a' },
  },
  // Nothing is judged before every ready view is current
  {
    name: 'readiness not probed yet',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), neu('c', { ready: null })],
    want: { outcome: 'passthrough', reason: 'not_synced' },
  },
  {
    name: 'a ready server without a view',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), server('c', null)],
    want: { outcome: 'passthrough', reason: 'not_synced' },
  },
  {
    name: 'a ready server whose view is not current',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a'), neu('c', { consecutiveFailures: 1 })],
    want: { outcome: 'passthrough', reason: 'view_incomplete' },
  },
  {
    name: 'no server ready',
    path: '/apis/admissionregistration.k8s.io/v1',
    servers: [old('a', { ready: false }), neu('c', { ready: false })],
    want: { outcome: 'passthrough', reason: 'view_incomplete' },
  },
  // OpenAPI
  {
    name: '/openapi/v3 (the index): a server whose discovery is whole',
    path: '/openapi/v3',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: '/openapi/v2: a server whose discovery is whole',
    path: '/openapi/v2',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: 'OpenAPI with the same APIs but other schemas (other indexes): not balanced',
    path: '/openapi/v2',
    servers: [server('a', view(OLD, OA_OLD)), server('b', view(OLD, OA_NEW))],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'a', candidates: ['a', 'b'] },
  },
  {
    name: 'OpenAPI where every server lists the same index: balanced',
    path: '/openapi/v3',
    servers: [old('a'), old('b')],
    want: { outcome: 'default', reason: 'served_by_all' },
  },
  {
    name: 'a per-group-version document asked by hash: a server whose index lists that hash',
    path: '/openapi/v3/api/v1?hash=H1NEW',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'openapi_hash', upstream: 'c', candidates: ['c'] },
  },
  {
    name: "the old servers' hash goes to an old server",
    path: '/openapi/v3/api/v1?hash=H1OLD',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'openapi_hash', upstream: 'a', candidates: ['a', 'b'] },
  },
  {
    name: 'a hash every server lists: balanced',
    path: '/openapi/v3/apis/apps/v1?hash=HAPPS',
    servers: mixed(),
    want: { outcome: 'default', reason: 'served_by_all', candidates: ['a', 'b', 'c'] },
  },
  {
    name: 'an unknown hash: the server holding the group/version whole (it redirects to its own hash)',
    path: '/openapi/v3/apis/admissionregistration.k8s.io/v1?hash=STALE',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: 'no hash: the server holding the group/version whole',
    path: '/openapi/v3/apis/admissionregistration.k8s.io/v1',
    servers: mixed(),
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'c' },
  },
  {
    name: 'a document that is no group/version, asked by a known hash',
    path: '/openapi/v3/version?hash=HV',
    servers: mixed(),
    want: { outcome: 'default', reason: 'served_by_all' },
  },
  {
    name: 'a document that is no group/version, unknown hash: any',
    path: '/openapi/v3/version?hash=NOPE',
    servers: mixed(),
    want: { outcome: 'passthrough', reason: 'non_resource' },
  },
  {
    name: 'a hash only a server that is not ready lists: by its scope among the ready',
    path: '/openapi/v3/api/v1?hash=H1NEW',
    servers: [old('a'), neu('c', { ready: false })],
    want: { outcome: 'routed', reason: 'complete_document', upstream: 'a' },
  },
];

for (const row of rows) {
  t.test(row.name, async (t) => {
    const snap0 = buildSnapshot(row.servers, 1, undefined, row.membership ? { membership: row.membership } : {});
    const info = classifyRequest(row.method ?? 'GET', row.path);
    const headers = new Map(row.accept ? [['accept', row.accept]] : []);
    const d = decide({ info, headers, identity: { kind: 'none' } }, snap0, { now: NOW, staleAfterMs: 3_000, rng: () => 0 });
    t.match(d, row.want);
    if (row.want.candidates) t.same(d.candidates, row.want.candidates, 'candidates exactly');
    if (row.want.outcome !== 'routed') t.notOk('upstream' in d, 'no upstream');
  });
}

t.test('documentOf: which document a path is', async (t) => {
  const of = (path: string, accept = ''): ReturnType<typeof documentOf> => {
    const info = classifyRequest('GET', path);
    if (info.kind !== 'non-resource') throw new Error(`${path} is not a non-resource path`);
    return documentOf(info, accept);
  };
  t.same(of('/apis/apps/v1'), { scope: groupVersionScope('apps', 'v1'), openapi: false });
  t.same(of('/openapi/v3/apis/apps/v1?hash=AB&x=1'), {
    scope: groupVersionScope('apps', 'v1'),
    openapi: true,
    openapiPath: 'apis/apps/v1',
    hash: 'AB',
  });
  t.same(of('/openapi/v3/'), { scope: SCOPE_ALL, openapi: true });
  t.equal(of('/healthz'), null);
  t.equal(of('/version'), null);
  t.same(of('/apis/apps/v1/'), of('/apis/apps/v1'), 'the same document with a trailing slash');
});

t.test('the document index: who holds whom, and whether the OpenAPI indexes agree', async (t) => {
  const index = buildDocumentIndex(mixed());
  const ar = index.scopes.get(groupVersionScope('admissionregistration.k8s.io', 'v1'));
  t.same([...(ar?.covers.get('c') ?? [])], ['a', 'b', 'c'], 'the new server holds everyone');
  t.same([...(ar?.covers.get('a') ?? [])], ['a', 'b'], 'an old one holds the old ones only');
  t.equal(index.openapiIdentical, false);
  t.same([...(index.openapi.get('api/v1')?.get('H1OLD') ?? [])], ['a', 'b']);
  t.equal(buildDocumentIndex([old('a'), old('b')]).openapiIdentical, true);
  t.throws(() => (index.scopes as Map<string, unknown>).set('x', null), /immutable/);
});
