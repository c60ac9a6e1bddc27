// Two skewgate replicas over one control plane learn and lose a member at different moments (one
// reads the control-plane Nodes, the other the kubernetes EndpointSlice, and the test changes the
// second only once the first replica has acted on the first, as two replicas' source watches may lag
// each other). Asked every few milliseconds throughout for what only that member serves, neither
// ever answers 404 while it runs (deploy/replicas.md). Fake apiservers sharing one store.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { Agent } from 'undici';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { IDENTITY_LEASES_PATH } from '../../src/membership/identity-leases.js';
import { KUBERNETES_SLICES_PATH, NODES_PATH } from '../../src/membership/sources.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import { createRouter } from '../../src/routing/router.js';
import { FakeCluster, discoveryConfig, startFake, testPki, tokenServer, waitForSnapshot } from '../helpers/discovery-fixtures.js';
import { AskRounds, firstRound, transitions, type Round } from '../helpers/ask-rounds.js';
import { eventually } from '../helpers/http.js';
import { callWithToken, controlPlaneNode, identityLease, kubernetesSlice } from '../helpers/k8s-objects.js';
import { waitMs } from '../helpers/waits.js';

const pki = await testPki();
const agent = new Agent({ connect: { ca: await readFile(pki.caFile) } });
t.teardown(() => agent.close());
const call = (url: string, method: string, body?: unknown): Promise<number> => callWithToken(agent, pki.token, url, method, body);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const [UNMATCHED, ROUTED, DRAINING] = [
  'unavailable/unmatched_apiserver_identity',
  'routed/served_by_subset',
  'unavailable/no_healthy_capable_server',
];
/** Discovery rounds (500 ms) and the drain (drainTimeout, 1 s) bound each wait. */
const WAIT_MS = waitMs(500, 1000);

t.test('two replicas, staggered sources: a member joins and leaves, and neither ever answers 404 for what only it serves', async (t) => {
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'a', pki, cluster, builtins: BUILTINS_OLD });
  const n = await startFake(t, { name: 'n', pki, cluster, builtins: BUILTINS_NEW, host: '127.0.0.6', port: a.port });
  const replica = (source: 'nodes' | 'endpointSlice'): DiscoveryService =>
    new DiscoveryService({
      ...discoveryConfig([tokenServer(a, pki, { hostname: 'cp-a' })], { watch: true, interval: 500, staleAfter: 3000 }),
      membership: {
        sources: [source],
        port: a.port,
        nodeSelector: 'node-role.kubernetes.io/control-plane',
        template: { caFile: pki.caFile, serverName: 'localhost', credentials: { tokenFile: pki.tokenFile } },
        drainTimeout: 1000,
      },
    });
  const base = a.url;
  t.equal(await call(`${base}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-a')), 201);
  t.equal(await call(`${base}${NODES_PATH}`, 'POST', controlPlaneNode('cp-a', '127.0.0.1')), 201);
  t.equal(await call(`${base}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes', '127.0.0.1', a.port)), 201);
  const replicas = { A: replica('nodes'), B: replica('endpointSlice') };
  for (const r of Object.values(replicas)) t.teardown(() => r.close());
  await Promise.all(Object.values(replicas).map((r) => r.start()));
  const routers = Object.fromEntries(
    Object.entries(replicas).map(([k, r]) => [k, createRouter(r, { staleAfterMs: 3000, retryAfterSeconds: 1 })]),
  );
  for (const r of Object.values(routers))
    t.match(r.route('GET', NEW_ONLY, new Map()).decision, { outcome: 'not_found' }, 'before: a true 404');

  // The new machine's apiserver is up (its lease), and from here both replicas are asked continuously.
  t.equal(await call(`${base}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-n')), 201);
  await Promise.all(Object.values(replicas).map((r) => waitForSnapshot(r, (s) => s.membership.unmatched.length === 1, WAIT_MS)));
  const log = new AskRounds();
  const falseNotFound: string[] = [];
  let asking = true;
  const ask = (async () => {
    while (asking) {
      // Both asked in one synchronous step: a round is never split by the test's actions.
      log.begin();
      const round: Record<string, string> = {};
      for (const [k, r] of Object.entries(routers)) {
        const d = r.route('GET', NEW_ONLY, new Map()).decision;
        round[k] = `${d.outcome}/${d.reason}`;
        if (d.outcome === 'not_found') falseNotFound.push(`${k}: ${round[k]}`);
      }
      log.push(round);
      await sleep(5);
    }
  })();
  const until = async (what: string, pred: (r: Round) => boolean, from: string): Promise<number> => {
    let i = -1;
    await eventually(what, () => (i = firstRound(log.rounds, pred, log.after(from))) >= 0, WAIT_MS);
    return i;
  };
  const routed = (k: string) => (r: Round) => r[k] === ROUTED;
  // Joins: A (Nodes) learns it first; B's EndpointSlice is written once A routes to it.
  t.equal(await call(`${base}${NODES_PATH}`, 'POST', controlPlaneNode('cp-n', '127.0.0.6')), 201);
  log.mark('node added');
  const aJoined = await until('A to route to it', routed('A'), 'node added');
  t.equal(await call(`${base}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes-n', '127.0.0.6', n.port)), 201);
  log.mark('slice added');
  await until('both to route to it', (r) => routed('A')(r) && routed('B')(r), 'slice added');
  // Leaves: A loses it first (its Node deleted), B once A has stopped routing there; the
  // apiserver stops; its lease goes.
  t.equal(await call(`${base}${NODES_PATH}/cp-n`, 'DELETE'), 200);
  log.mark('node deleted');
  const aLeft = await until('A to stop routing to it', (r) => !routed('A')(r), 'node deleted');
  t.equal(await call(`${base}${KUBERNETES_SLICES_PATH}/kubernetes-n`, 'DELETE'), 200);
  log.mark('slice deleted');
  await Promise.all(Object.values(replicas).map((r) => waitForSnapshot(r, (s) => s.servers.length === 1, WAIT_MS, 'removed')));
  await n.close();
  asking = false;
  await ask;
  t.same(falseNotFound, [], `no 404 from either replica in ${log.rounds.length} rounds while the member ran`);
  t.comment(`A: ${transitions(log.rounds, 'A').join(' → ')}`);
  t.comment(`B: ${transitions(log.rounds, 'B').join(' → ')}`);
  t.same(
    transitions(log.rounds, 'A').slice(0, 3),
    [UNMATCHED, ROUTED, DRAINING],
    'A: 503 (an unmatched identity), routed once admitted, 503 while draining',
  );
  t.same(transitions(log.rounds, 'B').slice(0, 3), [UNMATCHED, ROUTED, DRAINING], 'B: the same, later');
  t.equal(log.rounds[aJoined]?.['B'], UNMATCHED, 'when A first routed to it, B did not yet (its slice not written)');
  const bJoined = firstRound(log.rounds, routed('B'));
  t.ok(bJoined >= log.before('slice added'), `B routed to it only once its EndpointSlice was written (round ${bJoined})`);
  t.equal(log.rounds[aLeft]?.['B'], ROUTED, 'when A stopped, B still routed to it');
  const bLeft = firstRound(log.rounds, (r) => !routed('B')(r), bJoined);
  t.ok(bLeft >= log.before('slice deleted'), `B stopped only once its slice was deleted (round ${bLeft})`);
  t.equal(await call(`${base}${IDENTITY_LEASES_PATH}/${apiserverIdentity('cp-n')}`, 'DELETE'), 200);
  for (const [k, r] of Object.entries(replicas)) {
    await waitForSnapshot(r, (s) => s.membership.unmatched.length === 0, WAIT_MS);
    t.match(routers[k]?.route('GET', NEW_ONLY, new Map()).decision, { outcome: 'not_found' }, `${k}: gone for good: a true 404 again`);
  }
});
