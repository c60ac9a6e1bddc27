// A watch to an apiserver that goes silent without closing anything (every packet between Envoy
// and it dropped by iptables: what a dead machine or a cut link looks like) is not held open
// forever. Long-running requests get no route timeout (kube-apiserver bounds them itself), so
// Envoy's TCP keepalive on apiserver connections (15 s idle, then 3 probes 5 s apart) is what ends
// it: the client's watch breaks once the kernel gives up (30 s after the connection's last packet,
// not sooner), and client-go opens a new one elsewhere.
import t from 'tap';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { openWatch } from '../helpers/envoy-fixtures.js';
import { within } from '../helpers/http.js';
import { dropPackets } from '../helpers/packet-drop.js';
import { stackFixture } from '../helpers/stack-fixture.js';
import { waitMs } from '../helpers/waits.js';

/** Served by apiserver-a only: the watch is routed there. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/**
 * Envoy's keepalive on apiserver connections (src/envoy/clusters.ts): 15 s idle, then 3 probes
 * 5 s apart; the kernel gives up on the connection when the last probe goes unanswered, 30 s after
 * the last packet it received.
 */
const KEEPALIVE_BOUND_MS = 15_000 + 3 * 5000;
/** The kernel's keepalive timer may fire a tick early: a second is far more than that. */
const TIMER_SLACK_MS = 1000;
/**
 * How long the test waits for the end: only a hang guard, far below what would end the watch
 * without Envoy's keepalive (the kernel's default keepalive, 2 hours; the route has no timeout).
 */
const WAIT_MS = waitMs(KEEPALIVE_BOUND_MS);

t.setTimeout(WAIT_MS + 60_000);

const fixture = stackFixture(t, 'silent-watch', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_NEW },
    { name: 'apiserver-b', builtins: BUILTINS_OLD },
  ],
  failureMode: 'open',
  clientCertificates: false,
  // Envoy reaches apiserver-a through a proxy of its own port: dropping that port's packets
  // silences Envoy's connections to apiserver-a and nothing else.
  proxied: true,
});

t.test('a watch to an apiserver whose packets are all dropped ends by the keepalive', async (t) => {
  const stack = fixture.stack();
  const proxy = stack.proxies.get('apiserver-a');
  if (!proxy) throw new Error('no proxy in front of apiserver-a');
  const port = Number(new URL(stack.gatewayUrl).port);
  // Every packet Envoy's connection received for this watch came after the request was sent.
  const requestedAt = performance.now();
  const watch = await openWatch(port, stack.pki, `${SKEWED}?watch=true`, { authorization: `Bearer ${stack.pki.token}` });
  t.equal(watch.status, 200, 'a watch on apiserver-a is open');
  let endedAt: number | null = null;
  void watch.ended.then(() => (endedAt = performance.now()));

  await dropPackets(t, { ip: '127.0.0.1', port: proxy.port });
  await within('the watch to end', watch.ended, WAIT_MS).catch(() => undefined);
  const ended = endedAt;
  t.not(ended, null, `the watch ended (a guard of ${WAIT_MS} ms, far below the kernel's default keepalive)`);
  if (ended === null) return;
  const ms = ended - requestedAt;
  // Not by anything sooner than the keepalive: the route has no timeout, the health checks close
  // nothing, and Envoy's default route timeout (15 s) would have ended it earlier.
  t.ok(
    ms >= KEEPALIVE_BOUND_MS - TIMER_SLACK_MS,
    `ended by the keepalive: ${ms.toFixed(0)} ms after the request, not before the keepalive's ${KEEPALIVE_BOUND_MS} ms`,
  );
});
