// The static-pod recipe (deploy/static-pods/) run as an operator runs it, by a real kubelet (issue
// 26, item 3a): on a node `cp-<slot>` — containerd, kubelet and kube-proxy in a network namespace of
// their own — the files the README lists are placed where it says (under the node's own root
// folder: the lab's nodes share this machine's filesystem), skewgate.yaml changed only where the
// README says (the apiservers' names and addresses; the collector block deleted, as it says when
// there is none), skewgate-gateway.yaml untouched but for its hostPaths' root, and the images
// imported into the node's containerd as the deploy README does (`docker save | ctr images
// import`). The node's own kubelet and kube-proxy talk to the control plane only through that
// gateway (https://<node IP>:16443), as the recipe intends. Asserted: the kubelet runs the pod
// before any apiserver knows the node (the init container renders Envoy's bootstrap, both
// containers start and pass their probes); the Node registers through it and turns Ready; the
// mirror pod shows the init container done and both containers ready, never restarted; the
// kubelet's Lease renewals pass through that Envoy (its access log, the container's log) as
// system:node:<name> (the audit logs); kube-proxy syncs through it; skewgate writes the xDS
// folder on the node. Then SIGKILL of its skewgate, then its Envoy (item 5: what the kubelet sees),
// and the Helm chart installed through that gateway onto the node (item 3b,
// suites/helm-chart-on-node.ts): kube-controller-manager (its default set) and kube-scheduler run
// beside kas-1, as on a kubeadm control-plane node. Fails, never skips, when a part is missing.
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent } from 'undici';
import { parse, stringify } from 'yaml';
import { readAuditEvents } from '../../harness/lab/audit-events.js';
import { certKubeconfig } from '../../harness/lab/kubeconfig.js';
import { Lab } from '../../harness/lab/lab.js';
import { KUBE_PROXY_USER } from '../../harness/lab/pki.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { LabNode, NODES_GROUP, nodeUser } from '../../harness/node/node.js';
import { packageRoot } from '../../src/util/package-root.js';
import { requireHelm } from '../helpers/helm.js';
import { labNodeOptions, requireNodeParts } from '../../harness/node/lab-node.js';
import { requireLabParts } from '../helpers/lab-parts.js';
import { LEASE_SECONDS, NODE_STATUS_MS, RENEW_MS, labApi, poller } from '../helpers/node-lab.js';
import { lagSummary, leaseRenewals } from '../helpers/lease-renewals.js';
import { installStaticPodGateway } from '../helpers/static-pod-install.js';
import { waitMs } from '../helpers/waits.js';
import { writeClusterPart } from '../../bench/cluster-results.js';
import { helmChartOnNode } from './suites/helm-chart-on-node.js';

const run = promisify(execFile);
t.setTimeout(12 * 60_000);
const slot = claimLabSlot();
const { versions: v, kubectl } = requireLabParts();
const parts = requireNodeParts();
const helm = requireHelm();
const root = packageRoot();
const RECIPE = join(root, 'deploy', 'static-pods');
const version = (JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const NODE = `cp-${slot.slot}`;
const POD = `skewgate-gateway-${NODE}`;
const GATEWAY_PORT = 16443;

interface Container {
  name: string;
  image: string;
}
interface PodManifest {
  spec: { initContainers: Container[]; containers: Container[]; volumes: { name: string; hostPath?: { path: string } }[] };
}
const manifest = parse(await readFile(join(RECIPE, 'skewgate-gateway.yaml'), 'utf8')) as PodManifest;
const images = [...new Set([...manifest.spec.initContainers, ...manifest.spec.containers].map((c) => c.image))];
const skewgateImage = `skewgate:${version}`;
t.ok(images.includes(skewgateImage), `the recipe runs ${skewgateImage} (package.json's version)`);

const started = performance.now();
const progress = (line: string): void => t.comment(`[static-pod-gateway +${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
// The image as deploy/README.md builds it (Docker's layer cache makes a repeat quick).
progress(`docker build -t ${skewgateImage} .`);
await run('docker', ['build', '-q', '-t', skewgateImage, root], {
  env: { ...process.env, DOCKER_BUILDKIT: '0' },
  maxBuffer: 64 * 1024 * 1024,
});
for (const image of images)
  await run('docker', ['image', 'inspect', image]).catch(() => {
    throw new Error(`image ${image} is not in the local Docker engine: run scripts/demo-images.sh`);
  });

const labDir = join(root, '.cache', 'lab-static-pod-gateway');
await (await Lab.open({ dir: labDir, addresses: slot })).down({ kill: true });
const lab = await Lab.open({ dir: labDir, killOnExit: true, addresses: slot, log: progress });
const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
const api = labApi(lab, agent);
let node: LabNode | undefined;
const until = poller(async () => (await node?.logTails(25)) ?? '');
t.teardown(async () => {
  await node?.down().catch((err: Error) => progress(`node down: ${err.message}`));
  await lab.down({ kill: true }).catch((err: Error) => progress(`lab down: ${err.message}`));
  await agent.close();
  slot.release();
});

// Apiservers on alias addresses: the node's network namespace (and its pods) reach them there, as
// a control-plane node reaches its peers' advertise addresses. The ServiceAccount admission plugin
// as kubeadm runs it: the chart's pods get their tokens.
const servers = [
  { name: 'kas-1', version: v.kubeOld, ip: slot.alias(1), port: 6443, placement: 'alias' as const, serviceAccountAdmission: true },
  { name: 'kas-2', version: v.kubeOld, ip: slot.alias(2), port: 6443, placement: 'alias' as const, serviceAccountAdmission: true },
  { name: 'kas-3', version: v.kubeNew, ip: slot.alias(3), port: 6443, placement: 'alias' as const, serviceAccountAdmission: true },
];
await lab.startEtcd();
await Promise.all(servers.map((s) => lab.startApiServer(s)));
const kas1 = lab.apiServerUrl('kas-1');
// The admin's certificate straight to kas-1: the RBAC step, and kube-controller-manager and
// kube-scheduler, which on a kubeadm control-plane node talk to their own apiserver.
const adminKubeconfig = join(lab.dir, 'admin-kas-1.kubeconfig');
const adminDoc = { cluster: 'lab', caFile: lab.pki.caFile, user: 'admin', certFile: lab.pki.adminCertFile, keyFile: lab.pki.adminKeyFile };
await writeFile(adminKubeconfig, stringify(certKubeconfig({ ...adminDoc, server: kas1 })));
await lab.startControllerManager({
  name: 'kcm',
  version: v.kubeOld,
  kubeconfig: adminKubeconfig,
  controllers: ['*'],
  serviceAccountKeyFile: lab.pki.saKeyFile,
  rootCaFile: lab.pki.caFile,
});
await lab.startScheduler({ name: 'kube-scheduler', version: v.kubeOld, server: kas1 });

const options = {
  ...labNodeOptions(lab, parts, { addresses: slot, index: 0, name: NODE, images: [parts.pauseImage, ...images], log: progress }),
};
const nodeIp = options.spec.ip;
const nodeRoot = join(options.spec.dir, 'root');
const onNode = (path: string): string => join(nodeRoot, path);

await t.test('the operator steps of deploy/static-pods/README.md, on the node', async (t) => {
  // Once: the RBAC, from a machine with kubectl (here straight to kas-1 with the admin certificate).
  const applied = await run(kubectl, ['--kubeconfig', adminKubeconfig, 'apply', '-f', join(root, 'deploy', 'kubernetes', 'rbac.yaml')]);
  t.match(applied.stdout, /created|configured|unchanged/, 'kubectl apply -f deploy/kubernetes/rbac.yaml');

  // A node that never had the gateway: nothing of an earlier run's processes or files (the xDS folder above all).
  await new LabNode({ ...options, server: `https://${nodeIp}:${GATEWAY_PORT}` }).down();
  await rm(join(options.spec.dir, 'manifests'), { recursive: true, force: true });
  const placed = await installStaticPodGateway({
    recipe: RECIPE,
    nodeRoot,
    nodeName: NODE,
    pkiDir: join(options.spec.dir, 'pki'),
    pki: lab.pki,
    apiservers: servers.map((x) => ({ name: x.name, url: lab.apiServerUrl(x.name) })),
  });
  node = new LabNode({ ...options, server: `https://${nodeIp}:${GATEWAY_PORT}`, killOnExit: true });
  // In the kubelet's folder before it starts (kube-proxy, started with the node, is up once the gateway serves it).
  await node.addStaticPod('skewgate-gateway.yaml', placed);
  await node.start(180_000);
  t.pass(`installed: skewgate.yaml, skewgate.conf, the PKI files, the images, skewgate-gateway.yaml in the kubelet's folder`);
});

await t.test('the kubelet runs the gateway before the control plane knows the node; the node registers through it', async (t) => {
  if (node === undefined) {
    t.fail('the node did not start');
    return;
  }
  const gateway = await until(`Envoy of the static pod accepting on ${nodeIp}:${GATEWAY_PORT}`, 120_000, async () => {
    const r = await run('nsenter', [
      `--net=/run/netns/${options.spec.netns}`,
      '--',
      'bash',
      '-c',
      `exec 3<>/dev/tcp/${nodeIp}/${GATEWAY_PORT}`,
    ]).then(
      () => true,
      () => undefined,
    );
    return r;
  });
  t.ok(gateway, `the static pod's Envoy listens on the node's ${nodeIp}:${GATEWAY_PORT}`);
  const ready = await until(`Node ${NODE} Ready`, waitMs(NODE_STATUS_MS), async () => {
    const r = await api(kas1, 'GET', `/api/v1/nodes/${NODE}`);
    const c = (r.json as { status?: { conditions?: { type: string; status: string }[] } }).status?.conditions?.find(
      (x) => x.type === 'Ready',
    );
    return c?.status === 'True' ? true : undefined;
  });
  t.ok(ready, `Node ${NODE} registered through its own gateway and Ready`);
});

interface PodStatus {
  status?: {
    conditions?: { type: string; status: string }[];
    initContainerStatuses?: { name: string; state?: { terminated?: { exitCode: number } } }[];
    containerStatuses?: { name: string; ready: boolean; restartCount: number; state?: { running?: { startedAt: string } } }[];
  };
}

await t.test('the mirror pod: init container done, Envoy and skewgate ready (their probes), never restarted', async (t) => {
  const pod = await until(`mirror pod kube-system/${POD} Ready`, waitMs(NODE_STATUS_MS), async () => {
    const r = await api(kas1, 'GET', `/api/v1/namespaces/kube-system/pods/${POD}`);
    const p = r.json as PodStatus;
    return p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? p : undefined;
  });
  t.same(
    pod.status?.initContainerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode]),
    [['render-envoy-bootstrap', 0]],
    'render-envoy-bootstrap ran and exited 0',
  );
  t.same(
    pod.status?.containerStatuses?.map((c) => [c.name, c.ready, c.restartCount]).sort(),
    [
      ['envoy', true, 0],
      ['skewgate', true, 0],
    ],
    'envoy and skewgate ready, 0 restarts',
  );
  // The kubelet can register only through the gateway: Envoy ran before the Node existed.
  const nodeObject = (await api(kas1, 'GET', `/api/v1/nodes/${NODE}`)).json as { metadata?: { creationTimestamp?: string } };
  const envoyStarted = pod.status?.containerStatuses?.find((c) => c.name === 'envoy')?.state?.running?.startedAt ?? '';
  const nodeCreated = nodeObject.metadata?.creationTimestamp ?? '';
  t.ok(
    Date.parse(envoyStarted) <= Date.parse(nodeCreated),
    `Envoy started (${envoyStarted}) no later than the Node was created (${nodeCreated}): the kubelet ran it on its own`,
  );
});

await t.test("the node's own kubelet and kube-proxy through the gateway; skewgate writes the xDS folder", async (t) => {
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${NODE}`;
  const envoyLines = await until("two Lease renewals in Envoy's access log", waitMs(2 * RENEW_MS), async () => {
    const r = await api(kas1, 'GET', `/api/v1/namespaces/kube-system/pods/${POD}/log?container=envoy`);
    const lines = String(r.json)
      .split('\n')
      .filter((l) => l.includes('"method":"PUT"') && l.includes(`"path":"${leasePath}?`));
    return lines.length >= 2 ? lines : undefined;
  });
  t.ok(envoyLines.length >= 2, `the static pod's Envoy logged ${envoyLines.length} Lease renewals (kubectl logs -c envoy)`);
  const events = [...(await readAuditEvents(servers.map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) })))).values()].flat();
  const renewals = events.filter(
    (e) => e.event.stage === 'ResponseComplete' && e.event.verb === 'update' && e.event.requestURI?.split('?')[0] === leasePath,
  );
  t.ok(renewals.length >= 2, `the apiservers stored ${renewals.length} renewals`);
  t.ok(
    renewals.every((e) => e.event.user.username === nodeUser(NODE) && (e.event.user.groups ?? []).includes(NODES_GROUP)),
    `each by ${nodeUser(NODE)} (the certificate the static pod's Envoy verified, stated by its skewgate)`,
  );
  t.ok(
    events.some((e) => e.event.user.username === KUBE_PROXY_USER),
    `${KUBE_PROXY_USER} reached the apiservers (its only way is the gateway)`,
  );
  const rules = await until("kube-proxy's rules for the kubernetes Service", 60_000, async () => {
    const { stdout } = await run('nsenter', [`--net=/run/netns/${options.spec.netns}`, '--', 'iptables-save', '-t', 'nat']);
    return stdout.includes('default/kubernetes:https') ? stdout : undefined;
  });
  t.ok(rules, "kube-proxy synced through the gateway: the kubernetes Service's rules in the node's iptables");
  const xds = await until('the xDS folder written by skewgate', waitMs(RENEW_MS), async () => {
    const files = await readdir(onNode('var/lib/skewgate/xds'));
    return files.includes('members.json') ? files : undefined;
  });
  t.same(
    xds.filter((f) => f.endsWith('.json')).sort(),
    ['cds.json', 'members.json', 'rds.json'],
    'var/lib/skewgate/xds on the node: cds.json and rds.json (the init container, then skewgate) and members.json (skewgate)',
  );
  const members = JSON.parse(await readFile(onNode('var/lib/skewgate/xds/members.json'), 'utf8')) as { members?: { name: string }[] };
  t.same(
    (members.members ?? []).map((m) => m.name).sort(),
    servers.map((s) => s.name),
    'members.json: the three apiservers',
  );
});

// ---- gateway faults seen by the node's own kubelet (issue 26, item 5) ----

const crictl = (args: readonly string[]): Promise<{ stdout: string }> =>
  run(parts.crictl, ['--runtime-endpoint', `unix://${options.spec.dir}/containerd/containerd.sock`, ...args], { timeout: 30_000 });
/** The running container of the static pod named `name`: its id and its main process. */
async function runningContainer(name: string): Promise<{ id: string; pid: number }> {
  const { stdout } = await crictl(['ps', '--label', `io.kubernetes.pod.name=${POD}`, '--name', `^${name}$`, '--state', 'Running', '-q']);
  const id = stdout.trim().split('\n')[0] ?? '';
  if (id === '') throw new Error(`no running container ${name}`);
  const info = JSON.parse((await crictl(['inspect', id])).stdout) as { info?: { pid?: number } };
  return { id, pid: info.info?.pid ?? 0 };
}
const readyTransition = async (): Promise<string> => {
  const r = await api(kas1, 'GET', `/api/v1/nodes/${NODE}`);
  const c = (r.json as { status?: { conditions?: { type: string; status: string; lastTransitionTime: string }[] } }).status?.conditions;
  const ready = c?.find((x) => x.type === 'Ready');
  return `${ready?.status ?? '?'} since ${ready?.lastTransitionTime ?? '?'}`;
};
const faults: { what: string; outageMs: number; maxLagMs: number; refused: number; kubeletErrors: number }[] = [];

await t.test(
  "deploy/runbook.md's `sg status`: `crictl exec <skewgate> skewgate status`, the CLI on the image's PATH, no --config",
  async (t) => {
    const { id } = await runningContainer('skewgate');
    const out = await crictl(['exec', id, 'skewgate', 'status', '-o', 'json']).then(
      (r) => r.stdout,
      (err: Error & { stderr?: string }) => `failed: ${err.stderr ?? err.message}`,
    );
    const members = (JSON.parse(out.startsWith('{') ? out : '{}') as { members?: { name: string; ready: boolean | null }[] }).members;
    t.same(
      (members ?? []).map((m) => [m.name, m.ready]).sort(),
      servers.map((s) => [s.name, true]),
      `the gateway's own members, read from /etc/skewgate/skewgate.yaml's admin.listen (${out.slice(0, 200)})`,
    );
  },
);

for (const container of ['skewgate', 'envoy'] as const) {
  await t.test(`SIGKILL of the static pod's ${container}: what the node's kubelet sees; the node stays Ready`, async (t) => {
    if (node === undefined) {
      t.fail('the node did not start');
      return;
    }
    const before = await readyTransition();
    t.match(before, /^True since /, `${NODE} Ready before (${before})`);
    const victim = await runningContainer(container);
    const kubeletLogBefore = (await readFile(node.logFile('kubelet'), 'utf8')).length;
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    progress(`SIGKILL ${container} (pid ${victim.pid})`);
    // Back: a new container running, and the node's Lease renewed twice after the kill.
    const back = await until(`${container} running again`, waitMs(NODE_STATUS_MS), async () => {
      const c = await runningContainer(container).catch(() => undefined);
      return c !== undefined && c.id !== victim.id ? c : undefined;
    });
    const backAt = Date.now();
    t.not(back.id, victim.id, `the kubelet started a new ${container} container`);
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${NODE}`;
    const events = await until('two Lease renewals after the kill', waitMs(2 * RENEW_MS, NODE_STATUS_MS), async () => {
      const all = [...(await readAuditEvents(servers.map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) })))).values()].flat();
      return leaseRenewals(all, NODE, killedAt).renewals.length >= 2 ? all : undefined;
    });
    // The lag that spans the kill: from the last renewal before it to the first after it.
    const { renewals, failed } = leaseRenewals(events, NODE, killedAt - 2 * RENEW_MS);
    const lag = lagSummary(renewals, failed, renewals.at(-1)?.at ?? killedAt);
    const restarts = await until(`the mirror pod counting the ${container} restart`, waitMs(NODE_STATUS_MS), async () => {
      const p = (await api(kas1, 'GET', `/api/v1/namespaces/kube-system/pods/${POD}`)).json as PodStatus;
      const c = p.status?.containerStatuses?.find((x) => x.name === container);
      return c !== undefined && c.restartCount >= 1 && c.ready ? c.restartCount : undefined;
    });
    t.equal(restarts, 1, `the mirror pod: ${container} restarted once, ready again`);
    const after = await readyTransition();
    t.equal(after, before, `${NODE}'s Ready condition unchanged (${after})`);
    t.ok(
      lag.maxMs < LEASE_SECONDS * 1000,
      `the longest Lease lag across the kill: ${(lag.maxMs / 1000).toFixed(1)} s (< ${LEASE_SECONDS} s)`,
    );
    const envoyLog = await api(kas1, 'GET', `/api/v1/namespaces/kube-system/pods/${POD}/log?container=envoy`);
    const refused = String(envoyLog.json)
      .split('\n')
      .filter(
        (l) =>
          l.includes(`"path":"${leasePath}?`) &&
          /"status":(401|503)/.test(l) &&
          Date.parse((/"start":"([^"]+)"/.exec(l) ?? [])[1] ?? '') >= killedAt,
      );
    const kubeletErrors = (await readFile(node.logFile('kubelet'), 'utf8'))
      .slice(kubeletLogBefore)
      .split('\n')
      .filter((l) => /^E\d{4}/.test(l));
    t.comment(
      `${container} killed: running again ${((backAt - killedAt) / 1000).toFixed(1)} s later (polled); longest Lease lag ${(lag.maxMs / 1000).toFixed(1)} s; ` +
        `${refused.length} Lease renewals answered 401/503 by the gateway meanwhile; ${kubeletErrors.length} kubelet error lines, e.g. ${kubeletErrors[0]?.slice(0, 220) ?? 'none'}`,
    );
    faults.push({
      what: container,
      outageMs: backAt - killedAt,
      maxLagMs: lag.maxMs,
      refused: refused.length,
      kubeletErrors: kubeletErrors.length,
    });
  });
}

await t.test('the faults, recorded', async (t) => {
  const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  const md = [
    '### Gateway faults seen by a real kubelet (test/cluster/static-pod-gateway.test.ts)',
    '',
    `**Method.** The static-pod gateway of deploy/static-pods on node \`${NODE}\` (kubelet v${v.kubeOld}, containerd), the node's own kubelet and kube-proxy talking to the control plane only through it (no peer skewgates, no other gateway: the worst case); one container's main process SIGKILLed at a time. "Running again" is when crictl first lists a new running container (polled every 0.5 s); Lease lags are the apiservers' timestamps of consecutive renewals around the kill; refused renewals are the Envoy access log's 401/503 answers to the kubelet's Lease PUTs after the kill.`,
    '',
    '| SIGKILL of | running again after | longest Lease lag | renewals refused by the gateway | kubelet error lines | Node Ready |',
    '|---|---|---|---|---|---|',
    ...faults.map((f) => `| ${f.what} | ${sec(f.outageMs)} | ${sec(f.maxLagMs)} | ${f.refused} | ${f.kubeletErrors} | never changed |`),
  ].join('\n');
  t.equal(faults.length, 2, 'both faults measured');
  await writeClusterPart('static-pod-faults', md);
  t.comment(md);
});

// ---- the Helm chart through that gateway onto the node (issue 26, item 3b) ----

await t.test('the Helm chart installed with helm through the gateway, run by the node', async (t) => {
  if (node === undefined) {
    t.fail('the node did not start');
    return;
  }
  // The operator's kubectl and helm reach the control plane through the node's static-pod gateway.
  const viaGateway = join(lab.dir, 'admin-gateway.kubeconfig');
  const server = `https://${nodeIp}:${GATEWAY_PORT}`;
  await writeFile(viaGateway, stringify(certKubeconfig({ ...adminDoc, server, tlsServerName: 'kubernetes' })));
  await helmChartOnNode(t, {
    lab,
    kubectl,
    helm,
    adminKubeconfig: viaGateway,
    api,
    apiBase: kas1,
    until,
    nodeName: NODE,
    nodeIp,
    apiservers: servers.map((x) => ({ name: x.name, url: lab.apiServerUrl(x.name) })),
    crictl,
    progress,
  });
});
