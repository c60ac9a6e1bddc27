// A real node registered through the gateway (issue: a real node, item 2): etcd, kube-apiservers
// KUBE_OLD and KUBE_NEW, Envoy + skewgate, and a node — containerd and kubelet KUBE_OLD in a
// network namespace of their own — whose kubelet reaches the control plane only through a gateway
// (on an alias address, checked by the certificate's name kubernetes), with its own client
// certificate (CN=system:node:<name>, O=system:nodes; the apiservers run the Node authorizer and
// NodeRestriction). kube-scheduler (its certificate) and kube-controller-manager (its whole default
// set: node lifecycle at its 40 s default, Deployments, ReplicaSets) run through the control
// plane's gateway on loopback. Asserted: the Node registers and turns Ready; its Lease is renewed
// by system:node:<name> (the apiservers' audit logs) through the node's gateway (Envoy's access
// log), never more than the lease's 40 s apart; a Deployment's pod is scheduled onto the node and
// runs on the pod network; kube-proxy (its certificate, in the node's namespace) writes a Service's
// rules into the node's iptables and none into this machine's; the node's own credentials are held
// to what NodeRestriction and the Node authorizer allow. Uses the addresses of its lab slot.
// Fails, never skips, when a part is missing.
import t, { type Test as Tap } from 'tap';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { readAuditEvents } from '../../harness/lab/audit-events.js';
import { KUBE_PROXY_USER } from '../../harness/lab/pki.js';
import { Lab, freePort } from '../../harness/lab/lab.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { LabNode, NODES_GROUP, nodeUser } from '../../harness/node/node.js';
import { ipv4InCidr, labNodeSpec } from '../../harness/node/placement.js';
import { requireLabParts, requireNodeParts } from '../helpers/lab-parts.js';
import { waitMs } from '../helpers/waits.js';
import { packageRoot } from '../../src/package-root.js';
import { join } from 'node:path';

const run = promisify(execFile);
const { versions, kubectl } = requireLabParts();
const parts = requireNodeParts();
await run('docker', ['image', 'inspect', parts.pauseImage]).catch(() => {
  throw new Error(`image ${parts.pauseImage} is not in the local Docker engine: run scripts/demo-images.sh`);
});
t.setTimeout(12 * 60_000);

const started = performance.now();
const progress = (line: string): void => t.comment(`[node-registration +${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
const slot = claimLabSlot();
const NODE = `node-${slot.slot}`;
/** The kubelet's defaults (harness/node/config.ts states them): Lease of 40 s, renewed every quarter of it. */
const LEASE_SECONDS = 40;
/** The kubelet renews its Lease every quarter of it, and reports its status every 10 s (its defaults). */
const RENEW_MS = (LEASE_SECONDS * 1000) / 4;
const NODE_STATUS_MS = 10_000;
const DEPLOYMENT = 'pause';
const NS = 'node-registration';

const labDir = join(packageRoot(), '.cache', 'lab-node-registration');
// What a crashed earlier run left, stopped by a Lab object of its own (down() closes it).
await (await Lab.open({ dir: labDir, addresses: slot })).down({ kill: true });
const lab = await Lab.open({ dir: labDir, killOnExit: true, addresses: slot, log: progress });
const servers = [
  { name: 'kas-1', version: versions.kubeOld, ip: slot.loopback(1), port: 6443 },
  { name: 'kas-2', version: versions.kubeNew, ip: slot.loopback(2), port: 6443 },
];
const spec = labNodeSpec({
  addresses: slot,
  index: 0,
  name: NODE,
  labDir: lab.dir,
  sandboxImage: parts.pauseImage,
  cniBinDir: parts.cniBinDir,
  clientCaFile: lab.pki.caFile,
});
let node: LabNode | undefined;
let nodeReady = false;
/** A part after a failed node start fails with one clear line instead of waiting out its bounds. */
const needNode = (t: Tap): boolean => {
  if (!nodeReady) t.fail('the node did not come up (see its test)');
  return nodeReady;
};
t.teardown(async () => {
  await node?.down().catch((err: Error) => progress(`node down: ${err.message}`));
  await lab.down({ kill: true }).catch((err: Error) => progress(`lab down: ${err.message}`));
  slot.release();
});

const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
t.teardown(() => agent.close());
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
async function api(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await request(`${base}${path}`, {
    method: method as 'GET',
    dispatcher: agent,
    headers: {
      authorization: `Bearer ${lab.pki.adminToken}`,
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.body.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.statusCode, json };
}
/** Polls `probe` every 500 ms until it returns a value (not undefined), at most `limitMs`. */
async function until<T>(what: string, limitMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${limitMs / 1000} s\n${(await node?.logTails(20)) ?? ''}`);
    await sleep(500);
  }
}

interface NodeObject {
  status?: { conditions?: { type: string; status: string }[]; addresses?: { type: string; address: string }[] };
}
interface LeaseObject {
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string };
}
interface PodList {
  items: { metadata: { name: string }; spec: { nodeName?: string }; status: { phase?: string; podIP?: string } }[];
}

await lab.startEtcd();
await Promise.all(servers.map((s) => lab.startApiServer(s)));
// Two gateways in front of the same apiservers, as a load-balanced control plane has: one on this
// machine's loopback for the control-plane components and the test's own requests, one on an alias
// address the node reaches from its network namespace (checked by the certificate's name kubernetes).
const { gateway: gw, node: nodeGw } = await lab.startGateways({
  gateway: { name: 'gateway', withSkewgate: true, xds: true, port: await freePort() },
  node: { name: 'node-gateway', withSkewgate: true, xds: true, port: 6443, address: slot.alias(1) },
});
const kas1 = lab.apiServerUrl('kas-1');
progress(`control plane up; gateways at ${gw.url} and, for the node, ${nodeGw.url}`);

await t.test('the control plane through the gateway: kube-controller-manager (default controllers) and kube-scheduler', async (t) => {
  await lab.startControllerManager({
    name: 'kcm',
    version: versions.kubeOld,
    kubeconfig: gw.kubeconfigFile,
    controllers: ['*'],
    serviceAccountKeyFile: lab.pki.saKeyFile,
    rootCaFile: lab.pki.caFile,
  });
  await lab.startScheduler({ name: 'kube-scheduler', version: versions.kubeOld, server: gw.url });
  t.pass('both running');
});

await t.test(`${NODE} registers through the gateway with its own certificate and turns Ready`, async (t) => {
  const options = {
    spec,
    server: nodeGw.url,
    serverName: 'kubernetes',
    ca: { certFile: lab.pki.caFile, keyFile: lab.pki.caKeyFile },
    binaries: { kubelet: parts.kubelet, containerd: parts.containerd, ctr: parts.ctr },
    images: [parts.pauseImage],
    kubeProxy: { binary: parts.kubeProxy, certFile: lab.pki.kubeProxyCertFile, keyFile: lab.pki.kubeProxyKeyFile },
    log: progress,
  };
  // What a crashed earlier run left (its processes, mounts, bridge), by a node object of its own.
  await new LabNode(options).down();
  node = new LabNode({ ...options, killOnExit: true });
  await node.start();
  const kubeconfig = await readFile(node.spec.kubeconfig ?? '', 'utf8');
  t.match(kubeconfig, `server: ${nodeGw.url}`, "the kubelet's kubeconfig names the node's gateway, nothing else");
  t.notMatch(kubeconfig, /token/, 'and a client certificate, no token');
  const ready = await until('the Node Ready', waitMs(NODE_STATUS_MS), async () => {
    const r = await api(kas1, 'GET', `/api/v1/nodes/${NODE}`);
    const cond = (r.json as NodeObject).status?.conditions?.find((c) => c.type === 'Ready');
    return r.status === 200 && cond?.status === 'True' ? (r.json as NodeObject) : undefined;
  });
  t.ok(ready, `Node ${NODE} Ready (read straight from kas-1)`);
  nodeReady = true;
  t.same(
    ready.status?.addresses?.find((a) => a.type === 'InternalIP')?.address,
    spec.ip,
    `its InternalIP is the node's address ${spec.ip}`,
  );
});

await t.test("the node's Lease: renewed by the node itself, through the gateway, within the lease's duration", async (t) => {
  if (!needNode(t)) return;
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${NODE}`;
  const renewals = new Set<string>();
  const holders = new Set<string>();
  // Three renewals seen (each a distinct renewTime the apiserver stored): about 20–30 s of the kubelet's 10 s period.
  await until('three Lease renewals', waitMs(3 * RENEW_MS), async () => {
    const r = await api(kas1, 'GET', leasePath);
    const lease = r.json as LeaseObject;
    if (r.status === 200 && lease.spec?.renewTime !== undefined) renewals.add(lease.spec.renewTime);
    if (r.status === 200) holders.add(lease.spec?.holderIdentity ?? '');
    return renewals.size >= 3 ? true : undefined;
  });
  t.same([...holders], [NODE], `the Lease is held by ${NODE}`);
  const times = [...renewals].map((x) => Date.parse(x)).sort((a, b) => a - b);
  const gaps = times.slice(1).map((x, i) => (x - (times[i] ?? x)) / 1000);
  t.comment(`renewTime gaps (the apiserver's own timestamps): ${gaps.map((g) => `${g.toFixed(1)} s`).join(', ')}`);
  t.ok(
    gaps.every((g) => g < LEASE_SECONDS),
    `every renewal within the ${LEASE_SECONDS} s lease of the one before (largest ${Math.max(...gaps).toFixed(1)} s)`,
  );

  const files = servers.map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) }));
  const updates = [...(await readAuditEvents(files)).values()]
    .flat()
    .filter((e) => e.event.stage === 'ResponseComplete' && e.event.verb === 'update' && e.event.requestURI?.split('?')[0] === leasePath);
  t.ok(updates.length >= 2, `the apiservers' audit logs hold ${updates.length} updates of the Lease`);
  t.ok(
    updates.every((e) => e.event.user.username === nodeUser(NODE) && (e.event.user.groups ?? []).includes(NODES_GROUP)),
    `each by ${nodeUser(NODE)} in ${NODES_GROUP} (the identity skewgate stated from the certificate Envoy verified)`,
  );
  const envoyLog = await readFile(lab.logFile('envoy-node-gateway'), 'utf8');
  // The kubelet asks with ?timeout=10s.
  const throughGateway = envoyLog.split('\n').filter((l) => l.includes('"method":"PUT"') && l.includes(`"path":"${leasePath}?`));
  t.ok(throughGateway.length >= 2, `Envoy's access log shows ${throughGateway.length} Lease renewals through the gateway`);
});

await t.test('a Deployment through the gateway: its pod scheduled onto the node, running on the pod network', async (t) => {
  if (!needNode(t)) return;
  const apply = await run(kubectl, ['--kubeconfig', gw.kubeconfigFile, 'create', 'namespace', NS]).catch((err: { stderr?: string }) => ({
    stdout: '',
    stderr: err.stderr ?? String(err),
  }));
  t.match(apply.stdout, /created/, `kubectl create namespace ${NS} through the gateway`);
  const dep = await api(gw.url, 'POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: DEPLOYMENT },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: DEPLOYMENT } },
      template: {
        metadata: { labels: { app: DEPLOYMENT } },
        spec: {
          automountServiceAccountToken: false,
          containers: [{ name: 'pause', image: parts.pauseImage, imagePullPolicy: 'Never' }],
        },
      },
    },
  });
  t.equal(dep.status, 201, 'Deployment created through the gateway');
  const pod = await until('the Deployment pod Running', 120_000, async () => {
    const r = await api(kas1, 'GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3D${DEPLOYMENT}`);
    const p = (r.json as PodList).items?.[0];
    return p?.status.phase === 'Running' ? p : undefined;
  });
  t.equal(pod.spec.nodeName, NODE, `scheduled onto ${NODE} (kube-scheduler through the gateway)`);
  t.ok(ipv4InCidr(pod.status.podIP ?? '', spec.podCidr), `pod IP ${pod.status.podIP ?? 'none'} from the node's range ${spec.podCidr}`);
});

await t.test("kube-proxy through the gateway: a Service's rules in the node's own iptables, none on this machine", async (t) => {
  if (!needNode(t)) return;
  const svc = await api(gw.url, 'POST', `/api/v1/namespaces/${NS}/services`, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: DEPLOYMENT },
    spec: { selector: { app: DEPLOYMENT }, ports: [{ port: 80, targetPort: 8080 }] },
  });
  t.equal(svc.status, 201, 'Service created through the gateway');
  const clusterIp = (svc.json as { spec?: { clusterIP?: string } }).spec?.clusterIP ?? '';
  t.match(clusterIp, /^10\.96\./, `ClusterIP ${clusterIp}`);
  const rules = await until(`kube-proxy's rules for ${clusterIp}`, 60_000, async () => {
    const { stdout } = await run('nsenter', [`--net=/run/netns/${spec.netns}`, '--', 'iptables-save', '-t', 'nat']);
    return stdout.includes(`${clusterIp}/32`) ? stdout : undefined;
  });
  t.match(rules, `${NS}/${DEPLOYMENT}`, "in the node's namespace: the Service's KUBE-SERVICES rule, with its name");
  const host = await run('iptables-save', ['-t', 'nat']);
  t.notOk(host.stdout.includes(`${clusterIp}/32`), "on this machine's own iptables: nothing of it");
  const files = servers.map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) }));
  const proxyEvents = [...(await readAuditEvents(files)).values()].flat().filter((e) => e.event.user.username === KUBE_PROXY_USER);
  t.ok(
    proxyEvents.length > 0,
    `the apiservers saw ${proxyEvents.length} requests of ${KUBE_PROXY_USER} (its certificate, stated by skewgate)`,
  );
  // Its watches are written to Envoy's access log only when they end; that the gateway is its only
  // way in is shown by what its namespace can reach.
  const reach = async (ip: string, port: number): Promise<boolean> =>
    run('nsenter', [`--net=/run/netns/${spec.netns}`, '--', 'bash', '-c', `exec 3<>/dev/tcp/${ip}/${port}`]).then(
      () => true,
      () => false,
    );
  const gwHost = new URL(nodeGw.url);
  t.ok(await reach(gwHost.hostname, Number(gwHost.port)), `from the node's namespace the node's gateway ${gwHost.host} is reachable`);
  for (const s of servers)
    t.notOk(await reach(s.ip, s.port), `and ${s.name} (${s.ip}:${s.port}) is not: the gateway is the node's only way in`);
});

await t.test("the node's credentials are held to its own Node (Node authorizer, NodeRestriction)", async (t) => {
  if (!needNode(t)) return;
  const kubeconfig = node?.spec.kubeconfig ?? '';
  const label = await run(kubectl, [
    '--kubeconfig',
    kubeconfig,
    'label',
    'node',
    NODE,
    '--overwrite',
    'node-restriction.kubernetes.io/own=yes',
  ]).catch((err: { stdout?: string; stderr?: string }) => ({ stdout: err.stdout ?? '', stderr: err.stderr ?? '' }));
  t.match(
    label.stderr,
    /forbidden|cannot modify labels/i,
    `labelling its own Node with a node-restriction.kubernetes.io/ label: refused (NodeRestriction) (${label.stderr.trim()})`,
  );
  const list = await run(kubectl, ['--kubeconfig', kubeconfig, 'get', 'secrets', '-A']).catch(
    (err: { stdout?: string; stderr?: string }) => ({ stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
  t.match(list.stderr, /forbidden/i, `listing every Secret as the node: forbidden`);
});
