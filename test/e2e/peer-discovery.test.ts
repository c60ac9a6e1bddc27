// The peer-aggregated GET /apis through a REAL Envoy: fake apiservers behind Envoy + skewgate.
// Envoy missing → startStack throws and the test fails (it never skips).
//
// The expected bodies and ETags are not computed here: they are kube-apiserver's own answers for
// the same documents (test/fixtures/peer-discovery, the output of k8s.io/apiserver's merge, see
// its oracle/README.md). The fakes serve those documents as their own /apis, and they are named
// kas-6, kas-7 and kas-8 as the lab apiservers the real documents came from, so that their
// identities (the merge's visiting order) are those of the fixture.
import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MEDIA_AGGREGATED_V2, MEDIA_AGGREGATED_V2_NOPEER, REASON_HEADER } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD, type FakeApiServer } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { createClient, eventually, within, type Answer, type Client } from '../helpers/http.js';

const KUBECTL_ACCEPT = `${MEDIA_AGGREGATED_V2},application/json`;
const MAP = 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

type Case = { servers: { id: string; document: unknown }[] };
type Expected = { local: string; body: string; etag: string }[];
const FIXTURES = new URL('../../../test/fixtures/peer-discovery/', import.meta.url);
const cases = JSON.parse(readFileSync(new URL('cases.json', FIXTURES), 'utf8')) as Record<string, Case>;
const expected = JSON.parse(readFileSync(new URL('expected.json', FIXTURES), 'utf8')) as Record<string, Expected>;

/** Real documents of three lab apiservers, no two alike: v1.36.3 without autoscaling/v2, v1.36.3 without batch/v1, v1.35.4. */
const LAB = Object.keys(cases).find((n) => n.startsWith('lab:')) as string;
/** Crafted: every server lists a group no other one does (zeta.io, alpha.io, mid.io), so a union without one shows. */
const DISTINCT = 'partial group orders, lexicographic tie-break';
/** The lab case's servers are, in order, kas-6, kas-7 and kas-8; their ids are those apiservers' identity leases. */
const NAMES = ['kas-6', 'kas-7', 'kas-8'] as const;

/**
 * Which fake serves which document of a case: the lab case by identity; a crafted one (ids
 * apiserver-a, -b, …) in the same Go string order of ids as the fixture, so the visiting order is kept.
 */
function assignment(name: string): Map<string, unknown> {
  const c = cases[name];
  const lab = cases[LAB];
  if (!c || !lab) throw new Error(`no fixture case ${name}`);
  const byId = new Map(lab.servers.map((s, i) => [s.id, NAMES[i] as string]));
  if (name === LAB) return new Map(c.servers.map((s) => [byId.get(s.id) as string, s.document]));
  const ours = [...byId].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, n]) => n);
  const theirs = [...c.servers].sort((a, b) => (a.id < b.id ? -1 : 1));
  if (theirs.length !== ours.length) throw new Error(`${name}: ${theirs.length} servers, the stack has ${ours.length}`);
  return new Map(theirs.map((s, i) => [ours[i] as string, s.document]));
}

/** kube-apiserver's answer for a case; every server of it gave the same one. */
function kubeAnswer(t: Tap, name: string): { body: string; etag: string } {
  const answers = expected[name] ?? [];
  t.ok(answers.length > 0, `${name}: kube-apiserver's answers are in the fixture`);
  t.equal(new Set(answers.map((a) => a.etag)).size, 1, `${name}: every kube-apiserver gave the same answer`);
  return { body: answers[0]?.body ?? '', etag: `"${answers[0]?.etag ?? ''}"` };
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

let stack: Stack;
let client: Client;
let anonymous: Client;

t.before(async () => {
  stack = await startStack({
    dir: mkdtempSync(join(tmpdir(), 'sg-e2e-pd-')),
    servers: [
      { name: 'kas-6', builtins: BUILTINS_NEW },
      { name: 'kas-7', builtins: BUILTINS_NEW },
      { name: 'kas-8', builtins: BUILTINS_OLD },
    ],
  });
  client = createClient(stack.pki.caFile, stack.pki.token);
  anonymous = createClient(stack.pki.caFile, null);
});
t.teardown(async () => {
  await client?.close();
  await anonymous?.close();
  await stack?.close();
});

type Doc = { items: { metadata: { name?: string }; versions: { version: string; resources?: { resource: string }[] }[] }[] };
const resourcesOf = (doc: unknown): Set<string> =>
  new Set(
    (doc as Doc).items.flatMap((g) =>
      g.versions.flatMap((v) => (v.resources ?? []).map((r) => `${g.metadata.name ?? ''}/${v.version}/${r.resource}`)),
    ),
  );
const resources = (a: Answer): Set<string> => resourcesOf(a.json());
/** The union of documents as plain sets: what any correct merge must list, whatever its order. */
const unionOf = (docs: readonly unknown[]): string[] => [...new Set(docs.flatMap((d) => [...resourcesOf(d)]))].sort();
const apis = (headers: Record<string, string>): Promise<Answer> => client.send('GET', `${stack.gatewayUrl}/apis`, { headers });
const fake = (name: string): FakeApiServer => {
  const s = stack.apiservers.find((x) => x.name === name);
  if (!s) throw new Error(`no fake ${name}`);
  return s;
};
const state = (name: string) =>
  stack
    .skewgate()
    ?.discovery.current()
    .servers.find((s) => s.name === name);

/** Each fake serves its document of the case; resolves once skewgate has fetched every one of them. */
async function serve(name: string): Promise<Map<string, unknown>> {
  const docs = assignment(name);
  const app = stack.skewgate();
  if (!app) throw new Error('skewgate is not running');
  // A round that ends with a discovery GET /apis in its fake's log (cleared with the swap) has
  // fetched the new document: one poller's rounds never overlap, so no earlier round can have.
  const fetched = new Set<string>();
  let allFetched: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allFetched = resolve));
  const off = app.discovery.onRound((e) => {
    const asked = fake(e.server).requests.some((r) => r.path.split('?')[0] === '/apis' && r.headers['user-agent'] === 'skewgate-discovery');
    if (asked && e.after.consecutiveFailures === 0) fetched.add(e.server);
    if (fetched.size === stack.apiservers.length) allFetched();
  });
  try {
    for (const s of stack.apiservers) {
      s.setAggregatedApis(docs.get(s.name) ?? null);
      s.clearRequests();
    }
    app.discovery.refresh();
    await within(`skewgate's views of ${name}`, done);
  } finally {
    off();
  }
  return docs;
}

/** What each fake serves as its own /apis, straight from it. */
async function ownDocuments(): Promise<{ name: string; doc: unknown }[]> {
  return Promise.all(
    stack.apiservers.map(async (s) => ({
      name: s.name,
      doc: (await client.send('GET', `${s.url}/apis`, { headers: { accept: MEDIA_AGGREGATED_V2_NOPEER } })).json(),
    })),
  );
}

t.test("GET /apis with the v2 Accept: kube-apiserver's peer-aggregated document of the three, answered by skewgate", async (t) => {
  const kube = kubeAnswer(t, LAB);
  await serve(LAB);
  const a = await apis({ accept: MEDIA_AGGREGATED_V2 });
  t.equal(a.status, 200);
  t.equal(a.server, undefined, 'no apiserver answered');
  t.equal(a.headers[REASON_HEADER], 'merged_apis');
  t.equal(a.headers['content-type'], MEDIA_AGGREGATED_V2);
  t.equal(a.headers['vary'], 'Accept');
  t.equal(a.headers['cache-control'], 'public');
  t.equal(a.text, kube.body, 'the body, byte for byte, as kube-apiserver writes it');
  t.equal(a.headers['etag'], kube.etag, 'the ETag kube-apiserver gives it');
  const own = await ownDocuments();
  t.same([...resources(a)].sort(), unionOf(own.map((o) => o.doc)), 'exactly the union of what the apiservers list');
  t.ok(resources(a).has(MAP), 'lists the resource the v1.35 apiserver does not serve');
});

t.test('If-None-Match with the ETag: 304 without a body, from the edge', async (t) => {
  const first = await apis({ accept: MEDIA_AGGREGATED_V2 });
  const etag = first.headers['etag'] as string;
  for (const s of stack.apiservers) s.clearRequests();
  const again = await apis({ accept: MEDIA_AGGREGATED_V2, 'if-none-match': etag });
  t.equal(again.status, 304);
  t.equal(again.text, '');
  t.equal(again.headers['etag'], etag);
  t.equal(again.headers[REASON_HEADER], 'merged_apis_not_modified');
  // skewgate's own discovery polls (user-agent skewgate-discovery) go on meanwhile; the client's do not reach an apiserver.
  const asked = stack.apiservers
    .flatMap((s) => s.requests)
    .filter((r) => r.path.startsWith('/apis') && r.headers['user-agent'] !== 'skewgate-discovery');
  t.equal(asked.length, 0, 'no apiserver was asked');
  const other = await apis({ accept: MEDIA_AGGREGATED_V2, 'if-none-match': '"0"' });
  t.equal(other.status, 200, 'another tag: the document');
});

t.test("kubectl's Accept list gets the merged document too", async (t) => {
  const a = await apis({ accept: KUBECTL_ACCEPT });
  t.equal(a.status, 200);
  t.equal(a.headers[REASON_HEADER], 'merged_apis');
  t.ok(resources(a).has(MAP));
});

t.test("profile=nopeer: one apiserver's own document, from that apiserver", async (t) => {
  const own = new Map((await ownDocuments()).map((o) => [o.name, JSON.stringify(o.doc)]));
  const seen = new Set<string>();
  for (let i = 0; i < 9; i++) {
    const a = await apis({ accept: MEDIA_AGGREGATED_V2_NOPEER });
    t.equal(a.status, 200);
    t.ok(a.server, 'an apiserver answered');
    t.equal(a.headers[REASON_HEADER], undefined);
    t.equal(JSON.stringify(a.json()), own.get(a.server as string), `${a.server}'s own document`);
    seen.add(a.server as string);
  }
  t.ok(seen.size >= 2, `balanced over the apiservers: ${[...seen].join(', ')}`);
});

t.test('legacy /apis, /api and /apis/<group> are not merged', async (t) => {
  const legacy = await apis({ accept: 'application/json' });
  t.ok(legacy.server, 'an apiserver answered the legacy /apis');
  t.match(legacy.json(), { kind: 'APIGroupList' });
  const core = await client.send('GET', `${stack.gatewayUrl}/api`, { headers: { accept: MEDIA_AGGREGATED_V2 } });
  t.ok(core.server, 'an apiserver answered /api');
  const group = await client.send('GET', `${stack.gatewayUrl}/apis/apps`, { headers: { accept: 'application/json' } });
  t.ok(group.server, 'an apiserver answered /apis/apps');
});

t.test('without credentials the apiserver answers (skewgate cannot authenticate)', async (t) => {
  const a = await anonymous.send('GET', `${stack.gatewayUrl}/apis`, { headers: { accept: MEDIA_AGGREGATED_V2 } });
  t.equal(a.status, 401);
  t.ok(a.server, 'an apiserver answered');
});

t.test('an unready apiserver leaves the union; back when ready', async (t) => {
  const kube = kubeAnswer(t, DISTINCT);
  const docs = await serve(DISTINCT);
  const kas7 = fake('kas-7');
  const without = unionOf(['kas-6', 'kas-8'].map((n) => docs.get(n)));
  const only7 = unionOf([docs.get('kas-7')]).filter((r) => !without.includes(r));
  t.ok(only7.length > 0, `kas-7 lists what the others do not: ${only7.join(', ')}`);
  t.equal((await apis({ accept: MEDIA_AGGREGATED_V2 })).text, kube.body, "all three ready: kube-apiserver's document");
  kas7.setReady(false);
  t.teardown(() => kas7.setReady(true));
  await eventually('skewgate to see kas-7 unready', () => state('kas-7')?.ready === false);
  const a = await apis({ accept: MEDIA_AGGREGATED_V2 });
  t.equal(a.headers[REASON_HEADER], 'merged_apis', 'still merged at the edge');
  t.same([...resources(a)].sort(), without, "the union of the two ready apiservers, without kas-7's own group");
  kas7.setReady(true);
  await eventually('skewgate to see kas-7 ready', () => state('kas-7')?.ready === true);
  const back = await apis({ accept: MEDIA_AGGREGATED_V2 });
  t.equal(back.headers[REASON_HEADER], 'merged_apis');
  t.equal(back.text, kube.body, "ready again: the whole union, kube-apiserver's document");
  t.equal(back.headers['etag'], kube.etag);
});

t.test('a failing discovery on a ready apiserver: never a partial union', async (t) => {
  const kube = kubeAnswer(t, DISTINCT);
  await serve(DISTINCT);
  const kas7 = fake('kas-7');
  kas7.setDiscoveryFault('error500');
  t.teardown(() => kas7.setDiscoveryFault('none'));
  // Until skewgate has seen the failure its view of kas-7 is fresh and the whole union is right.
  const answers: Answer[] = [];
  await eventually("skewgate to record kas-7's failure", async () => {
    answers.push(await apis({ accept: MEDIA_AGGREGATED_V2 }));
    return (state('kas-7')?.consecutiveFailures ?? 0) > 0;
  });
  // From now on the union cannot be vouched for (kas-7 is ready, its view not fresh): kas-7's
  // group would be missing from anything merged, so the balanced pool must answer instead.
  const after: Answer[] = [];
  for (let i = 0; i < 6; i++) after.push(await apis({ accept: MEDIA_AGGREGATED_V2 }));
  t.equal(state('kas-7')?.ready, true, 'kas-7 stayed ready throughout');
  for (const a of after) {
    t.equal(a.headers[REASON_HEADER], undefined, 'not answered by skewgate');
    t.ok(a.server, `answered by an apiserver (${a.server ?? '-'} ${a.status})`);
  }
  const merged = [...answers, ...after].filter((a) => a.headers[REASON_HEADER] === 'merged_apis');
  for (const a of merged) t.equal(a.text, kube.body, 'a merged answer is only ever the whole union');
  kas7.setDiscoveryFault('none');
  await eventually(
    'the merged /apis again',
    async () => (await apis({ accept: MEDIA_AGGREGATED_V2 })).headers[REASON_HEADER] === 'merged_apis',
  );
  const back = await apis({ accept: MEDIA_AGGREGATED_V2 });
  t.equal(back.text, kube.body, 'served again once the view is fresh: the whole union');
});
