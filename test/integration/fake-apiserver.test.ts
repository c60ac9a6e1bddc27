// The fake control plane over real HTTPS: discovery skew, auth, CRUD, watch, CRDs and restart.
import type { IncomingHttpHeaders } from 'node:http';
import { request } from 'node:https';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { MEDIA_AGGREGATED_V2, MEDIA_AGGREGATED_V2_NOPEER, DISCOVERY_ACCEPT } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer, FakeCluster, createPki } from '../../harness/fake/index.js';
import { arr, at, obj, objs, opt, str, type Obj } from '../helpers/json.js';

// dist/test/integration → repo root/.cache, shared with other tests (createPki locks and reuses).
const pki = await createPki(fileURLToPath(new URL('../../../.cache/fake-pki', import.meta.url)));
const ca = readFileSync(pki.caFile);

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}
interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: unknown;
  auth?: 'token' | 'cert' | 'none';
  timeoutMs?: number;
}

function call(base: string, path: string, o: CallOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      ...((o.auth ?? 'token') === 'token' ? { authorization: `Bearer ${pki.token}` } : {}),
      ...o.headers,
    };
    const body = o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const req = request(
      new URL(path, base),
      {
        method: o.method ?? 'GET',
        headers,
        ca,
        agent: false,
        ...(o.auth === 'cert' ? { cert: readFileSync(pki.clientCertFile), key: readFileSync(pki.clientKeyFile) } : {}),
      },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
        res.on('error', reject);
      },
    );
    if (o.timeoutMs) req.setTimeout(o.timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

// Parsed documents are walked with the helpers of test/helpers/json.ts: a wrong path fails with what was there.
const j = (r: Reply): Obj => obj(JSON.parse(r.body), r.body.slice(0, 80));
/** The item of a list whose `key` (a dotted path) is `value`. */
const find = (list: unknown, key: string, value: string): Obj => {
  const hit = objs(list).find((x) => opt(x, key) === value);
  if (hit === undefined) throw new Error(`no item with ${key}=${value}`);
  return hit;
};
const names = (list: unknown, key: string): string[] => objs(list).map((x) => str(at(x, key), key));
const groups = (d: Obj): string[] => names(d.items, 'metadata.name');

/** A watch stream: collects events, resolves waits, reports when the server ends it. */
function watch(
  base: string,
  path: string,
): { events: Obj[]; waitFor: (n: number) => Promise<Obj[]>; ended: Promise<void>; stop: () => void } {
  const events: Obj[] = [];
  const waiters: (() => void)[] = [];
  let buf = '';
  let endedResolve = (): void => undefined;
  const ended = new Promise<void>((r) => (endedResolve = r));
  const req = request(new URL(path, base), { headers: { authorization: `Bearer ${pki.token}` }, ca, agent: false }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (c: string) => {
      buf += c;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        events.push(obj(JSON.parse(buf.slice(0, i)), 'watch event'));
        buf = buf.slice(i + 1);
      }
      for (const w of waiters.splice(0)) w();
    });
    res.on('close', endedResolve);
  });
  req.on('error', endedResolve);
  req.end();
  const waitFor = async (n: number): Promise<Obj[]> => {
    const deadline = Date.now() + 5000;
    while (events.length < n) {
      if (Date.now() > deadline) throw new Error(`only ${events.length} of ${n} watch events`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 100);
      });
    }
    return events;
  };
  return { events, waitFor, ended, stop: () => req.destroy() };
}

const cluster = new FakeCluster();
const oldServer = new FakeApiServer({ name: 'old', cluster, pki, builtins: BUILTINS_OLD, gitVersion: 'v1.35.2' });
const newServer = new FakeApiServer({ name: 'new', cluster, pki, builtins: BUILTINS_NEW, gitVersion: 'v1.36.0' });
const legacyServer = new FakeApiServer({ name: 'legacy', cluster, pki, builtins: BUILTINS_OLD, discovery: 'legacy' });
await Promise.all([oldServer.start(), newServer.start(), legacyServer.start()]);
t.teardown(() => Promise.all([oldServer.close(), newServer.close(), legacyServer.close()]));

const aggregated = { accept: MEDIA_AGGREGATED_V2_NOPEER };

t.test('pki and kubeconfig', async (t) => {
  const again = await createPki(pki.dir);
  t.same(again, pki, 'a complete set is reused as is');
  const kubeconfig = readFileSync(pki.kubeconfigFile, 'utf8');
  t.match(kubeconfig, /current-context: token/);
  t.match(kubeconfig, new RegExp(`certificate-authority: ${pki.caFile}`));
  t.equal(readFileSync(pki.tokenFile, 'utf8').trim(), pki.token);
});

t.test('aggregated discovery shows the skew between the two servers', async (t) => {
  const [o, n] = await Promise.all([
    call(oldServer.url, '/apis', { headers: aggregated }),
    call(newServer.url, '/apis', { headers: aggregated }),
  ]);
  for (const r of [o, n]) {
    t.equal(r.status, 200);
    t.equal(r.headers['content-type'], MEDIA_AGGREGATED_V2, 'no profile in the response type');
    t.equal(r.headers['vary'], 'Accept');
    t.match(r.headers['etag'], /^"[0-9A-F]{128}"$/);
  }
  t.equal(o.headers['x-fake-apiserver'], 'old');
  t.equal(n.headers['x-fake-apiserver'], 'new');
  t.not(o.headers['etag'], n.headers['etag']);
  const od = j(o);
  const nd = j(n);
  t.equal(nd.kind, 'APIGroupDiscoveryList');
  t.equal(nd.apiVersion, 'apidiscovery.k8s.io/v2');
  t.same(groups(od), groups(nd), 'same groups, in a deterministic order');
  t.equal(groups(nd)[0], 'apiregistration.k8s.io');
  t.equal(groups(nd)[1], 'apps');
  const versions = (d: Obj, g: string): string[] => names(find(d.items, 'metadata.name', g).versions, 'version');
  t.same(versions(od, 'resource.k8s.io'), ['v1']);
  t.same(versions(nd, 'resource.k8s.io'), ['v1', 'v1beta2'], 'GA first, then beta');
  const resources = (d: Obj, g: string): string[] => names(at(find(d.items, 'metadata.name', g), 'versions.0.resources'), 'resource');
  t.notOk(resources(od, 'admissionregistration.k8s.io').includes('mutatingadmissionpolicies'));
  t.ok(resources(nd, 'admissionregistration.k8s.io').includes('mutatingadmissionpolicies'));
  const deployments = find(at(nd, 'items.1.versions.0.resources'), 'resource', 'deployments');
  t.match(deployments, {
    responseKind: { kind: 'Deployment' },
    scope: 'Namespaced',
    singularResource: 'deployment',
    shortNames: ['deploy'],
    subresources: [
      { subresource: 'status', verbs: ['get', 'patch', 'update'] },
      { subresource: 'scale', responseKind: { group: 'autoscaling', kind: 'Scale' } },
    ],
  });
  t.equal(at(nd, 'items.0.versions.0.freshness'), 'Current');

  const core = j(await call(newServer.url, '/api', { headers: { accept: DISCOVERY_ACCEPT } }));
  t.equal(arr(core.items).length, 1);
  t.same(at(core, 'items.0.metadata'), {}, 'the core group has no name');
  const pods = find(at(core, 'items.0.versions.0.resources'), 'resource', 'pods');
  t.ok(names(pods.subresources, 'subresource').includes('status'));

  const plain = await call(newServer.url, '/apis', { headers: { accept: MEDIA_AGGREGATED_V2 } });
  t.equal(plain.body, n.body, 'without profile=nopeer the same (own) document');
});

t.test('ETag and 304', async (t) => {
  const first = await call(newServer.url, '/apis', { headers: aggregated });
  const etag = String(first.headers['etag']);
  const second = await call(newServer.url, '/apis', { headers: { ...aggregated, 'if-none-match': etag } });
  t.equal(second.status, 304);
  t.equal(second.body, '');
  t.equal(second.headers['etag'], etag);
  const stale = await call(newServer.url, '/apis', { headers: { ...aggregated, 'if-none-match': '"0"' } });
  t.equal(stale.status, 200);
});

t.test('legacy discovery documents', async (t) => {
  const apis = await call(legacyServer.url, '/apis', { headers: { accept: DISCOVERY_ACCEPT } });
  t.equal(apis.headers['content-type'], 'application/json', 'an old server ignores the aggregated Accept');
  t.equal(j(apis).kind, 'APIGroupList');
  t.same(find(j(apis).groups, 'name', 'apps'), {
    name: 'apps',
    versions: [{ groupVersion: 'apps/v1', version: 'v1' }],
    preferredVersion: { groupVersion: 'apps/v1', version: 'v1' },
  });
  t.match(j(await call(legacyServer.url, '/api')), { kind: 'APIVersions', versions: ['v1'] });
  const v1 = j(await call(legacyServer.url, '/api/v1'));
  t.equal(v1.kind, 'APIResourceList');
  t.equal(v1.groupVersion, 'v1');
  t.match(find(v1.resources, 'name', 'pods/status'), { kind: 'Pod', namespaced: true, verbs: ['get', 'patch', 'update'] });
  t.match(j(await call(legacyServer.url, '/apis/apps')), { kind: 'APIGroup', name: 'apps' });
  t.match(j(await call(legacyServer.url, '/apis/apps/v1')), { groupVersion: 'apps/v1' });
  const scale = find(j(await call(legacyServer.url, '/apis/apps/v1')).resources, 'name', 'deployments/scale');
  t.match(scale, { group: 'autoscaling', version: 'v1', kind: 'Scale' });
  // An aggregated-capable server answers a plain JSON Accept with the legacy documents.
  t.equal(j(await call(newServer.url, '/apis', { headers: { accept: 'application/json' } })).kind, 'APIGroupList');
  const missing = await call(oldServer.url, '/apis/resource.k8s.io/v1beta2');
  t.equal(missing.status, 404);
  t.match(j(missing), { kind: 'Status', reason: 'NotFound', code: 404 });
  t.equal((await call(legacyServer.url, '/apis/nope.example.com')).status, 404);
});

t.test('authentication', async (t) => {
  const none = await call(oldServer.url, '/api/v1/namespaces', { auth: 'none' });
  t.equal(none.status, 401);
  t.match(j(none), { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', code: 401 });
  t.equal(none.headers['x-fake-apiserver'], 'old');
  t.equal((await call(oldServer.url, '/api/v1/namespaces', { auth: 'none', headers: { authorization: 'Bearer wrong' } })).status, 401);
  const cert = await call(oldServer.url, '/api/v1/namespaces', { auth: 'cert' });
  t.equal(cert.status, 200, 'client certificate signed by the cluster CA');
  t.ok(names(j(cert).items, 'metadata.name').includes('default'));
  t.equal((await call(oldServer.url, '/healthz', { auth: 'none' })).body, 'ok');
  t.match(j(await call(newServer.url, '/version', { auth: 'none' })), { major: '1', minor: '36', gitVersion: 'v1.36.0' });
});

t.test('readiness and discovery faults', async (t) => {
  newServer.setReady(false);
  t.equal((await call(newServer.url, '/readyz', { auth: 'none' })).status, 500);
  newServer.setReady(true);
  t.equal((await call(newServer.url, '/readyz', { auth: 'none' })).status, 200);

  newServer.setDiscoveryFault('error500');
  t.equal((await call(newServer.url, '/apis', { headers: aggregated })).status, 500);
  newServer.setDiscoveryFault('malformed');
  const bad = await call(newServer.url, '/apis', { headers: aggregated });
  t.equal(bad.status, 200);
  t.throws(() => JSON.parse(bad.body));
  newServer.setDiscoveryFault('hang');
  await t.rejects(call(newServer.url, '/apis', { headers: aggregated, timeoutMs: 300 }), /timeout/);
  newServer.setDiscoveryFault('none');
  t.equal((await call(newServer.url, '/apis', { headers: aggregated })).status, 200);
});

t.test('CRUD, conflicts and bad input', async (t) => {
  const base = '/api/v1/namespaces/default/configmaps';
  const created = await call(oldServer.url, base, {
    method: 'POST',
    body: { metadata: { name: 'cm1', labels: { app: 'x' } }, data: { a: '1' } },
  });
  t.equal(created.status, 201);
  const cm = j(created);
  t.match(cm, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm1', namespace: 'default' } });
  t.match(at(cm, 'metadata.resourceVersion'), /^\d+$/);
  t.match(j(await call(newServer.url, `${base}/cm1`)), { data: { a: '1' } }, 'the other server sees the same store');
  const again = await call(newServer.url, base, { method: 'POST', body: { metadata: { name: 'cm1' } } });
  t.equal(again.status, 409);
  t.equal(j(again).reason, 'AlreadyExists');

  const updated = await call(newServer.url, `${base}/cm1`, { method: 'PUT', body: { ...cm, data: { a: '2' } } });
  t.equal(updated.status, 200);
  t.not(at(j(updated), 'metadata.resourceVersion'), at(cm, 'metadata.resourceVersion'));
  const stale = await call(oldServer.url, `${base}/cm1`, { method: 'PUT', body: { ...cm, data: { a: '3' } } });
  t.equal(stale.status, 409);
  t.equal(j(stale).reason, 'Conflict');

  const patched = await call(oldServer.url, `${base}/cm1`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: { data: { b: '2' } },
  });
  t.same(j(patched).data, { a: '2', b: '2' });
  const jsonPatch = await call(oldServer.url, `${base}/cm1`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json-patch+json' },
    body: [],
  });
  t.equal(jsonPatch.status, 415);

  await call(oldServer.url, base, { method: 'POST', body: { metadata: { name: 'cm2' } } });
  const list = j(await call(oldServer.url, `${base}?labelSelector=app%3Dx`));
  t.equal(list.kind, 'ConfigMapList');
  t.same(names(list.items, 'metadata.name'), ['cm1']);
  t.equal(arr(j(await call(oldServer.url, '/api/v1/configmaps')).items).length, 2, 'list across namespaces');

  const bad = await call(oldServer.url, base, { method: 'POST', body: '{"metadata":' });
  t.equal(bad.status, 400);
  t.match(j(bad), { kind: 'Status', reason: 'BadRequest' });
  t.equal((await call(oldServer.url, base, { method: 'POST', body: { metadata: {} } })).status, 422);
  t.equal((await call(oldServer.url, '/api/v1/namespaces/default/configmaps/%E0%A4%A', {})).status, 400);

  t.equal((await call(oldServer.url, `${base}/cm1`, { method: 'DELETE' })).status, 200);
  const gone = await call(oldServer.url, `${base}/cm1`);
  t.equal(gone.status, 404);
  t.match(j(gone), { reason: 'NotFound', details: { name: 'cm1', kind: 'configmaps' } });
  t.equal(arr(j(await call(oldServer.url, base, { method: 'DELETE' })).items).length, 1, 'deletecollection');
});

t.test('status subresource', async (t) => {
  const base = '/apis/apps/v1/namespaces/default/deployments';
  await call(newServer.url, base, { method: 'POST', body: { metadata: { name: 'd' }, spec: { replicas: 1 }, status: { replicas: 5 } } });
  const d = j(await call(newServer.url, `${base}/d`));
  t.same(d.status, { replicas: 5 });
  const put = await call(newServer.url, `${base}/d`, { method: 'PUT', body: { ...d, spec: { replicas: 2 }, status: { replicas: 9 } } });
  t.same(j(put).status, { replicas: 5 }, 'the main resource cannot change status');
  const st = await call(newServer.url, `${base}/d/status`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: { status: { replicas: 2 } },
  });
  t.same([j(st).spec, j(st).status], [{ replicas: 2 }, { replicas: 2 }]);
  t.equal((await call(newServer.url, `${base}/d/nope`)).status, 404);
});

t.test('unknown resources and verbs', async (t) => {
  const path = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
  const o = await call(oldServer.url, path);
  t.equal(o.status, 404);
  t.match(j(o), { kind: 'Status', reason: 'NotFound', code: 404, message: 'the server could not find the requested resource' });
  t.equal((await call(newServer.url, path)).status, 200);
  const notAllowed = await call(newServer.url, '/api/v1/namespaces', { method: 'DELETE' });
  t.equal(notAllowed.status, 405, 'namespaces have no deletecollection');
  t.equal(j(notAllowed).reason, 'MethodNotAllowed');
  t.equal((await call(newServer.url, '/api/v1/namespaces/default/nodes')).status, 404, 'cluster-scoped under a namespace');
  t.equal((await call(newServer.url, '/nope')).status, 404);
});

t.test('bad input gets a Status, never a crash', async (t) => {
  const cms = '/api/v1/namespaces/default/configmaps';
  for (const [path, o] of [
    [cms, { method: 'POST', body: '[1,2]' }],
    [`${cms}?labelSelector=a%20in%20(b)`, {}],
    [`${cms}?fieldSelector=spec.x%3D1`, {}],
    [`${cms}?watch=1&resourceVersion=abc`, {}],
  ] as const) {
    const r = await call(oldServer.url, path, o);
    t.equal(r.status, 400, path);
    t.match(j(r), { kind: 'Status', reason: 'BadRequest', code: 400 });
  }
  t.equal((await call(oldServer.url, '/healthz', { auth: 'none' })).status, 200, 'still serving');
  t.same(j(await call(oldServer.url, '/openapi/v3')), { paths: {} }, 'empty OpenAPI, enough for kubectl validation');
});

t.test('watch delivers events from both servers', async (t) => {
  const base = '/api/v1/namespaces/default/secrets';
  await call(oldServer.url, base, { method: 'POST', body: { metadata: { name: 'before' } } });
  const rv = str(at(j(await call(newServer.url, base)), 'metadata.resourceVersion'));
  const fromNow = watch(newServer.url, `${base}?watch=true&resourceVersion=${rv}`);
  const initial = watch(oldServer.url, `/api/v1/watch/namespaces/default/secrets`);
  t.teardown(() => {
    fromNow.stop();
    initial.stop();
  });
  t.match(await initial.waitFor(1), [{ type: 'ADDED', object: { kind: 'Secret', metadata: { name: 'before' } } }]);
  // fromNow resumes from rv, so it sees these events whenever its subscription lands.
  const s = j(await call(oldServer.url, base, { method: 'POST', body: { metadata: { name: 's1' } } }));
  await call(newServer.url, `${base}/s1`, { method: 'PUT', body: { ...s, data: { k: 'dg==' } } });
  await call(oldServer.url, `${base}/s1`, { method: 'DELETE' });
  const events = await fromNow.waitFor(3);
  t.same(
    events.map((e) => `${str(e.type)} ${str(at(e, 'object.metadata.name'))}`),
    ['ADDED s1', 'MODIFIED s1', 'DELETED s1'],
  );
  t.equal(at(events, '0.object.apiVersion'), 'v1');
  t.ok(Number(at(events, '2.object.metadata.resourceVersion')) > Number(at(events, '1.object.metadata.resourceVersion')));
  t.equal((await initial.waitFor(4)).length, 4);
});

t.test('a CRD is served by every server at once', async (t) => {
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
      versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} } }],
    },
  };
  const crds = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  const invalid = await call(oldServer.url, crds, { method: 'POST', body: { ...crd, metadata: { name: 'wrong' } } });
  t.equal(invalid.status, 422);
  const created = await call(oldServer.url, crds, { method: 'POST', body: crd });
  t.equal(created.status, 201);
  t.match(at(j(created), 'status.conditions'), [{ type: 'NamesAccepted' }, { type: 'Established', status: 'True' }]);
  for (const s of [oldServer, newServer]) {
    const d = j(await call(s.url, '/apis', { headers: aggregated }));
    const g = find(d.items, 'metadata.name', 'example.com');
    t.match(
      g,
      {
        versions: [{ version: 'v1', resources: [{ resource: 'widgets', scope: 'Namespaced', subresources: [{ subresource: 'status' }] }] }],
      },
      s.name,
    );
    t.equal(groups(d).at(-1), 'example.com', 'CRD groups after the built-ins');
  }
  t.match(j(await call(legacyServer.url, '/apis/example.com/v1')), {
    resources: [{ name: 'widgets', kind: 'Widget' }, { name: 'widgets/status' }],
  });
  const widgets = '/apis/example.com/v1/namespaces/default/widgets';
  t.equal((await call(newServer.url, widgets, { method: 'POST', body: { metadata: { name: 'w1' }, spec: { size: 1 } } })).status, 201);
  t.match(j(await call(oldServer.url, `${widgets}/w1`)), { apiVersion: 'example.com/v1', kind: 'Widget', spec: { size: 1 } });
  t.equal((await call(newServer.url, `${crds}/widgets.example.com`, { method: 'DELETE' })).status, 200);
  t.equal((await call(oldServer.url, `${widgets}/w1`)).status, 404, 'its objects and API are gone');
  t.notOk(names(j(await call(oldServer.url, '/apis', { headers: aggregated })).items, 'metadata.name').includes('example.com'));
});

t.test('close() ends watches; start() listens again on the same port', async (t) => {
  const s = new FakeApiServer({ name: 'restart', cluster, pki, builtins: BUILTINS_OLD });
  await s.start();
  const port = s.port;
  t.ok(port > 0);
  const w = watch(s.url, '/api/v1/namespaces?watch=1');
  await w.waitFor(1);
  // The watch never ends by itself: close() returning and the watch's end prove it was ended.
  await s.close();
  await w.ended;
  t.pass('close() ended the open watch');
  await s.close(); // idempotent
  await t.rejects(call(s.url, '/healthz', { auth: 'none' }));
  await s.start();
  t.equal(s.port, port);
  t.ok(arr(j(await call(s.url, '/api/v1/namespaces')).items).length >= 4, 'the cluster outlives its servers');
  s.removeBuiltin('', 'v1', 'namespaces');
  t.equal((await call(s.url, '/api/v1/namespaces')).status, 404);
  s.addBuiltin({ group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false });
  t.equal((await call(s.url, '/api/v1/namespaces')).status, 200);
  t.ok(s.requests.some((r) => r.path === '/api/v1/namespaces?watch=1' && r.method === 'GET'));
  s.clearRequests();
  t.equal(s.requests.length, 0);
  await s.close();
});
