// The identity-Lease watch against fake apiservers: an apiserver identity that appears in
// kube-system and matches no configured member reaches the snapshot through the watch (discovery
// polls every 60 s), the router then refuses to answer 404 for what no member serves, and a
// member's own identity (its hostname) is recognised.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { Agent } from 'undici';
import { BUILTINS_OLD } from '../../harness/fake/index.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { IDENTITY_LEASES_PATH, liveUnmatched } from '../../src/membership/identity-leases.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import { createRouter } from '../../src/routing/router.js';
import { FakeCluster, discoveryConfig, startFake, testPki, tokenServer, waitForSnapshot } from '../helpers/discovery-fixtures.js';
import { callWithToken, identityLease } from '../helpers/k8s-objects.js';

const pki = await testPki();
const agent = new Agent({ connect: { ca: await readFile(pki.caFile) } });
t.teardown(() => agent.close());
const call = (url: string, method: string, body?: unknown): Promise<number> => callWithToken(agent, pki.token, url, method, body);

const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

t.test("an identity no member matches blocks the 404 until it is gone; a member's own is recognised", async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const b = await startFake(t, { name: 'b', pki, cluster, builtins: BUILTINS_OLD });
  const config = discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' }), tokenServer(b, pki, { hostname: 'cp-b' })], {
    interval: 60_000,
    watch: true,
  });
  const svc = new DiscoveryService(config);
  t.teardown(() => svc.close());
  await svc.start();
  const router = createRouter(svc, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
  const leases = `${a.url}${IDENTITY_LEASES_PATH}`;

  // The members' own identities, as their kube-apiservers would write them.
  t.equal(await call(leases, 'POST', identityLease('cp-a', new Date())), 201);
  t.equal(await call(leases, 'POST', identityLease('cp-b', new Date())), 201);
  const synced = await waitForSnapshot(svc, (s) => s.membership.synced && s.servers.every((x) => x.view !== null), 10_000);
  t.same(synced.membership.unmatched, [], 'both leases are members: hostname cp-a and cp-b');
  t.match(
    router.route('GET', NEW_ONLY, new Map()).decision,
    { outcome: 'not_found', reason: 'resource_not_served' },
    'a true 404 while the list is complete',
  );

  // A member renews its lease (every 10 s in a real cluster): no decision changes, so no snapshot is
  // published for it. Then a new control-plane machine at an address the config does not name: the
  // watch delivers both in order, and only the second makes a snapshot.
  const published: number[] = [];
  const off = svc.onChange((s) => published.push(s.generation));
  t.teardown(off);
  t.equal(await call(`${leases}/${apiserverIdentity('cp-a')}`, 'PUT', identityLease('cp-a', new Date(Date.now() + 10_000))), 200);
  t.equal(await call(leases, 'POST', identityLease('cp-new', new Date())), 201);
  const seen = await waitForSnapshot(svc, (s) => s.membership.unmatched.length === 1, 10_000);
  t.same(published, [seen.generation], "one snapshot: the member's renewal published none");
  t.same(
    liveUnmatched(seen.membership, Date.now()).map((l) => l.hostname),
    ['cp-new'],
    'learnt through the watch (discovery polls every 60 s)',
  );
  t.match(router.route('GET', NEW_ONLY, new Map()).decision, {
    outcome: 'unavailable',
    reason: 'unmatched_apiserver_identity',
    candidates: [apiserverIdentity('cp-new')],
  });
  t.match(
    router.route('GET', '/api/v1/namespaces/default/configmaps', new Map()).decision,
    { outcome: 'default' },
    'what the members serve is untouched',
  );

  // It is removed (its lease deleted, as the identity-lease GC does).
  t.equal(await call(`${leases}/${apiserverIdentity('cp-new')}`, 'DELETE'), 200);
  await waitForSnapshot(svc, (s) => s.membership.unmatched.length === 0, 10_000);
  t.match(router.route('GET', NEW_ONLY, new Map()).decision, { outcome: 'not_found' }, 'gone: absence is provable again');
});

t.test('a stale identity (not renewed within the bound) does not block a 404', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const svc = new DiscoveryService(
    discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' })], { interval: 60_000, watch: true, identityLeaseLiveness: 30_000 }),
  );
  t.teardown(() => svc.close());
  await svc.start();
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-old', new Date(Date.now() - 120_000))), 201);
  const snap = await waitForSnapshot(svc, (s) => s.membership.unmatched.length === 1, 10_000);
  t.same(liveUnmatched(snap.membership, Date.now()), [], 'listed, but its server stopped renewing 2 minutes ago');
  const router = createRouter(svc, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
  t.match(router.route('GET', NEW_ONLY, new Map()).decision, { outcome: 'not_found' });
});

t.test('start() resolves with the membership known: no first request can get a false 404', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  // The stranger's lease is there before skewgate starts.
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-early', new Date())), 201);
  const svc = new DiscoveryService(discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' })], { interval: 60_000, watch: true }));
  t.teardown(() => svc.close());
  await svc.start();
  const snap = svc.current();
  t.equal(snap.membership.synced, true, 'listed during start()');
  t.same(
    snap.membership.unmatched.map((l) => l.hostname),
    ['cp-early'],
  );
  const router = createRouter(svc, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
  t.match(
    router.route('GET', NEW_ONLY, new Map()).decision,
    { outcome: 'unavailable', reason: 'unmatched_apiserver_identity' },
    'the very first decision',
  );
});
