// extproc.workers: the whole skewgate with three ext_proc endpoints (the main thread and two
// worker threads) over real gRPC streams and real fake apiservers. Every endpoint decides alike,
// follows a new snapshot, is counted in the one /metrics, comes back after a crash, and stops
// with close().
import t from 'tap';
import { join } from 'node:path';
import { request } from 'undici';
import { createSkewgate, type Skewgate } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import { EXTPROC_SERVICE_NAME, UPSTREAM_HEADER } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { FakeCluster, startFake, testPki, tokenServer, type FakeApiServer, type Pki } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';
import { captureLogs, createExtProcClient, replyHeader, type ExtProcTestClient } from '../helpers/extproc-client.js';

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';

let pki: Pki;
let servers: FakeApiServer[];
t.before(async () => {
  pki = await testPki();
  const cluster = new FakeCluster();
  servers = [
    await startFake(t, { name: 'apiserver-a', pki, cluster, builtins: BUILTINS_OLD }),
    await startFake(t, { name: 'apiserver-c', pki, cluster, builtins: BUILTINS_NEW }),
  ];
});

interface Running {
  readonly app: Skewgate;
  readonly clients: ExtProcTestClient[];
  readonly ports: number[];
  readonly logs: ReturnType<typeof captureLogs>;
}

function configWith(workers: number, retryAfterSeconds = 1): Config {
  return parseConfig(
    {
      apiservers: servers.map((s) => tokenServer(s, pki)),
      discovery: { interval: '200ms', watch: false },
      extproc: { listen: '127.0.0.1:0', shutdownGrace: '1s', workers },
      routing: { retryAfterSeconds },
      envoy: { tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile } },
      telemetry: { metrics: { prometheus: { listen: '127.0.0.1:0' } } },
    },
    join(pki.dir, 'skewgate.yaml'),
    pki.dir,
  );
}

async function started(t: Tap, workers: number): Promise<Running> {
  const config = configWith(workers);
  const logs = captureLogs('info');
  const app = createSkewgate(config, logs.logger, { env: {} });
  const bound = await app.start();
  const ports = [bound.port, ...(bound.workerPorts ?? [])].map((p) => {
    if (p === undefined) throw new Error('an endpoint without a TCP port');
    return p;
  });
  const clients = ports.map((p) => createExtProcClient(`127.0.0.1:${p}`));
  t.teardown(async () => {
    for (const c of clients) c.close();
    await app.close();
  });
  return { app, clients, ports, logs };
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

const upstreamOf = async (c: ExtProcTestClient, path: string): Promise<string | undefined> =>
  replyHeader((await c.process({ path, headers: { authorization: `Bearer ${pki.token}` } })).response, UPSTREAM_HEADER)?.raw;
const statusOf = async (c: ExtProcTestClient, path: string): Promise<number | undefined> =>
  (await c.process({ path })).response?.immediate_response?.status?.code;

t.test('three endpoints, one discovery: each decides alike and follows a new snapshot', async (t) => {
  const { app, clients, ports } = await started(t, 3);
  t.equal(new Set(ports).size, 3, 'three distinct ports');
  for (const [i, c] of clients.entries()) {
    t.same(await c.check(EXTPROC_SERVICE_NAME), { code: 0, status: 'SERVING' }, `endpoint ${i} is SERVING`);
    t.equal(await upstreamOf(c, SKEWED), 'apiserver-c', `endpoint ${i} routes the skewed resource to the one apiserver serving it`);
  }
  for (const s of servers) s.clearRequests();
  const generationBefore = app.discovery.current().generation;

  // Only the main thread discovers: the apiserver that serves the skewed resource goes unready,
  // and every worker answers from the snapshot that says so.
  servers[1]?.setReady(false);
  t.teardown(() => servers[1]?.setReady(true));
  for (const [i, c] of clients.entries())
    await eventually(`endpoint ${i} answers 503 once apiserver-c is not ready`, async () => (await statusOf(c, SKEWED)) === 503);
  servers[1]?.setReady(true);
  for (const [i, c] of clients.entries())
    await eventually(`endpoint ${i} routes to apiserver-c again`, async () => (await upstreamOf(c, SKEWED)) === 'apiserver-c');

  // One discovery load: every round of the main thread fetches /apis once per apiserver, and
  // publishes a snapshot. Were the two workers discovering too, each apiserver would see three
  // fetches per round, against at most one snapshot per round of each of the two apiservers.
  const snapshots = app.discovery.current().generation - generationBefore;
  const fetches = servers.map((s) => s.requests.filter((r) => r.path === '/apis').length);
  t.ok(
    fetches.every((n) => n > 0 && n <= snapshots + 1),
    `each apiserver saw at most one /apis per round (${fetches.join(', ')} against ${snapshots} snapshots)`,
  );
});

t.test("the workers' decisions are counted in the one /metrics", async (t) => {
  const { app, clients } = await started(t, 3);
  for (const c of clients) for (let n = 0; n < 4; n++) await c.process({ path: COMMON });
  const port = app.telemetry?.prometheusPort();
  let text = '';
  // Workers hand their counts over every 250 ms.
  await eventually('12 decisions counted', async () => {
    text = await (await request(`http://127.0.0.1:${port}/metrics`)).body.text();
    return /skewgate_decisions_total\{[^}]*outcome="default"[^}]*\} 12\b/.test(text);
  });
  t.match(text, /skewgate_decision_duration_seconds_count\{[^}]*outcome="default"[^}]*\} 12\b/, 'durations too');
});

t.test('a worker that dies is started again; the others keep serving; close() ends them all', async (t) => {
  const { app, clients, logs } = await started(t, 3);
  const workers = app.workers;
  if (workers === null) throw new Error('no workers');
  const before = workers.ports();
  t.ok(before[0] !== undefined && before[1] !== undefined, 'both workers listening');
  await workers.killWorker(1);
  t.equal(workers.ports()[0], undefined, 'worker 1 is down');
  // Meanwhile the main thread and worker 2 answer.
  t.equal(await upstreamOf(clients[0] as ExtProcTestClient, SKEWED), 'apiserver-c', 'the main thread answers');
  t.equal(await upstreamOf(clients[2] as ExtProcTestClient, SKEWED), 'apiserver-c', 'worker 2 answers');
  await eventually('worker 1 listening again', () => workers.ports()[0] !== undefined, 15_000);
  t.ok(
    logs.lines.some((l) => l['msg'] === 'ext_proc worker exited; starting it again' && l['worker'] === 1),
    'the exit is logged with the worker',
  );
  const again = createExtProcClient(`127.0.0.1:${workers.ports()[0]}`);
  t.teardown(() => again.close());
  t.equal(await upstreamOf(again, SKEWED), 'apiserver-c', 'the restarted worker decides on the current snapshot');

  await app.close();
  await app.close();
  for (const [i, c] of [...clients, again].entries()) t.not((await c.check('')).code, 0, `endpoint ${i} no longer answers`);
});

t.test('a reload reaches the workers: their answers follow the new routing section', async (t) => {
  const { app, clients } = await started(t, 2);
  const retryAfter = async (c: ExtProcTestClient): Promise<string | undefined> =>
    replyHeader((await c.process({ path: SKEWED })).response, 'retry-after')?.raw;
  servers[1]?.setReady(false);
  t.teardown(() => servers[1]?.setReady(true));
  for (const [i, c] of clients.entries()) await eventually(`endpoint ${i} answers 503`, async () => (await statusOf(c, SKEWED)) === 503);
  for (const [i, c] of clients.entries()) t.equal(await retryAfter(c), '1', `endpoint ${i}: Retry-After 1 before`);
  const r = await app.reload(configWith(2, 7), { trigger: 'test' });
  t.match(r, { result: 'applied', changed: ['routing'] });
  for (const [i, c] of clients.entries())
    await eventually(`endpoint ${i}: Retry-After 7 after the reload`, async () => (await retryAfter(c)) === '7');
  t.equal((await app.reload(configWith(3, 7))).result, 'restart_required', 'extproc.workers takes a restart');
});
