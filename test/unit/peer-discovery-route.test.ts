// GET /apis at the edge: Accept negotiation, which servers are merged and when the union is
// refused, the merge each snapshot carries, the router's decisions and the ImmediateResponse.
import t from 'tap';
import { MEDIA_AGGREGATED_V2, MEDIA_AGGREGATED_V2_NOPEER, REASON_HEADER } from '../../src/constants.js';
import { legacyView, parseAggregatedDiscovery } from '../../src/discovery/core/parse.js';
import { peerDiscoveryParticipants } from '../../src/discovery/core/peer-discovery.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import type { ServerState, ServerView, Snapshot } from '../../src/discovery/core/types.js';
import { computeEtag, mergePeerDiscovery } from '../../src/discovery/core/merge.js';
import { negotiateApis, parseAccept } from '../../src/routing/discovery-accept.js';
import { decidePeerDiscovery } from '../../src/routing/discovery-route.js';
import type { DiscoveryDecision } from '../../src/routing/decision.js';
import { createRouter } from '../../src/routing/router.js';
import { readyState } from '../helpers/server-states.js';
import { responseFor } from '../../src/extproc/core/responses.js';

const PB = 'application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
const BETA = 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList';

t.test('Accept negotiation as kube-apiserver does it (checked against a real v1.36.3 in test/cluster)', async (t) => {
  const table: [string | undefined, string][] = [
    [undefined, 'not_aggregated'],
    ['', 'not_aggregated'],
    ['application/json', 'not_aggregated'],
    ['*/*', 'not_aggregated'],
    [MEDIA_AGGREGATED_V2, 'peer application/json'],
    [MEDIA_AGGREGATED_V2_NOPEER, 'nopeer application/json'],
    [`${MEDIA_AGGREGATED_V2},application/json`, 'peer application/json'],
    [`${MEDIA_AGGREGATED_V2},${BETA},application/json`, 'peer application/json'],
    [`${MEDIA_AGGREGATED_V2_NOPEER},${MEDIA_AGGREGATED_V2},application/json`, 'nopeer application/json'],
    [BETA, 'not_aggregated'],
    [`application/json,${MEDIA_AGGREGATED_V2}`, 'peer application/json'],
    [`application/json;q=0.9,${MEDIA_AGGREGATED_V2};q=0.5`, 'peer application/json'],
    [PB, 'peer application/vnd.kubernetes.protobuf'],
    [`${PB};q=0.5,${MEDIA_AGGREGATED_V2}`, 'peer application/json'],
    [`${PB},${MEDIA_AGGREGATED_V2};q=0.9`, 'peer application/vnd.kubernetes.protobuf'],
    [`${MEDIA_AGGREGATED_V2};q=abc,${PB};q=0.1`, 'peer application/vnd.kubernetes.protobuf'],
    ['*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'peer application/json'],
    ['application/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'peer application/json'],
    ['application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'peer application/yaml'],
    ['application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;stream=watch', 'not_aggregated'],
    ['Application/JSON;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'not_aggregated'],
    ['application/json;g=apidiscovery.k8s.io;v=v2;as=apigroupdiscoverylist', 'not_aggregated'],
    [' application/json ; g=apidiscovery.k8s.io ; v=v2 ; as=APIGroupDiscoveryList', 'peer application/json'],
    ['application/json;\tg=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', 'not_aggregated'],
    ['application/json;g="apidiscovery.k8s.io";v=v2;as=APIGroupDiscoveryList', 'not_aggregated'],
    [`${MEDIA_AGGREGATED_V2};stream=watch`, 'peer application/json'],
    [`${MEDIA_AGGREGATED_V2};stream=foo`, 'not_aggregated'],
    [`${MEDIA_AGGREGATED_V2};sv=v1`, 'not_aggregated'],
    [`${MEDIA_AGGREGATED_V2};profile=other`, 'peer application/json'],
    [`${MEDIA_AGGREGATED_V2};profile=`, 'peer application/json'],
    [`${MEDIA_AGGREGATED_V2};q=0`, 'peer application/json'],
    [`${MEDIA_AGGREGATED_V2_NOPEER};q=0.5,${MEDIA_AGGREGATED_V2}`, 'peer application/json'],
  ];
  for (const [accept, want] of table) {
    const n = negotiateApis(accept);
    const got = n.kind === 'not_aggregated' ? n.kind : `${n.profile === 'nopeer' ? 'nopeer' : 'peer'} ${n.mediaType}`;
    t.equal(got, want, JSON.stringify(accept));
  }
  t.equal((negotiateApis(`${MEDIA_AGGREGATED_V2};pretty=1`) as { pretty: boolean }).pretty, true);
  t.same(
    parseAccept('*/*;q=1, application/json;q=0.5').map((c) => c.type),
    ['application', '*'],
    'goautoneg puts a concrete type before */* whatever the q',
  );
  t.same(
    parseAccept('a/b;q=0.5;x=1;y;z=1=2').map((c) => [c.q, [...c.params]]),
    [[0.5, [['x', '1']]]],
    'q read, malformed parameters dropped',
  );
  const hostile = `${Array.from({ length: 20_000 }, (_, i) => `text/x${i};q=0.${i % 9}`).join(',')},${MEDIA_AGGREGATED_V2};q=0.95`;
  const started = process.hrtime.bigint();
  t.equal(negotiateApis(hostile).kind, 'aggregated', 'a 20,000-clause Accept still finds the clause');
  t.ok(Number(process.hrtime.bigint() - started) / 1e6 < 1000, 'and in O(n log n) time, not quadratic');
  t.same(
    parseAccept(
      'a/a;q=0.1,b/b;q=0.2,c/c;q=0.3,d/d;q=0.4,e/e;q=0.5,f/f;q=0.6,g/g;q=0.7,h/h;q=0.8,i/i;q=0.9,j/j,k/k;q=0,l/l;q=0.05,m/m;q=0.15',
    )
      .map((c) => c.type)
      .join(''),
    'jihgfedcbmalk',
    'more than 12 clauses: by q',
  );
  t.same(
    parseAccept('a, /b, a/b/c, */*').map((c) => `${c.type}/${c.subType}`),
    ['/b', '*/*'],
    'a range without a slash or with two is dropped; an empty type is kept (and matches nothing)',
  );
});

// ---- snapshots with real-shaped documents -----------------------------------------------------

const API_DOC = {
  kind: 'APIGroupDiscoveryList',
  apiVersion: 'apidiscovery.k8s.io/v2',
  metadata: {},
  items: [
    {
      metadata: {},
      versions: [
        {
          version: 'v1',
          resources: [{ resource: 'pods', scope: 'Namespaced', singularResource: 'pod', verbs: ['get'] }],
          freshness: 'Current',
        },
      ],
    },
  ],
};
const apis = (...groups: [string, string][]): unknown => ({
  kind: 'APIGroupDiscoveryList',
  apiVersion: 'apidiscovery.k8s.io/v2',
  metadata: {},
  items: groups.map(([name, resource]) => ({
    metadata: { name },
    versions: [
      {
        version: 'v1',
        resources: [
          {
            resource,
            responseKind: { group: '', version: '', kind: 'X' },
            scope: 'Namespaced',
            singularResource: resource,
            verbs: ['get', 'list'],
          },
        ],
        freshness: 'Current',
      },
    ],
  })),
});
const view = (...groups: [string, string][]): ServerView => parseAggregatedDiscovery(API_DOC, apis(...groups));
const OLD = view(['apps', 'deployments'], ['batch', 'jobs']);
const NEW = view(['apps', 'deployments'], ['batch', 'jobs'], ['admissionregistration.k8s.io', 'mutatingadmissionpolicies']);
const LEGACY = legacyView([{ group: 'apps', version: 'v1', resources: new Map() }]);

const NOW = 1_000_000;
const state = (name: string, v: ServerView | null, extra: Partial<ServerState> = {}): ServerState => readyState(name, v, NOW, extra);
const snapOf = (...servers: ServerState[]): Snapshot => buildSnapshot(servers, 1);
const opts = { now: NOW, staleAfterMs: 3000 };

t.test('who is merged, and when the union is refused', async (t) => {
  const ok = peerDiscoveryParticipants([state('a', OLD), state('b', NEW)]);
  t.same(ok.ok && ok.servers.map((s) => s.name), ['a', 'b'], 'all ready servers with aggregated views');
  const unready = peerDiscoveryParticipants([state('a', OLD), state('b', NEW, { ready: false }), state('c', LEGACY, { ready: false })]);
  t.same(unready.ok && unready.servers.map((s) => s.name), ['a'], 'unready servers (also a legacy one) are left out');
  t.match(
    peerDiscoveryParticipants([state('a', OLD), state('b', NEW, { ready: null })]),
    { ok: false, reason: 'not_synced' },
    'readiness unknown',
  );
  t.match(
    peerDiscoveryParticipants([state('a', OLD), state('b', null)]),
    { ok: false, reason: 'not_synced' },
    'a ready server without a view',
  );
  t.match(
    peerDiscoveryParticipants([state('a', OLD), state('b', LEGACY)]),
    { ok: false, reason: 'view_incomplete', detail: /legacy.*b/ },
    'a ready legacy-only server: no aggregated document to merge',
  );
  t.match(peerDiscoveryParticipants([state('a', OLD, { ready: false })]), {
    ok: false,
    reason: 'view_incomplete',
    detail: /no apiserver is ready/,
  });
});

t.test('snapshots carry the merge, built once per change of views or readiness', async (t) => {
  let merges = 0;
  // identityOf is called only while merging: it counts the merges.
  const counting = {
    identityOf: (n: string) => {
      merges++;
      return `apiserver-${n}`;
    },
  };
  const s1 = buildSnapshot([state('a', OLD), state('b', NEW)], 1, undefined, counting);
  const r1 = s1.peerDiscovery;
  t.ok(r1.ok);
  if (!r1.ok) return;
  t.ok(merges > 0, 'merged when the snapshot was built');
  const afterFirst = merges;
  t.equal(r1.document.groups, 3);
  t.equal(
    r1.document.etag,
    computeEtag(
      mergePeerDiscovery([
        { serverId: 'apiserver-x', document: OLD.apisDocument },
        { serverId: 'apiserver-y', document: NEW.apisDocument },
      ]),
    ),
    'the ETag of the merged items',
  );
  t.equal(r1.document.quotedEtag, `"${r1.document.etag}"`);
  const s2 = buildSnapshot([state('a', OLD, { lastSuccessAt: NOW }), state('b', NEW, { lastSuccessAt: NOW })], 2, s1, counting);
  t.equal(s2.peerDiscovery, r1, 'a new poll with the same views: the same result object, no rebuild');
  t.equal(merges, afterFirst);
  const s3 = buildSnapshot([state('a', OLD), state('b', NEW, { ready: false })], 3, s2, counting);
  const r3 = s3.peerDiscovery;
  t.ok(merges > afterFirst, 'readiness changed: rebuilt');
  t.ok(r3.ok && r3.document.groups === 2 && r3.document.servers.length === 1, 'without the unready server');
  const afterThird = merges;
  const s4 = buildSnapshot([state('a', NEW), state('b', NEW)], 4, s3, counting);
  t.ok(merges > afterThird, 'a view changed: rebuilt');
  t.ok(s4.peerDiscovery.ok && s4.peerDiscovery.document.groups === 3);
  const afterFourth = merges;
  t.match(buildSnapshot([state('a', OLD), state('b', LEGACY)], 5, s4, counting).peerDiscovery, { ok: false, reason: 'view_incomplete' });
  t.equal(merges, afterFourth, 'a refused union merges nothing');
});

t.test('servers are merged in identity order (kube-apiserver sorts by identity-lease name)', async (t) => {
  const identities: Record<string, string> = { a: 'apiserver-z', b: 'apiserver-a' };
  const r = buildSnapshot([state('a', OLD), state('b', NEW)], 1, undefined, { identityOf: (n) => identities[n] as string }).peerDiscovery;
  t.same(r.ok && r.document.servers, ['b', 'a']);
});

t.test('decidePeerDiscovery', async (t) => {
  const snap = snapOf(state('a', OLD), state('b', NEW), state('c', OLD, { ready: false, consecutiveFailures: 2 }));
  const d = decidePeerDiscovery(snap, true, opts) as DiscoveryDecision;
  t.match(d, { outcome: 'discovery', reason: 'merged_apis' });
  t.same(d.candidates, ['a', 'b'], 'the merged servers, an unready one left out');
  const etag = d.document.quotedEtag;
  t.match(decidePeerDiscovery(snap, true, { ...opts, ifNoneMatch: etag }), { outcome: 'discovery', reason: 'merged_apis_not_modified' });
  t.match(
    decidePeerDiscovery(snap, true, { ...opts, ifNoneMatch: `W/${etag}` }),
    { reason: 'merged_apis' },
    'a weak or different tag is no match',
  );
  t.match(
    decidePeerDiscovery(snap, true, { ...opts, ifNoneMatch: `${etag}, "x"` }),
    { reason: 'merged_apis' },
    'compared verbatim, as kube-apiserver does',
  );
  t.match(decidePeerDiscovery(snap, false, opts), { outcome: 'passthrough', reason: 'no_credentials' });
  const stale = snapOf(state('a', OLD, { lastSuccessAt: NOW - 10_000 }), state('b', NEW));
  t.match(
    decidePeerDiscovery(stale, true, opts),
    { outcome: 'passthrough', reason: 'view_incomplete' },
    'a ready server with a stale view',
  );
  const failing = snapOf(state('a', OLD, { consecutiveFailures: 1 }), state('b', NEW));
  t.match(
    decidePeerDiscovery(failing, true, opts),
    { outcome: 'passthrough', reason: 'view_incomplete' },
    'a ready server whose last fetch failed',
  );
  const unsynced = snapOf(state('a', OLD), state('b', null));
  t.match(decidePeerDiscovery(unsynced, true, opts), { outcome: 'passthrough', reason: 'not_synced' });
});

t.test('the router: only GET /apis with the aggregated v2 JSON Accept (no nopeer) is answered', async (t) => {
  let identityCalls = 0;
  const current = buildSnapshot([state('a', OLD), state('b', NEW)], 1, undefined, {
    identityOf: (n) => {
      identityCalls++;
      return `apiserver-${n}`;
    },
  });
  const router = createRouter({ current: () => current }, { staleAfterMs: 3000, retryAfterSeconds: 1, now: () => NOW });
  t.ok(identityCalls > 0, 'the merge ran when the snapshot was built, before any request');
  const calls = identityCalls;
  const route = (method: string, path: string, headers: Record<string, string>): string => {
    const d = router.route(method, path, new Map(Object.entries({ authorization: 'Bearer x', ...headers }))).decision;
    return `${d.outcome}/${d.reason}`;
  };
  t.equal(route('GET', '/apis', { accept: MEDIA_AGGREGATED_V2 }), 'discovery/merged_apis');
  t.equal(identityCalls, calls, 'no merge on the request path');
  t.equal(
    route('GET', '/apis?timeout=32s', { accept: `${MEDIA_AGGREGATED_V2},application/json` }),
    'discovery/merged_apis',
    "kubectl's Accept, a query",
  );
  t.equal(
    route('GET', '/apis', { accept: MEDIA_AGGREGATED_V2_NOPEER }),
    'passthrough/non_resource',
    "nopeer: one apiserver's own document",
  );
  // The others are one apiserver's own document: one that lists every group (document-route.test.ts).
  t.equal(route('GET', '/apis', { accept: 'application/json' }), 'routed/complete_document', 'legacy APIGroupList');
  t.equal(route('GET', '/apis', { accept: PB }), 'routed/complete_document', 'protobuf: not built at the edge');
  t.equal(route('GET', '/apis', {}), 'routed/complete_document', 'no Accept');
  t.equal(route('HEAD', '/apis', { accept: MEDIA_AGGREGATED_V2 }), 'passthrough/non_resource');
  t.equal(route('POST', '/apis', { accept: MEDIA_AGGREGATED_V2 }), 'passthrough/non_resource');
  t.equal(route('GET', '/apis/', { accept: MEDIA_AGGREGATED_V2 }), 'routed/complete_document', '/apis/ is the legacy handler');
  t.equal(route('GET', '/api', { accept: MEDIA_AGGREGATED_V2 }), 'default/served_by_all', '/api is never merged: the same core everywhere');
  t.equal(route('GET', '/apis/apps', { accept: MEDIA_AGGREGATED_V2 }), 'default/served_by_all', 'the same everywhere');
  t.equal(route('GET', '/apis/apps/v1', { accept: MEDIA_AGGREGATED_V2 }), 'default/served_by_all');
  t.equal(
    route('GET', '/apis/apps/v1/deployments', { accept: MEDIA_AGGREGATED_V2 }),
    'default/served_by_all',
    'resource requests are routed as always',
  );
});

t.test('the router and client certificates: a stated one counts as a credential, an unstated one is refused', async (t) => {
  const snap = snapOf(state('a', OLD), state('b', NEW));
  const seen: [string | undefined, number][] = [];
  const router = createRouter(
    { current: () => snap },
    {
      staleAfterMs: 3000,
      retryAfterSeconds: 1,
      now: () => NOW,
      clientIdentity: (xfcc, now) => {
        seen.push([xfcc, now]);
        if (xfcc === 'good') return { kind: 'stated', identity: { user: 'jane', uid: null, groups: [], extra: [], fingerprint: 'ab' } };
        return xfcc === undefined ? { kind: 'none' } : { kind: 'unstated', problem: 'nope' };
      },
    },
  );
  const apis = (headers: Record<string, string>) =>
    router.route('GET', '/apis', new Map(Object.entries({ accept: MEDIA_AGGREGATED_V2, ...headers })));
  t.match(
    apis({ 'x-forwarded-client-cert': 'good' }),
    { decision: { outcome: 'discovery', reason: 'merged_apis' }, identity: { kind: 'stated' } },
    'a verified certificate is a credential',
  );
  t.match(apis({}), { decision: { outcome: 'passthrough', reason: 'no_credentials' }, identity: { kind: 'none' } });
  const bad = router.route(
    'GET',
    '/apis/apps/v1/deployments',
    new Map([
      ['x-forwarded-client-cert', 'forged'],
      ['authorization', 'Bearer x'],
    ]),
  );
  t.match(
    bad,
    {
      decision: { outcome: 'rejected', reason: 'client_identity_unstated', problem: 'nope', candidates: [] },
      identity: { kind: 'unstated' },
    },
    'refused even with a token beside it',
  );
  t.same(seen[0], ['good', NOW], 'the XFCC header and the router clock are what the identity is stated from');
  const noCa = createRouter({ current: () => snap }, { staleAfterMs: 3000, retryAfterSeconds: 1, now: () => NOW });
  t.match(
    noCa.route('GET', '/api/v1/pods', new Map([['x-forwarded-client-cert', 'Cert="x"']])),
    { decision: { outcome: 'rejected', reason: 'client_identity_unstated', problem: /no client CA/ } },
    'without a client CA nothing is ever stated',
  );
});

t.test('the ImmediateResponse', async (t) => {
  const snap = snapOf(state('a', OLD), state('b', NEW));
  const d = decidePeerDiscovery(snap, true, opts) as DiscoveryDecision;
  const info = { kind: 'non-resource' as const, method: 'GET', path: '/apis', query: '', verb: 'get' };
  const headersOf = (r: ReturnType<typeof responseFor>): Record<string, string> => {
    const im = 'immediate_response' in r ? r.immediate_response : undefined;
    return Object.fromEntries(
      (im?.headers?.set_headers ?? []).map((h) => [h.header.key, Buffer.from(h.header.raw_value as Uint8Array).toString()]),
    );
  };
  const ok = responseFor({ info, decision: d, generation: 1, viewAgeMs: 0, identity: { kind: 'none' } }, 1);
  t.ok('immediate_response' in ok);
  const im = 'immediate_response' in ok ? ok.immediate_response : undefined;
  t.equal(im?.status.code, 200);
  t.same(headersOf(ok), {
    'content-type': MEDIA_AGGREGATED_V2,
    etag: d.document.quotedEtag,
    vary: 'Accept',
    'cache-control': 'public',
    [REASON_HEADER]: 'merged_apis',
  });
  t.equal(Buffer.from(im?.body as Uint8Array).toString(), d.document.body.toString());
  t.match(JSON.parse(d.document.body.toString()), { kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2' });
  t.equal(im?.details, 'skewgate_merged_apis');
  const nm = responseFor(
    { info, decision: { ...d, reason: 'merged_apis_not_modified' }, generation: 1, viewAgeMs: 0, identity: { kind: 'none' } },
    1,
  );
  const nmi = 'immediate_response' in nm ? nm.immediate_response : undefined;
  t.equal(nmi?.status.code, 304);
  t.equal(nmi?.body, undefined, 'no body');
  t.same(
    headersOf(nm),
    { etag: d.document.quotedEtag, vary: 'Accept', 'cache-control': 'public', [REASON_HEADER]: 'merged_apis_not_modified' },
    'no Content-Type on a 304',
  );
});
