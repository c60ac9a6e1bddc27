// An apiserver that accepts connections and never answers (a BlackholeProxy in front of it: the
// sockets stay open, nothing comes back — a SIGSTOPped process or dropped packets, as Envoy sees
// them), through a real Envoy and skewgate. A request that is not long-running waits
// envoy.requestTimeout at most and gets a 504 Status; a watch is not cut by that bound; the other
// apiserver goes on answering; skewgate keeps the hung one's last good view (no false 404: a fast
// 503 for what only it serves) and logs and counts the fault; Envoy counts the timeouts.
import t from 'tap';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { envoyCounter, openWatch, send } from '../helpers/envoy-fixtures.js';
import { captureLogs } from '../helpers/extproc-client.js';
import { eventually, within } from '../helpers/http.js';
import { stackFixture } from '../helpers/stack-fixture.js';

/** envoy.requestTimeout for this file: short, so that the test is (the default is 65 s). */
const BOUND_MS = 3000;
/** What Envoy and the client may add to the bound. */
const SLACK_MS = 1500;
/** Served by apiserver-a only: skewgate routes it there, on the bounded route of that cluster. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';

const logs = captureLogs('info');
const fixture = stackFixture(t, 'hung-apiserver', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_NEW },
    { name: 'apiserver-b', builtins: BUILTINS_OLD },
  ],
  failureMode: 'open',
  clientCertificates: false,
  proxied: true,
  envoy: { requestTimeout: `${BOUND_MS}ms` },
  logger: logs.logger,
});
const port = (): number => Number(new URL(fixture.stack().gatewayUrl).port);
const token = (): Record<string, string> => ({ authorization: `Bearer ${fixture.stack().pki.token}` });

async function timed(method: string, path: string): Promise<{ status: number; body: string; ms: number }> {
  const started = Date.now();
  const r = await within(
    `${method} ${path}`,
    send(port(), fixture.stack().pki, method, path, { ...token(), 'content-type': 'application/json' }),
    BOUND_MS * 4,
  );
  return { status: r.status, body: r.body, ms: Date.now() - started };
}

t.test('an apiserver that never answers: bounded requests end in time, watches stay, the rest goes on', async (t) => {
  const stack = fixture.stack();
  const proxy = stack.proxies.get('apiserver-a');
  if (!proxy) throw new Error('no proxy in front of apiserver-a');
  t.equal((await timed('GET', SKEWED)).status, 200, 'before: apiserver-a answers the skewed resource');
  const watch = await openWatch(port(), fixture.stack().pki, `${SKEWED}?watch=true`, token());
  t.equal(watch.status, 200, 'a watch on apiserver-a is open');
  let watchEnded = false;
  void watch.ended.then(() => (watchEnded = true));
  const rqTimeouts = (): Promise<number> => envoyCounter(fixture.stack().envoy.adminUrl, 'cluster.apiserver-a.upstream_rq_timeout');
  const cxTimeouts = (): Promise<number> => envoyCounter(fixture.stack().envoy.adminUrl, 'cluster.apiserver-a.upstream_cx_connect_timeout');
  const [rqBefore, cxBefore] = [await rqTimeouts(), await cxTimeouts()];

  proxy.setBlackhole(true);
  t.teardown(() => proxy.setBlackhole(false));
  // At once, before any health check has noticed: routed to apiserver-a, a read and a write. One
  // finds the pooled connection (sent, never answered: the route's bound, 504), the other needs a
  // new one, whose TLS handshake never ends (envoy.connectTimeout, 503): both within the bound.
  const [read, write] = await Promise.all([timed('GET', SKEWED), timed('POST', SKEWED)]);
  for (const [what, r] of [
    ['read', read],
    ['write', write],
  ] as const) {
    t.ok(r.ms <= BOUND_MS + SLACK_MS, `${what}: ended after ${r.ms} ms, the bound being ${BOUND_MS} ms`);
    const body = JSON.parse(r.body) as { message?: string };
    if (r.status === 504) {
      t.ok(r.ms >= BOUND_MS - 100, `${what}: the route's bound ended it`);
      t.match(body, { kind: 'Status', reason: 'Timeout', code: 504, message: /response_timeout/ }, `${what}: a Status body`);
    } else {
      t.match(
        body,
        { kind: 'Status', reason: 'ServiceUnavailable', code: 503, message: /connection_timeout/ },
        `${what}: the connect timeout ended it`,
      );
    }
  }
  t.ok([read.status, write.status].includes(504), 'a request sent to the hung apiserver was ended by the route bound');
  const answered504 = [read, write].filter((r) => r.status === 504).length;
  t.equal((await rqTimeouts()) - rqBefore, answered504, 'Envoy counted each 504 (upstream_rq_timeout)');
  // Its /readyz checks open connections too, which time out as well.
  t.ok((await cxTimeouts()) - cxBefore >= 2 - answered504, 'and each connect timeout (upstream_cx_connect_timeout)');
  t.notOk(watchEnded, 'the watch was not cut by the bound (long-running requests have none)');

  // skewgate notices (its /readyz probe and discovery time out): the hung apiserver is unhealthy,
  // its last good view kept, so what only it serves is a fast 503 with Retry-After — never a 404.
  const skewgate = stack.skewgate();
  if (!skewgate) throw new Error('skewgate is not running');
  await eventually(
    'skewgate sees apiserver-a failing',
    () => {
      const a = skewgate.discovery.current().servers.find((s) => s.name === 'apiserver-a');
      return a?.ready === false && a.consecutiveFailures > 0;
    },
    15_000,
  );
  const a = skewgate.discovery.current().servers.find((s) => s.name === 'apiserver-a');
  t.ok(a?.view, 'its last good view is kept');
  t.ok(a?.lastError, `and its fault stated: ${a?.lastError}`);
  const skewed = await timed('GET', SKEWED);
  t.equal(skewed.status, 503, `what only apiserver-a serves: 503 (${skewed.body})`);
  t.ok(skewed.ms < 1000, `at once (${skewed.ms} ms)`);
  t.ok(skewed.ms < BOUND_MS, 'not after the bound');
  const common: number[] = [];
  for (let i = 0; i < 6; i++) {
    const r = await timed('GET', COMMON);
    t.ok(r.ms < 1000, `common read ${i}: ${r.ms} ms`);
    common.push(r.status);
  }
  t.same(common, Array(6).fill(200), 'what both serve: answered by apiserver-b');
  const lines = logs.lines.filter((l) => l['server'] === 'apiserver-a');
  t.ok(
    lines.some((l) => l['msg'] === 'discovery failing' && l['keptView'] === true),
    'skewgate logged the failing discovery, view kept',
  );
  t.ok(
    lines.some((l) => l['msg'] === 'apiserver not ready (/readyz)'),
    'and the failed readiness',
  );
  t.notOk(watchEnded, `the watch still open after ${BOUND_MS + SLACK_MS} ms and more`);

  // Back: the blackholed connections are cut (the watch ends, clients re-watch), new ones answered.
  proxy.setBlackhole(false);
  await within('the watch ends with its connection', watch.ended, 5000);
  await eventually('apiserver-a answers again through the gateway', async () => (await timed('GET', SKEWED)).status === 200, 15_000, 250);
});
