// DiscoveryService against fake apiservers: lifecycle, snapshots, 304s, failures, rotation.
import t, { type Test } from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { type DiscoveryConfig } from '../../src/discovery/options.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import type { ApiServerSettings } from '../../src/kube/credentials.js';
import type { Snapshot } from '../../src/discovery/core/types.js';
import { FakeCluster, discoveryConfig, startFake, testPki, tokenServer, waitForSnapshot } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

const pki = await testPki();
/** A round's timeout (2 s); refresh() starts one at once, and failures are retried within the interval. */
const WAIT_MS = waitMs(2000);

function service(t: Test, config: DiscoveryConfig, minRetryMs = 50): DiscoveryService {
  const s = new DiscoveryService(config, { minRetryMs });
  t.teardown(() => s.close());
  return s;
}

const server = (snap: Snapshot, name: string) => {
  const s = snap.servers.find((x) => x.name === name);
  if (!s) throw new Error(`no server ${name}`);
  return s;
};

t.test('lifecycle and the merged snapshot of an aggregated and a legacy server', async (t) => {
  const cluster = new FakeCluster();
  const oldS = await startFake(t, { name: 'old', pki, cluster, builtins: BUILTINS_OLD, discovery: 'legacy' });
  const newS = await startFake(t, { name: 'new', pki, cluster, builtins: BUILTINS_NEW });
  let clock = 1_000_000;
  const svc = new DiscoveryService(discoveryConfig([tokenServer(oldS, pki), tokenServer(newS, pki)]), { now: () => clock });
  t.teardown(() => svc.close());

  const initial = svc.current();
  t.equal(initial.generation, 0);
  t.same(
    initial.servers.map((s) => [s.name, s.view, s.ready]),
    [
      ['old', null, null],
      ['new', null, null],
    ],
    'never null: views null before start',
  );

  const seen: number[] = [];
  const off = svc.onChange((s) => seen.push(s.generation));
  await svc.start();
  t.equal(svc.start(), svc.start(), 'start() is idempotent');
  const snap = svc.current();
  t.equal(snap.generation, 2, 'one swap per server round');
  t.same(seen, [1, 2]);
  off();
  t.equal(server(snap, 'old').view?.source, 'legacy');
  t.equal(server(snap, 'new').view?.source, 'aggregated');
  for (const s of snap.servers) {
    t.equal(s.ready, true, `${s.name} ready`);
    t.equal(s.lastSuccessAt, 1_000_000);
    t.equal(s.consecutiveFailures, 0);
    t.equal(s.lastError, null);
  }
  t.same([...(snap.resources.get('/v1/pods')?.keys() ?? [])].sort(), ['new', 'old']);
  t.same(
    [...(snap.resources.get('admissionregistration.k8s.io/v1/mutatingadmissionpolicies')?.keys() ?? [])],
    ['new'],
    'skew: only the new server',
  );
  t.same([...(snap.groupVersions.get('resource.k8s.io/v1beta2') ?? [])], ['new']);

  // Revalidation: refresh → two 304s on the aggregated server, the same view, the same index.
  newS.clearRequests();
  clock = 2_000_000;
  svc.refresh();
  svc.refresh(); // bursts coalesce
  const after = await waitForSnapshot(
    svc,
    (s) => server(s, 'new').lastSuccessAt === 2_000_000 && server(s, 'old').lastSuccessAt === 2_000_000,
    3000,
    'a refresh round',
  );
  const roots = newS.requests.filter((r) => r.path === '/api' || r.path === '/apis');
  t.equal(roots.length, 2, 'one round per server for two refresh() calls');
  for (const r of roots) t.match(r.headers['if-none-match'], /^"[0-9A-F]+"$/, `${r.path}: If-None-Match sent`);
  t.equal(server(after, 'new').view, server(snap, 'new').view, 'view kept on 304');
  t.equal(server(after, 'old').view, server(snap, 'old').view, 'unchanged legacy view kept as the same object');
  t.equal(after.resources, snap.resources, 'merged index reused, not rebuilt');
  t.equal(after.generation, snap.generation, "nothing changed but the views' age: the same generation (issue 30)");
  t.not(after, snap, '… in a new snapshot, which carries the new times');

  await svc.close();
  await svc.close();
  t.pass('close() is idempotent');
  // That nothing runs after close() (refresh() included) is shown with a fake clock, over ten
  // intervals, in test/unit/discovery-watch.test.ts: a sleep here could only fail to see it.
  await t.rejects(svc.start(), /closed/);
});

t.test("each apiserver's /version: read with the view, read again when it comes back as another version", async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD, gitVersion: 'v1.35.4' });
  const svc = service(t, discoveryConfig([tokenServer(a, pki)], { interval: 100 }));
  await svc.start();
  t.equal(server(svc.current(), 'a').gitVersion, 'v1.35.4', 'read in the first round');
  const { versionReadAt: readAt, lastSuccessAt: firstRound } = server(svc.current(), 'a');
  // Later good rounds (every 100 ms), however long they take to come on a busy machine.
  let rounds = 0;
  await waitForSnapshot(svc, (s) => server(s, 'a').lastSuccessAt !== firstRound && ++rounds >= 3, WAIT_MS);
  t.equal(server(svc.current(), 'a').versionReadAt, readAt, 'not read again while it stays ready (rounds every 100 ms)');
  // Restarted in place as the next version (an upgrade; a rollback is the same the other way).
  await a.close();
  await waitForSnapshot(svc, (s) => server(s, 'a').consecutiveFailures > 0, WAIT_MS);
  t.equal(server(svc.current(), 'a').gitVersion, 'v1.35.4', 'kept while it cannot be reached');
  a.setGitVersion('v1.36.3');
  await a.start();
  const snap = await waitForSnapshot(svc, (s) => server(s, 'a').gitVersion === 'v1.36.3', WAIT_MS);
  t.equal(server(snap, 'a').consecutiveFailures, 0, 'read as soon as it answers again');
});

t.test('token file rotation is picked up without a restart', async (t) => {
  const cluster = new FakeCluster();
  const s = await startFake(t, { name: 'rot', pki, cluster, builtins: BUILTINS_OLD });
  const dir = await mkdtemp(join(tmpdir(), 'skewgate-token-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, 'not-the-right-token\n');
  const svc = service(t, discoveryConfig([tokenServer(s, pki, { credentials: { tokenFile } })]));
  await svc.start();
  let st = server(svc.current(), 'rot');
  t.equal(st.view, null);
  t.equal(st.consecutiveFailures, 1);
  t.match(st.lastError, /HTTP 401/);
  t.notMatch(st.lastError, /not-the-right-token/, 'the token never appears in errors');

  await writeFile(tokenFile, `${pki.token}\n`);
  const snap = await waitForSnapshot(svc, (x) => server(x, 'rot').view !== null, WAIT_MS, 'the rotated token to work');
  st = server(snap, 'rot');
  t.equal(st.consecutiveFailures, 0);
  t.ok(st.view?.resources.has('/v1/pods'));
  t.equal(s.requests.at(-1)?.headers.authorization, `Bearer ${pki.token}`);
});

t.test('client certificate and kubeconfig credentials through the service', async (t) => {
  const cluster = new FakeCluster();
  const s = await startFake(t, { name: 'auth', pki, cluster, builtins: BUILTINS_OLD });
  const servers: ApiServerSettings[] = [
    { name: 'cert', url: s.url, caFile: pki.caFile, credentials: { clientCertFile: pki.clientCertFile, clientKeyFile: pki.clientKeyFile } },
    { name: 'kc', url: s.url, credentials: { kubeconfig: pki.kubeconfigFile, context: 'cert' } },
  ];
  const svc = service(t, discoveryConfig(servers));
  await svc.start();
  for (const st of svc.current().servers) {
    t.equal(st.consecutiveFailures, 0, `${st.name}: ${st.lastError}`);
    t.ok(st.view?.resources.has('apps/v1/deployments'), st.name);
  }
});

t.test('a malformed document keeps the last good view and counts a failure', async (t) => {
  const cluster = new FakeCluster();
  const s = await startFake(t, { name: 'mal', pki, cluster, builtins: BUILTINS_NEW });
  const svc = service(t, discoveryConfig([tokenServer(s, pki)]));
  await svc.start();
  const good = server(svc.current(), 'mal').view;
  t.ok(good);
  s.setDiscoveryFault('malformed');
  svc.refresh();
  const bad = await waitForSnapshot(svc, (x) => server(x, 'mal').consecutiveFailures >= 1, WAIT_MS, 'a failure');
  t.equal(server(bad, 'mal').view, good, 'last good view kept');
  t.match(server(bad, 'mal').lastError, /malformed discovery document \/apis?: not valid JSON/);
  t.equal(bad.resources.get('/v1/pods')?.has('mal'), true, 'routing still sees the server');
  s.setDiscoveryFault('none');
  const back = await waitForSnapshot(svc, (x) => server(x, 'mal').consecutiveFailures === 0, WAIT_MS, 'recovery (retry with backoff)');
  t.equal(server(back, 'mal').view, good, 'recovered to the same content: the same view object');
  t.equal(server(back, 'mal').lastError, null);
});

t.test('a dead server: failures grow with backoff, its view is kept, readiness false', async (t) => {
  const cluster = new FakeCluster();
  const s = await startFake(t, { name: 'dead', pki, cluster, builtins: BUILTINS_OLD });
  const svc = service(t, discoveryConfig([tokenServer(s, pki)], { interval: 1000, timeout: 500 }), 50);
  await svc.start();
  const good = server(svc.current(), 'dead').view;
  t.ok(good);
  await s.close();
  // Every failed round, in order: the count grows by one per round, each refused.
  const rounds: { failures: number; error: string | null }[] = [];
  const off = svc.onRound((e) => rounds.push({ failures: e.after.consecutiveFailures, error: e.after.lastError }));
  t.teardown(off);
  svc.refresh();
  // The retry schedule itself (50, 100, 200 ms …, capped at the interval) is pinned with a fake
  // clock in test/unit/discovery-watch.test.ts; here the wait only guards against a hang.
  const snap = await waitForSnapshot(svc, (x) => server(x, 'dead').consecutiveFailures >= 4, WAIT_MS, 'four failures');
  // A round's event follows the snapshot that publishes it (the build is asynchronous).
  await eventually('the fourth round event', () => rounds.length >= 4, WAIT_MS);
  const st = server(snap, 'dead');
  t.equal(st.view, good, 'view kept');
  t.equal(st.ready, false);
  t.match(st.lastError, /ECONNREFUSED/);
  t.same(
    rounds.slice(0, 4).map((r) => r.failures),
    [1, 2, 3, 4],
    'one more failure per round, retried without a new cause',
  );
  t.ok(
    rounds.slice(0, 4).every((r) => /ECONNREFUSED/.test(r.error ?? '')),
    'each refused',
  );

  await s.start(); // same port
  const back = await waitForSnapshot(svc, (x) => server(x, 'dead').consecutiveFailures === 0, WAIT_MS, 'recovery');
  t.equal(server(back, 'dead').ready, true);
});

t.test('/readyz false → ready false, discovery still fine', async (t) => {
  const cluster = new FakeCluster();
  const s = await startFake(t, { name: 'unready', pki, cluster, builtins: BUILTINS_OLD });
  s.setReady(false);
  const svc = service(t, discoveryConfig([tokenServer(s, pki)]));
  await svc.start();
  const st = server(svc.current(), 'unready');
  t.equal(st.ready, false);
  t.equal(st.consecutiveFailures, 0);
  t.ok(st.view);
  s.setReady(true);
  svc.refresh();
  await waitForSnapshot(svc, (x) => server(x, 'unready').ready === true, WAIT_MS, 'ready again');
  t.pass('ready again after /readyz recovers');
});

t.test('start() resolves even when a server hangs (timeout), close() aborts in-flight fetches', async (t) => {
  const cluster = new FakeCluster();
  const s = await startFake(t, { name: 'hang', pki, cluster, builtins: BUILTINS_OLD });
  s.setDiscoveryFault('hang');
  const svc = service(t, discoveryConfig([tokenServer(s, pki)], { timeout: 300 }));
  // The server never answers: only the timeout can end the first round.
  await svc.start();
  t.match(server(svc.current(), 'hang').lastError, /timed out after 300ms/, 'first round ended by the timeout');

  // A second service whose first round is hanging when closed, with a timeout far beyond the
  // test's own: close() can only return by aborting the fetch, never by waiting it out.
  s.clearRequests();
  const svc2 = new DiscoveryService(discoveryConfig([tokenServer(s, pki)], { timeout: 3_600_000 }));
  const startP = svc2.start();
  await eventually('the hanging discovery request to arrive', () => s.requests.some((r) => r.path === '/api' || r.path === '/apis'));
  await svc2.close();
  await startP;
  t.pass('close() aborted the hanging fetch instead of waiting for its timeout');
});
