import t from 'tap';
import {
  DiscoveryDocumentError,
  groupVersionResources,
  isAggregatedDiscoveryMediaType,
  legacyView,
  parseAggregatedDiscovery,
  parseAggregatedDiscoverySteps,
  parseApiGroupList,
  parseApiResourceList,
  parseApiVersions,
  parseOpenApiV3Index,
} from '../../src/discovery/core/parse.js';
import { diffViews, sameView } from '../../src/discovery/core/view-compare.js';
import { sameOpenApiIndex } from '../../src/discovery/core/types.js';
import { MEDIA_AGGREGATED_V2 } from '../../src/constants.js';
import { failureOf } from '../../src/errors/catalog.js';
import { runToEnd } from '../../src/util/core/sliced.js';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function aggList(items: unknown[]): Record<string, unknown> {
  return { kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items };
}

const API = aggList([
  {
    metadata: {},
    versions: [
      {
        version: 'v1',
        freshness: 'Current',
        resources: [
          {
            resource: 'pods',
            responseKind: { group: '', version: '', kind: 'Pod' },
            scope: 'Namespaced',
            singularResource: 'pod',
            verbs: VERBS,
            subresources: [
              { subresource: 'status', verbs: ['get', 'patch', 'update'] },
              { subresource: 'log', verbs: ['get'] },
            ],
          },
          { resource: 'namespaces', scope: 'Cluster', singularResource: 'namespace', verbs: ['get', 'list'] },
        ],
      },
    ],
  },
]);

const APIS = aggList([
  {
    metadata: { name: 'apps' },
    versions: [
      {
        version: 'v1',
        resources: [
          {
            resource: 'deployments',
            scope: 'Namespaced',
            singularResource: 'deployment',
            verbs: VERBS,
            subresources: [
              {
                subresource: 'scale',
                responseKind: { group: 'autoscaling', version: 'v1', kind: 'Scale' },
                verbs: ['get', 'patch', 'update'],
              },
            ],
          },
        ],
        freshness: 'Current',
      },
    ],
  },
  // A version with no resources (omitempty) still counts as served.
  { metadata: { name: 'empty.example.com' }, versions: [{ version: 'v1alpha1' }] },
  // Go encodes nil slices as null.
  {
    metadata: { name: 'nulls.example.com' },
    versions: [{ version: 'v1', resources: [{ resource: 'things', scope: 'Cluster', verbs: null, subresources: null }] }],
  },
]);

t.test('aggregated documents → view', async (t) => {
  const view = parseAggregatedDiscovery(API, APIS);
  t.equal(view.source, 'aggregated');
  t.same([...view.groupVersions].sort(), ['/v1', 'apps/v1', 'empty.example.com/v1alpha1', 'nulls.example.com/v1']);
  t.same([...view.resources.keys()].sort(), ['/v1/namespaces', '/v1/pods', 'apps/v1/deployments', 'nulls.example.com/v1/things']);
  const pods = view.resources.get('/v1/pods');
  t.ok(pods?.namespaced);
  t.same([...(pods?.verbs ?? [])].sort(), VERBS);
  t.same([...(pods?.subresources.get('status') ?? [])], ['get', 'patch', 'update']);
  t.same([...(pods?.subresources.get('log') ?? [])], ['get']);
  t.equal(view.resources.get('/v1/namespaces')?.namespaced, false);
  t.equal(view.resources.get('nulls.example.com/v1/things')?.verbs.size, 0);
  t.same([...(view.resources.get('apps/v1/deployments')?.subresources.keys() ?? [])], ['scale']);
  t.equal(view.apisDocument, APIS, 'the parsed /apis JSON is kept');
  t.ok(Object.isFrozen(view.apisDocument), 'and frozen');
  t.throws(() => (view.resources as Map<string, unknown>).set('x', 1), TypeError, 'resources are immutable');
  t.throws(() => (pods?.verbs as Set<string>).add('proxy'), TypeError, 'verbs are immutable');
  t.ok(Object.isFrozen(view));
});

t.test('empty but valid aggregated documents', async (t) => {
  const view = parseAggregatedDiscovery(aggList([]), { ...aggList([]), items: null });
  t.equal(view.resources.size, 0);
  t.equal(view.groupVersions.size, 0);
});

interface BadCase {
  readonly name: string;
  readonly api?: unknown;
  readonly apis?: unknown;
  readonly match: RegExp;
}

const group = (g: Record<string, unknown>): Record<string, unknown> => aggList([g]);
const res = (r: Record<string, unknown>): Record<string, unknown> =>
  group({ metadata: { name: 'g' }, versions: [{ version: 'v1', resources: [{ resource: 'r', scope: 'Cluster', verbs: [], ...r }] }] });

const BAD: readonly BadCase[] = [
  { name: 'empty body (null)', apis: null, match: /\/apis: expected an object, got null/ },
  { name: 'empty object', apis: {}, match: /\/apis at kind: expected "APIGroupDiscoveryList", got nothing/ },
  { name: 'a string', api: 'hello', match: /\/api: expected an object, got the string "hello"/ },
  { name: 'an array', apis: [], match: /expected an object, got an array/ },
  {
    name: 'wrong kind',
    apis: { ...aggList([]), kind: 'APIGroupList' },
    match: /at kind: expected "APIGroupDiscoveryList", got the string "APIGroupList"/,
  },
  {
    name: 'wrong apiVersion (v2beta1)',
    apis: { ...aggList([]), apiVersion: 'apidiscovery.k8s.io/v2beta1' },
    match: /at apiVersion: expected "apidiscovery.k8s.io\/v2"/,
  },
  { name: 'items not an array', apis: { ...aggList([]), items: {} }, match: /at items: expected an array, got an object/ },
  { name: 'item not an object', apis: aggList([42]), match: /at items\[0\]: expected an object, got number 42/ },
  {
    name: 'group name a number',
    apis: group({ metadata: { name: 7 }, versions: [{ version: 'v1' }] }),
    match: /items\[0\]\.metadata\.name: expected a string, got number 7/,
  },
  { name: 'missing versions', apis: group({ metadata: { name: 'g' } }), match: /items\[0\]\.versions: is missing/ },
  {
    name: 'null versions',
    apis: group({ metadata: { name: 'g' }, versions: null }),
    match: /items\[0\]\.versions: expected an array, got null/,
  },
  { name: 'no versions', apis: group({ metadata: { name: 'g' }, versions: [] }), match: /group "g" lists no versions/ },
  {
    name: 'version missing its name',
    apis: group({ metadata: { name: 'g' }, versions: [{ resources: [] }] }),
    match: /versions\[0\]\.version: is missing/,
  },
  {
    name: 'version name empty',
    apis: group({ metadata: { name: 'g' }, versions: [{ version: '' }] }),
    match: /versions\[0\]\.version: must not be empty/,
  },
  {
    name: 'resources a string',
    apis: group({ metadata: { name: 'g' }, versions: [{ version: 'v1', resources: 'pods' }] }),
    match: /resources: expected an array, got the string "pods"/,
  },
  { name: 'resource name missing', apis: res({ resource: undefined }), match: /resources\[0\]\.resource: is missing/ },
  {
    name: 'bad scope',
    apis: res({ scope: 'Global' }),
    match: /resources\[0\]\.scope: expected "Namespaced" or "Cluster", got the string "Global"/,
  },
  { name: 'verbs a string', apis: res({ verbs: 'get' }), match: /resources\[0\]\.verbs: expected an array, got the string "get"/ },
  { name: 'verb a number', apis: res({ verbs: ['get', 1] }), match: /resources\[0\]\.verbs\[1\]: expected a string, got number 1/ },
  {
    name: 'subresource without a name',
    apis: res({ subresources: [{ verbs: ['get'] }] }),
    match: /subresources\[0\]\.subresource: is missing/,
  },
  {
    name: 'subresource verbs wrong',
    apis: res({ subresources: [{ subresource: 's', verbs: {} }] }),
    match: /subresources\[0\]\.verbs: expected an array, got an object/,
  },
];

t.test('malformed aggregated documents throw DiscoveryDocumentError, never TypeError', async (t) => {
  for (const c of BAD) {
    const api = 'api' in c ? c.api : API;
    const apis = 'apis' in c ? c.apis : APIS;
    t.throws(() => parseAggregatedDiscovery(api, apis), DiscoveryDocumentError, c.name);
    try {
      parseAggregatedDiscovery(api, apis);
    } catch (err) {
      t.match((err as Error).message, c.match, `${c.name}: ${(err as Error).message}`);
      t.equal((err as DiscoveryDocumentError).code, 'SKEWGATE_ERR_DISCOVERY_DOCUMENT');
    }
  }
});

t.test('media type detection', async (t) => {
  const cases: [string | null, boolean][] = [
    [MEDIA_AGGREGATED_V2, true],
    ['application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer', true],
    ['application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io', true],
    ['Application/JSON;G=apidiscovery.k8s.io;V=v2;AS=APIGroupDiscoveryList', true],
    ['application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList', false],
    ['application/json', false],
    ['application/json; charset=utf-8', false],
    ['application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList', false],
    ['', false],
    [null, false],
  ];
  for (const [ct, want] of cases) t.equal(isAggregatedDiscoveryMediaType(ct), want, String(ct));
});

// ---------------------------------------------------------------------------------------------
// Legacy

const CORE_V1 = {
  kind: 'APIResourceList',
  groupVersion: 'v1',
  resources: [
    { name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', verbs: VERBS },
    { name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get', 'patch', 'update'] },
    { name: 'pods/exec', singularName: '', namespaced: true, kind: 'PodExecOptions', verbs: ['create', 'get'] },
    // A subresource listed before (or without) its parent.
    { name: 'bindings/status', singularName: '', namespaced: true, kind: 'Binding', verbs: ['get'] },
    { name: 'namespaces', singularName: 'namespace', namespaced: false, kind: 'Namespace', verbs: ['get', 'list'] },
  ],
};
const APPS_V1 = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: 'apps/v1',
  resources: [
    {
      name: 'deployments/scale',
      singularName: '',
      namespaced: true,
      group: 'autoscaling',
      version: 'v1',
      kind: 'Scale',
      verbs: ['get', 'patch', 'update'],
    },
    { name: 'deployments', singularName: 'deployment', namespaced: true, kind: 'Deployment', verbs: VERBS },
  ],
};

t.test('legacy documents → view', async (t) => {
  t.same(parseApiVersions({ kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] }), ['v1']);
  const groups = parseApiGroupList({
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: [
      {
        name: 'apps',
        versions: [{ groupVersion: 'apps/v1', version: 'v1' }],
        preferredVersion: { groupVersion: 'apps/v1', version: 'v1' },
      },
      {
        name: 'batch',
        versions: [
          { groupVersion: 'batch/v1', version: 'v1' },
          { groupVersion: 'batch/v1beta1', version: 'v1beta1' },
        ],
      },
    ],
  });
  t.same(groups, [
    { group: 'apps', versions: ['v1'] },
    { group: 'batch', versions: ['v1', 'v1beta1'] },
  ]);

  const core = parseApiResourceList(CORE_V1, '', 'v1');
  t.same([...core.keys()].sort(), ['bindings', 'namespaces', 'pods']);
  t.same([...(core.get('pods')?.verbs ?? [])].sort(), VERBS);
  t.same([...(core.get('pods')?.subresources.keys() ?? [])].sort(), ['exec', 'status']);
  t.same([...(core.get('pods')?.subresources.get('exec') ?? [])], ['create', 'get']);
  t.equal(core.get('bindings')?.verbs.size, 0, 'a parent only implied by its subresource has no verbs of its own');
  t.same([...(core.get('bindings')?.subresources.keys() ?? [])], ['status']);
  t.equal(core.get('namespaces')?.namespaced, false);
  const apps = parseApiResourceList(APPS_V1, 'apps', 'v1');
  t.same([...(apps.get('deployments')?.verbs ?? [])].sort(), VERBS, 'the real parent replaces the placeholder');
  t.same([...(apps.get('deployments')?.subresources.keys() ?? [])], ['scale']);

  const view = legacyView([
    { group: '', version: 'v1', resources: core },
    { group: 'apps', version: 'v1', resources: apps },
    { group: 'batch', version: 'v1beta1', resources: new Map() },
  ]);
  t.equal(view.source, 'legacy');
  t.equal(view.apisDocument, undefined);
  t.same([...view.groupVersions].sort(), ['/v1', 'apps/v1', 'batch/v1beta1']);
  t.ok(view.resources.has('/v1/pods'));
  t.ok(view.resources.has('apps/v1/deployments'));
  t.same([...(groupVersionResources(view, 'apps', 'v1')?.keys() ?? [])], ['deployments']);
  t.equal(groupVersionResources(view, 'batch', 'v1beta1')?.size, 0);
  t.equal(groupVersionResources(view, 'nope', 'v1'), null);
});

t.test('malformed legacy documents', async (t) => {
  const cases: [string, () => unknown, RegExp][] = [
    ['APIVersions wrong kind', () => parseApiVersions({ kind: 'APIGroupList', versions: ['v1'] }), /\/api at kind: expected "APIVersions"/],
    [
      'APIVersions versions wrong type',
      () => parseApiVersions({ kind: 'APIVersions', versions: 'v1' }),
      /\/api at versions: expected an array/,
    ],
    ['APIVersions empty version', () => parseApiVersions({ kind: 'APIVersions', versions: [''] }), /versions\[0\]: must not be empty/],
    [
      'APIGroupList wrong apiVersion',
      () => parseApiGroupList({ kind: 'APIGroupList', apiVersion: 'v2', groups: [] }),
      /\/apis at apiVersion: expected "v1"/,
    ],
    [
      'APIGroupList group without versions',
      () => parseApiGroupList({ kind: 'APIGroupList', apiVersion: 'v1', groups: [{ name: 'apps' }] }),
      /groups\[0\]\.versions: is missing/,
    ],
    [
      'APIGroupList group empty versions',
      () => parseApiGroupList({ kind: 'APIGroupList', apiVersion: 'v1', groups: [{ name: 'apps', versions: [] }] }),
      /group "apps" lists no versions/,
    ],
    [
      'APIGroupList group name missing',
      () => parseApiGroupList({ kind: 'APIGroupList', apiVersion: 'v1', groups: [{ versions: [] }] }),
      /groups\[0\]\.name: is missing/,
    ],
    [
      'APIResourceList wrong groupVersion',
      () => parseApiResourceList({ ...APPS_V1, groupVersion: 'apps/v2' }, 'apps', 'v1'),
      /\/apis\/apps\/v1 at groupVersion: expected "apps\/v1", got the string "apps\/v2"/,
    ],
    [
      'APIResourceList namespaced not boolean',
      () => parseApiResourceList({ ...CORE_V1, resources: [{ name: 'pods', namespaced: 'yes', verbs: [] }] }, '', 'v1'),
      /\/api\/v1 at resources\[0\]\.namespaced: expected true or false, got the string "yes"/,
    ],
    [
      'APIResourceList bad subresource name',
      () => parseApiResourceList({ ...CORE_V1, resources: [{ name: 'pods/', namespaced: true, verbs: [] }] }, '', 'v1'),
      /"pods\/" is not resource or resource\/subresource/,
    ],
    [
      'APIResourceList resources an object',
      () => parseApiResourceList({ ...CORE_V1, resources: {} }, '', 'v1'),
      /at resources: expected an array, got an object/,
    ],
    ['APIResourceList empty document', () => parseApiResourceList(undefined, '', 'v1'), /\/api\/v1: expected an object, got nothing/],
  ];
  for (const [name, fn, match] of cases) {
    t.throws(fn, DiscoveryDocumentError, name);
    try {
      fn();
    } catch (err) {
      t.match((err as Error).message, match, `${name}: ${(err as Error).message}`);
    }
  }
});

t.test('sameView and diffViews', async (t) => {
  const a = parseAggregatedDiscovery(API, APIS);
  const b = parseAggregatedDiscovery(structuredClone(API), structuredClone(APIS));
  t.not(a, b);
  t.ok(sameView(a, b), 'equal content, different objects');
  const fewer = parseAggregatedDiscovery(API, aggList([]));
  t.notOk(sameView(a, fewer));
  const d = diffViews(fewer, a);
  t.same([...d.added].sort(), ['apps/v1/deployments', 'nulls.example.com/v1/things']);
  t.same(d.removed, []);
  const back = diffViews(a, fewer);
  t.same([...back.removed].sort(), ['apps/v1/deployments', 'nulls.example.com/v1/things']);
  const moreVerbs = structuredClone(APIS) as { items: { versions: { resources: { verbs: string[] }[] }[] }[] };
  moreVerbs.items[0]!.versions[0]!.resources[0]!.verbs = ['get'];
  const changed = parseAggregatedDiscovery(API, moreVerbs);
  t.notOk(sameView(a, changed));
  t.same(diffViews(a, changed).changed, ['apps/v1/deployments']);
  t.same(diffViews(null, a).added.length, a.resources.size, 'first view: everything added');
});

t.test('the OpenAPI v3 index: each document path with its hash; a malformed one names the field', async (t) => {
  const index = parseOpenApiV3Index({
    paths: {
      'api/v1': { serverRelativeURL: '/openapi/v3/api/v1?hash=79E2EA' },
      'apis/apps/v1': { serverRelativeURL: '/openapi/v3/apis/apps/v1?x=1&hash=B6B6' },
    },
  });
  t.same(
    [...index],
    [
      ['api/v1', '79E2EA'],
      ['apis/apps/v1', 'B6B6'],
    ],
  );
  t.throws(() => (index as Map<string, string>).set('x', 'y'), /immutable/);
  t.ok(sameOpenApiIndex(index, new Map(index)), 'same paths, same hashes');
  t.notOk(sameOpenApiIndex(index, new Map([['api/v1', '79E2EA']])));
  t.notOk(sameOpenApiIndex(index, undefined));
  t.ok(sameOpenApiIndex(undefined, undefined));
  const bad: [unknown, RegExp][] = [
    [[], /\/openapi\/v3: expected an object/],
    [{}, /\/openapi\/v3 at paths: expected an object/],
    [{ paths: { 'api/v1': 'x' } }, /at paths\["api\/v1"\]: expected an object/],
    [{ paths: { 'api/v1': { serverRelativeURL: 5 } } }, /paths\["api\/v1"\]\.serverRelativeURL: expected a string/],
    [{ paths: { 'api/v1': { serverRelativeURL: '/openapi/v3/api/v1' } } }, /serverRelativeURL: has no hash= parameter/],
  ];
  for (const [doc, want] of bad) t.throws(() => parseOpenApiV3Index(doc), want, JSON.stringify(doc));
});

t.test('discovery.maxResources: a view past the bound is refused as too large; up to it, accepted', async (t) => {
  const resource = (name: string): unknown => ({ resource: name, scope: 'Cluster', verbs: ['get'] });
  // /api: v1 and one resource = 2 entries; /apis: each group/version 1, each resource 1.
  const api = aggList([{ metadata: {}, versions: [{ version: 'v1', resources: [resource('nodes')] }] }]);
  const apis = aggList([
    { metadata: { name: 'a.io' }, versions: [{ version: 'v1', resources: [resource('xs'), resource('ys')] }] },
    { metadata: { name: 'b.io' }, versions: [{ version: 'v1', resources: [] }] },
  ]);
  const entries = 2 + 3 + 1;
  const view = runToEnd(parseAggregatedDiscoverySteps(api, apis, { maxEntries: entries }));
  t.equal(view.resources.size, 3, 'exactly at the bound: accepted');
  const err = (() => {
    try {
      runToEnd(parseAggregatedDiscoverySteps(api, apis, { maxEntries: entries - 1 }));
    } catch (e) {
      return e;
    }
    return null;
  })();
  t.ok(err instanceof DiscoveryDocumentError, 'one past it: refused');
  t.match(err, { document: '/apis', kind: 'too_large', code: 'SKEWGATE_ERR_DISCOVERY_DOCUMENT' });
  t.match((err as Error).message, /lists more than 5 resources and group\/versions \(discovery\.maxResources\)/);
  t.match(
    failureOf(err),
    { kind: 'too_large', code: 'SKEWGATE_ERR_DISCOVERY_DOCUMENT' },
    'counted as too large, as a body past the size cap',
  );
  t.match(failureOf(new DiscoveryDocumentError('/apis', 'items', 'x')), { kind: 'malformed' }, 'a malformed one stays malformed');
});

t.test('capabilities are shared by content within a view: a few objects for many resources, never two contents in one', async (t) => {
  const res = (name: string, verbs: string[], subs: [string, string[]][] = [], scope = 'Namespaced'): unknown => ({
    resource: name,
    scope,
    verbs,
    subresources: subs.map(([subresource, v]) => ({ subresource, verbs: v })),
  });
  const apis = aggList([
    {
      metadata: { name: 'x.io' },
      versions: [
        {
          version: 'v1',
          resources: [
            ...Array.from({ length: 100 }, (_, i) => res(`crd${i}s`, VERBS, [['status', ['get', 'patch']]])),
            res('joined', ['a,b']),
            res('split', ['a', 'b']),
            res('cluster', VERBS, [['status', ['get', 'patch']]], 'Cluster'),
            res('other-sub', VERBS, [['status', ['get']]]),
          ],
        },
      ],
    },
  ]);
  const view = parseAggregatedDiscovery(aggList([]), apis);
  const caps = [...view.resources.values()];
  t.equal(new Set(caps).size, 5, 'five contents, five objects');
  t.equal(view.resources.get('x.io/v1/crd0s'), view.resources.get('x.io/v1/crd99s'), 'equal content: one object');
  t.same([...(view.resources.get('x.io/v1/joined')?.verbs ?? [])], ['a,b']);
  t.same([...(view.resources.get('x.io/v1/split')?.verbs ?? [])], ['a', 'b'], 'a verb with a comma is not two verbs');
  t.equal(view.resources.get('x.io/v1/cluster')?.namespaced, false);
  t.same([...(view.resources.get('x.io/v1/other-sub')?.subresources.get('status') ?? [])], ['get']);
  t.ok(Object.isFrozen(view.resources.get('x.io/v1/crd0s')), 'and frozen');
});
