// A watch to an apiserver that goes silent without closing anything (every packet between Envoy
// and it dropped by iptables: what a dead machine or a cut link looks like) is not held open
// forever. Long-running requests get no route timeout (kube-apiserver bounds them itself), so
// Envoy's TCP keepalive on apiserver connections (15 s idle, then 3 probes 5 s apart) is what ends
// it: the client's watch breaks within ~30 s, and client-go opens a new one elsewhere.
import t from 'tap';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { openWatch } from '../helpers/envoy-fixtures.js';
import { dropPackets } from '../helpers/packet-drop.js';
import { stackFixture } from '../helpers/stack-fixture.js';

/** Served by apiserver-a only: the watch is routed there. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/** keepalive_time + keepalive_probes × keepalive_interval (src/envoy/clusters.ts). */
const KEEPALIVE_BOUND_MS = 15_000 + 3 * 5000;
const SLACK_MS = 5000;

t.setTimeout(120_000);

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

t.test('a watch to an apiserver whose packets are all dropped ends within the keepalive bound', async (t) => {
  const stack = fixture.stack();
  const proxy = stack.proxies.get('apiserver-a');
  if (!proxy) throw new Error('no proxy in front of apiserver-a');
  const port = Number(new URL(stack.gatewayUrl).port);
  const watch = await openWatch(port, stack.pki, `${SKEWED}?watch=true`, { authorization: `Bearer ${stack.pki.token}` });
  t.equal(watch.status, 200, 'a watch on apiserver-a is open');
  let endedAt: number | null = null;
  void watch.ended.then(() => (endedAt = Date.now()));

  const droppedAt = Date.now();
  await dropPackets(t, { ip: '127.0.0.1', port: proxy.port });
  await Promise.race([watch.ended, new Promise((r) => setTimeout(r, KEEPALIVE_BOUND_MS + SLACK_MS))]);
  const ended = endedAt;
  t.not(ended, null, `the watch ended (waited ${KEEPALIVE_BOUND_MS + SLACK_MS} ms)`);
  if (ended === null) return;
  const ms = ended - droppedAt;
  t.ok(ms <= KEEPALIVE_BOUND_MS + SLACK_MS, `ended ${ms} ms after the drop, the bound being ${KEEPALIVE_BOUND_MS} ms`);
  // Not by anything faster than the keepalive (the route has no timeout, the health checks close nothing).
  t.ok(ms >= 10_000, `by the keepalive, not by a route timeout (${ms} ms)`);
});
