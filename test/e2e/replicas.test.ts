// Two gateways (each a real Envoy on filesystem xDS and its own skewgate) in front of one fake
// control plane learn and lose a member at different moments: gateway A reads the control-plane
// Nodes, gateway B the kubernetes EndpointSlice, and the test changes them seconds apart. Asked
// every few milliseconds through both Envoys for what only that member serves, neither ever
// answers 404 while it runs (deploy/replicas.md).
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { FakeApiServer, FakeCluster, BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { createSkewgate, type Skewgate } from '../../src/app.js';
import { parseConfig } from '../../src/config.js';
import { REASON_HEADER } from '../../src/constants.js';
import { apiserverIdentity } from '../../src/discovery/apiserver-identity.js';
import { IDENTITY_LEASES_PATH } from '../../src/discovery/identity-leases.js';
import { KUBERNETES_SLICES_PATH, NODES_PATH } from '../../src/discovery/member-sources.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, type EnvoyHandle } from '../../src/envoy/process.js';
import { writeSeedXds } from '../../src/envoy/xds-files.js';
import { createLogger } from '../../src/log.js';
import { onEphemeralPort, send, sharedPki } from '../helpers/envoy-fixtures.js';
import { callWithToken, controlPlaneNode, identityLease, kubernetesSlice } from '../helpers/k8s-objects.js';

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
    let first = await ask(g);
    for (let i = 0; i < 50 && first !== '404 resource_not_served'; i++) first = (await sleep(100), await ask(g));
    t.equal(first, '404 resource_not_served', `${g.name} before: a true 404`);
  }

  // The new machine's apiserver is up (its identity Lease); both gateways are asked from here on.
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}`, 'POST', identityLease('cp-n')), 201);
  const seen = new Map<string, string[]>(gws.map((g) => [g.name, []]));
  const firstAt = new Map<string, Map<string, number>>(gws.map((g) => [g.name, new Map()]));
  const falseNotFound: string[] = [];
  let asking = true;
  const loop = (async () => {
    while (asking) {
      for (const g of gws) {
        const got = await ask(g);
        const list = seen.get(g.name) as string[];
        if (list.at(-1) !== got) list.push(got);
        const firsts = firstAt.get(g.name) as Map<string, number>;
        if (!firsts.has(got)) firsts.set(got, Date.now());
        if (got.startsWith('404')) falseNotFound.push(`${g.name}: ${got}`);
      }
      await sleep(10);
    }
  })();
  await sleep(1000);
  // Joins: gateway A (Nodes) learns it first, gateway B (EndpointSlice) 4 s later (a join takes
  // each about a second and a half, varying with the machine: room for the stagger to show).
  t.equal(await call(`${a.url}${NODES_PATH}`, 'POST', controlPlaneNode('cp-n', '127.0.0.8')), 201);
  await sleep(4000);
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}`, 'POST', kubernetesSlice('kubernetes-n', '127.0.0.8', n.port)), 201);
  await sleep(3000);
  // Leaves: A loses it first (its Node deleted), B 3 s later.
  t.equal(await call(`${a.url}${NODES_PATH}/cp-n`, 'DELETE'), 200);
  await sleep(3000);
  t.equal(await call(`${a.url}${KUBERNETES_SLICES_PATH}/kubernetes-n`, 'DELETE'), 200);
  await sleep(3000);
  asking = false;
  await loop;
  for (const g of gws) t.comment(`${g.name}: ${(seen.get(g.name) ?? []).join(' → ')}`);
  t.same(falseNotFound, [], 'no 404 through either gateway while the member ran');
  for (const g of gws) {
    const s = seen.get(g.name) ?? [];
    t.ok(s.includes('200 from n'), `${g.name}: routed to the member once it had learnt it`);
    t.equal(s[0], '503 unmatched_apiserver_identity', `${g.name}: before learning it, 503 (its Lease matches no member)`);
  }
  const at = (gw: string, label: string): number => firstAt.get(gw)?.get(label) ?? Number.NaN;
  const joinLag = at('gw-b', '200 from n') - at('gw-a', '200 from n');
  const drainLag = at('gw-b', '503 no_healthy_capable_server') - at('gw-a', '503 no_healthy_capable_server');
  t.ok(joinLag >= 2000, `staggered: gateway B routed to it ${joinLag} ms after gateway A (A answered 200 while B answered 503)`);
  t.ok(drainLag >= 2000, `and stopped ${drainLag} ms after A`);
  const members = gws.map((g) => g.skewgate.discovery.current().servers.map((s) => s.name));
  t.same(members, [['kas-a'], ['kas-a']], 'both gateways removed the member after its drain');
  t.equal(await call(`${a.url}${IDENTITY_LEASES_PATH}/${apiserverIdentity('cp-n')}`, 'DELETE'), 200);
});
