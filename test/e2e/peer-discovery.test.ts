// The peer-aggregated GET /apis through a REAL Envoy: fake skewed apiservers behind Envoy +
// skewgate. Envoy missing → startStack throws and the test fails (it never skips).
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MEDIA_AGGREGATED_V2, MEDIA_AGGREGATED_V2_NOPEER, REASON_HEADER } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { apiserverIdentity } from '../../src/discovery/apiserver-identity.js';
import { computeEtag, discoveryBody, mergePeerDiscovery } from '../../src/discovery/merge.js';
import { createClient, eventually, type Answer, type Client } from '../helpers/http.js';

const KUBECTL_ACCEPT = `${MEDIA_AGGREGATED_V2},application/json`;
const MAP = 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

let stack: Stack;
let client: Client;
let anonymous: Client;

t.before(async () => {
  stack = await startStack({
    dir: mkdtempSync(join(tmpdir(), 'sg-e2e-pd-')),
    servers: [
      { name: 'apiserver-a', builtins: BUILTINS_OLD },
      { name: 'apiserver-b', builtins: BUILTINS_OLD },
      { name: 'apiserver-c', builtins: BUILTINS_NEW },
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
const resources = (a: Answer): Set<string> => new Set((a.json() as Doc).items.flatMap((g) => g.versions.flatMap((v) => (v.resources ?? []).map((r) => `${g.metadata.name ?? ''}/${v.version}/${r.resource}`))));
const apis = (headers: Record<string, string>): Promise<Answer> => client.send('GET', `${stack.gatewayUrl}/apis`, { headers });

/** What each fake serves as its own /apis, straight from it. */
async function ownDocuments(): Promise<{ name: string; doc: unknown }[]> {
  return Promise.all(stack.apiservers.map(async (s) => ({ name: s.name, doc: (await client.send('GET', `${s.url}/apis`, { headers: { accept: MEDIA_AGGREGATED_V2_NOPEER } })).json() })));
}

t.test('GET /apis with the v2 Accept: the union of all apiservers, answered by skewgate', async (t) => {
  const a = await apis({ accept: MEDIA_AGGREGATED_V2 });
  t.equal(a.status, 200);
  t.equal(a.server, undefined, 'no apiserver answered');
  t.equal(a.headers[REASON_HEADER], 'merged_apis');
  t.equal(a.headers['content-type'], MEDIA_AGGREGATED_V2);
  t.equal(a.headers['vary'], 'Accept');
  t.equal(a.headers['cache-control'], 'public');
  t.match(a.headers['etag'], /^"[0-9A-F]{128}"$/);
  const union = resources(a);
  t.ok(union.has(MAP), 'lists the resource only apiserver-c serves');
  const own = await ownDocuments();
  for (const { name, doc } of own) {
    const missing = [...resources({ json: () => doc } as Answer)].filter((r) => !union.has(r));
    t.same(missing, [], `everything ${name} lists is in the union`);
  }
  // Exactly what kube-apiserver's merge gives for these documents.
  const items = mergePeerDiscovery(own.map((o) => ({ serverId: apiserverIdentity(o.name), document: o.doc })));
  t.equal(a.text, discoveryBody(items), 'the body, byte for byte');
  t.equal(a.headers['etag'], `"${computeEtag(items)}"`, 'the ETag');
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
  const asked = stack.apiservers.flatMap((s) => s.requests).filter((r) => r.path.startsWith('/apis') && r.headers['user-agent'] !== 'skewgate-discovery');
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

t.test('profile=nopeer: one apiserver\'s own document, from that apiserver', async (t) => {
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
  const c = stack.apiservers.find((s) => s.name === 'apiserver-c');
  c?.setReady(false);
  t.teardown(() => c?.setReady(true));
  await eventually('the union without apiserver-c', async () => {
    const a = await apis({ accept: MEDIA_AGGREGATED_V2 });
    return a.status === 200 && a.headers[REASON_HEADER] === 'merged_apis' && !resources(a).has(MAP);
  });
  c?.setReady(true);
  await eventually('the union with apiserver-c again', async () => {
    const a = await apis({ accept: MEDIA_AGGREGATED_V2 });
    return a.headers[REASON_HEADER] === 'merged_apis' && resources(a).has(MAP);
  });
  t.pass('readiness followed');
});

t.test('a failing discovery on a ready apiserver: never a partial union', async (t) => {
  const b = stack.apiservers.find((s) => s.name === 'apiserver-b');
  b?.setDiscoveryFault('error500');
  t.teardown(() => b?.setDiscoveryFault('none'));
  await eventually('a pass-through /apis', async () => {
    const a = await apis({ accept: MEDIA_AGGREGATED_V2 });
    return a.headers[REASON_HEADER] === undefined && a.server !== undefined;
  });
  b?.setDiscoveryFault('none');
  await eventually('the merged /apis again', async () => (await apis({ accept: MEDIA_AGGREGATED_V2 })).headers[REASON_HEADER] === 'merged_apis');
  t.pass('served again once the view is fresh');
});
