// The CRD/APIService watch: new APIs reach the snapshot within 1 s although polling is at 60 s.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'undici';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import type { Snapshot } from '../../src/discovery/types.js';
import { type FakeApiServer, FakeCluster, discoveryConfig, startFake, testPki, tokenServer, waitForSnapshot } from '../helpers/discovery-fixtures.js';

const pki = await testPki();
const agent = new Agent({ connect: { ca: await readFile(pki.caFile) } });
t.teardown(() => agent.close());

async function post(s: FakeApiServer, path: string, body: unknown): Promise<number> {
  const res = await request(`${s.url}${path}`, {
    method: 'POST',
    dispatcher: agent,
    headers: { authorization: `Bearer ${pki.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.body.text();
  return res.statusCode;
}

function crd(group: string, plural: string, kind: string): unknown {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: { group, scope: 'Namespaced', names: { plural, kind, singular: kind.toLowerCase() }, versions: [{ name: 'v1', served: true, storage: true }] },
  };
}

const servedBy = (snap: Snapshot, key: string): string[] => [...(snap.resources.get(key)?.keys() ?? [])].sort();

t.test('a CRD created through one apiserver is in the snapshot within 1 s (watch, 60 s poll)', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const b = await startFake(t, { name: 'b', pki, cluster, builtins: BUILTINS_NEW });
  const svc = new DiscoveryService(discoveryConfig([tokenServer(a, pki), tokenServer(b, pki)], { interval: 60_000, watch: true }));
  t.teardown(() => svc.close());
  await svc.start();
  // The watch is connected once a list and a watch request have been seen by some server.
  const watching = (collection: string): boolean =>
    [a, b].some((s) => s.requests.some((r) => r.path.startsWith(`${collection}?`) && r.path.includes('watch=1')));
  const crds = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  const apiservices = '/apis/apiregistration.k8s.io/v1/apiservices';
  for (let i = 0; i < 100 && !(watching(crds) && watching(apiservices)); i++) await new Promise((r) => setTimeout(r, 20));
  t.ok(watching(crds), 'CRD watch established');
  t.ok(watching(apiservices), 'APIService watch established');
  const watchReq = [...a.requests, ...b.requests].find((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1'));
  t.match(watchReq?.path, /allowWatchBookmarks=true/);
  t.match(watchReq?.path, /resourceVersion=\d+/, 'watch starts at the listed resourceVersion');

  const key = 'stable.example.com/v1/crontabs';
  t.same(servedBy(svc.current(), key), []);
  const genBefore = svc.current().generation;
  const created = performance.now();
  t.equal(await post(a, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd('stable.example.com', 'crontabs', 'CronTab')), 201);
  const snap = await waitForSnapshot(svc, (s) => servedBy(s, key).length === 2, 3000, `${key} on both servers`);
  const ms = performance.now() - created;
  t.ok(ms < 1000, `learnt in ${ms.toFixed(0)} ms (< 1000)`);
  t.same(servedBy(snap, key), ['a', 'b']);
  t.ok(snap.generation > genBefore);
  t.ok(snap.groupVersions.get('stable.example.com/v1')?.has('a'));
});

t.test('an APIService change triggers a discovery refresh', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const svc = new DiscoveryService(discoveryConfig([tokenServer(a, pki)], { interval: 60_000, watch: true }));
  t.teardown(() => svc.close());
  await svc.start();
  for (let i = 0; i < 100 && !a.requests.some((r) => r.path.includes('apiservices?') && r.path.includes('watch=1')); i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 100)); // let the start-up refreshes settle
  a.clearRequests();
  const gen = svc.current().generation;
  t.equal(
    await post(a, '/apis/apiregistration.k8s.io/v1/apiservices', {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: 'v1beta1.metrics.k8s.io' },
      spec: { group: 'metrics.k8s.io', version: 'v1beta1', groupPriorityMinimum: 100, versionPriority: 100 },
    }),
    201,
  );
  await waitForSnapshot(svc, (s) => s.generation > gen, 1000, 'a refresh after the APIService event');
  t.ok(a.requests.some((r) => r.path === '/apis' && r.method === 'GET'), '/apis fetched again');
});

t.test('the watch moves to another apiserver when its server goes away', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const b = await startFake(t, { name: 'b', pki, cluster, builtins: BUILTINS_OLD });
  const svc = new DiscoveryService(discoveryConfig([tokenServer(a, pki), tokenServer(b, pki)], { interval: 60_000, watch: true }));
  t.teardown(() => svc.close());
  await svc.start();
  for (let i = 0; i < 100 && !a.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')); i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(a.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')), 'first watch on the first healthy server');
  b.clearRequests();
  await a.close();
  for (let i = 0; i < 200 && !b.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')); i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(b.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')), 'watch reconnected to b');

  const key = 'moved.example.com/v1/gadgets';
  const created = performance.now();
  t.equal(await post(b, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd('moved.example.com', 'gadgets', 'Gadget')), 201);
  await waitForSnapshot(svc, (s) => servedBy(s, key).includes('b'), 3000, `${key} on b`);
  const ms = performance.now() - created;
  t.ok(ms < 1000, `learnt through the second server in ${ms.toFixed(0)} ms`);
});
