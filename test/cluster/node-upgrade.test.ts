// A rolling upgrade of three real kube-apiservers (KUBE_OLD → KUBE_NEW, one at a time on the same
// address) with two real nodes running throughout (issue 26, item 4): node-sg reaches the control
// plane through Envoy + skewgate, node-rr through a plain TCP balancer (round robin, TLS passed
// through: kubeadm's HAProxy recipe, harness/lab/tcp-balancer.ts) — the same kubelet, kube-proxy,
// containerd and pod on each, side by side. kube-controller-manager keeps its defaults (a node
// NotReady after 40 s without a Lease renewal) and kube-scheduler runs, both through the skewgate
// gateway. In every phase: both Nodes' Ready condition and taints, and kubectl's logs, exec,
// attach and port-forward (WebSocket and SPDY) to each node's pod through that node's front; an
// open `exec -i` per front the whole run, reopened when one ends; an in-cluster kubectl Job on the
// skewgate node listing what only KUBE_NEW serves through the `kubernetes` Service (the node's
// gateway publishes itself). Phases end on counts of Lease renewals stored after the phase's
// apiserver was ready, never on a clock. The skewgate node's traffic is written as a mix
// (bench/node-traffic-mix.json). Asserted for skewgate (the round-robin node is measured beside
// it, not judged): Ready in every phase and never flipped; every Lease renewal within the 40 s
// lease (distribution reported); the pod never restarted, evicted or moved; no 404 to the
// kubelet; every streaming check passes; every in-cluster list 200 once an apiserver serves the resource; every open session that
// ended, ended after its own apiserver's SIGTERM.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent } from 'undici';
import { readAuditEvents } from '../../harness/lab/audit-events.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { Lab } from '../../harness/lab/lab.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { KUBE_PROXY_USER } from '../../harness/lab/pki.js';
import { TcpBalancer } from '../../harness/lab/tcp-balancer.js';
import { LabNode, nodeUser } from '../../harness/node/node.js';
import { packageRoot } from '../../src/util/package-root.js';
import { render, writeClusterPart } from '../../bench/cluster-results.js';
import { HeldExecs, type HeldSession } from '../helpers/held-sessions.js';
import { allowList, runInClusterJob, type JobRun } from '../helpers/in-cluster-job.js';
import { labNodeOptions, requireNodeParts } from '../../harness/node/lab-node.js';
import { requireLabParts } from '../helpers/lab-parts.js';
import { lagSummary, leaseRenewals, type LagSummary } from '../helpers/lease-renewals.js';
import {
  LEASE_SECONDS,
  NODE_STATUS_MS,
  RENEW_MS,
  labApi,
  poller,
  startNodeControlPlane,
  waitNamespaceReady,
  workloadImage,
} from '../helpers/node-lab.js';
import { TICK_MS, echoPod } from '../helpers/node-workload.js';
import { PROTOCOLS, streamChecks, type StreamCheck, type StreamTarget } from '../helpers/stream-checks.js';
import { mixSummary, trafficMix, writeTrafficMix } from '../helpers/traffic-mix.js';
import { nodeArmTable } from '../helpers/node-upgrade-table.js';
import { nodeView, podView, type NodeView, type PodView } from '../helpers/node-views.js';
import { waitMs } from '../helpers/waits.js';

t.setTimeout(20 * 60_000);
const slot = claimLabSlot();
const { versions: v, kubectl } = requireLabParts();
const parts = { ...requireNodeParts(), workloadImage: await workloadImage(), kubectlImage: `registry.k8s.io/kubectl:v${v.kubeNew}` };
const SERVERS = ['kas-1', 'kas-2', 'kas-3'] as const;
const NS = 'node-upgrade';
/** Lease renewals each node must have stored after a phase's apiserver was ready before the phase ends. */
const RENEWALS_PER_PHASE = 2;
/** What only KUBE_NEW serves: the in-cluster client lists it in every phase. */
const SKEWED = { group: 'admissionregistration.k8s.io', version: 'v1', resource: 'mutatingadmissionpolicies' };
/** P0, the steady window of the traffic mix, lasts six renewals (about a minute). */
const RENEWALS_STEADY = 6;
const ARMS = ['skewgate', 'round-robin'] as const;
type Arm = (typeof ARMS)[number];
const JUDGED: Arm = 'skewgate';
// Held open through the whole run: `exec -i`, not `logs -f` — an open one holds its stopping
// apiserver until the SIGKILL (node-sessions measures it, docs/design.md states it), which would
// add 30 s to each phase here and tell nothing more.

const started = performance.now();
const progress = (line: string): void => t.comment(`[node-upgrade +${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
const labDir = join(packageRoot(), '.cache', 'lab-node-upgrade');
await (await Lab.open({ dir: labDir, addresses: slot })).down({ kill: true });
const lab = await Lab.open({ dir: labDir, killOnExit: true, addresses: slot, log: progress });
const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
const api = labApi(lab, agent);
const nodes = new Map<Arm, LabNode>();
const until = poller(async () => (await Promise.all([...nodes.values()].map((n) => n.logTails(15)))).join('\n'));
const balancer = new TcpBalancer({
  name: 'node-balancer',
  address: slot.alias(2),
  port: 6443,
  upstreams: SERVERS.map((s, i) => ({ ip: slot.loopback(i + 1), port: 6443 })),
  dir: join(lab.dir, 'tcp-balancer'),
  log: progress,
  killOnExit: true,
});
// The kubectl exec sessions held open (the target is read when one opens, after the fronts exist).
const held = new HeldExecs<Arm>((arm) => front[arm].target);
t.teardown(async () => {
  await held.stopAll();
  for (const n of nodes.values()) await n.down().catch((err: Error) => progress(`node down: ${err.message}`));
  await balancer.stop().catch(() => undefined);
  await lab.down({ kill: true }).catch((err: Error) => progress(`lab down: ${err.message}`));
  await agent.close();
  slot.release();
});

interface Restart {
  readonly server: string;
  readonly sigterm: number;
  readonly gone: number;
  readonly ready: number;
}
/** Set-up before the claims: a failure throws (the file fails) with what went wrong. */
function must(ok: boolean, problem: string): void {
  if (!ok) throw new Error(problem);
}
// With the ServiceAccount admission plugin (kube-controller-manager runs): pods get their tokens.
const spec = (name: string, version: string): ApiServerSpec => ({
  name,
  version,
  ip: slot.loopback(Number(name.slice(-1))),
  port: 6443,
  serviceAccountAdmission: true,
});
const nodeName = (arm: Arm): string => `node-${arm === 'skewgate' ? 'sg' : 'rr'}-${slot.slot}`;
const podName = (arm: Arm): string => `echo-${arm === 'skewgate' ? 'sg' : 'rr'}`;

const viewNode = (arm: Arm): Promise<NodeView> => nodeView(api, gw.url, nodeName(arm));
const viewPod = (arm: Arm): Promise<PodView> => podView(api, gw.url, NS, podName(arm));

// ---- the lab ----
await lab.startEtcd();
await Promise.all(SERVERS.map((s) => lab.startApiServer(spec(s, v.kubeOld))));
const { gw, nodeGw } = await startNodeControlPlane(lab, slot, v);
await balancer.start();
const front: Record<Arm, { readonly url: string; readonly target: StreamTarget }> = {
  skewgate: { url: nodeGw.url, target: target('skewgate') },
  'round-robin': { url: balancer.url, target: target('round-robin') },
};
function target(arm: Arm): StreamTarget {
  // kubectl reaches the pod as the node's own clients reach the control plane: skewgate's gateway, or the balancer.
  const base = { kubectl, kubeconfig: gw.kubeconfigFile, context: 'admin-token', namespace: NS, pod: podName(arm) };
  return arm === 'skewgate' ? base : { ...base, server: { url: balancer.url, tlsServerName: 'kubernetes' } };
}
for (const [i, arm] of ARMS.entries()) {
  const options = {
    ...labNodeOptions(lab, parts, {
      addresses: slot,
      index: i,
      name: nodeName(arm),
      images: [parts.pauseImage, parts.workloadImage, ...(arm === 'skewgate' ? [parts.kubectlImage] : [])],
      log: progress,
    }),
    server: front[arm].url,
  };
  await new LabNode(options).down();
  const node = new LabNode({ ...options, killOnExit: true });
  nodes.set(arm, node);
  await node.start();
}
for (const arm of ARMS)
  await until(`${nodeName(arm)} Ready`, waitMs(NODE_STATUS_MS), async () => ((await viewNode(arm)).ready === 'True' ? true : undefined));
must((await api(gw.url, 'POST', '/api/v1/namespaces', { metadata: { name: NS } })).status === 201, `namespace ${NS} not created`);
await waitNamespaceReady(api, gw.url, until, NS);
must(await allowList(api, gw.url, NS, SKEWED), `RBAC for ${NS}:default not created`);
for (const arm of ARMS) {
  const r = await api(
    gw.url,
    'POST',
    `/api/v1/namespaces/${NS}/pods`,
    echoPod({ name: podName(arm), namespace: NS, image: parts.workloadImage, nodeName: nodeName(arm) }),
  );
  must(r.status === 201, `pod ${podName(arm)} not created: ${r.status} ${JSON.stringify(r.json)}`);
}
for (const arm of ARMS)
  await until(`${podName(arm)} ticking`, 120_000, async () => {
    const r = await api(gw.url, 'GET', `/api/v1/namespaces/${NS}/pods/${podName(arm)}/log?tailLines=1`);
    return r.status === 200 && String(r.json).startsWith('tick ') ? true : undefined;
  });
// Registration ends with the node's Lease created (the kubelet's GETs of it answer 404 until then):
// from here on, a 404 to the kubelet is not one of registration's own.
for (const arm of ARMS)
  await until(`${nodeName(arm)}'s Lease`, waitMs(RENEW_MS), async () =>
    (await api(gw.url, 'GET', `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${nodeName(arm)}`)).status === 200
      ? true
      : undefined,
  );
const first = new Map<Arm, { node: NodeView; pod: PodView }>();
for (const arm of ARMS) first.set(arm, { node: await viewNode(arm), pod: await viewPod(arm) });
progress(`both nodes Ready, their pods running: ${ARMS.map((a) => `${nodeName(a)} through ${front[a].url}`).join(', ')}`);

// ---- the phases ----
const origin = Date.now();
const restarts: Restart[] = [];
const rows: { phase: string; arm: Arm; node: NodeView; checks: StreamCheck[] }[] = [];
/** Per phase: the in-cluster kubectl Job on the skewgate node (through the published gateway). */
const inCluster: { phase: string; run: JobRun }[] = [];
async function phase(name: string, readyAt: number, renewals: number): Promise<void> {
  for (const arm of ARMS) {
    const checks: StreamCheck[] = [];
    for (const proto of PROTOCOLS)
      checks.push(...(await streamChecks(front[arm].target, proto, `${arm}-${name}-${proto.verb}`, waitMs(TICK_MS))));
    rows.push({ phase: name, arm, node: await viewNode(arm), checks });
  }
  const job = { namespace: NS, name: `in-cluster-${name.toLowerCase()}`, nodeName: nodeName(JUDGED), image: parts.kubectlImage };
  inCluster.push({
    phase: name,
    run: await runInClusterJob(api, gw.url, { ...job, runs: 2, parallelism: 2, list: SKEWED }, until, 120_000),
  });
  held.tend();
  // The phase lasts until each node has stored `renewals` Lease renewals since its apiserver was ready.
  await until(`${name}: ${renewals} Lease renewals of each node`, waitMs(renewals * RENEW_MS), async () => {
    const events = [...(await auditEvents()).values()].flat();
    return ARMS.every((arm) => leaseRenewals(events, nodeName(arm), readyAt).renewals.length >= renewals) ? true : undefined;
  });
  progress(
    `${name}: done (${rows
      .filter((r) => r.phase === name)
      .map((r) => `${r.arm} Ready=${r.node.ready}, ${r.checks.filter((c) => c.ok).length}/${r.checks.length} streaming checks`)
      .join('; ')})`,
  );
}
const auditEvents = (): ReturnType<typeof readAuditEvents> =>
  readAuditEvents(SERVERS.map((s) => ({ server: s, file: lab.auditLogFile(s) })));

for (const arm of ARMS) held.open(arm);
await Promise.all(held.all.map((s) => s.session.waitFor(/"Response" verb="GET" url="[^"]+\/exec\?/, waitMs(TICK_MS))));
await phase('P0', origin, RENEWALS_STEADY);
for (const [i, name] of SERVERS.entries()) {
  progress(`P${i + 1}: replacing ${name} v${v.kubeOld} → v${v.kubeNew}`);
  const sigterm = Date.now();
  await lab.stopApiServer(name);
  const gone = Date.now();
  await lab.startApiServer(spec(name, v.kubeNew));
  restarts.push({ server: name, sigterm, gone, ready: Date.now() });
  await phase(`P${i + 1}`, Date.now(), RENEWALS_PER_PHASE);
}
held.tend();
const end = Date.now();

// ---- what happened ----
const events = [...(await auditEvents()).values()].flat();
const servedBy = (s: HeldSession<Arm>): string | undefined => held.servedBy(events, s);
const lags = new Map<Arm, LagSummary>();
for (const arm of ARMS) {
  const r = leaseRenewals(events, nodeName(arm), origin);
  lags.set(arm, lagSummary(r.renewals, r.failed, end));
}
const last = new Map<Arm, { node: NodeView; pod: PodView }>();
for (const arm of ARMS) last.set(arm, { node: await viewNode(arm), pod: await viewPod(arm) });
const kubelet404 = (arm: Arm): string[] =>
  events
    .filter(
      (e) =>
        e.event.stage === 'ResponseComplete' &&
        e.event.user.username === nodeUser(nodeName(arm)) &&
        e.event.responseStatus?.code === 404 &&
        Date.parse(e.event.stageTimestamp ?? '') >= origin,
    )
    .map((e) => `${e.server} ${e.event.verb ?? ''} ${e.event.requestURI ?? ''}`);
const envoy404 = (await readFile(lab.logFile('envoy-node-gateway'), 'utf8'))
  .split('\n')
  .filter((l) => l.startsWith('{') && l.includes('"status":404'))
  .map((l) => JSON.parse(l) as { start: string; method: string; path: string })
  .filter((x) => Date.parse(x.start) >= origin);
const sessionEnds = held.ended.map((e) => {
  const server = servedBy(e.held);
  // Its own apiserver's stop: that server's SIGTERM while the session was open, before it ended.
  const own = restarts.find((r) => r.server === server && r.sigterm >= e.held.openedAt && r.sigterm <= e.at);
  return { ...e, server, own };
});
const survived = (arm: Arm): number =>
  held.all
    .filter((s) => s.arm === arm)
    .reduce(
      (n, s) =>
        n + restarts.filter((r) => r.server !== servedBy(s) && r.sigterm > s.openedAt && r.ready < (s.session.done?.at ?? end)).length,
      0,
    );

const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const phases = ['P0', ...SERVERS.map((_, i) => `P${i + 1}`)];
// The skewgate node's own traffic (issue 26, item 6): its kubelet and its kube-proxy (the address
// the gateway forwarded tells it from the other node's, which shares the identity), steady and
// through the upgrade, as bench/node-traffic-mix.json for the benchmarks to replay and scale.
const sgIp = nodes.get('skewgate')?.spec.ip;
const mix = trafficMix(
  events,
  [
    { name: 'kubelet', matches: (e) => e.user.username === nodeUser(nodeName('skewgate')) },
    { name: 'kube-proxy', matches: (e) => e.user.username === KUBE_PROXY_USER && e.sourceIPs?.[0] === sgIp },
  ],
  [
    { name: 'steady (P0)', fromMs: origin, toMs: restarts[0]?.sigterm ?? end },
    { name: 'upgrade (P1–P3: three apiserver restarts)', fromMs: restarts[0]?.sigterm ?? end, toMs: end },
  ],
);
await writeTrafficMix(join(packageRoot(), 'bench', 'node-traffic-mix.json'), {
  source: 'test/cluster/node-upgrade.test.ts',
  kubelet: v.kubeOld,
  kubeProxy: v.kubeOld,
  apiservers: `${v.kubeOld} → ${v.kubeNew}`,
  pods: 1,
  windows: mix,
});
const md = [
  `### Rolling upgrade with real nodes: skewgate beside a TCP round robin (test/cluster/node-upgrade.test.ts)`,
  '',
  `**Method.** etcd and kube-apiservers kas-1..3 (v${v.kubeOld}, replaced one at a time in place by v${v.kubeNew}: P1–P3), kube-controller-manager (default controllers: NotReady after ${LEASE_SECONDS} s without a Lease renewal) and kube-scheduler v${v.kubeOld} through Envoy + skewgate. Two nodes, each a kubelet, kube-proxy v${v.kubeOld} and containerd in a network namespace of its own, with one pod: \`${nodeName('skewgate')}\` reaches the control plane through Envoy + skewgate, \`${nodeName('round-robin')}\` through a TCP round robin (Envoy tcp_proxy, TLS passed through, connect check every 2 s: kubeadm's HAProxy recipe). In each phase, kubectl (v${v.kubeNew}) runs logs, exec, attach -i and port-forward over WebSocket and SPDY to each node's pod through that node's front; an \`exec -i\` per front stays open the whole run (reopened when it ends; not \`logs -f\`, which holds its stopping apiserver until the SIGKILL: see node-sessions). A phase lasts until each node has stored ${RENEWALS_PER_PHASE} Lease renewals after its apiserver was ready. Lease lags are the apiservers' own timestamps of consecutive renewals (audit logs), the last to the end of the run included.`,
  '',
  render(
    nodeArmTable(
      ARMS.map((arm) => {
        const f = first.get(arm);
        const z = last.get(arm);
        const checks = rows.filter((r) => r.arm === arm).flatMap((r) => r.checks);
        const ends = sessionEnds.filter((e) => e.held.arm === arm);
        return {
          label: arm === 'skewgate' ? 'Envoy + skewgate' : 'TCP round robin',
          readyByPhase: rows.filter((r) => r.arm === arm).map((r) => r.node.ready),
          flippedAt: f?.node.since === z?.node.since ? undefined : (z?.node.since ?? '?'),
          lag: lags.get(arm),
          podRestarts: z?.pod.restarts,
          podMovedOrEvicted: !(f?.pod.uid === z?.pod.uid && z?.pod.nodeName === nodeName(arm) && z?.pod.deleting === false),
          kubelet404: kubelet404(arm).length,
          checksOk: checks.filter((c) => c.ok).length,
          checks: checks.length,
          sessionsEnded: ends.length,
          sessionsEndedAtOwnStop: ends.filter((e) => e.own !== undefined).length,
          restartsSurvived: survived(arm),
        };
      }),
    ),
  ),
  '',
  `Sessions that ended: ${sessionEnds.map((e) => `${e.held.arm} exec -i on ${e.server ?? '?'}, ${e.own === undefined ? "not during its apiserver's stop" : `${sec(e.at - e.own.sigterm)} after its SIGTERM`}: exit ${e.code} \`${e.error}\``).join('; ') || 'none'}.`,
  '',
  `The skewgate node's traffic (bench/node-traffic-mix.json): ${mix.map((w) => `${w.name}, ${w.seconds} s: ${mixSummary(w, ['kubelet', 'kube-proxy'])}`).join('. ')}.`,
  '',
  `In-cluster client (a Job of two unmodified kubectl pods on \`${nodeName(JUDGED)}\`, in-cluster config, listing \`${SKEWED.resource}\` through the \`kubernetes\` Service, which the skewgate gateway publishes; the round-robin node's pods would use the same Service): ${inCluster.map((j) => `${j.phase} ${j.run.outcome === 'Complete' ? `Complete, ${j.run.answers.map((a) => a.status.split(' ')[0]).join('/')}` : `${j.run.outcome}: kubectl says the server has no such resource type (none serves it yet)`}`).join(', ')}.`,
  '',
  `Restarts: ${restarts.map((r) => `${r.server} gone ${sec(r.gone - r.sigterm)} after SIGTERM, ready ${sec(r.ready - r.sigterm)}`).join('; ')}. Longest Lease lag ended at ${ARMS.map((a) => `${a} +${sec((lags.get(a)?.maxEndedAt ?? origin) - origin)}`).join(', ')} (t from P0). Run time ${sec(end - origin)} from P0.`,
].join('\n');
await writeClusterPart('node-upgrade', md);

// ---- the claims ----
await t.test('the node through skewgate over the whole upgrade', async (t) => {
  t.comment(md);
  t.equal(
    rows.find((r) => r.phase === 'P0' && r.arm === 'round-robin')?.node.ready,
    'True',
    'the round-robin node ran too: Ready in P0 (its row is a real comparison)',
  );
  const arm = JUDGED;
  for (const p of phases) {
    const r = rows.find((x) => x.phase === p && x.arm === arm);
    t.equal(r?.node.ready, 'True', `${p}: ${nodeName(arm)} Ready`);
    t.same(r?.node.taints, [], `${p}: no taint on ${nodeName(arm)}`);
    for (const c of r?.checks ?? []) t.ok(c.ok, `${p}: ${c.what} through skewgate${c.ok ? '' : `: ${c.detail}`}`);
  }
  t.equal(last.get(arm)?.node.since, first.get(arm)?.node.since, `${nodeName(arm)}'s Ready condition never changed (lastTransitionTime)`);
  const lag = lags.get(arm);
  t.ok((lag?.renewals ?? 0) >= RENEWALS_PER_PHASE * phases.length, `${lag?.renewals ?? 0} Lease renewals stored over the run`);
  t.ok(
    (lag?.maxMs ?? Infinity) < LEASE_SECONDS * 1000,
    `every Lease renewal within the ${LEASE_SECONDS} s lease: longest lag ${sec(lag?.maxMs ?? 0)}`,
  );
  const f = first.get(arm)?.pod;
  const z = last.get(arm)?.pod;
  t.same(
    [z?.uid, z?.nodeName, z?.phase, z?.restarts, z?.deleting],
    [f?.uid, nodeName(arm), 'Running', 0, false],
    `pod ${podName(arm)}: the same pod, on its node, Running, never restarted, not evicted`,
  );
  const steady = mix[0];
  t.ok(
    steady?.rows.some((r) => r.client === 'kubelet' && r.verb === 'update' && r.resource === 'coordination.k8s.io/v1/leases'),
    "the traffic mix holds the kubelet's Lease renewals",
  );
  t.ok((steady?.watchesOpenAtEnd['kube-proxy'] ?? 0) > 0, `and kube-proxy's open watches (${steady?.watchesOpenAtEnd['kube-proxy'] ?? 0})`);
  for (const j of inCluster)
    if (j.phase === 'P0')
      // No apiserver serves it yet: kubectl's true answer is that the server has no such resource.
      t.ok(
        j.run.outcome === 'Failed' &&
          j.run.answers.every((a) => a.status.includes(`the server doesn't have a resource type "${SKEWED.resource}"`)),
        `P0 (none serves ${SKEWED.resource}): the in-cluster kubectl says the server has no such resource type`,
      );
    else
      t.same(
        [j.run.outcome, ...j.run.answers.map((a) => `${a.server}${a.path} ${a.status}`)],
        ['Complete', ...j.run.answers.map(() => `https://10.96.0.1:443/apis/${SKEWED.group}/${SKEWED.version}/${SKEWED.resource} 200 OK`)],
        `${j.phase}: the in-cluster kubectl Job listed ${SKEWED.resource} through the kubernetes Service, every pod 200`,
      );
  t.same(
    inCluster.map((j) => j.run.answers.length),
    phases.map(() => 2),
    'two in-cluster pods per phase',
  );
  t.same(kubelet404(arm), [], `no 404 to ${nodeUser(nodeName(arm))} (the apiservers' audit logs)`);
  t.same(
    envoy404.map((x) => `${x.method} ${x.path}`),
    [],
    "no 404 in the node gateway's access log (kubelet and kube-proxy)",
  );
  for (const e of sessionEnds.filter((x) => x.held.arm === arm))
    t.ok(
      e.own !== undefined,
      `exec -i ended ${e.own === undefined ? 'while its apiserver ran' : `${sec(e.at - e.own.sigterm)} after its apiserver ${e.server ?? ''}'s SIGTERM`} (exit ${e.code})`,
    );
  // Which apiserver a session lands on is the balancer's choice: how many other restarts one spanned is reported, not required (node-sessions proves it on purpose).
  t.comment(`open sessions through skewgate carried on over ${survived(arm)} restarts of another apiserver`);
});
