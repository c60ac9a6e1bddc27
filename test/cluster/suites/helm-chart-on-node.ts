// The Helm chart installed as its README says, with the real helm through a gateway, onto a real
// node (issue 26, item 3b; run by test/cluster/static-pod-gateway.test.ts on its node, which the
// test marks as kubeadm marks a control-plane node: the chart's default nodeSelector and
// toleration meet it). The operator's steps: the namespace with the restricted Pod Security
// profile, the two Secrets (`skewgate gateway-cert` from the cluster CA; the front-proxy client
// pair), a values file (the seed, the names, one replica for the one node), `helm install`.
// Asserted: the replica is scheduled onto the node and Running, its init container done and both
// containers ready, never restarted; the NodePort Service (<node>:30443, externalTrafficPolicy
// Local) answers and routes as skewgate does (the resource only the newer apiserver serves: 200
// every time); the readiness means what the chart says — a replica whose skewgate does not answer
// (SIGSTOP) leaves the Service (its endpoint not ready, <node>:30443 no longer answered) though its
// Envoy still runs, and comes back when skewgate does (SIGCONT); `helm uninstall` removes it.
import type { Test as Tap } from 'tap';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { stringify } from 'yaml';
import { certKubeconfig } from '../../../harness/lab/kubeconfig.js';
import type { Lab } from '../../../harness/lab/lab.js';
import { packageRoot } from '../../../src/util/package-root.js';
import { CHART, runHelm } from '../../helpers/helm.js';
import type { NodeLab } from '../../helpers/node-lab.js';
import { listPath } from '../../helpers/in-cluster-job.js';

const run = promisify(execFile);
const NS = 'skewgate';
/** values.yaml's nodePort. */
const NODE_PORT = 30443;
const SKEWED = { group: 'admissionregistration.k8s.io', version: 'v1', resource: 'mutatingadmissionpolicies' };
const LISTS = 20;
/** The chart's skewgate readiness probe: every 5 s, a 5 s timeout, 2 failures (templates/deployment.yaml). */
const READINESS_MS = 2 * (5000 + 5000);

export interface ChartNode {
  readonly lab: Lab;
  readonly kubectl: string;
  readonly helm: string;
  /** The admin's client certificate, through a gateway: what the operator's kubectl and helm use. */
  readonly adminKubeconfig: string;
  readonly api: NodeLab['api'];
  /** Where the test reads objects. */
  readonly apiBase: string;
  readonly until: NodeLab['until'];
  readonly nodeName: string;
  readonly nodeIp: string;
  /** The seed: each apiserver's name and URL (as a kubeadm node's address). */
  readonly apiservers: readonly { readonly name: string; readonly url: string }[];
  /** crictl against the node's containerd. */
  readonly crictl: (args: readonly string[]) => Promise<{ stdout: string }>;
  readonly progress: (line: string) => void;
}

interface PodList {
  items: {
    metadata: { name: string };
    spec: { nodeName?: string };
    status?: {
      conditions?: { type: string; status: string }[];
      initContainerStatuses?: { name: string; state?: { terminated?: { exitCode: number } } }[];
      containerStatuses?: { name: string; ready: boolean; restartCount: number }[];
    };
  }[];
}
type Pod = PodList['items'][number];
interface EndpointSlices {
  items: { endpoints?: { nodeName?: string; conditions?: { ready?: boolean } }[] }[];
}

export async function helmChartOnNode(t: Tap, c: ChartNode): Promise<void> {
  const dir = join(c.lab.dir, 'helm-chart');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const kubectl = (args: readonly string[]): Promise<{ stdout: string }> =>
    run(c.kubectl, ['--kubeconfig', c.adminKubeconfig, ...args], { timeout: 60_000 });
  const gatewayUrl = `https://${c.nodeIp}:${NODE_PORT}`;
  const agent = new Agent({ connect: { ca: await readFile(c.lab.pki.caFile, 'utf8') } });
  t.teardown(() => agent.close());
  /**
   * One GET with the admin token through the chart's Service, on a connection of its own (an open
   * one keeps its conntrack entry to the pod whatever kube-proxy's rules become): its status, or
   * the error's code.
   */
  const viaService = async (path: string): Promise<number | string> =>
    request(`${gatewayUrl}${path}`, {
      dispatcher: agent,
      reset: true,
      headers: { authorization: `Bearer ${c.lab.pki.adminToken}`, accept: 'application/json' },
      signal: AbortSignal.timeout(5000),
    }).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode;
      },
      (err: Error & { code?: string }) => err.code ?? err.name,
    );
  const chartPod = async (): Promise<Pod | undefined> => {
    const r = await c.api(c.apiBase, 'GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app.kubernetes.io%2Fname%3Dskewgate`);
    return (r.json as PodList).items?.[0];
  };
  const endpoints = async (): Promise<{ nodeName?: string; ready: boolean }[]> => {
    const r = await c.api(
      c.apiBase,
      'GET',
      `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dskewgate-gateway`,
    );
    return ((r.json as EndpointSlices).items ?? [])
      .flatMap((s) => s.endpoints ?? [])
      .map((e) => ({ ...(e.nodeName === undefined ? {} : { nodeName: e.nodeName }), ready: e.conditions?.ready === true }));
  };
  const ready = (p: Pod | undefined): boolean => p?.status?.conditions?.find((x) => x.type === 'Ready')?.status === 'True';

  await t.test("the chart README's install: namespace, Secrets, values, helm install through the gateway", async (t) => {
    // What kubeadm does to a control-plane node, and what the chart's defaults select and tolerate.
    await kubectl(['label', 'node', c.nodeName, 'node-role.kubernetes.io/control-plane=']);
    await kubectl(['taint', 'node', c.nodeName, 'node-role.kubernetes.io/control-plane:NoSchedule']);
    await kubectl(['create', 'namespace', NS]);
    await kubectl([
      'label',
      'namespace',
      NS,
      'pod-security.kubernetes.io/enforce=restricted',
      'pod-security.kubernetes.io/warn=restricted',
    ]);
    // NOTES.txt's commands: the serving certificate from the cluster CA for the names clients use
    // (here the node's address: the balancer's backend), the front-proxy client pair as it is.
    const certDir = join(dir, 'gw');
    const cli = join(packageRoot(), 'dist', 'src', 'cli', 'main.js');
    // --days: the lab's CA lives a year (kubeadm's ten), and gateway-cert refuses to outlive it.
    const certArgs = ['--ca-cert', c.lab.pki.caFile, '--ca-key', c.lab.pki.caKeyFile, '--san', c.nodeIp, '--days', '30', '--out', certDir];
    await run(process.execPath, [cli, 'gateway-cert', ...certArgs]);
    await kubectl([
      '-n',
      NS,
      'create',
      'secret',
      'tls',
      'skewgate-gateway-tls',
      '--cert',
      join(certDir, 'gateway.crt'),
      '--key',
      join(certDir, 'gateway.key'),
    ]);
    await kubectl([
      ...['-n', NS, 'create', 'secret', 'tls', 'skewgate-front-proxy-client'],
      ...['--cert', c.lab.pki.frontProxyClientCertFile, '--key', c.lab.pki.frontProxyClientKeyFile],
    ]);
    // The values an operator writes (examples/kubeadm.yaml's keys): the seed, the names, one
    // replica per control-plane node (the lab has one). The lab's apiservers are not Nodes of
    // their own, so the members are learnt from the kubernetes EndpointSlice alone.
    const values = {
      apiservers: c.apiservers,
      controlPlaneEndpoint: { names: [c.nodeIp] },
      replicas: 1,
      config: { membership: { sources: ['endpointSlice'] } },
    };
    // The static pods' RBAC (deploy/kubernetes/rbac.yaml) is applied already, and the chart
    // renders the same objects: the release adopts them, as the chart README says.
    const rbac = join(packageRoot(), 'deploy', 'kubernetes', 'rbac.yaml');
    await kubectl(['label', '--overwrite', '-f', rbac, 'app.kubernetes.io/managed-by=Helm']);
    await kubectl(['annotate', '--overwrite', '-f', rbac, 'meta.helm.sh/release-name=skewgate', `meta.helm.sh/release-namespace=${NS}`]);
    const valuesFile = join(dir, 'my-values.yaml');
    await writeFile(valuesFile, stringify(values));
    const installed = await runHelm(c.helm, ['install', 'skewgate', CHART, '-n', NS, '-f', valuesFile, '--kubeconfig', c.adminKubeconfig]);
    t.equal(installed.code, 0, `helm install skewgate deploy/helm/skewgate -n ${NS} -f my-values.yaml: exit 0 ${installed.stderr.trim()}`);
    t.match(installed.stdout, /STATUS: deployed/, 'the release is deployed');
    t.match(
      installed.stdout,
      new RegExp(`--san ${c.nodeIp.replaceAll('.', '\\.')}`),
      "NOTES.txt's gateway-cert command names the node's address",
    );
  });

  await t.test('the replica scheduled onto the node, Running: init container done, both containers ready, never restarted', async (t) => {
    // Images present; the startup probe allows 60 s (every 2 s, 30 failures).
    const pod = await c.until(`the chart's pod Ready in ${NS}`, 180_000, async () => {
      const p = await chartPod();
      return ready(p) ? p : undefined;
    });
    t.equal(pod.spec.nodeName, c.nodeName, `scheduled onto ${c.nodeName} (the control-plane label and taint)`);
    t.same(
      pod.status?.initContainerStatuses?.map((x) => [x.name, x.state?.terminated?.exitCode]),
      [['render-envoy-bootstrap', 0]],
      'render-envoy-bootstrap ran and exited 0',
    );
    t.same(
      pod.status?.containerStatuses?.map((x) => [x.name, x.ready, x.restartCount]).sort(),
      [
        ['envoy', true, 0],
        ['skewgate', true, 0],
      ],
      'envoy and skewgate ready, 0 restarts (admitted by the restricted Pod Security profile)',
    );
    const eps = await c.until('the Service endpoint ready', 60_000, async () => {
      const e = await endpoints();
      return e.some((x) => x.ready) ? e : undefined;
    });
    t.same(eps, [{ nodeName: c.nodeName, ready: true }], `skewgate-gateway's one endpoint: on ${c.nodeName}, ready`);
  });

  await t.test(`the Service answers on ${c.nodeIp}:${NODE_PORT} and routes as skewgate does`, async (t) => {
    const adminVia = join(dir, 'admin-nodeport.kubeconfig');
    await writeFile(
      adminVia,
      stringify(
        certKubeconfig({
          cluster: 'lab',
          server: gatewayUrl,
          caFile: c.lab.pki.caFile,
          user: 'admin',
          certFile: c.lab.pki.adminCertFile,
          keyFile: c.lab.pki.adminKeyFile,
        }),
      ),
    );
    // NOTES.txt's check (its --server is the first apiserver's host: on kubeadm, the node's address).
    const whoami = await c.until(`kubectl --server ${gatewayUrl} auth whoami`, 60_000, async () =>
      run(c.kubectl, ['--kubeconfig', adminVia, 'auth', 'whoami', '-o', 'json'], { timeout: 30_000 }).then(
        (r) => r.stdout,
        () => undefined,
      ),
    );
    const user = (JSON.parse(whoami) as { status?: { userInfo?: { username?: string; groups?: string[] } } }).status?.userInfo;
    t.ok(
      user?.groups?.includes('system:masters'),
      `auth whoami through the chart's gateway: ${user?.username} (the client certificate, stated by skewgate)`,
    );
    const path = listPath(SKEWED);
    const direct = await Promise.all(c.apiservers.map(async (a) => (await c.api(a.url, 'GET', path)).status));
    t.ok(
      direct.includes(404) && direct.includes(200),
      `the apiservers disagree about ${SKEWED.resource} (${direct.join(', ')}): the list is skewed`,
    );
    const answers: (number | string)[] = [];
    for (let i = 0; i < LISTS; i++) answers.push(await viaService(path));
    t.same(answers, Array<number>(LISTS).fill(200), `${LISTS} lists of ${SKEWED.resource} through ${gatewayUrl}: 200 every time`);
  });

  await t.test(
    "values.yaml's `kubectl exec … -c skewgate -- skewgate status`: the image's CLI on PATH, its config without --config",
    async (t) => {
      const pod = await chartPod();
      const name = pod?.metadata?.name ?? '';
      t.not(name, '', "the chart's pod");
      const status = await kubectl(['-n', NS, 'exec', name, '-c', 'skewgate', '--', 'skewgate', 'status', '-o', 'json']).then(
        (r) => r.stdout,
        (err: Error & { stderr?: string }) => `failed: ${err.stderr ?? err.message}`,
      );
      const members = (JSON.parse(status.startsWith('{') ? status : '{}') as { members?: { name: string; ready: boolean | null }[] })
        .members;
      t.same(
        c.apiservers.map((a) => [a.name, members?.find((m) => m.name === a.name)?.ready]),
        c.apiservers.map((a) => [a.name, true]),
        `the running replica's members: the seed, every one ready (${status.slice(0, 200)})`,
      );
    },
  );

  await t.test(
    'readiness means what the chart says: a replica whose skewgate does not answer leaves the Service, and comes back',
    async (t) => {
      const { stdout } = await c.crictl([
        'ps',
        '--label',
        `io.kubernetes.pod.namespace=${NS}`,
        '--name',
        '^skewgate$',
        '--state',
        'Running',
        '-q',
      ]);
      const id = stdout.trim().split('\n')[0] ?? '';
      const pid = (JSON.parse((await c.crictl(['inspect', id])).stdout) as { info?: { pid?: number } }).info?.pid ?? 0;
      t.ok(pid > 0, `the chart's skewgate container ${id.slice(0, 12)}: pid ${pid}`);
      const t0 = Date.now();
      process.kill(pid, 'SIGSTOP');
      c.progress(`SIGSTOP the chart's skewgate (pid ${pid})`);
      try {
        const gone = await c.until('the endpoint not ready', 3 * READINESS_MS + 30_000, async () => {
          const e = await endpoints();
          return e.length > 0 && e.every((x) => !x.ready) ? e : undefined;
        });
        t.same(
          gone,
          [{ nodeName: c.nodeName, ready: false }],
          `the endpoint not ready ${((Date.now() - t0) / 1000).toFixed(1)} s after SIGSTOP`,
        );
        const refused = await c.until(`${gatewayUrl} no longer answered`, 60_000, async () => {
          const a = await viaService('/version');
          return typeof a === 'string' ? a : undefined;
        });
        t.ok(refused, `${gatewayUrl} no longer answered (${refused}): kube-proxy has no ready local endpoint`);
        // The Envoy of the replica still runs: only the readiness took it out.
        const envoy = (
          await c.crictl(['ps', '--label', `io.kubernetes.pod.namespace=${NS}`, '--name', '^envoy$', '--state', 'Running', '-q'])
        ).stdout.trim();
        t.not(envoy, '', "the replica's Envoy still running");
      } finally {
        process.kill(pid, 'SIGCONT');
        c.progress(`SIGCONT the chart's skewgate (pid ${pid})`);
      }
      const back = await c.until('the endpoint ready again', 3 * READINESS_MS + 30_000, async () => {
        const e = await endpoints();
        return e.some((x) => x.ready) ? e : undefined;
      });
      t.same(back, [{ nodeName: c.nodeName, ready: true }], 'the endpoint ready again once skewgate answers');
      const answered = await c.until(`${gatewayUrl} answered again`, 60_000, async () =>
        (await viaService(listPath(SKEWED))) === 200 ? true : undefined,
      );
      t.ok(answered, `${gatewayUrl} routes the skewed list again (200)`);
      const restarts = (await chartPod())?.status?.containerStatuses?.find((x) => x.name === 'skewgate')?.restartCount;
      t.comment(`the chart's skewgate: ${restarts} restarts (its liveness allows 60 s without an answer)`);
    },
  );

  await t.test('helm uninstall removes the release', async (t) => {
    const r = await runHelm(c.helm, ['uninstall', 'skewgate', '-n', NS, '--kubeconfig', c.adminKubeconfig]);
    t.equal(r.code, 0, `helm uninstall skewgate -n ${NS}: exit 0 ${r.stderr.trim()}`);
    const svc = await c.api(c.apiBase, 'GET', `/api/v1/namespaces/${NS}/services/skewgate-gateway`);
    t.equal(svc.status, 404, 'the Service is gone');
    // The adopted objects went with the release: the static pods' RBAC applied again.
    const role = await c.api(c.apiBase, 'GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/skewgate:discovery');
    t.equal(role.status, 404, 'the adopted ClusterRole skewgate:discovery went with the release');
    await kubectl(['apply', '-f', join(packageRoot(), 'deploy', 'kubernetes', 'rbac.yaml')]);
    const again = await c.api(c.apiBase, 'GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/skewgate:discovery');
    t.equal(again.status, 200, 'kubectl apply -f deploy/kubernetes/rbac.yaml: back for the static pods');
  });
}
