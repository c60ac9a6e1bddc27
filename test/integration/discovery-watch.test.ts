// The CRD/APIService watch against real fake apiservers: a new API reaches the snapshot although
// polling is at 60 s, so only the watch can have brought it (every wait here is a hang guard far
// below 60 s). How soon (at once, then 250 and 750 ms later) is pinned with a fake clock in
// test/unit/discovery-watch.test.ts.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'undici';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import type { Snapshot } from '../../src/discovery/core/types.js';
import {
  type FakeApiServer,
  FakeCluster,
  discoveryConfig,
  discoveryQuiet,
  startFake,
  testPki,
  tokenServer,
  waitForSnapshot,
} from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';

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
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, kind, singular: kind.toLowerCase() },
      versions: [{ name: 'v1', served: true, storage: true }],
    },
  };
}

const servedBy = (snap: Snapshot, key: string): string[] => [...(snap.resources.get(key)?.keys() ?? [])].sort();

t.test('a CRD created through one apiserver reaches the snapshot through the watch (60 s poll)', async (t) => {
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
  await eventually('both watches', () => watching(crds) && watching(apiservices));
  t.ok(watching(crds), 'CRD watch established');
  t.ok(watching(apiservices), 'APIService watch established');
  // Nothing left of the start-up: a fetch from now on has the CRD's watch event as its cause.
  await discoveryQuiet([a, b]);
  const watchReq = [...a.requests, ...b.requests].find((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1'));
  t.match(watchReq?.path, /allowWatchBookmarks=true/);
  t.match(watchReq?.path, /resourceVersion=\d+/, 'watch starts at the listed resourceVersion');

  const key = 'stable.example.com/v1/crontabs';
  t.same(servedBy(svc.current(), key), []);
  const genBefore = svc.current().generation;
  const created = performance.now();
  t.equal(await post(a, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd('stable.example.com', 'crontabs', 'CronTab')), 201);
  const snap = await waitForSnapshot(svc, (s) => servedBy(s, key).length === 2, 15_000, `${key} on both servers`);
  t.comment(`learnt ${(performance.now() - created).toFixed(0)} ms after the create`);
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
  await eventually('the APIService watch', () => a.requests.some((r) => r.path.includes('apiservices?') && r.path.includes('watch=1')));
  // The start-up's refreshes and follow-ups are over: the next /apis fetch is the event's.
  await discoveryQuiet([a]);
  a.clearRequests();
  // A refresh round is seen by its time (the generation moves only when what routing can tell does).
  const lastRound = svc.current().servers[0]?.lastSuccessAt ?? 0;
  t.equal(
    await post(a, '/apis/apiregistration.k8s.io/v1/apiservices', {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: 'v1beta1.metrics.k8s.io' },
      spec: { group: 'metrics.k8s.io', version: 'v1beta1', groupPriorityMinimum: 100, versionPriority: 100 },
    }),
    201,
  );
  await waitForSnapshot(svc, (s) => (s.servers[0]?.lastSuccessAt ?? 0) > lastRound, 15_000, 'a refresh after the APIService event');
  t.ok(
    a.requests.some((r) => r.path === '/apis' && r.method === 'GET'),
    '/apis fetched again',
  );
});

t.test('the watch moves to another apiserver when its server goes away', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const b = await startFake(t, { name: 'b', pki, cluster, builtins: BUILTINS_OLD });
  const svc = new DiscoveryService(discoveryConfig([tokenServer(a, pki), tokenServer(b, pki)], { interval: 60_000, watch: true }));
  t.teardown(() => svc.close());
  await svc.start();
  await eventually('the CRD watch on a', () =>
    a.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')),
  );
  t.ok(
    a.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')),
    'first watch on the first healthy server',
  );
  b.clearRequests();
  await a.close();
  await eventually('the CRD watch on b', () =>
    b.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')),
  );
  t.ok(
    b.requests.some((r) => r.path.includes('customresourcedefinitions?') && r.path.includes('watch=1')),
    'watch reconnected to b',
  );
  // The reconnect relisted, with its own refreshes: let them pass, so the CRD below is the watch event's.
  await discoveryQuiet([b]);

  const key = 'moved.example.com/v1/gadgets';
  const created = performance.now();
  t.equal(await post(b, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd('moved.example.com', 'gadgets', 'Gadget')), 201);
  await waitForSnapshot(svc, (s) => servedBy(s, key).includes('b'), 15_000, `${key} on b`);
  t.pass("learnt through the second server's watch");
  t.comment(`learnt ${(performance.now() - created).toFixed(0)} ms after the create`);
});
