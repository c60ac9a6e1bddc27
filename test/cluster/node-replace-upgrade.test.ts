// A replace-style rolling upgrade (as Cluster API's KubeadmControlPlane does it: a new machine in,
// then the oldest out) with two real nodes running throughout (issue 26, item 4): three KUBE_OLD
// apiservers kas-1..3, then, one at a time, a KUBE_NEW apiserver on a NEW address (kas-4..6) and
// an old one removed. Both skewgate gateways (the control plane's and the node's) start knowing
// only kas-1..3 and learn the rest from the control-plane Nodes — not from the `kubernetes`
// EndpointSlice, which lists the node gateway itself (kubernetesService.publish). The lab has no
// kubelet on the control-plane machines: the test registers and deletes their Node objects where
// their kubelets and Cluster API would. The round-robin node's balancer pool follows the machines
// as a load balancer's does (the new one in once ready, the old one out before it goes). What runs
// and what is judged: test/helpers/node-upgrade-run.ts and node-upgrade-results.ts.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { learntName } from '../../src/membership/members.js';
import { skewgateLogRecords } from '../load/gateway-view.js';
import { controlPlaneNode } from '../helpers/k8s-objects.js';
import { LEASE_SECONDS } from '../helpers/node-lab.js';
import { FIRST_SERVERS, NodeUpgradeRun, must } from '../helpers/node-upgrade-run.js';
import { finish, judge } from '../helpers/node-upgrade-results.js';

t.setTimeout(20 * 60_000);
const RENEWALS_PER_PHASE = 2;
const NEW = ['kas-4', 'kas-5', 'kas-6'] as const;
/** The two skewgate gateways of the lab (test/helpers/node-lab.ts startNodeControlPlane). */
const GATEWAYS = ['gateway', 'node-gateway'] as const;
/** How long a gateway may take to admit a registered apiserver (a failure bound: the phase waits for the log line). */
const ADMIT_LIMIT_MS = 60_000;
/** How long a gateway may take to remove a member whose Node was deleted: its drain (10 s in the lab) and ample room (a failure bound). */
const DRAIN_LIMIT_MS = 60_000;
/** skewgate's log lines that mark a membership change, and how the claims name them. */
const MEMBERSHIP_LINES: Readonly<Record<string, string>> = {
  'apiserver admitted as a member': 'admitted',
  'drained apiserver removed': 'removed',
};

const run = await NodeUpgradeRun.open(t, {
  name: 'node-replace-upgrade',
  namespace: 'node-replace-upgrade',
  membershipSources: ['nodes'],
  // The old machines' kubelets registered their Nodes long ago.
  beforeGateways: async (r) => {
    for (const s of FIRST_SERVERS) await registerNode(r, s, r.lab.apiServerUrl(s));
  },
});
const v = run.versions;
/** The name a gateway gives a server: a seed's own, a learnt one's from its address. */
const gatewayName = (s: string): string => ((FIRST_SERVERS as readonly string[]).includes(s) ? s : learntName(run.ip(s), 6443));

await run.start();
await run.phase('P0', run.origin, RENEWALS_PER_PHASE);
const pool = new Set<string>(FIRST_SERVERS);
const setPool = (): Promise<void> => run.balancer.setUpstreams([...pool].map((s) => ({ ip: run.ip(s), port: 6443 })));
for (const [i, added] of NEW.entries()) {
  const removed = FIRST_SERVERS[i] as string;
  run.progress(`P${i + 1}: adding ${added} v${v.kubeNew} at ${run.ip(added)}, then removing ${removed}`);
  // Cluster API: the new machine first; its apiserver starts, then its kubelet registers the Node.
  const ready = await run.startServer(added, v.kubeNew);
  await registerNode(run, added, run.lab.apiServerUrl(added));
  for (const g of GATEWAYS)
    await run.until(`${g} admitted ${added}`, ADMIT_LIMIT_MS, async () =>
      (await membership(g)).some((m) => m.server === gatewayName(added) && m.what === 'admitted' && m.atMs >= ready) ? true : undefined,
    );
  pool.add(added);
  await setPool();
  // Then the old machine goes: out of the balancer, its apiserver stopped, its Node deleted.
  pool.delete(removed);
  await setPool();
  const { sigterm, gone } = await run.stopServer(removed);
  const r = await run.api(run.lab.apiServerUrl(added), 'DELETE', `/api/v1/nodes/${removed}`);
  must(r.status === 200, `deleting Node ${removed}: ${r.status}`);
  run.changes.push({ stopped: removed, sigterm, gone, started: added, ready });
  await run.phase(`P${i + 1}`, Date.now(), RENEWALS_PER_PHASE);
}
// A member that left every source drains for membership.drainTimeout (10 s in the lab's gateways) before it is removed.
for (const g of GATEWAYS)
  await run.until(`${g} removed ${FIRST_SERVERS.join(', ')}`, DRAIN_LIMIT_MS, async () => {
    const seen = await membership(g);
    return FIRST_SERVERS.every((s) => seen.some((m) => m.server === s && m.what === 'removed')) ? true : undefined;
  });

const outcome = await finish(run, {
  id: 'node-replace-upgrade',
  title: 'Replace-style rolling upgrade with real nodes: skewgate beside a TCP round robin that follows the machines',
  method: `etcd and kube-apiservers kas-1..3 v${v.kubeOld}; in P1–P3, as Cluster API orders it, a v${v.kubeNew} apiserver on a new address (kas-4..6) is started and its control-plane Node registered (the lab's control-plane machines have no kubelet: the test writes the Node with the machine's InternalIP), and once both skewgate gateways have admitted it (their own log line) and the round robin's pool has it, the oldest machine leaves: out of the round robin's pool, its apiserver stopped, its Node deleted. Both skewgate gateways start with kas-1..3 as their seed and \`membership.sources: [nodes]\`; no config edit, no restart. kube-controller-manager (default controllers: NotReady after ${LEASE_SECONDS} s without a Lease renewal) and kube-scheduler v${v.kubeOld} run through the control plane's gateway. Two nodes, each a kubelet, kube-proxy v${v.kubeOld} and containerd in a network namespace of its own, with one pod: \`${run.nodeName('skewgate')}\` through the node's Envoy + skewgate gateway, \`${run.nodeName('round-robin')}\` through a TCP round robin (Envoy tcp_proxy, TLS passed through, its pool in a file Envoy watches, rewritten as the machines change). Each phase lasts ${RENEWALS_PER_PHASE} renewals after the change.`,
});

await t.test('the node through skewgate over the whole replace-style upgrade', async (t) => {
  t.comment(outcome.md);
  judge(t, run, outcome, RENEWALS_PER_PHASE * (NEW.length + 1));
  for (const g of GATEWAYS) {
    const seen = await membership(g);
    for (const s of NEW)
      t.ok(
        seen.some((m) => m.server === gatewayName(s) && m.what === 'admitted'),
        `${g}: ${gatewayName(s)} admitted`,
      );
    for (const s of FIRST_SERVERS)
      t.ok(
        seen.some((m) => m.server === s && m.what === 'removed'),
        `${g}: ${s} drained, then removed`,
      );
    const clusters = await (await fetch(`${g === 'gateway' ? run.gw.envoyAdminUrl : run.nodeGw.envoyAdminUrl}/clusters`)).text();
    const members = [...new Set([...clusters.matchAll(/^([a-z0-9-]+)::/gm)].map((m) => m[1] as string))]
      .filter((n) => n !== 'default' && n !== 'skewgate-extproc')
      .sort();
    t.same(members, NEW.map(gatewayName).sort(), `${g}: Envoy's apiserver clusters are the learnt members; the seed is gone`);
  }
  t.same(
    (await run.balancer.hosts()).sort(),
    NEW.map((s) => `${run.ip(s)}:6443`).sort(),
    "the round robin's pool followed the machines too (its row is the same upgrade)",
  );
});

async function registerNode(r: NodeUpgradeRun, name: string, via: string): Promise<void> {
  const res = await r.api(via, 'POST', '/api/v1/nodes', controlPlaneNode(name, r.ip(name)));
  must(res.status === 201, `registering Node ${name}: ${res.status} ${JSON.stringify(res.json).slice(0, 200)}`);
}

/** A gateway's membership changes from its skewgate's log (this run's only: the file outlives one). */
async function membership(gateway: string): Promise<{ atMs: number; server: string; what: string }[]> {
  const out: { atMs: number; server: string; what: string }[] = [];
  for (const o of skewgateLogRecords(await readFile(run.lab.logFile(`skewgate-${gateway}`), 'utf8'))) {
    const what = typeof o['msg'] === 'string' ? MEMBERSHIP_LINES[o['msg']] : undefined;
    const atMs = typeof o['time'] === 'string' ? Date.parse(o['time']) : NaN;
    if (what !== undefined && typeof o['server'] === 'string' && atMs >= run.origin) out.push({ atMs, server: o['server'], what });
  }
  return out;
}
