// An apiserver that accepts connections and never answers (a BlackholeProxy in front of it: the
// sockets stay open, nothing comes back — a SIGSTOPped process or dropped packets, as Envoy sees
// them), through a real Envoy and skewgate. A request that is not long-running waits
// envoy.requestTimeout at most and gets a 504 Status; a watch is not cut by that bound; the other
// apiserver goes on answering; skewgate keeps the hung one's last good view (no false 404: a fast
// 503 for what only it serves) and logs and counts the fault; Envoy counts the timeouts.
import t from 'tap';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { REQUEST_TIMEOUT_MS } from '../../src/config/core/schema.js';
import { REASON_HEADER } from '../../src/constants.js';
import { envoyCounter, openWatch, send } from '../helpers/envoy-fixtures.js';
import { captureLogs } from '../helpers/extproc-client.js';
import { eventually, within } from '../helpers/http.js';
import { stackFixture } from '../helpers/stack-fixture.js';
import { waitMs } from '../helpers/waits.js';

/** envoy.requestTimeout for this file: short, so that the test is. */
const BOUND_MS = 3000;
/**
 * What tells the bound's 504 apart from any other end: it comes no earlier than BOUND_MS and well
 * before the default bound (REQUEST_TIMEOUT_MS, 65 s), which would apply had the setting been lost.
 * Nothing here is timed against the machine's speed.
 */
const DEFAULT_BOUND_MS = REQUEST_TIMEOUT_MS;
/** Served by apiserver-a only: skewgate routes it there, on the bounded route of that cluster. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';
/** The stack's discovery (1 s, 2 s timeout) and health checks (1 s, 1 s timeout) bound each wait. */
const WAIT_MS = waitMs(1000, 2000, 1000, 1000);

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

interface Timed {
  readonly status: number;
  readonly body: string;
  readonly ms: number;
  /** Who answered: a fake apiserver's name, or skewgate's reason when it answered itself. */
  readonly server: string | undefined;
  readonly reason: string | undefined;
}

async function timed(method: string, path: string): Promise<Timed> {
  const started = performance.now();
  const r = await within(
    `${method} ${path}`,
    send(port(), fixture.stack().pki, method, path, { ...token(), 'content-type': 'application/json' }),
    DEFAULT_BOUND_MS + WAIT_MS,
  );
  const header = (name: string): string | undefined => {
    const v = r.headers[name];
    return typeof v === 'string' ? v : undefined;
  };
  return {
    status: r.status,
    body: r.body,
    ms: performance.now() - started,
    server: header('x-fake-apiserver'),
    reason: header(REASON_HEADER),
  };
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
    t.ok(r.ms < DEFAULT_BOUND_MS, `${what}: ended after ${r.ms.toFixed(0)} ms, well before the default bound (${DEFAULT_BOUND_MS} ms)`);
    const body = JSON.parse(r.body) as { message?: string };
    if (r.status === 504) {
      t.ok(r.ms >= BOUND_MS - 100, `${what}: not before the route's bound (${BOUND_MS} ms): the bound ended it`);
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
    WAIT_MS,
  );
  const a = skewgate.discovery.current().servers.find((s) => s.name === 'apiserver-a');
  t.ok(a?.view, 'its last good view is kept');
  t.ok(a?.lastError, `and its fault stated: ${a?.lastError}`);
  const skewed = await timed('GET', SKEWED);
  t.equal(skewed.status, 503, `what only apiserver-a serves: 503 (${skewed.body})`);
  // skewgate's own answer (an immediate response): nothing was sent to the hung apiserver, so
  // nothing could wait for it. How fast that answer is, is a benchmark's figure.
  t.equal(skewed.reason, 'no_healthy_capable_server', 'answered by skewgate itself, at once');
  // What both serve goes to apiserver-b; one sent to apiserver-a first would have waited at least
  // envoy.connectTimeout for a handshake that never ends, before any retry elsewhere.
  const connectTimeoutMs = stack.config.envoy.connectTimeout;
  const common: string[] = [];
  for (let i = 0; i < 6; i++) {
    const r = await timed('GET', COMMON);
    common.push(`${r.status} ${r.server ?? 'edge'}${r.ms >= connectTimeoutMs ? ` after ${r.ms.toFixed(0)} ms` : ''}`);
  }
  t.same(
    common,
    Array(6).fill('200 apiserver-b'),
    `what both serve: answered by apiserver-b, none after a ${connectTimeoutMs} ms connect timeout`,
  );
  const lines = logs.lines.filter((l) => l['server'] === 'apiserver-a');
  t.ok(
    lines.some((l) => l['msg'] === 'discovery failing' && l['keptView'] === true),
    'skewgate logged the failing discovery, view kept',
  );
  t.ok(
    lines.some((l) => l['msg'] === 'apiserver not ready (/readyz)'),
    'and the failed readiness',
  );
  t.notOk(watchEnded, `the watch still open, long after the ${BOUND_MS} ms bound ended the read`);

  // Back: the blackholed connections are cut (the watch ends, clients re-watch), new ones answered.
  proxy.setBlackhole(false);
  await within('the watch ends with its connection', watch.ended, WAIT_MS);
  await eventually('apiserver-a answers again through the gateway', async () => (await timed('GET', SKEWED)).status === 200, WAIT_MS, 250);
});
