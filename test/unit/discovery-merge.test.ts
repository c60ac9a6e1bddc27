// The peer-aggregated merge, its ETag and its body, against kube-apiserver's own code
// (test/fixtures/peer-discovery: expected.json is the output of k8s.io/apiserver v0.36.3's merge on
// cases.json) and on readable crafted tables.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { computeEtag, discoveryBody, encodeItems, mergePeerDiscovery, type ServerDocument } from '../../src/discovery/core/merge.js';
import { AggregatedDecodeError, decodeGroupList, decodeGroupListSteps, marshalGroups } from '../../src/discovery/core/aggregated-model.js';
import { STEP_EVERY } from '../../src/util/core/sliced.js';
import { compareGoStrings, mergePreservingRelativeOrder } from '../../src/discovery/core/relative-order.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { deepFreezeJson } from '../../src/discovery/core/freeze.js';
import { runCountingPauses } from '../helpers/sliced.js';

const FIXTURES = new URL('../../../test/fixtures/peer-discovery/', import.meta.url);
type Cases = Record<string, { servers: { id: string; document: unknown }[] }>;
type Expected = Record<string, { local: string; body: string; etag: string }[]>;
const cases = JSON.parse(readFileSync(new URL('cases.json', FIXTURES), 'utf8')) as Cases;
const expected = JSON.parse(readFileSync(new URL('expected.json', FIXTURES), 'utf8')) as Expected;

const docs = (name: string): ServerDocument[] => (cases[name]?.servers ?? []).map((s) => ({ serverId: s.id, document: s.document }));

t.test('equal to kube-apiserver v1.36.3 on every oracle case: body and ETag byte for byte', async (t) => {
  const names = Object.keys(cases);
  t.ok(names.length >= 20, `${names.length} cases`);
  for (const name of names) {
    const items = mergePeerDiscovery(docs(name));
    const firstId = (cases[name]?.servers ?? []).map((s) => s.id).sort(compareGoStrings)[0];
    const results = expected[name] ?? [];
    const asFirst = results.find((r) => r.local === firstId);
    t.ok(asFirst, `${name}: oracle result with the first server as local`);
    t.equal(discoveryBody(items), asFirst?.body, `${name}: body`);
    t.equal(computeEtag(items), asFirst?.etag, `${name}: ETag`);
    // Frozen documents (as ServerViews hold them) take the no-copy paths and are decoded once.
    const frozen = docs(name).map((d) => ({ serverId: d.serverId, document: deepFreezeJson(structuredClone(d.document)) }));
    t.equal(discoveryBody(mergePeerDiscovery(frozen)), asFirst?.body, `${name}: body from frozen documents`);
    t.equal(computeEtag(mergePeerDiscovery(frozen)), asFirst?.etag, `${name}: ETag from frozen documents, decoded once`);
    // Whichever server kube-apiserver answers from, it agrees, except where the docs say not.
    const distinct = new Set(results.map((r) => r.etag));
    if (name === 'freshness differs, content equal')
      t.equal(distinct.size, 2, `${name}: kube-apiserver's answer depends on the answering server`);
    else t.equal(distinct.size, 1, `${name}: every kube-apiserver gives this answer`);
  }
});

t.test('the real lab documents (v1.35.4 and two v1.36.3 with different --runtime-config)', async (t) => {
  const name = Object.keys(cases).find((n) => n.startsWith('lab:')) as string;
  const items = mergePeerDiscovery(docs(name));
  const groups = items.map((g) => g.name);
  t.ok(groups.includes('batch'), 'batch, missing on one server, is in the union');
  const autoscaling = items.find((g) => g.name === 'autoscaling');
  t.same(
    autoscaling?.versions?.map((v) => v.version),
    ['v2', 'v1'],
    'autoscaling/v2, missing on one server, keeps its place',
  );
  const admission = items.find((g) => g.name === 'admissionregistration.k8s.io')?.versions?.find((v) => v.version === 'v1');
  t.ok(
    admission?.resources?.some((r) => r.resource === 'mutatingadmissionpolicies'),
    'the v1.36-only resource is in the union',
  );
  // Each server's own document alone re-encodes to exactly what that server sent.
  for (const s of cases[name]?.servers ?? []) {
    const single = mergePeerDiscovery([{ serverId: s.id, document: s.document }]);
    t.equal(discoveryBody(single), `${JSON.stringify(s.document)}\n`, `${s.id}: a single document is served unchanged`);
  }
});

// ---- readable crafted tables -----------------------------------------------------------------

const V = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
const list = (items: unknown[]): unknown => ({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items });
const res = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  resource: name,
  responseKind: { group: '', version: '', kind: 'K' },
  scope: 'Namespaced',
  singularResource: name,
  verbs: V,
  ...extra,
});
const grp = (name: string, versions: Record<string, Record<string, unknown>[]>): unknown => ({
  metadata: { name },
  versions: Object.entries(versions).map(([version, resources]) => ({ version, resources, freshness: 'Current' })),
});
const shape = (docsIn: ServerDocument[]): string[] =>
  mergePeerDiscovery(docsIn).flatMap((g) =>
    (g.versions ?? []).flatMap((v) => (v.resources ?? []).map((r) => `${g.name}/${v.version}/${r.resource}`)),
  );

t.test('crafted cases', async (t) => {
  t.test('conflicting group orders', async (t) => {
    const g = (...names: string[]): unknown => list(names.map((n) => grp(n, { v1: [res('xs')] })));
    const order = (...lists: string[][]): string[] =>
      mergePeerDiscovery(lists.map((l, i) => ({ serverId: `s${i}`, document: g(...l) }))).map((x) => x.name);
    t.same(
      order(['c.io', 'a.io', 'b.io'], ['b.io', 'c.io', 'a.io']),
      ['c.io', 'a.io', 'b.io'],
      'a complete list is taken as it is, even against another',
    );
    t.same(order(['c.io', 'a.io'], ['a.io', 'c.io'], ['b.io']), ['a.io', 'b.io', 'c.io'], 'no complete list and a cycle: name order');
    t.same(order(['z.io', 'm.io'], ['a.io', 'm.io']), ['a.io', 'z.io', 'm.io'], 'no complete list: relative order kept, ties by name');
  });
  t.test('one resource with different verbs on two servers: union, sorted; other fields from the first id', async (t) => {
    const merged = mergePeerDiscovery([
      {
        serverId: 'apiserver-z',
        document: list([grp('apps', { v1: [res('deployments', { verbs: ['watch', 'get'], shortNames: ['z'] })] })]),
      },
      {
        serverId: 'apiserver-a',
        document: list([grp('apps', { v1: [res('deployments', { verbs: ['list', 'get'], shortNames: ['a'] })] })]),
      },
    ]);
    const r = merged[0]?.versions?.[0]?.resources?.[0];
    t.same(r?.verbs, ['get', 'list', 'watch']);
    t.same(r?.shortNames, ['a'], 'apiserver-a sorts first');
  });
  t.test('a server missing a whole group; an empty server adds nothing', async (t) => {
    const full = list([
      grp('apps', { v1: [res('deployments')] }),
      grp('batch', { v1: [res('jobs')] }),
      grp('policy', { v1: [res('pdbs')] }),
    ]);
    const noBatch = list([grp('apps', { v1: [res('deployments')] }), grp('policy', { v1: [res('pdbs')] })]);
    t.same(
      shape([
        { serverId: 'b', document: noBatch },
        { serverId: 'a', document: full },
      ]),
      ['apps/v1/deployments', 'batch/v1/jobs', 'policy/v1/pdbs'],
    );
    t.same(
      shape([
        { serverId: 'a', document: noBatch },
        { serverId: 'b', document: full },
      ]),
      ['apps/v1/deployments', 'batch/v1/jobs', 'policy/v1/pdbs'],
      'same either way round',
    );
    t.same(
      shape([
        { serverId: 'a', document: noBatch },
        { serverId: 'b', document: list([]) },
      ]),
      ['apps/v1/deployments', 'policy/v1/pdbs'],
    );
  });
  t.test('versions and resources unioned in relative order', async (t) => {
    t.same(
      shape([
        { serverId: 'a', document: list([grp('apps', { v2: [res('as'), res('cs')], v1: [res('as')] })]) },
        { serverId: 'b', document: list([grp('apps', { v2: [res('bs'), res('cs')], v1beta1: [res('as')] })]) },
      ]),
      ['apps/v2/as', 'apps/v2/bs', 'apps/v2/cs', 'apps/v1/as', 'apps/v1beta1/as'],
    );
  });
  t.test("the core group and repeated groups in a document are dropped, as a peer's are", async (t) => {
    const merged = decodeGroupList(list([grp('', { v1: [res('pods')] }), grp('apps', { v1: [] }), grp('apps', { v2: [] })]));
    t.same(
      merged.map((g) => [g.name, g.versions?.map((v) => v.version)]),
      [['apps', ['v1']]],
    );
  });
  t.test('a document Go would not decode is an error, not a guess', async (t) => {
    t.throws(
      () => mergePeerDiscovery([{ serverId: 'a', document: list([{ metadata: { name: 'x' }, versions: 'v1' }]) }]),
      AggregatedDecodeError,
    );
    t.throws(() => mergePeerDiscovery([{ serverId: 'a', document: list([grp('x', { v1: [res('r', { verbs: [1] })] })]) }]), /verbs\[0\]/);
    t.throws(() => decodeGroupList('nope'), AggregatedDecodeError);
  });
  t.test('no documents: nothing merged', async (t) => {
    t.same(mergePeerDiscovery([]), []);
  });
});

t.test('mergePreservingRelativeOrder', async (t) => {
  const table: [string, string[][], string[]][] = [
    [
      'a list holding everything wins as it is',
      [
        ['b', 'c'],
        ['a', 'b', 'c'],
      ],
      ['a', 'b', 'c'],
    ],
    [
      'the first complete list wins',
      [
        ['c', 'b', 'a'],
        ['a', 'b', 'c'],
      ],
      ['c', 'b', 'a'],
    ],
    [
      'ties broken by name',
      [
        ['a', 'c'],
        ['b', 'c'],
      ],
      ['a', 'b', 'c'],
    ],
    ['smallest ready item first', [['z', 'y'], ['a']], ['a', 'z', 'y']],
    ['a cycle: name order', [['a', 'b'], ['b', 'a'], ['c']], ['a', 'b', 'c']],
    ['a repeated item in a list is no complete list', [['a', 'a', 'b'], ['b']], ['a', 'b']],
    ['no lists', [], []],
    ['empty lists', [[], []], []],
    ['byte order, not UTF-16 order', [['\uffee'], ['😀']], ['\uffee', '😀']],
  ];
  for (const [what, lists, want] of table) t.same(mergePreservingRelativeOrder(lists), want, what);
  t.equal(compareGoStrings('a', 'b'), -1);
  t.equal(compareGoStrings('ab', 'a'), 1);
  t.equal(compareGoStrings('x', 'x'), 0);
  t.equal(compareGoStrings('😀', '\uffee'), 1, 'U+1F600 sorts after U+FFEE in UTF-8');
});

t.test('ETag and body: Go json.Marshal compatible', async (t) => {
  const doc = list([grp('esc.io', { v1: [res('things', { shortNames: ['<a>&b', 'x\u2028y'], categories: [] })] })]);
  const items = mergePeerDiscovery([{ serverId: 'a', document: doc }]);
  const json = marshalGroups(items);
  t.match(json, /"shortNames":\["\\u003ca\\u003e\\u0026b","x\\u2028y"\]/, 'HTML characters and U+2028 escaped as Go does');
  t.notMatch(json, /categories/, 'an empty omitempty slice is left out');
  t.equal(marshalGroups(null), 'null');
  const etag = computeEtag(items);
  t.match(etag, /^[0-9A-F]{128}$/, 'uppercase hex SHA-512');
  t.equal(computeEtag(encodeItems(items)), etag, 'pre-encoded items hash the same');
  // Stable: the same content in another key order or spacing gives the same ETag.
  const reordered = JSON.parse(JSON.stringify(doc, null, 2)) as { items: { versions: { resources: Record<string, unknown>[] }[] }[] };
  const r = reordered.items[0]?.versions[0]?.resources[0] as Record<string, unknown>;
  const flipped = Object.fromEntries(Object.entries(r).reverse());
  (reordered.items[0]?.versions[0]?.resources as unknown[])[0] = flipped;
  t.equal(computeEtag(mergePeerDiscovery([{ serverId: 'a', document: reordered }])), etag, 'key order of the input does not matter');
  t.not(
    computeEtag(
      mergePeerDiscovery([{ serverId: 'a', document: list([grp('esc.io', { v1: [res('things', { shortNames: ['<a>&b'] })] })]) }]),
    ),
    etag,
    'content does',
  );
  t.match(
    discoveryBody(items),
    /^\{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io\/v2","metadata":\{\},"items":\[.*\]\}\n$/s,
  );
});

t.test('apiserverIdentity: the identity-lease name kube-apiserver derives from its hostname', async (t) => {
  // Read from the leases of real lab apiservers (hostnames kas-6, kas-7, kas-8).
  t.equal(apiserverIdentity('kas-6'), 'apiserver-pdd7lec3frdsiz5eqtii6ds2vi');
  t.equal(apiserverIdentity('kas-7'), 'apiserver-zvlvi7vajxzigodzcxrbp54yvi');
  t.equal(apiserverIdentity('kas-8'), 'apiserver-4c6acmjdw5h53vrbhp23uvwdfi');
  t.match(apiserverIdentity(''), /^apiserver-[a-z2-7]{26}$/);
});

t.test('decoding shares equal string lists and kinds within a document, and pauses inside one large group', async (t) => {
  const resource = (i: number, verbs: string[]): unknown => ({
    resource: `r${i}s`,
    responseKind: { group: '', version: '', kind: 'K' },
    scope: 'Namespaced',
    verbs,
    categories: ['all'],
  });
  const doc = {
    kind: 'APIGroupDiscoveryList',
    apiVersion: 'apidiscovery.k8s.io/v2',
    items: [
      {
        metadata: { name: 'big.io' },
        versions: [{ version: 'v1', resources: Array.from({ length: 3000 }, (_, i) => resource(i, i === 7 ? ['get'] : ['get', 'list'])) }],
      },
    ],
  };
  const { value, pauses } = runCountingPauses(decodeGroupListSteps(doc));
  t.ok(pauses >= 3000 / STEP_EVERY, `${pauses} pauses in one group of 3,000 resources`);
  const rs = value[0]?.versions?.[0]?.resources ?? [];
  t.equal(rs.length, 3000);
  t.equal(rs[0]?.verbs, rs[2999]?.verbs, 'equal verb lists: one array');
  t.equal(rs[0]?.categories, rs[1]?.categories);
  t.equal(rs[0]?.responseKind, rs[1]?.responseKind, 'equal kinds: one object');
  t.same(rs[7]?.verbs, ['get'], 'a different list stays its own');
  t.ok(Object.isFrozen(rs[0]?.verbs) && Object.isFrozen(rs[0]?.responseKind), 'shared, so frozen');
  t.same(marshalGroups(value), marshalGroups(decodeGroupList(JSON.parse(JSON.stringify(doc)))), 'the same as decoding at once');
});
