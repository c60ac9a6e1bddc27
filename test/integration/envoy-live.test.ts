// The rendered bootstrap in a REAL Envoy, in front of HTTPS echo "apiservers", with the REAL
// skewgate ext_proc server (a stub router picks the decisions) where one is needed.
import t from 'tap';
import { join } from 'node:path';
import { EXTPROC_SERVICE_NAME, MEDIA_JSON, REASON_HEADER, UPSTREAM_HEADER } from '../../src/constants.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, type EnvoyHandle } from '../../src/envoy-runtime/process.js';
import {
  onEphemeralPort,
  scratchDir,
  send,
  sharedPki,
  startEcho,
  startProcessor,
  testConfig,
  unusedPort,
  upgrade,
  type EchoServer,
} from '../helpers/envoy-fixtures.js';
import { resourceInfo, resultOf, stubRouter } from '../helpers/extproc-client.js';

const pki = await sharedPki();
const scratch = scratchDir();
t.teardown(() => scratch.cleanup());

const FORGED: Record<string, string> = {
  [UPSTREAM_HEADER]: 'apiserver-b',
  'X-Remote-User': 'system:admin',
  'X-Remote-Group': 'system:masters',
  'X-Remote-Extra-Foo': 'bar',
  'x-forwarded-client-cert': 'By=spiffe://evil;Hash=00',
  'x-kubernetes-peer-proxied': 'true',
  'x-skewgate-anything': 'x',
  'x-envoy-retry-on': '5xx',
  'x-forwarded-for': '203.0.113.66',
  'x-real-ip': '203.0.113.66',
};
const MUST_NOT_ARRIVE = [
  'x-skewgate-upstream',
  'x-remote-user',
  'x-remote-group',
  'x-remote-extra-foo',
  'x-forwarded-client-cert',
  'x-kubernetes-peer-proxied',
  'x-skewgate-anything',
  'x-envoy-retry-on',
  'x-real-ip',
];

/** The part of a tap Test the helpers need. */
interface WithTeardown {
  teardown(fn: () => unknown): void;
}

async function twoApiservers(t: WithTeardown): Promise<[EchoServer, EchoServer]> {
  const a = await startEcho('apiserver-a', pki);
  const b = await startEcho('apiserver-b', pki);
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  return [a, b];
}

async function envoyFor(
  t: WithTeardown & { ok(v: unknown, msg: string): unknown },
  cfg: Parameters<typeof renderBootstrap>[0],
): Promise<EnvoyHandle> {
  const envoy = await startEnvoy({ bootstrap: onEphemeralPort(renderBootstrap(cfg)) });
  t.teardown(() => envoy.stop());
  t.ok(envoy.listenPort, 'Envoy reports its listener port');
  return envoy;
}

t.test('skewgate down, failureMode open: Envoy balances over all apiservers and strips forged headers', async (t) => {
  const [a, b] = await twoApiservers(t);
  const cfg = testConfig(pki, {
    apiservers: [
      { name: 'apiserver-a', url: a.url },
      { name: 'apiserver-b', url: b.url },
    ],
    extprocListen: `127.0.0.1:${await unusedPort()}`,
    failureMode: 'open',
  });
  const envoy = await envoyFor(t, cfg);
  const port = envoy.listenPort as number;

  const plain = await send(port, pki, 'GET', '/api/v1/namespaces');
  t.equal(plain.status, 200, 'a GET reaches an apiserver without skewgate (docs/design.md, invariant 4)');

  const bodies: string[] = [];
  for (let i = 0; i < 6; i++) {
    const r = await send(port, pki, i % 2 === 0 ? 'GET' : 'POST', '/api/v1/namespaces/default/pods', FORGED);
    t.equal(r.status, 200, `forged request ${i} answered`);
    bodies.push(r.body);
  }
  // A forged routing header would pin every request to apiserver-b: it must not select the route.
  t.ok(bodies.includes('apiserver-a') && bodies.includes('apiserver-b'), 'forged x-skewgate-upstream is ignored: both apiservers served');

  const arrived = [...a.requests, ...b.requests];
  t.equal(arrived.length, 7, 'every request arrived exactly once');
  for (const r of arrived) {
    for (const h of MUST_NOT_ARRIVE) t.notOk(h in r.headers, `${h} stripped (${r.method} ${r.url})`);
    t.notMatch(String(r.headers['x-forwarded-for'] ?? ''), /203\.0\.113\.66/, 'client X-Forwarded-For entries dropped');
  }

  const echoed = await upgrade(port, pki, 'SPDY/3.1', 'ping-spdy');
  t.match(echoed, /^HTTP\/1\.1 101 /, 'SPDY/3.1 upgrade (kubectl exec) passes');
  t.ok(echoed.endsWith('ping-spdy'), 'upgraded stream carries bytes both ways');
  const ws = await upgrade(port, pki, 'websocket', 'ping-ws');
  t.match(ws, /^HTTP\/1\.1 101 /, 'WebSocket upgrade passes');
});

t.test('skewgate down, failureMode closed: requests fail with 5xx and reach no apiserver', async (t) => {
  const [a, b] = await twoApiservers(t);
  const cfg = testConfig(pki, {
    apiservers: [
      { name: 'apiserver-a', url: a.url },
      { name: 'apiserver-b', url: b.url },
    ],
    extprocListen: `127.0.0.1:${await unusedPort()}`,
    failureMode: 'closed',
  });
  const envoy = await envoyFor(t, cfg);
  const r = await send(envoy.listenPort as number, pki, 'GET', '/api/v1/namespaces');
  t.ok(r.status >= 500 && r.status < 600, `fail closed gives 5xx (got ${r.status})`);
  t.equal(a.requests.length + b.requests.length, 0, 'no apiserver was asked');
});

// What the stub router decides, by :path (anything else: passthrough, non_resource).
const ROUTED = '/apis/example.com/v1/namespaces/default/widgets';
const SERVED_BY_ALL = '/api/v1/namespaces/default/configmaps';
const NAMES_NO_APISERVER = '/apis/example.com/v1/gadgets';
const NOT_FOUND = '/apis/nothing.example/v1/widgets';
const UNAVAILABLE = '/apis/example.com/v1/namespaces/default/sprockets';

t.test('skewgate over a unix socket: routes, default, 404 and 503 answers through Envoy', async (t) => {
  const [a, b] = await twoApiservers(t);
  const socket = join(scratch.dir, 'extproc.sock');
  const router = stubRouter({
    [ROUTED]: resultOf(
      { outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-b', candidates: ['apiserver-b'] },
      resourceInfo({ path: ROUTED }),
    ),
    [SERVED_BY_ALL]: resultOf(
      { outcome: 'default', reason: 'served_by_all', candidates: ['apiserver-a', 'apiserver-b'] },
      resourceInfo({ path: SERVED_BY_ALL, apiPrefix: 'api', group: '', resource: 'configmaps' }),
    ),
    // The real router never names the processor cluster; Envoy must still never send a request there.
    [NAMES_NO_APISERVER]: resultOf(
      { outcome: 'routed', reason: 'served_by_subset', upstream: 'skewgate-extproc', candidates: [] },
      resourceInfo({ path: NAMES_NO_APISERVER, resource: 'gadgets', namespace: '' }),
    ),
    [NOT_FOUND]: resultOf(
      { outcome: 'not_found', reason: 'group_version_not_served', candidates: [] },
      resourceInfo({ path: NOT_FOUND, group: 'nothing.example', namespace: '' }),
    ),
    [UNAVAILABLE]: resultOf(
      { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['apiserver-b'] },
      resourceInfo({ path: UNAVAILABLE, resource: 'sprockets' }),
    ),
  });
  const skewgate = await startProcessor(`unix:${socket}`, router);
  t.teardown(() => skewgate.close());
  const cfg = testConfig(pki, {
    apiservers: [
      { name: 'apiserver-a', url: a.url },
      { name: 'apiserver-b', url: b.url },
    ],
    extprocListen: `unix:${socket}`,
    failureMode: 'closed',
  });
  const envoy = await envoyFor(t, cfg);
  const port = envoy.listenPort as number;
  t.ok(skewgate.healthChecks.includes(EXTPROC_SERVICE_NAME), 'Envoy health-checks the processor by service name');

  for (const method of ['GET', 'POST', 'GET', 'DELETE']) {
    const r = await send(port, pki, method, ROUTED, { [UPSTREAM_HEADER]: 'apiserver-a' });
    t.equal(r.body, 'apiserver-b', `${method} routed to apiserver-b by skewgate, not by the client's header`);
  }
  for (const path of [SERVED_BY_ALL, '/version']) {
    const spread = new Set<string>();
    for (let i = 0; i < 4; i++) spread.add((await send(port, pki, 'GET', path, { [UPSTREAM_HEADER]: 'apiserver-b' })).body);
    t.same([...spread].sort(), ['apiserver-a', 'apiserver-b'], `continue without a header (${path}): balanced default`);
  }

  const before = a.requests.length + b.requests.length;
  const unknown = await send(port, pki, 'GET', NAMES_NO_APISERVER);
  t.equal(unknown.status, 503, 'a value naming no apiserver Envoy has a route for: 503, never the balanced pool');
  t.equal(unknown.headers[REASON_HEADER], 'upstream_unknown_to_envoy');
  t.equal(a.requests.length + b.requests.length, before, 'no apiserver saw it, and never the processor cluster');

  const gone = await send(port, pki, 'GET', NOT_FOUND);
  t.equal(gone.status, 404, 'not_found: 404 at the edge');
  t.equal(gone.headers['content-type'], MEDIA_JSON, 'content-type allowed by the mutation rules');
  t.equal(gone.headers[REASON_HEADER], 'group_version_not_served', `${REASON_HEADER} allowed by the mutation rules`);
  t.match(
    JSON.parse(gone.body),
    { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: /nothing\.example\/v1/ },
    'a Kubernetes Status body',
  );

  const busy = await send(port, pki, 'GET', UNAVAILABLE);
  t.equal(busy.status, 503, 'unavailable: 503 at the edge');
  t.equal(busy.headers['retry-after'], String(router.retryAfterSeconds), 'Retry-After allowed by the mutation rules');
  t.equal(busy.headers[REASON_HEADER], 'no_healthy_capable_server', 'the reason names the outcome');
  t.match(
    JSON.parse(busy.body),
    { kind: 'Status', reason: 'ServiceUnavailable', code: 503, details: { retryAfterSeconds: router.retryAfterSeconds } },
    'a Kubernetes Status body',
  );

  const arrived = [...a.requests, ...b.requests];
  t.notOk(
    arrived.some((r) => r.url === NOT_FOUND || r.url === UNAVAILABLE),
    "skewgate's own answers made no upstream hop",
  );
  for (const r of arrived) t.notOk(UPSTREAM_HEADER in r.headers, `routing header not forwarded upstream (${r.url})`);
  t.equal(router.calls.length, 15, 'the processor saw every request');
  for (const c of router.calls) {
    t.notOk(c.headers.has(UPSTREAM_HEADER), 'the processor never sees a client routing header');
    t.ok(c.headers.get(':path') === c.path && c.headers.get(':method') === c.method, 'pseudo-headers reach the processor');
  }
  t.same(skewgate.logs.problems(), [], 'the server logged no warning or error');
});

t.test('reads and writes retried on another apiserver after a connect failure (nothing was sent); each write sent once', async (t) => {
  const [a, b] = await twoApiservers(t);
  const cfg = testConfig(pki, {
    apiservers: [
      { name: 'apiserver-a', url: a.url },
      { name: 'apiserver-b', url: b.url },
    ],
    extprocListen: `127.0.0.1:${await unusedPort()}`,
    failureMode: 'open',
    // Keep apiserver-b "healthy" in Envoy's eyes after it stops: only the retry policy can help.
    healthCheckIntervalMs: 60_000,
  });
  const envoy = await envoyFor(t, cfg);
  const port = envoy.listenPort as number;
  await b.close();

  for (let i = 0; i < 6; i++) {
    const r = await send(port, pki, 'GET', `/api/v1/pods?i=${i}`);
    t.equal(r.status, 200, `GET ${i} succeeded (retried on apiserver-a when apiserver-b refused)`);
  }
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await send(port, pki, 'POST', `/api/v1/namespaces/default/configmaps?i=${i}`)).status);
  t.same(statuses, [200, 200, 200, 200, 200, 200], 'a write whose connection to the dead apiserver failed went to apiserver-a');
  const posts = a.requests.filter((r) => r.method === 'POST').map((r) => r.url);
  t.same(
    posts.sort(),
    Array.from({ length: 6 }, (_, i) => `/api/v1/namespaces/default/configmaps?i=${i}`).sort(),
    'each write reached apiserver-a exactly once',
  );
});
