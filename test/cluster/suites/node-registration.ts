// A real node registered through the gateway (issue 26, item 2; a suite of test/cluster/node.test.ts,
// whose lab — test/helpers/node-lab.ts — starts the node through the node's gateway with its own
// client certificate, CN=system:node:<name>, O=system:nodes; the apiservers run the Node authorizer
// and NodeRestriction). Asserted: the Node registers Ready at its address; its Lease is renewed by
// system:node:<name> (the apiservers' audit logs) through the node's gateway (Envoy's access log),
// never more than the lease's 40 s apart; a Deployment's pod is scheduled onto the node and runs on
// the pod network; kube-proxy (its certificate, in the node's namespace) writes a Service's rules
// into the node's iptables and none into this machine's; the node's own credentials are held to
// what NodeRestriction and the Node authorizer allow.
import type { Test as Tap } from 'tap';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { readAuditEvents } from '../../../harness/lab/audit-events.js';
import { KUBE_PROXY_USER } from '../../../harness/lab/pki.js';
import { NODES_GROUP, nodeUser } from '../../../harness/node/node.js';
import { ipv4InCidr } from '../../../harness/node/placement.js';
import { LEASE_SECONDS, RENEW_MS, type NodeLab, type NodeSuite } from '../../helpers/node-lab.js';
import { waitMs } from '../../helpers/waits.js';

const run = promisify(execFile);
const DEPLOYMENT = 'pause';
const NS = 'node-registration';

interface NodeObject {
  status?: { conditions?: { type: string; status: string }[]; addresses?: { type: string; address: string }[] };
}
interface LeaseObject {
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string };
}
interface PodList {
  items: { metadata: { name: string }; spec: { nodeName?: string }; status: { phase?: string; podIP?: string } }[];
}

export const nodeRegistrationSuite: NodeSuite = {
  title: 'a node registered through the gateway: its Lease, a Deployment, kube-proxy, its credentials',
  run: async (t, l) => {
    await registration(t, l);
  },
};

async function registration(t: Tap, l: NodeLab): Promise<void> {
  const { lab, gw, nodeGw, node, api, until, kubectl, servers } = l;
  const NODE = l.nodeName;
  const spec = node.spec;
  const kas1 = lab.apiServerUrl(servers[0]?.name ?? '');
  const parts = l.parts;

  await t.test(`${NODE} registers through the gateway with its own certificate and turns Ready`, async (t) => {
    const kubeconfig = await readFile(node.spec.kubeconfig ?? '', 'utf8');
    t.match(kubeconfig, `server: ${nodeGw.url}`, "the kubelet's kubeconfig names the node's gateway, nothing else");
    t.notMatch(kubeconfig, /token/, 'and a client certificate, no token');
    const r = await api(kas1, 'GET', `/api/v1/nodes/${NODE}`);
    const ready = r.json as NodeObject;
    t.equal(ready.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True', `Node ${NODE} Ready (read straight from kas-1)`);
    t.same(
      ready.status?.addresses?.find((a) => a.type === 'InternalIP')?.address,
      spec.ip,
      `its InternalIP is the node's address ${spec.ip}`,
    );
  });

  await t.test("the node's Lease: renewed by the node itself, through the gateway, within the lease's duration", async (t) => {
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
    const apply = await run(kubectl, ['--kubeconfig', gw.kubeconfigFile, 'create', 'namespace', NS]).catch((err: { stderr?: string }) => ({
      stdout: '',
      stderr: err.stderr ?? String(err),
    }));
    t.match(apply.stdout, /created/, `kubectl create namespace ${NS} through the gateway`);
    await l.namespaceReady(NS);
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
    const kubeconfig = node.spec.kubeconfig ?? '';
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
}
