// Two gateways (each a real Envoy on filesystem xDS and its own skewgate) in front of one fake
// control plane learn and lose a member at different moments: gateway A reads the control-plane
// Nodes, gateway B the kubernetes EndpointSlice, and the test changes B's only once A has acted on
// its own. Asked round after round through both Envoys for what only that member serves, neither
// ever answers 404 while it runs (deploy/replicas.md).
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { FakeApiServer, FakeCluster, BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { createSkewgate, type Skewgate } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { REASON_HEADER } from '../../src/constants.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { IDENTITY_LEASES_PATH } from '../../src/membership/identity-leases.js';
import { KUBERNETES_SLICES_PATH, NODES_PATH } from '../../src/membership/sources.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, type EnvoyHandle } from '../../src/envoy-runtime/process.js';
import { writeSeedXds } from '../../src/envoy-runtime/xds-disk.js';
import { createLogger } from '../../src/util/log.js';
import { onEphemeralPort, send, sharedPki } from '../helpers/envoy-fixtures.js';
import { AskRounds, firstRound, transitions, type Round } from '../helpers/ask-rounds.js';
import { eventually } from '../helpers/http.js';
import { callWithToken, controlPlaneNode, identityLease, kubernetesSlice } from '../helpers/k8s-objects.js';
import { waitMs } from '../helpers/waits.js';

const pki = await sharedPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-replicas-'));
const agent = new Agent({ connect: { ca: readFileSync(pki.caFile) } });
t.teardown(async () => {
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
});
const call = (url: string, method: string, body?: unknown): Promise<number> => callWithToken(agent, pki.token, url, method, body);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const [UNMATCHED, ROUTED, DRAINING] = ['503 unmatched_apiserver_identity', '200 from n', '503 no_healthy_capable_server'];
/** A join takes a discovery round and a health check (500 ms each), a drain drainTimeout (2 s). */
const WAIT_MS = waitMs(500, 500, 2000);

async function fake(
  name: string,
  cluster: FakeCluster,
  builtins: typeof BUILTINS_OLD,
  host: string,
  port?: number,
): Promise<FakeApiServer> {
  const s = new FakeApiServer({ name, pki, cluster, builtins, host, ...(port === undefined ? {} : { port }) });
  await s.start();
  t.teardown(() => s.close());
  return s;
}

interface Gateway {
  readonly name: string;
  readonly skewgate: Skewgate;
  readonly envoy: EnvoyHandle;
}

async function gateway(name: string, seedUrl: string, source: 'nodes' | 'endpointSlice', port: number): Promise<Gateway> {
  const gdir = join(dir, name);
  const config = parseConfig(
    {
      apiservers: [{ name: 'kas-a', url: seedUrl, hostname: 'cp-a', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } }],
      discovery: { interval: '500ms', timeout: '2s', staleAfter: '3s' },
      membership: {
        sources: [source],
        port,
        template: { caFile: pki.caFile, serverName: 'localhost', credentials: { tokenFile: pki.tokenFile } },
        drainTimeout: '2s',
      },
      extproc: { listen: `unix:${join(gdir, 'extproc.sock')}`, messageTimeout: '1s' },
      envoy: {
        listen: { address: '127.0.0.1', port: 0 },
        admin: { address: '127.0.0.1', port: 0 },
        tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile },
        xds: { directory: join(gdir, 'xds') },
        healthCheck: { interval: '500ms', timeout: '1s' },
      },
      log: { level: 'warn' },
    },
    join(gdir, 'skewgate.yaml'),
    gdir,
  );
  const skewgate = createSkewgate(config, createLogger('warn'));
  await skewgate.start();
  t.teardown(() => skewgate.close());
  writeSeedXds(config);
  const envoy = await startEnvoy({ bootstrap: onEphemeralPort(renderBootstrap(config)) });
  t.teardown(() => envoy.stop());
  return { name, skewgate, envoy };
}

t.test('two gateways, staggered sources: a member joins and leaves, and neither answers 404 for what only it serves', async (t) => {
  const cluster = new FakeCluster();
  const a = await fake('a', cluster, BUILTINS_OLD, '127.0.0.1');
  // The Nodes source gives one port for every Node: the new apiserver listens on the same one.
  const n = await fake('n', cluster, BUILTINS_NEW, '127.0.0.8', a.port);
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-a')), 201);
  t.equal(await call(`${a.url}${NODES_PATH}`, 'POST', controlPlaneNode('cp-a', '127.0.0.1')), 201);
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes', '127.0.0.1', a.port)), 201);
  const gws = [await gateway('gw-a', a.url, 'nodes', a.port), await gateway('gw-b', a.url, 'endpointSlice', a.port)];
  const ask = async (g: Gateway): Promise<string> => {
    const r = await send(g.envoy.listenPort as number, pki, 'GET', NEW_ONLY, { authorization: `Bearer ${pki.token}` });
    const reason = r.headers[REASON_HEADER];
    return `${r.status}${typeof reason === 'string' ? ` ${reason}` : r.status === 200 ? ' from n' : ''}`;
  };
  for (const g of gws) {
    let first = '';
    await eventually(
      `${g.name} to answer for its seed`,
      async () => (first = await ask(g)) === '404 resource_not_served',
      WAIT_MS,
      100,
    ).catch(() => undefined);
    t.equal(first, '404 resource_not_served', `${g.name} before: a true 404`);
  }

  // The new machine's apiserver is up (its identity Lease); both gateways are asked from here on,
  // one round after another, and each step below waits for the round that shows it took effect.
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-n')), 201);
  for (const g of gws) await eventually(`${g.name} to see the new Lease`, async () => (await ask(g)) === UNMATCHED, WAIT_MS);
  const log = new AskRounds();
  const falseNotFound: string[] = [];
  let asking = true;
  const loop = (async () => {
    while (asking) {
      const round: Record<string, string> = {};
      log.begin();
      for (const g of gws) {
        const got = await ask(g);
        round[g.name] = got;
        if (got.startsWith('404')) falseNotFound.push(`${g.name}: ${got}`);
      }
      log.push(round);
      await sleep(10);
    }
  })();
  const until = async (what: string, pred: (r: Round) => boolean, from: string): Promise<number> => {
    let i = -1;
    await eventually(what, () => (i = firstRound(log.rounds, pred, log.after(from))) >= 0, WAIT_MS);
    return i;
  };
  const [A, B] = ['gw-a', 'gw-b'];
  const routed = (g: string) => (r: Round) => r[g] === ROUTED;

  // Joins: gateway A (Nodes) learns of the member; only then is the EndpointSlice that B reads
  // written, so B cannot have learnt it from its own source before.
  t.equal(await call(`${a.url}${NODES_PATH}`, 'POST', controlPlaneNode('cp-n', '127.0.0.8')), 201);
  log.mark('node added');
  const aJoined = await until('gateway A to route to the member', routed(A), 'node added');
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes-n', '127.0.0.8', n.port)), 201);
  log.mark('slice added');
  await until('gateway B to route to it too', (r) => routed(A)(r) && routed(B)(r), 'slice added');
  // Leaves: A loses it first (its Node deleted); the slice goes once A has stopped routing there.
  t.equal(await call(`${a.url}${NODES_PATH}/cp-n`, 'DELETE'), 200);
  log.mark('node deleted');
  const aLeft = await until('gateway A to stop routing to it', (r) => !routed(A)(r), 'node deleted');
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}/kubernetes-n`, 'DELETE'), 200);
  log.mark('slice deleted');
  const members = (): string[][] => gws.map((g) => g.skewgate.discovery.current().servers.map((s) => s.name));
  await eventually('both gateways to remove the member after its drain', () => members().every((m) => m.length === 1), WAIT_MS);
  asking = false;
  await loop;

  for (const g of gws) t.comment(`${g.name}: ${transitions(log.rounds, g.name).join(' → ')}`);
  t.same(falseNotFound, [], `no 404 through either gateway in ${log.rounds.length} rounds while the member ran`);
  for (const g of gws)
    t.same(
      transitions(log.rounds, g.name).slice(0, 3),
      [UNMATCHED, ROUTED, DRAINING],
      `${g.name}: 503 before learning it (its Lease matches no member), routed, then 503 while it drained`,
    );
  t.equal(log.rounds[aJoined]?.[B], UNMATCHED, 'staggered: when A first routed to it, B still answered 503 (its slice not yet written)');
  const bJoined = firstRound(log.rounds, routed(B));
  t.ok(bJoined >= log.before('slice added'), `B routed to it only once its EndpointSlice was written (round ${bJoined})`);
  t.equal(log.rounds[aLeft]?.[B], ROUTED, 'when A stopped, B still routed to it (its slice not yet deleted)');
  const bLeft = firstRound(log.rounds, (r) => !routed(B)(r), bJoined);
  t.ok(bLeft >= log.before('slice deleted'), `B stopped only once its slice was deleted (round ${bLeft})`);
  t.same(members(), [['kas-a'], ['kas-a']], 'both gateways removed the member after its drain');
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}/${apiserverIdentity('cp-n')}`, 'DELETE'), 200);
});
