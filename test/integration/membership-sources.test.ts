// The membership sources against fake apiservers sharing one store: an apiserver published in the
// kubernetes EndpointSlice or registered as a control-plane Node is probed, admitted and routed
// to; one that leaves every source is drained (never routed to, never the reason for a 404) and
// removed; the seed itself leaves when the sources no longer name it, and the watches move on.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { Agent } from 'undici';
import { pino } from 'pino';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import type { Config } from '../../src/config/core/schema.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { IDENTITY_LEASES_PATH } from '../../src/membership/identity-leases.js';
import { KUBERNETES_SLICES_PATH, NODES_PATH } from '../../src/membership/sources.js';
import { learntName } from '../../src/membership/members.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import { type MemberEntry } from '../../src/membership/members.js';
import { createRouter } from '../../src/routing/router.js';
import { FakeCluster, discoveryConfig, startFake, testPki, tokenServer, waitForSnapshot } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';
import { callWithToken, controlPlaneNode, identityLease, kubernetesSlice } from '../helpers/k8s-objects.js';
import { waitMs } from '../helpers/waits.js';

const pki = await testPki();
const agent = new Agent({ connect: { ca: await readFile(pki.caFile) } });
t.teardown(() => agent.close());
const call = (url: string, method: string, body?: unknown): Promise<number> => callWithToken(agent, pki.token, url, method, body);

function withMembership(
  base: ReturnType<typeof discoveryConfig>,
  sources: Config['membership']['sources'],
  port = 6443,
): ReturnType<typeof discoveryConfig> {
  return {
    ...base,
    membership: {
      sources,
      port,
      nodeSelector: 'node-role.kubernetes.io/control-plane',
      // The fake PKI's server certificate names localhost (and 127.0.0.1-9): verified by name.
      template: { caFile: pki.caFile, serverName: 'localhost', credentials: { tokenFile: pki.tokenFile } },
      drainTimeout: 600,
    },
  };
}

const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const NOWHERE = '/apis/nowhere.example/v1/things';

t.test(
  'EndpointSlice: a published apiserver is probed, admitted, routed to; unpublished, drained (503, never 404), then removed',
  async (t) => {
    const cluster = new FakeCluster();
    const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
    const n = await startFake(t, { name: 'n', pki, cluster, builtins: BUILTINS_NEW, host: '127.0.0.4' });
    const svc = new DiscoveryService(
      withMembership(discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' })], { watch: true }), ['endpointSlice']),
    );
    t.teardown(() => svc.close());
    const roles: string[] = [];
    // What routing decides at the moment Envoy is told a member drains (its route goes then).
    const atDrainNotice: unknown[] = [];
    svc.onMembers((ms: readonly MemberEntry[]) => {
      roles.push(ms.map((m) => `${m.spec.name}:${m.role}`).join(' '));
      if (ms.some((m) => m.role === 'draining') && atDrainNotice.length === 0) atDrainNotice.push(decide(NEW_ONLY));
    });
    await svc.start();
    const router = createRouter(svc, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
    const decide = (path: string): unknown => router.route('GET', path, new Map()).decision;
    t.match(decide(NEW_ONLY), { outcome: 'not_found' }, 'the seed alone, nothing else known: a true 404');

    const slices = `${a.url}${KUBERNETES_SLICES_PATH}`;
    t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-a')), 201);
    t.equal(await call(slices, 'POST', kubernetesSlice('kubernetes', '127.0.0.1', a.port)), 201);
    t.equal(await call(slices, 'POST', kubernetesSlice('kubernetes-n', '127.0.0.4', n.port)), 201);
    const learnt = learntName('127.0.0.4', n.port);
    const snap = await waitForSnapshot(
      svc,
      (s) => s.servers.some((x) => x.name === learnt && x.view !== null),
      10_000,
      'the learnt member',
    );
    t.same(
      snap.servers.map((s) => s.name),
      ['a', learnt],
      'the seed (named by the slice too) and the learnt member',
    );
    t.same(roles.slice(0, 2), [`a:member ${learnt}:probing`, `a:member ${learnt}:member`], 'probed first, then admitted');
    t.match(decide(NEW_ONLY), { outcome: 'routed', upstream: learnt }, 'what only it serves goes to it');

    t.equal(await call(`${slices}/kubernetes-n`, 'DELETE'), 200);
    const draining = await waitForSnapshot(svc, (s) => s.servers.some((x) => x.name === learnt && x.draining === true), 10_000, 'draining');
    t.ok(draining.servers.find((x) => x.name === learnt)?.view, 'draining keeps its view');
    t.match(
      decide(NEW_ONLY),
      { outcome: 'unavailable', reason: 'no_healthy_capable_server' },
      'draining: no new request to it, and no 404 either',
    );
    t.match(decide('/api/v1/namespaces/default/configmaps'), { outcome: 'routed', upstream: 'a' }, 'never balanced onto a draining member');
    await eventually('the members listener to be told it drains', () => atDrainNotice.length > 0, waitMs());
    t.match(
      atDrainNotice,
      [{ outcome: 'unavailable', reason: 'no_healthy_capable_server' }],
      'when Envoy is told it drains (and drops its route), routing had already stopped naming it',
    );
    const removed = await waitForSnapshot(svc, (s) => s.servers.length === 1, 10_000, 'removal after drainTimeout');
    t.same(
      removed.servers.map((s) => s.name),
      ['a'],
    );
    // Envoy is told after the snapshot that no longer routes to it.
    await eventually('the members list without it', () => roles.at(-1) === 'a:member', waitMs());
    t.same(roles.at(-1), 'a:member', 'the members listener saw the removal');
    t.match(decide(NOWHERE), { outcome: 'not_found' }, 'absence is provable again');
  },
);

t.test(
  'Nodes: a new control-plane Node at a new address replaces the seed; its identity matches its lease; the watches move on',
  async (t) => {
    const cluster = new FakeCluster();
    const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
    // The nodes source gives one port for every Node: the new apiserver listens on the same one, at a new address.
    const n = await startFake(t, { name: 'n', pki, cluster, builtins: BUILTINS_NEW, host: '127.0.0.5', port: a.port });
    const svc = new DiscoveryService(
      withMembership(discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' })], { watch: true }), ['nodes'], a.port),
    );
    t.teardown(() => svc.close());
    await svc.start();
    const router = createRouter(svc, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
    const decide = (path: string): unknown => router.route('GET', path, new Map()).decision;
    const leases = `${a.url}${IDENTITY_LEASES_PATH}`;
    const nodes = `${a.url}${NODES_PATH}`;
    t.equal(await call(leases, 'POST', identityLease('cp-a')), 201);
    t.equal(await call(nodes, 'POST', controlPlaneNode('cp-a', '127.0.0.1')), 201);
    // The new machine's apiserver comes up (its lease) before its kubelet registers the Node.
    t.equal(await call(leases, 'POST', identityLease('cp-n')), 201);
    await waitForSnapshot(svc, (s) => s.membership.unmatched.length === 1, 10_000, 'its lease');
    t.match(decide(NEW_ONLY), { outcome: 'unavailable', reason: 'unmatched_apiserver_identity' }, 'before its Node: 503, never 404');
    t.equal(await call(nodes, 'POST', controlPlaneNode('cp-n', '127.0.0.5')), 201);
    const learnt = learntName('127.0.0.5', a.port);
    const joined = await waitForSnapshot(
      svc,
      (s) => s.servers.some((x) => x.name === learnt && x.view !== null) && s.membership.unmatched.length === 0,
      10_000,
    );
    t.same(joined.membership.unmatched, [], "the Node's hostname is the identity of its apiserver's lease");
    t.match(decide(NEW_ONLY), { outcome: 'routed', upstream: learnt });

    // Cluster API deletes the old machine: its Node goes, then its apiserver and lease.
    t.equal(await call(`${nodes}/cp-a`, 'DELETE'), 200);
    await waitForSnapshot(svc, (s) => s.servers.some((x) => x.name === 'a' && x.draining === true), 10_000, 'the seed draining');
    await waitForSnapshot(svc, (s) => s.servers.length === 1, 10_000, 'the seed removed');
    t.same(
      svc.current().servers.map((s) => s.name),
      [learnt],
      'no config edit: the learnt member is the whole membership',
    );
    t.match(decide('/api/v1/namespaces/default/configmaps'), { outcome: 'default' }, 'balanced over the one member');
    t.equal(await call(`${leases}/${apiserverIdentity('cp-a')}`, 'DELETE'), 200);
    await a.close();
    // The lease watch now runs through the learnt member: a newcomer is still noticed.
    t.equal(await call(`${n.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-x')), 201);
    const seen = await waitForSnapshot(
      svc,
      (s) => s.membership.unmatched.some((l) => l.hostname === 'cp-x'),
      15_000,
      'the watch through the new member',
    );
    t.ok(seen.membership.synced);
    t.match(decide(NOWHERE), { outcome: 'unavailable', reason: 'unmatched_apiserver_identity' });
  },
);

const JOIN_DELAY_MS = 800;

t.test('joining: a verified apiserver is given to Envoy first and routed to only after joinDelayMs', async (t) => {
  let joiningLoggedAt = Number.NaN;
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const n = await startFake(t, { name: 'n', pki, cluster, builtins: BUILTINS_NEW, host: '127.0.0.7' });
  const svc = new DiscoveryService(
    withMembership(discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' })], { watch: true }), ['endpointSlice']),
    {
      joinDelayMs: JOIN_DELAY_MS,
      // The join's timer is armed in the synchronous step that logs "joining" (pino writes at
      // once): the moment to measure from. Envoy's "joining" announcement may come a little later.
      logger: pino(
        { level: 'info' },
        {
          write: (line: string) => {
            if (line.includes('learnt apiserver verified; joining')) joiningLoggedAt = performance.now();
          },
        },
      ),
    },
  );
  t.teardown(() => svc.close());
  const roles: string[] = [];
  // When Envoy was told each step: the "member" announcement is made when the join's timer fires.
  const toldAt: number[] = [];
  svc.onMembers((ms) => {
    roles.push(ms.map((m) => `${m.spec.name}:${m.role}`).join(' '));
    toldAt.push(performance.now());
  });
  await svc.start();
  const router = createRouter(svc, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
  const learnt = learntName('127.0.0.7', n.port);
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes', '127.0.0.1', a.port)), 201);
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes-n', '127.0.0.7', n.port)), 201);
  await waitForSnapshot(
    svc,
    (s) => s.membership.probing.some((p) => p.name === learnt && p.problem?.startsWith('verified') === true),
    10_000,
    'joining',
  );
  t.notOk(
    svc.current().servers.some((s) => s.name === learnt),
    'joining: not in the snapshot, so never routed to',
  );
  t.match(
    router.route('GET', NEW_ONLY, new Map()).decision,
    { outcome: 'not_found' },
    'no other apiserver known to serve it, and no lease: as before',
  );
  await waitForSnapshot(svc, (s) => s.servers.some((x) => x.name === learnt), waitMs(JOIN_DELAY_MS), 'member');
  t.match(router.route('GET', NEW_ONLY, new Map()).decision, { outcome: 'routed', upstream: learnt });
  t.same(roles, [`a:member ${learnt}:probing`, `a:member ${learnt}:joining`, `a:member ${learnt}:member`], 'Envoy is told at each step');
  const joinedAfter = (toldAt[2] ?? Number.NaN) - joiningLoggedAt;
  // Not before joinDelayMs (less the millisecond a timer may be rounded by); no upper bound: a
  // slow machine only makes it later.
  t.ok(joinedAfter >= JOIN_DELAY_MS - 1, `a member no sooner than joinDelayMs after joining (${joinedAfter.toFixed(0)} ms)`);
});
