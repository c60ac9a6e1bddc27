// A whole control-plane upgrade with two real nodes running throughout (issue 26, item 4), shared by
// the in-place and the replace-style files: etcd and three KUBE_OLD apiservers, kube-controller-manager
// (its defaults: NotReady after 40 s without a Lease renewal) and kube-scheduler through the
// skewgate gateway; node-sg reaches the control plane through Envoy + skewgate, node-rr through a
// plain TCP balancer (round robin, TLS passed through: kubeadm's HAProxy recipe) — the same
// kubelet, kube-proxy, containerd and pod on each. In every phase: both Nodes' Ready condition,
// kubectl's logs, exec, attach and port-forward (WebSocket and SPDY) to each node's pod through
// that node's front, and an in-cluster kubectl Job on the skewgate node listing what only KUBE_NEW
// serves through the `kubernetes` Service (the node gateway publishes itself); an `exec -i` per
// front is held open the whole run, reopened when one ends. A phase ends on counts of Lease
// renewals stored after its change was complete, never on a clock. The style (how each phase
// changes the control plane) is the caller's; what happened is gathered in `finish()`.
import type { Test } from 'tap';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent } from 'undici';
import { readAuditEvents, type ServerAuditEvent } from '../../harness/lab/audit-events.js';
import type { LabAddresses } from '../../harness/lab/addresses.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { Lab, type GatewayInfo } from '../../harness/lab/lab.js';
import { claimLabSlot, type LabSlot } from '../../harness/lab/slots.js';
import { TcpBalancer } from '../../harness/lab/tcp-balancer.js';
import type { LabVersions } from '../../harness/lab/versions.js';
import { labNodeOptions, requireNodeParts } from '../../harness/node/lab-node.js';
import { LabNode } from '../../harness/node/node.js';
import { packageRoot } from '../../src/util/package-root.js';
import { HeldExecs } from './held-sessions.js';
import { allowList, runInClusterJob, type JobRun, type Listed } from './in-cluster-job.js';
import { requireLabParts } from './lab-parts.js';
import { leaseRenewals } from './lease-renewals.js';
import {
  NODE_STATUS_MS,
  RENEW_MS,
  labApi,
  poller,
  startNodeControlPlane,
  waitNamespaceReady,
  workloadImage,
  type NodeLab,
} from './node-lab.js';
import { TICK_MS, echoPod } from './node-workload.js';
import { nodeView, podView, type NodeView, type PodView } from './node-views.js';
import { PROTOCOLS, streamChecks, type StreamCheck, type StreamTarget } from './stream-checks.js';
import { waitMs } from './waits.js';

export const ARMS = ['skewgate', 'round-robin'] as const;
export type Arm = (typeof ARMS)[number];
/** The arm whose node is judged; the round-robin node is measured beside it. */
export const JUDGED: Arm = 'skewgate';
export const FIRST_SERVERS = ['kas-1', 'kas-2', 'kas-3'] as const;
/** What only KUBE_NEW serves: the in-cluster client lists it in every phase. */
export const SKEWED: Listed = { group: 'admissionregistration.k8s.io', version: 'v1', resource: 'mutatingadmissionpolicies' };

/** One phase's change: an apiserver stopped (SIGTERM to exit) and one ready (the same name in place, a new one when replacing). */
export interface Change {
  readonly stopped: string;
  readonly sigterm: number;
  readonly gone: number;
  readonly started: string;
  readonly ready: number;
}

export interface PhaseRow {
  readonly phase: string;
  readonly arm: Arm;
  readonly node: NodeView;
  readonly checks: readonly StreamCheck[];
}

export interface RunOptions {
  /** The lab's name: its run dir (.cache/lab-<name>) and the progress lines' prefix. */
  readonly name: string;
  readonly namespace: string;
  /** Where both gateways learn apiservers beyond the three they start with. */
  readonly membershipSources?: readonly 'nodes'[];
  /** Runs once the apiservers are up, before the gateways start (e.g. registering control-plane Nodes). */
  readonly beforeGateways?: (run: NodeUpgradeRun) => Promise<void>;
}

export const nodeName = (arm: Arm, slot: LabAddresses): string => `node-${arm === 'skewgate' ? 'sg' : 'rr'}-${slot.slot}`;
export const podName = (arm: Arm): string => `echo-${arm === 'skewgate' ? 'sg' : 'rr'}`;

export class NodeUpgradeRun {
  readonly parts = requireLabParts();
  readonly versions: LabVersions = this.parts.versions;
  readonly api: NodeLab['api'];
  readonly until: NodeLab['until'];
  readonly balancer: TcpBalancer;
  readonly nodes = new Map<Arm, LabNode>();
  /** The kubectl exec sessions held open (the target is read when one opens, after the fronts exist). */
  readonly held = new HeldExecs<Arm>((arm) => this.target(arm));
  /** Every apiserver started in the run (their audit logs are read at the end). */
  readonly servers = new Set<string>();
  readonly changes: Change[] = [];
  readonly rows: PhaseRow[] = [];
  readonly inCluster: { phase: string; run: JobRun }[] = [];
  readonly first = new Map<Arm, { node: NodeView; pod: PodView }>();
  /** When P0 began (the node's Lease renewals and 404s are counted from here). */
  origin = 0;
  private gateways: { gw: GatewayInfo; nodeGw: GatewayInfo } | undefined;

  private constructor(
    readonly o: RunOptions,
    readonly slot: LabSlot,
    readonly lab: Lab,
    private readonly agent: Agent,
    readonly progress: (line: string) => void,
  ) {
    this.api = labApi(lab, agent);
    this.until = poller(async () => (await Promise.all([...this.nodes.values()].map((n) => n.logTails(15)))).join('\n'));
    this.balancer = new TcpBalancer({
      name: 'node-balancer',
      address: slot.alias(2),
      port: 6443,
      upstreams: FIRST_SERVERS.map((s) => ({ ip: this.ip(s), port: 6443 })),
      dir: join(lab.dir, 'tcp-balancer'),
      log: progress,
      killOnExit: true,
    });
  }

  /** Claims a slot, opens the lab (stopping what a crashed run left) and registers the teardown. */
  static async open(t: Test, o: RunOptions): Promise<NodeUpgradeRun> {
    const started = performance.now();
    const progress = (line: string): void => t.comment(`[${o.name} +${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
    const slot = claimLabSlot();
    const dir = join(packageRoot(), '.cache', `lab-${o.name}`);
    await (await Lab.open({ dir, addresses: slot })).down({ kill: true });
    const lab = await Lab.open({ dir, killOnExit: true, addresses: slot, log: progress });
    const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
    const run = new NodeUpgradeRun(o, slot, lab, agent, progress);
    t.teardown(() => run.close());
    return run;
  }

  get gw(): GatewayInfo {
    if (this.gateways === undefined) throw new Error('the gateways have not started');
    return this.gateways.gw;
  }
  get nodeGw(): GatewayInfo {
    if (this.gateways === undefined) throw new Error('the gateways have not started');
    return this.gateways.nodeGw;
  }
  /** The address of apiserver kas-N: the slot's Nth loopback address. */
  ip(server: string): string {
    return this.slot.loopback(Number(server.slice(4)));
  }
  spec(name: string, version: string): ApiServerSpec {
    // With the ServiceAccount admission plugin (kube-controller-manager runs): pods get their tokens.
    return { name, version, ip: this.ip(name), port: 6443, serviceAccountAdmission: true };
  }
  nodeName(arm: Arm): string {
    return nodeName(arm, this.slot);
  }
  target(arm: Arm): StreamTarget {
    // kubectl reaches the pod as the node's own clients reach the control plane: skewgate's node gateway, or the balancer.
    const base = {
      kubectl: this.parts.kubectl,
      kubeconfig: this.gw.kubeconfigFile,
      context: 'admin-token',
      namespace: this.o.namespace,
      pod: podName(arm),
    };
    return arm === 'skewgate' ? base : { ...base, server: { url: this.balancer.url, tlsServerName: 'kubernetes' } };
  }
  front(arm: Arm): string {
    return arm === 'skewgate' ? this.nodeGw.url : this.balancer.url;
  }
  viewNode(arm: Arm): Promise<NodeView> {
    return nodeView(this.api, this.gw.url, this.nodeName(arm));
  }
  viewPod(arm: Arm): Promise<PodView> {
    return podView(this.api, this.gw.url, this.o.namespace, podName(arm));
  }
  /** Starts an apiserver; resolves to when it was ready. */
  async startServer(name: string, version: string): Promise<number> {
    this.servers.add(name);
    await this.lab.startApiServer(this.spec(name, version));
    return Date.now();
  }
  /** Stops an apiserver (SIGTERM, then SIGKILL after the lab's grace). */
  async stopServer(name: string): Promise<{ sigterm: number; gone: number }> {
    const sigterm = Date.now();
    await this.lab.stopApiServer(name);
    return { sigterm, gone: Date.now() };
  }
  auditEvents(): Promise<ServerAuditEvent[]> {
    return readAuditEvents([...this.servers].map((s) => ({ server: s, file: this.lab.auditLogFile(s) }))).then((m) =>
      [...m.values()].flat(),
    );
  }

  /** The control plane, both nodes Ready, the namespace and both pods running, both Leases stored, the held sessions open. */
  async start(): Promise<void> {
    const { lab, slot, versions: v } = this;
    const parts = { ...requireNodeParts(), workloadImage: await workloadImage(), kubectlImage: `registry.k8s.io/kubectl:v${v.kubeNew}` };
    await lab.startEtcd();
    await Promise.all(FIRST_SERVERS.map((s) => this.startServer(s, v.kubeOld)));
    await this.o.beforeGateways?.(this);
    this.gateways = await startNodeControlPlane(lab, slot, v, this.o.membershipSources);
    await this.balancer.start();
    for (const [i, arm] of ARMS.entries()) {
      const options = {
        ...labNodeOptions(lab, parts, {
          addresses: slot,
          index: i,
          name: this.nodeName(arm),
          images: [parts.pauseImage, parts.workloadImage, ...(arm === JUDGED ? [parts.kubectlImage] : [])],
          log: this.progress,
        }),
        server: this.front(arm),
      };
      await new LabNode(options).down();
      const node = new LabNode({ ...options, killOnExit: true });
      this.nodes.set(arm, node);
      await node.start();
    }
    for (const arm of ARMS)
      await this.until(`${this.nodeName(arm)} Ready`, waitMs(NODE_STATUS_MS), async () =>
        (await this.viewNode(arm)).ready === 'True' ? true : undefined,
      );
    const ns = this.o.namespace;
    must(
      (await this.api(this.gw.url, 'POST', '/api/v1/namespaces', { metadata: { name: ns } })).status === 201,
      `namespace ${ns} not created`,
    );
    await waitNamespaceReady(this.api, this.gw.url, this.until, ns);
    must(await allowList(this.api, this.gw.url, ns, SKEWED), `RBAC for ${ns}:default not created`);
    for (const arm of ARMS) {
      const pod = echoPod({ name: podName(arm), namespace: ns, image: parts.workloadImage, nodeName: this.nodeName(arm) });
      const r = await this.api(this.gw.url, 'POST', `/api/v1/namespaces/${ns}/pods`, pod);
      must(r.status === 201, `pod ${podName(arm)} not created: ${r.status} ${JSON.stringify(r.json)}`);
    }
    for (const arm of ARMS)
      await this.until(`${podName(arm)} ticking`, 120_000, async () => {
        const r = await this.api(this.gw.url, 'GET', `/api/v1/namespaces/${ns}/pods/${podName(arm)}/log?tailLines=1`);
        return r.status === 200 && String(r.json).startsWith('tick ') ? true : undefined;
      });
    // Registration ends with the node's Lease created (the kubelet's GETs of it answer 404 until
    // then): from here on, a 404 to the kubelet is not one of registration's own.
    for (const arm of ARMS)
      await this.until(`${this.nodeName(arm)}'s Lease`, waitMs(RENEW_MS), async () =>
        (await this.api(this.gw.url, 'GET', `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${this.nodeName(arm)}`))
          .status === 200
          ? true
          : undefined,
      );
    for (const arm of ARMS) this.first.set(arm, { node: await this.viewNode(arm), pod: await this.viewPod(arm) });
    this.progress(`both nodes Ready, their pods running: ${ARMS.map((a) => `${this.nodeName(a)} through ${this.front(a)}`).join(', ')}`);
    this.origin = Date.now();
    for (const arm of ARMS) this.held.open(arm);
    await Promise.all(this.held.all.map((s) => s.session.waitFor(/"Response" verb="GET" url="[^"]+\/exec\?/, waitMs(TICK_MS))));
  }

  /** A phase's checks, then until each node has stored `renewals` Lease renewals since `readyAt`. */
  async phase(name: string, readyAt: number, renewals: number): Promise<void> {
    for (const arm of ARMS) {
      const checks: StreamCheck[] = [];
      for (const proto of PROTOCOLS)
        checks.push(...(await streamChecks(this.target(arm), proto, `${arm}-${name}-${proto.verb}`, waitMs(TICK_MS))));
      this.rows.push({ phase: name, arm, node: await this.viewNode(arm), checks });
    }
    const job = {
      namespace: this.o.namespace,
      name: `in-cluster-${name.toLowerCase()}`,
      nodeName: this.nodeName(JUDGED),
      image: `registry.k8s.io/kubectl:v${this.versions.kubeNew}`,
    };
    this.inCluster.push({
      phase: name,
      run: await runInClusterJob(this.api, this.gw.url, { ...job, runs: 2, parallelism: 2, list: SKEWED }, this.until, 120_000),
    });
    this.held.tend();
    await this.until(`${name}: ${renewals} Lease renewals of each node`, waitMs(renewals * RENEW_MS), async () => {
      const events = await this.auditEvents();
      return ARMS.every((arm) => leaseRenewals(events, this.nodeName(arm), readyAt).renewals.length >= renewals) ? true : undefined;
    });
    this.progress(
      `${name}: done (${this.rows
        .filter((r) => r.phase === name)
        .map((r) => `${r.arm} Ready=${r.node.ready}, ${r.checks.filter((c) => c.ok).length}/${r.checks.length} streaming checks`)
        .join('; ')})`,
    );
  }

  async close(): Promise<void> {
    await this.held.stopAll();
    for (const n of this.nodes.values()) await n.down().catch((err: Error) => this.progress(`node down: ${err.message}`));
    await this.balancer.stop().catch(() => undefined);
    await this.lab.down({ kill: true }).catch((err: Error) => this.progress(`lab down: ${err.message}`));
    await this.agent.close();
    this.slot.release();
  }
}

/** Set-up before the claims: a failure throws (the file fails) with what went wrong. */
export function must(ok: boolean, problem: string): void {
  if (!ok) throw new Error(problem);
}
