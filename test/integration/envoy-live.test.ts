// The rendered bootstrap in a REAL Envoy, in front of HTTPS echo "apiservers".
import t from 'tap';
import { join } from 'node:path';
import { UPSTREAM_HEADER } from '../../src/constants.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, type EnvoyHandle } from '../../src/envoy/process.js';
import { makePki, onEphemeralPort, send, startEcho, startStubProcessor, testConfig, unusedPort, upgrade, type EchoServer } from '../helpers/envoy-fixtures.js';

const pki = makePki();
t.teardown(() => pki.cleanup());

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
const MUST_NOT_ARRIVE = ['x-skewgate-upstream', 'x-remote-user', 'x-remote-group', 'x-remote-extra-foo', 'x-forwarded-client-cert', 'x-kubernetes-peer-proxied', 'x-skewgate-anything', 'x-envoy-retry-on', 'x-real-ip'];

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

async function envoyFor(t: WithTeardown & { ok(v: unknown, msg: string): unknown }, cfg: Parameters<typeof renderBootstrap>[0]): Promise<EnvoyHandle> {
  const envoy = await startEnvoy({ bootstrap: onEphemeralPort(renderBootstrap(cfg)) });
  t.teardown(() => envoy.stop());
  t.ok(envoy.listenPort, 'Envoy reports its listener port');
  return envoy;
}

t.test('skewgate down, failureMode open: Envoy balances over all apiservers and strips forged headers', async (t) => {
  const [a, b] = await twoApiservers(t);
  const cfg = testConfig(pki, {
    apiservers: [{ name: 'apiserver-a', url: a.url }, { name: 'apiserver-b', url: b.url }],
    extprocListen: `127.0.0.1:${await unusedPort()}`,
    failureMode: 'open',
  });
  const envoy = await envoyFor(t, cfg);
  const port = envoy.listenPort as number;

  const plain = await send(port, pki, 'GET', '/api/v1/namespaces');
  t.equal(plain.status, 200, 'a GET reaches an apiserver without skewgate (invariant 4)');

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
    apiservers: [{ name: 'apiserver-a', url: a.url }, { name: 'apiserver-b', url: b.url }],
    extprocListen: `127.0.0.1:${await unusedPort()}`,
    failureMode: 'closed',
  });
  const envoy = await envoyFor(t, cfg);
  const r = await send(envoy.listenPort as number, pki, 'GET', '/api/v1/namespaces');
  t.ok(r.status >= 500 && r.status < 600, `fail closed gives 5xx (got ${r.status})`);
  t.equal(a.requests.length + b.requests.length, 0, 'no apiserver was asked');
});

t.test('ext_proc over a unix socket: the route is re-selected after skewgate sets the header', async (t) => {
  const [a, b] = await twoApiservers(t);
  const socket = join(pki.dir, 'extproc.sock');
  const stub = await startStubProcessor(`unix:${socket}`, (h) => {
    const path = h[':path'] ?? '';
    if (path.startsWith('/to-b')) return { kind: 'route', header: UPSTREAM_HEADER, upstream: 'apiserver-b' };
    if (path.startsWith('/unknown')) return { kind: 'route', header: UPSTREAM_HEADER, upstream: 'skewgate-extproc' };
    if (path.startsWith('/gone')) return { kind: 'immediate', code: 404, headers: { 'content-type': 'application/json', 'retry-after': '1' }, body: '{"kind":"Status"}' };
    return { kind: 'continue' };
  });
  t.teardown(() => stub.close());
  const cfg = testConfig(pki, {
    apiservers: [{ name: 'apiserver-a', url: a.url }, { name: 'apiserver-b', url: b.url }],
    extprocListen: `unix:${socket}`,
    failureMode: 'closed',
  });
  const envoy = await envoyFor(t, cfg);
  const port = envoy.listenPort as number;
  t.ok(stub.healthChecks.includes('envoy.service.ext_proc.v3.ExternalProcessor'), 'Envoy health-checks the processor by service name');

  for (const method of ['GET', 'POST', 'GET', 'DELETE']) {
    const r = await send(port, pki, method, '/to-b/x', { [UPSTREAM_HEADER]: 'apiserver-a' });
    t.equal(r.body, 'apiserver-b', `${method} routed to apiserver-b by skewgate, not by the client's header`);
  }
  const spread = new Set<string>();
  for (let i = 0; i < 4; i++) spread.add((await send(port, pki, 'GET', '/plain', { [UPSTREAM_HEADER]: 'apiserver-b' })).body);
  t.same([...spread].sort(), ['apiserver-a', 'apiserver-b'], 'continue without a header: balanced default');

  const unknown = await send(port, pki, 'GET', '/unknown');
  t.equal(unknown.status, 200, 'a value naming no apiserver falls back to the default route');
  t.match(unknown.body, /^apiserver-[ab]$/, 'and reaches an apiserver, never the processor cluster');

  const gone = await send(port, pki, 'GET', '/gone');
  t.equal(gone.status, 404, 'immediate response status');
  t.equal(gone.headers['content-type'], 'application/json', 'immediate response content-type allowed by mutation rules');
  t.equal(gone.headers['retry-after'], '1', 'immediate response retry-after allowed by mutation rules');
  t.equal(gone.body, '{"kind":"Status"}', 'immediate response body');

  for (const r of [...a.requests, ...b.requests]) t.notOk(UPSTREAM_HEADER in r.headers, `routing header not forwarded upstream (${r.url})`);
  t.ok(stub.seen.length >= 10, 'the processor saw every request');
  for (const h of stub.seen) {
    t.notOk(UPSTREAM_HEADER in h, 'the processor never sees a client routing header');
    t.ok(h[':path'] !== undefined && h[':method'] !== undefined, 'pseudo-headers reach the processor');
  }
});

t.test('reads retried on another apiserver after a connect failure; writes never retried', async (t) => {
  const [a, b] = await twoApiservers(t);
  const cfg = testConfig(pki, {
    apiservers: [{ name: 'apiserver-a', url: a.url }, { name: 'apiserver-b', url: b.url }],
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
  const ok = statuses.filter((s) => s === 200).length;
  t.ok(statuses.some((s) => s === 503), `a write sent to the dead apiserver fails (statuses ${statuses.join(',')})`);
  t.equal(a.requests.filter((r) => r.method === 'POST').length, ok, 'no write reached apiserver-a other than the ones answered 200: no retry');
});
