// The fast path through an upgrade, in a REAL Envoy (docs/design.md, "The fast path", issue 28):
// four fake apiservers on their own loopback addresses, membership from control-plane Nodes, and
// `skewgate serve`'s parts in this process, under a steady load of numbered lists (deployments,
// which every apiserver serves throughout, and jobs). One apiserver restarts as another version
// (without jobs), then a new one joins at a new address. Judged from Envoy's own access log, line
// by line, against the snapshots skewgate published:
//   - the fast path holds: every deployments list takes a fast route, through the restart and the
//     join, and is answered 200;
//   - no request reaches, through a fast route, an apiserver that the snapshot which compiled the
//     route (its generation, in the log) does not hold ready, current and listing the resource;
//   - the restarted apiserver answers no jobs request; the newcomer answers fast requests.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { FakeApiServer, FakeCluster, BUILTINS_OLD } from '../../harness/fake/index.js';
import { parseConfig } from '../../src/config/load.js';
import { gvrKey, type Snapshot } from '../../src/discovery/core/types.js';
import { fastClusterName } from '../../src/envoy/clusters.js';
import { FAST_PATH_ROUTE_PREFIX } from '../../src/envoy/fast-routes.js';
import { learntName } from '../../src/membership/members.js';
import { NODES_PATH } from '../../src/membership/sources.js';
import { isFresh, isHealthy } from '../../src/routing/freshness.js';
import { send, sharedPki } from '../helpers/envoy-fixtures.js';
import { xdsGateway } from '../helpers/xds-gateway.js';
import { callWithToken, controlPlaneNode } from '../helpers/k8s-objects.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

const pki = await sharedPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-fast-pool-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const auth = { authorization: `Bearer ${pki.token}` };
const DEPLOYMENTS = '/apis/apps/v1/namespaces/default/deployments';
const JOBS = '/apis/batch/v1/namespaces/default/jobs';
// Long: a busy machine's late round must not empty the table (a view goes stale only this long after it was fetched).
const STALE_MS = 30_000;

/** Discovery rounds (300 ms, 2 s timeout), Envoy's health checks (500 ms) and the join delay bound what is awaited. */
const WAIT_MS = waitMs(300, 2000, 500, 1000);

/** A wait for an event, bounded by WAIT_MS (a guard against a hang, not a verdict). */
const until = (what: string, check: () => Promise<boolean> | boolean): Promise<number> => eventually(what, check, WAIT_MS, 50);

// Every apiserver on its own address and the one port the nodes source gives every Node.
const cluster = new FakeCluster();
const start = async (name: string, host: string, port?: number): Promise<FakeApiServer> => {
  const s = new FakeApiServer({ name, pki, cluster, builtins: BUILTINS_OLD, host, ...(port === undefined ? {} : { port }) });
  await s.start();
  t.teardown(() => s.close());
  return s;
};
const kasA = await start('kas-a', '127.0.0.1');
const PORT = kasA.port;
const kasB = await start('kas-b', '127.0.0.2', PORT);
const kasC = await start('kas-c', '127.0.0.3', PORT);
const kasD = await start('kas-d', '127.0.0.4', PORT);
const D = learntName('127.0.0.4', PORT);
const byAddress = new Map([
  [`127.0.0.1:${PORT}`, 'kas-a'],
  [`127.0.0.2:${PORT}`, 'kas-b'],
  [`127.0.0.3:${PORT}`, 'kas-c'],
  [`127.0.0.4:${PORT}`, D],
]);

const agent = new Agent({ connect: { ca: await readFile(pki.caFile) } });
t.teardown(() => agent.close());
const nodes = `${kasA.url}${NODES_PATH}`;
/** A control-plane Node, as its kubelet registers it. */
async function registerNode(name: string, ip: string): Promise<void> {
  const status = await callWithToken(agent, pki.token, nodes, 'POST', controlPlaneNode(name, ip));
  if (status !== 201) throw new Error(`POST Node ${name}: ${status}`);
}
await registerNode('cp-a', '127.0.0.1');
await registerNode('cp-b', '127.0.0.2');
await registerNode('cp-c', '127.0.0.3');

const xdsDir = join(dir, 'xds');
const envoyLog = join(dir, 'envoy.log');
const config = parseConfig(
  {
    apiservers: [kasA, kasB, kasC].map((f, i) => ({
      name: f.name,
      url: f.url,
      hostname: `cp-${'abc'[i] as string}`,
      caFile: pki.caFile,
      credentials: { tokenFile: pki.tokenFile },
    })),
    membership: {
      sources: ['nodes'],
      port: PORT,
      nodeSelector: 'node-role.kubernetes.io/control-plane',
      template: { caFile: pki.caFile, serverName: 'localhost', credentials: { tokenFile: pki.tokenFile } },
    },
    discovery: { interval: '300ms', timeout: '2s', staleAfter: `${STALE_MS}ms` },
    extproc: { listen: `unix:${join(dir, 'extproc.sock')}`, messageTimeout: '1s' },
    envoy: {
      listen: { address: '127.0.0.1', port: 0 },
      admin: { address: '127.0.0.1', port: 0 },
      tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile },
      xds: { directory: xdsDir },
      healthCheck: { interval: '500ms', timeout: '1s' },
    },
    log: { level: 'warn' },
  },
  join(dir, 'skewgate.yaml'),
  dir,
);
const { envoy, skewgate } = await xdsGateway(t, config, { logFile: envoyLog });
// Every snapshot routing saw, by generation: the judge of every fast-path line.
const published = new Map<number, Snapshot>();
/** When each generation was published (ms), in order: what a failure report shows of the time. */
const publishedAt: [number, number][] = [];
skewgate.discovery.onChange((s) => {
  published.set(s.generation, s);
  publishedAt.push([Date.now(), s.generation]);
});
await skewgate.start();
published.set(skewgate.discovery.current().generation, skewgate.discovery.current());
const port = envoy.listenPort as number;

/** The cluster Envoy's running fast-path read route sends to, from its own config dump (null: none). */
async function runningFastCluster(): Promise<string | null> {
  const dump = (await (await fetch(`${envoy.adminUrl}/config_dump?resource=dynamic_route_configs`)).json()) as {
    configs: { route_config: { virtual_hosts: { routes: { name: string; route?: { cluster?: string } }[] }[] } }[];
  };
  const route = dump.configs[0]?.route_config.virtual_hosts[0]?.routes.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}read`);
  return route?.route?.cluster ?? null;
}
const poolOf = (...names: string[]): string => fastClusterName(names);

interface Sent {
  readonly seq: number;
  readonly path: string;
  readonly status: number;
}
const sent: Sent[] = [];
let loading = true;
/** One request after the other, deployments and jobs in turn, each numbered in its query. */
const load = (async () => {
  for (let seq = 0; loading; seq++) {
    const path = seq % 2 === 0 ? DEPLOYMENTS : JOBS;
    const r = await send(port, pki, 'GET', `${path}?seq=${seq}`, auth);
    sent.push({ seq, path, status: r.status });
  }
})();
const answeredSince = (n: number): number => sent.length - n;

await t.test('through a restart as another version and a join at a new address, the fast path holds and never misroutes', async (t) => {
  await until('the fast path on the three seeds', async () => (await runningFastCluster()) === poolOf('kas-a', 'kas-b', 'kas-c'));
  t.pass('Envoy runs the fast path on the pool of the three seeds');

  // kas-b goes down: it leaves the pool, the others keep the fast path.
  await kasB.close();
  await until('kas-b out of the pool', async () => (await runningFastCluster()) === poolOf('kas-a', 'kas-c'));
  t.pass('kas-b down: the fast path runs on kas-a and kas-c');
  // It comes back as another version, without jobs: back in the pool only with its new view.
  kasB.removeBuiltin('batch', 'v1', 'jobs');
  kasB.clearRequests();
  await kasB.start();
  await until('kas-b back in the pool', async () => (await runningFastCluster()) === poolOf('kas-a', 'kas-b', 'kas-c'));
  const view = skewgate.discovery.current().servers.find((s) => s.name === 'kas-b')?.view;
  t.equal(view?.resources.has(gvrKey('batch', 'v1', 'jobs')), false, 'with the view of its new version (no jobs)');
  let mark = sent.length;
  await until('20 requests with kas-b back', () => answeredSince(mark) >= 20);

  // A new control-plane machine: its Node, at a new address.
  await registerNode('cp-d', '127.0.0.4');
  await until('the newcomer in the pool', async () => (await runningFastCluster()) === poolOf('kas-a', 'kas-b', 'kas-c', D));
  t.pass(`${D} joined: the fast path runs on the four`);
  mark = sent.length;
  await until('20 requests with the newcomer', () => answeredSince(mark) >= 20);
  loading = false;
  await load;

  // Envoy's access log, line by line (flushed every 200 ms).
  const want = new Set(sent.map((s) => s.seq));
  let lines: Record<string, string>[] = [];
  await until('every request in the access log', () => {
    lines = readFileSync(envoyLog, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{') && l.includes('"route"'))
      .map((l) => JSON.parse(l) as Record<string, string>)
      .filter((l) => /[?&]seq=\d+/.test(l.path ?? ''));
    return lines.length >= want.size;
  });
  const seqOf = (l: Record<string, string>): number => Number(/[?&]seq=(\d+)/.exec(l.path ?? '')?.[1]);
  /** For a failure report: the generation published when a request started, and its servers' state. */
  const servedWhen = (l: Record<string, string>): string => {
    const at = Date.parse(String(l.start));
    const gen = publishedAt.filter(([when]) => when <= at).at(-1)?.[1];
    const snap = gen === undefined ? undefined : published.get(gen);
    const servers = snap?.servers.map((x) => `${x.name}${isHealthy(x) ? '' : ' (unready)'}${isFresh(x, at, STALE_MS) ? '' : ' (stale)'}`);
    return `at ${String(l.start)}, generation ${gen ?? 'none'}: ${servers?.join(', ') ?? '-'}`;
  };
  // A failure is reported with Envoy's word on it: the route, the upstream and the response flags.
  const lineOf = new Map(lines.map((l) => [seqOf(l), l]));
  const failed = sent
    .filter((s) => s.status !== 200)
    .map((s) => {
      const l = lineOf.get(s.seq);
      return `${s.path}?seq=${s.seq}: ${s.status} (route ${l?.route}, ${l?.upstream} ${l?.upstream_host}, flags ${l?.flags}, ${l?.details})`;
    });
  t.same(failed, [], `every one of ${sent.length} requests answered 200`);
  const deployments = lines.filter((l) => l.path?.startsWith(`${DEPLOYMENTS}?`));
  t.same(
    deployments
      .filter((l) => !String(l.route).startsWith(FAST_PATH_ROUTE_PREFIX))
      .map((l) => `seq=${seqOf(l)} route=${l.route} ${servedWhen(l)}`),
    [],
    `the fast path held: all ${deployments.length} deployments lists took a fast route, none met ext_proc`,
  );

  // The judge: the snapshot whose generation compiled the route holds the apiserver that answered
  // ready, not draining, current, and listing the resource.
  const fast = lines.filter((l) => String(l.route).startsWith(FAST_PATH_ROUTE_PREFIX));
  const wrong: string[] = [];
  for (const l of fast) {
    const snap = published.get(Number(l.skewgate_generation));
    const server = byAddress.get(String(l.upstream_host));
    const s = snap?.servers.find((x) => x.name === server);
    const gvr = l.path?.startsWith(`${JOBS}?`) ? gvrKey('batch', 'v1', 'jobs') : gvrKey('apps', 'v1', 'deployments');
    const at = Date.parse(String(l.start));
    if (snap === undefined || s === undefined)
      wrong.push(`seq=${seqOf(l)}: ${server ?? String(l.upstream_host)} not in generation ${l.skewgate_generation}`);
    else if (!isHealthy(s) || s.view?.resources.has(gvr) !== true || !isFresh(s, at, STALE_MS))
      wrong.push(`seq=${seqOf(l)}: ${s.name} in generation ${snap.generation} is not ready, current and listing ${gvr}`);
  }
  t.same(wrong.slice(0, 10), [], `no fast request reached an apiserver its table's snapshot does not vouch for (${fast.length} judged)`);
  const answeredBy = (name: string, path: string): number =>
    fast.filter((l) => byAddress.get(String(l.upstream_host)) === name && l.path?.startsWith(`${path}?`)).length;
  t.ok(answeredBy(D, DEPLOYMENTS) > 0, `${D} answered ${answeredBy(D, DEPLOYMENTS)} fast deployments lists once in the pool`);
  t.ok(
    kasD.requests.some((r) => r.path.startsWith(DEPLOYMENTS)),
    'the fake at the new address recorded them',
  );
  t.ok(answeredBy('kas-b', DEPLOYMENTS) > 0, `kas-b answered ${answeredBy('kas-b', DEPLOYMENTS)} of them, before and after its restart`);
  t.same(
    kasB.requests.filter((r) => r.path.startsWith(JOBS)).map((r) => r.path),
    [],
    'kas-b answered no jobs request after it came back without jobs',
  );
  // The pools in the order requests met them (repeats collapsed); a round that came late on a busy
  // machine may add a pool between these, never change their order.
  const pools = fast.map((l) => String(l.upstream)).filter((p, i, all) => i === 0 || all[i - 1] !== p);
  const milestones = [
    poolOf('kas-a', 'kas-b', 'kas-c'),
    poolOf('kas-a', 'kas-c'),
    poolOf('kas-a', 'kas-b', 'kas-c'),
    poolOf('kas-a', 'kas-b', 'kas-c', D),
  ];
  let at = 0;
  for (const p of pools) if (p === milestones[at]) at++;
  t.equal(
    at,
    milestones.length,
    `fast requests went to the pools in turn: three, two while kas-b was away, three, then four (${pools.length} changes)`,
  );
});
