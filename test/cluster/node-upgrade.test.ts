// An in-place rolling upgrade of three real kube-apiservers (KUBE_OLD → KUBE_NEW, one at a time on
// the same address, as kubeadm does it) with two real nodes running throughout (issue 26, item 4):
// node-sg through Envoy + skewgate, node-rr through a TCP round robin, side by side
// (test/helpers/node-upgrade-run.ts says what runs and what each phase checks;
// node-upgrade-results.ts what is judged). This file also records the skewgate node's traffic as
// a mix the benchmarks replay (bench/node-traffic-mix.json).
import t from 'tap';
import { LEASE_SECONDS } from '../helpers/node-lab.js';
import { FIRST_SERVERS, NodeUpgradeRun } from '../helpers/node-upgrade-run.js';
import { finish, judge } from '../helpers/node-upgrade-results.js';

t.setTimeout(20 * 60_000);
/** Lease renewals each node must have stored after a phase's apiserver was ready before the phase ends. */
const RENEWALS_PER_PHASE = 2;
/** P0, the steady window of the traffic mix, lasts six renewals (about a minute). */
const RENEWALS_STEADY = 6;

const run = await NodeUpgradeRun.open(t, { name: 'node-upgrade', namespace: 'node-upgrade' });
const v = run.versions;
await run.start();
await run.phase('P0', run.origin, RENEWALS_STEADY);
for (const [i, name] of FIRST_SERVERS.entries()) {
  run.progress(`P${i + 1}: replacing ${name} v${v.kubeOld} → v${v.kubeNew}`);
  const { sigterm, gone } = await run.stopServer(name);
  const ready = await run.startServer(name, v.kubeNew);
  run.changes.push({ stopped: name, sigterm, gone, started: name, ready });
  await run.phase(`P${i + 1}`, ready, RENEWALS_PER_PHASE);
}

const outcome = await finish(run, {
  id: 'node-upgrade',
  title: 'Rolling upgrade with real nodes: skewgate beside a TCP round robin',
  method: `etcd and kube-apiservers kas-1..3 (v${v.kubeOld}, replaced one at a time in place by v${v.kubeNew}: P1–P3), kube-controller-manager (default controllers: NotReady after ${LEASE_SECONDS} s without a Lease renewal) and kube-scheduler v${v.kubeOld} through Envoy + skewgate. Two nodes, each a kubelet, kube-proxy v${v.kubeOld} and containerd in a network namespace of its own, with one pod: \`${run.nodeName('skewgate')}\` reaches the control plane through Envoy + skewgate, \`${run.nodeName('round-robin')}\` through a TCP round robin (Envoy tcp_proxy, TLS passed through, connect check every 2 s: kubeadm's HAProxy recipe). P0 lasts ${RENEWALS_STEADY} renewals, P1–P3 ${RENEWALS_PER_PHASE}.`,
  trafficMix: { upgradeWindow: 'upgrade (P1–P3: three apiserver restarts)' },
});

await t.test('the node through skewgate over the whole in-place upgrade', async (t) => {
  t.comment(outcome.md);
  judge(t, run, outcome, RENEWALS_STEADY + RENEWALS_PER_PHASE * FIRST_SERVERS.length);
  const steady = outcome.mix[0];
  t.ok(
    steady?.rows.some((r) => r.client === 'kubelet' && r.verb === 'update' && r.resource === 'coordination.k8s.io/v1/leases'),
    "the traffic mix holds the kubelet's Lease renewals",
  );
  t.ok((steady?.watchesOpenAtEnd['kube-proxy'] ?? 0) > 0, `and kube-proxy's open watches (${steady?.watchesOpenAtEnd['kube-proxy'] ?? 0})`);
});
