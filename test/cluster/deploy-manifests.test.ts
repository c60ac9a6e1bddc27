// deploy/ against real parts: every Kubernetes manifest is sent to a real kube-apiserver
// (KUBE_NEW) with `kubectl create --dry-run=server` and must be accepted, and so is every object
// the Helm chart (deploy/helm/skewgate) renders with the real helm; Pod Security, RBAC and
// the static pod's own skewgate config are then tried for real (skewgate + Envoy from those
// files, only paths and addresses changed, in front of that apiserver), and a control-plane
// machine added and removed at a new address (a second kube-apiserver and its Node) is followed
// with no config edit, through the xDS folder, which a restart (the init container run again)
// keeps. Fails, never skips, when a part is missing. Uses the addresses of its lab slot
// (harness/lab/slots.ts); the added machine has a serving certificate of its own, as kubeadm issues.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import type { Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Agent, request } from 'undici';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { Lab, freePort, logTail } from '../../harness/lab/lab.js';
import { packageRoot } from '../../src/util/package-root.js';
import { issueCert } from '../../harness/openssl.js';
import { SKEWGATE_GROUP } from '../../harness/lab/pki.js';
import { obj, type Obj } from '../helpers/json.js';
import { requireLabParts } from '../helpers/lab-parts.js';
import { renderKubeadmExample, requireHelm } from '../helpers/helm.js';
import { FAST_CLUSTER_PREFIX, FRONT_PROXY_SUFFIX } from '../../src/envoy/clusters.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// Missing parts fail here, with the command that provides them.
const { versions, kubectl: kubectlBin, envoy: envoyBin } = requireLabParts();
const helm = requireHelm();
const root = packageRoot();
const skewgateMain = join(root, 'dist/src/cli/main.js');
const DEPLOY = join(root, 'deploy');
const STATIC_POD = join(DEPLOY, 'static-pods/skewgate-gateway.yaml');
const STATIC_CONFIG = join(DEPLOY, 'static-pods/skewgate.yaml');
const DEPLOYMENT = join(DEPLOY, 'kubernetes/deployment.yaml');
const RBAC = join(DEPLOY, 'kubernetes/rbac.yaml');
/** Written for this test: the lab has no Prometheus Operator (the file says what it types). */
const SERVICE_MONITOR_CRD = join(root, 'test/fixtures/helm/servicemonitor-crd.yaml');

const dir = await mkdtemp(join(tmpdir(), 'skewgate-deploy-'));
const slot = claimLabSlot();
const lab = await Lab.open({
  dir: join(dir, 'lab'),
  killOnExit: true,
  addresses: slot,
  log: (l) => t.comment(l),
});
const children = new Set<ChildProcess>();
const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
const certAgent = new Agent({
  connect: {
    ca: await readFile(lab.pki.caFile, 'utf8'),
    cert: await readFile(lab.pki.adminCertFile, 'utf8'),
    key: await readFile(lab.pki.adminKeyFile, 'utf8'),
  },
});
t.teardown(async () => {
  for (const c of children) await stopChild(c, 'SIGKILL');
  await agent.close();
  await certAgent.close();
  await lab.down({ kill: true }).catch((err: unknown) => t.fail(`lab down: ${(err as Error).message}`));
  await rm(dir, { recursive: true, force: true });
});

/** Spawns a process of this test; output to a log file; stopped in teardown at the latest. */
function startChild(name: string, cmd: string, args: readonly string[]): { child: ChildProcess; log: string } {
  const log = join(dir, `${name}.log`);
  const out = createWriteStream(log);
  const child = spawn(cmd, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(out);
  child.stderr?.pipe(out);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return { child, log };
}

async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

interface Ran {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function runProcess(
  cmd: string,
  args: readonly string[],
  stdin?: string,
  timeoutMs = 60_000,
  env: Readonly<Record<string, string>> = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin ?? '');
  });
}

// Named as the config's first node: its hostname (and so its identity Lease) is cp-1's.
const KAS = { name: 'cp-1', version: versions.kubeNew, ip: slot.loopback(1), port: 6443 };
/** A control-plane machine added later, at an address the config does not name. */
const ADDED = { name: 'cp-4', version: versions.kubeNew, ip: slot.loopback(2), port: 6443 };
const kubeconfig = join(dir, 'admin.kubeconfig');
const kubectl = (args: readonly string[], stdin?: string): Promise<Ran> =>
  runProcess(kubectlBin, ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kubectl-cache'), ...args], stdin);

/**
 * Every YAML file under deploy/ whose documents are all Kubernetes objects; not compose/ (the
 * demo's) nor helm/ (templates: the chart's objects are rendered by helm, below).
 */
async function manifestFiles(d: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(d, { withFileTypes: true })) {
    const p = join(d, e.name);
    if (e.isDirectory()) {
      if (p !== join(DEPLOY, 'compose') && p !== join(DEPLOY, 'helm')) out.push(...(await manifestFiles(p)));
      continue;
    }
    if (!/\.ya?ml$/.test(e.name)) continue;
    const docs = await yamlDocs(p);
    if (docs.length > 0 && docs.every((x) => typeof x.apiVersion === 'string' && typeof x.kind === 'string')) out.push(p);
  }
  return out.sort();
}

async function yamlDocs(file: string): Promise<Obj[]> {
  const docs = parseAllDocuments(await readFile(file, 'utf8'));
  if (!Array.isArray(docs)) return [];
  return docs
    .map((d) => d.toJS({ maxAliasCount: 100 }) as unknown)
    .filter((d) => d !== null && typeof d === 'object')
    .map((x) => obj(x));
}

const files = await manifestFiles(DEPLOY);

const label = (d: Obj): string =>
  `${String(d.kind)} ${String(obj(d.metadata).namespace ?? '')}${obj(d.metadata).namespace === undefined ? '' : '/'}${String(obj(d.metadata).name)}`;

/** kubectl create --dry-run=server of one object: accepted, with no warning. */
async function dryRun(t: Test, d: Obj, where: string): Promise<Ran> {
  const res = await kubectl(['create', '--dry-run=server', '-f', '-'], stringify(d));
  t.equal(res.code, 0, `${where}: ${label(d)} accepted${res.code === 0 ? '' : `: ${res.stderr.trim()}`}`);
  t.match(
    res.stdout.trim(),
    new RegExp(`/${String(obj(d.metadata).name).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} created \\(server dry run\\)$`),
    `${where}: ${label(d)}: "created (server dry run)"`,
  );
  t.notMatch(res.stderr, /warning/i, `${where}: ${label(d)}: no warning${res.stderr.trim() === '' ? '' : `: ${res.stderr.trim()}`}`);
  return res;
}

// ---------------------------------------------------------------------------------------------

await t.test('a real kube-apiserver for the manifests', async (t) => {
  await lab.startEtcd();
  await lab.startApiServer(KAS);
  const server = lab.apiServerUrl(KAS.name);
  await writeFile(
    kubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'lab', cluster: { server, 'certificate-authority': lab.pki.caFile } }],
      users: [{ name: 'admin', user: { token: lab.pki.adminToken } }],
      contexts: [{ name: 'admin', context: { cluster: 'lab', user: 'admin' } }],
      'current-context': 'admin',
    }),
    { mode: 0o600 },
  );
  const version = await kubectl(['get', '--raw', '/version']);
  t.equal(version.code, 0, version.stderr);
  t.equal((JSON.parse(version.stdout) as { gitVersion: string }).gitVersion, `v${versions.kubeNew}`, `kube-apiserver v${versions.kubeNew}`);
  // The lab grants its own skewgate token the same role under the same names: remove them, so
  // that the manifests meet a cluster without them, as on a fresh kubeadm cluster.
  const del = await kubectl(['delete', 'clusterrolebinding/skewgate:discovery', 'clusterrole/skewgate:discovery']);
  t.equal(del.code, 0, `the lab's own copies removed: ${del.stdout.trim()} ${del.stderr.trim()}`);
  const delLeases = await kubectl(['-n', 'kube-system', 'delete', 'rolebinding/skewgate:identity-leases', 'role/skewgate:identity-leases']);
  t.equal(delLeases.code, 0, `and the identity-lease Role: ${delLeases.stdout.trim()} ${delLeases.stderr.trim()}`);
  const delService = await kubectl([
    '-n',
    'default',
    'delete',
    'rolebinding/skewgate:kubernetes-service',
    'role/skewgate:kubernetes-service',
  ]);
  t.equal(delService.code, 0, `and the kubernetes Service publisher's Role: ${delService.stdout.trim()} ${delService.stderr.trim()}`);
});

await t.test('every manifest under deploy/ is accepted by kube-apiserver (kubectl create --dry-run=server)', async (t) => {
  const rel = (f: string): string => relative(root, f);
  for (const f of [STATIC_POD, RBAC, DEPLOYMENT]) t.ok(files.includes(f), `${rel(f)} is checked`);
  const all = (await Promise.all(files.map(async (f) => (await yamlDocs(f)).map((d) => ({ file: f, doc: d }))))).flat();
  // A Namespace first, for real, so that the objects inside it can be tried.
  const namespaces = all.filter((x) => x.doc.kind === 'Namespace');
  for (const { file, doc } of namespaces) {
    await dryRun(t, doc, rel(file));
    const created = await kubectl(['create', '-f', '-'], stringify(doc));
    t.equal(created.code, 0, `${label(doc)} created for the objects inside it: ${created.stderr.trim()}`);
  }
  let n = namespaces.length;
  for (const { file, doc } of all.filter((x) => x.doc.kind !== 'Namespace')) {
    await dryRun(t, doc, rel(file));
    n++;
  }
  t.ok(n >= 10, `${n} objects from ${files.length} files`);
});

// Before the RBAC test below creates rbac.yaml's objects for real: the chart's are the same
// names, tried with --dry-run only. Its own namespace, so that its Namespace can be tried too.
await t.test('the Helm chart: every object helm template renders is accepted, the ServiceMonitor included', async (t) => {
  const ns = 'skewgate-chart';
  const where = 'helm template -f examples/kubeadm.yaml';
  const example = await renderKubeadmExample(helm, [], ns);
  const monitored = await renderKubeadmExample(helm, ['--set', 'serviceMonitor.enabled=true'], ns);
  const namespace = example.find((d) => d.kind === 'Namespace');
  t.equal(obj(namespace?.metadata).name, ns, `the chart's Namespace is the release's, ${ns}`);
  if (namespace === undefined) return;
  await dryRun(t, namespace, where);
  const created = await kubectl(['create', '-f', '-'], stringify(namespace));
  t.equal(created.code, 0, `${label(namespace)} created for the objects inside it: ${created.stderr.trim()}`);
  const inside = (docs: readonly Obj[]): Obj[] => docs.filter((d) => d.kind !== 'Namespace');
  for (const d of inside(example)) await dryRun(t, d, where);
  const plainCount = (await yamlDocs(DEPLOYMENT)).length + (await yamlDocs(RBAC)).length;
  t.equal(example.length, plainCount, `${example.length} objects, as many as deployment.yaml + rbac.yaml`);

  // serviceMonitor.enabled: against the stand-in CRD, removed again afterwards.
  const crd = await kubectl(['create', '-f', SERVICE_MONITOR_CRD]);
  t.equal(crd.code, 0, `the stand-in ServiceMonitor CRD created: ${crd.stderr.trim()}`);
  t.teardown(async () => {
    await kubectl(['delete', '--ignore-not-found', '-f', SERVICE_MONITOR_CRD]);
  });
  const established = await kubectl(['wait', '--for=condition=Established', '--timeout=30s', '-f', SERVICE_MONITOR_CRD]);
  t.equal(established.code, 0, `and established: ${established.stdout.trim()} ${established.stderr.trim()}`);
  const added = monitored.filter((d) => !example.some((e) => label(e) === label(d)));
  t.same(
    added.map(label).sort(),
    [`Service ${ns}/skewgate-gateway-metrics`, `ServiceMonitor ${ns}/skewgate-gateway`],
    'serviceMonitor.enabled adds the metrics Service and the ServiceMonitor',
  );
  for (const d of inside(monitored)) await dryRun(t, d, `${where} --set serviceMonitor.enabled=true`);
  // Negative control: the stand-in's schema is applied (a port number where the name goes).
  const sm = added.find((d) => d.kind === 'ServiceMonitor') as Obj;
  const wrong = structuredClone(sm);
  (obj(wrong.spec).endpoints as Obj[])[0] = { port: 9464, path: '/metrics' };
  const refused = await kubectl(['create', '--dry-run=server', '-f', '-'], stringify(wrong));
  t.not(refused.code, 0, 'a ServiceMonitor with endpoints[0].port: 9464 (a number) is refused');
  t.match(refused.stderr, /spec\.endpoints\[0\]\.port/, refused.stderr.trim());
  // And a field it does not type is refused (kubectl's strict field validation), so the chart's
  // ServiceMonitor uses only the fields the stand-in types.
  const unknown = structuredClone(sm);
  (obj(unknown.spec).endpoints as Obj[])[0] = { port: 'metrics', scheme: 'https' };
  const unknownRefused = await kubectl(['create', '--dry-run=server', '-f', '-'], stringify(unknown));
  t.not(unknownRefused.code, 0, 'a ServiceMonitor with a field the stand-in does not type is refused');
  t.match(unknownRefused.stderr, /unknown field "spec\.endpoints\[0\]\.scheme"/, unknownRefused.stderr.trim());
});

await t.test('Pod Security: the Deployment\'s pods meet "restricted"; the static pod needs kube-system', async (t) => {
  const docs = await yamlDocs(DEPLOYMENT);
  const dep = docs.find((d) => d.kind === 'Deployment');
  const ns = String(obj(dep?.metadata).namespace);
  const template = obj(obj(dep?.spec).template);
  const pod = (spec: Obj, name: string): Obj => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: obj(template.metadata).labels },
    spec,
  });
  // The template as a Pod: PodSecurity enforces on Pods, not on Deployments.
  await dryRun(t, pod(obj(template.spec), 'template-check'), "the Deployment's pod template");
  // Negative controls: the namespace really enforces the profile.
  const loosened = JSON.parse(JSON.stringify(template.spec)) as { containers: { securityContext: Obj }[] };
  delete loosened.containers[0]?.securityContext.allowPrivilegeEscalation;
  const refused = await kubectl(['create', '--dry-run=server', '-f', '-'], stringify(pod(loosened as unknown as Obj, 'loosened-check')));
  t.not(refused.code, 0, 'without allowPrivilegeEscalation: false the same pod is refused');
  t.match(refused.stderr, /violates PodSecurity "restricted/, refused.stderr.trim());
  const staticPod = (await yamlDocs(STATIC_POD))[0] as Obj;
  const moved = { ...staticPod, metadata: { ...obj(staticPod.metadata), namespace: ns } };
  const hostRefused = await kubectl(['create', '--dry-run=server', '-f', '-'], stringify(moved));
  t.not(hostRefused.code, 0, `the static pod (hostNetwork, hostPath) is refused in ${ns}: it belongs in kube-system`);
  t.match(hostRefused.stderr, /hostNetwork|hostPath/, hostRefused.stderr.trim());
});

await t.test('RBAC: both discovery credentials may read and watch CRDs, APIServices, Nodes and EndpointSlices, nothing more', async (t) => {
  const created = await kubectl(['create', '-f', RBAC]);
  t.equal(created.code, 0, `${relative(root, RBAC)} created: ${created.stderr.trim()}`);
  const dep = await yamlDocs(DEPLOYMENT);
  for (const d of dep.filter((x) => x.kind === 'ServiceAccount' || x.kind === 'ClusterRoleBinding')) {
    const res = await kubectl(['create', '-f', '-'], stringify(d));
    t.equal(res.code, 0, `${label(d)} created: ${res.stderr.trim()}`);
  }
  const sa = dep.find((x) => x.kind === 'ServiceAccount');
  const who: [string, string[]][] = [
    ["the static pods' certificate", ['--as', 'skewgate:cp-1', '--as-group', SKEWGATE_GROUP]],
    [
      "the Deployment's ServiceAccount",
      ['--as', `system:serviceaccount:${String(obj(sa?.metadata).namespace)}:${String(obj(sa?.metadata).name)}`],
    ],
  ];
  for (const [name, as] of who) {
    for (const verb of ['get', 'list', 'watch']) {
      for (const resource of [
        'customresourcedefinitions.apiextensions.k8s.io',
        'apiservices.apiregistration.k8s.io',
        // membership.sources
        'nodes',
        'endpointslices.discovery.k8s.io',
      ]) {
        const res = await kubectl([
          'auth',
          'can-i',
          verb,
          resource,
          ...(resource.startsWith('endpointslices') ? ['-n', 'default'] : []),
          ...as,
        ]);
        t.equal(res.stdout.trim(), 'yes', `${name}: ${verb} ${resource}`);
      }
    }
    const denied: readonly (readonly [string, string])[] = [
      ['create', 'customresourcedefinitions.apiextensions.k8s.io'],
      ['get', 'secrets'],
      ['list', 'pods'],
      ['delete', 'apiservices.apiregistration.k8s.io'],
      ['patch', 'nodes'],
      ['create', 'endpointslices.discovery.k8s.io'],
    ];
    for (const [verb, resource] of denied) {
      const res = await kubectl(['auth', 'can-i', verb, resource, '--all-namespaces', ...as]);
      t.equal(res.stdout.trim(), 'no', `${name}: not ${verb} ${resource}`);
    }
  }
});

// ---- the static pod's files, run for real ---------------------------------------------------

/** Replaces string values exactly equal to a key of `map`, everywhere in a document. */
function mapStrings(v: unknown, map: ReadonlyMap<string, string>): unknown {
  if (typeof v === 'string') return map.get(v) ?? v;
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, map));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapStrings(x, map)]));
  return v;
}
const strings = (v: unknown): string[] =>
  typeof v === 'string'
    ? [v]
    : Array.isArray(v)
      ? v.flatMap(strings)
      : v !== null && typeof v === 'object'
        ? Object.values(v).flatMap(strings)
        : [];

async function until(what: string, timeoutMs: number, check: () => Promise<string | null>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const problem = await check();
      if (problem === null) return;
      last = problem;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (${last})`);
    await sleep(200);
  }
}

async function get(
  url: string,
  o: { dispatcher?: Agent; token?: string; method?: 'GET' | 'POST'; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const res = await request(url, {
    method: o.method ?? 'GET',
    ...(o.dispatcher === undefined ? {} : { dispatcher: o.dispatcher }),
    headers: {
      ...(o.token === undefined ? {} : { authorization: `Bearer ${o.token}` }),
      ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(o.body === undefined ? {} : { body: o.body }),
    signal: AbortSignal.timeout(5000),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

await t.test("the static pod's skewgate config and probes, run: skewgate + Envoy in front of the real apiserver", async (t) => {
  const server = lab.apiServerUrl(KAS.name);
  // What `kubeadm kubeconfig user --client-name skewgate:cp-1 --org skewgate:discovery` writes:
  // a kubeconfig with an inline client certificate from the cluster CA. Its server is never used.
  const cert = await issueCert({
    dir,
    name: 'skewgate-discovery',
    subject: `/O=${SKEWGATE_GROUP}/CN=skewgate:cp-1`,
    usage: 'client',
    ca: { certFile: lab.pki.caFile, keyFile: lab.pki.caKeyFile },
  });
  const b64 = async (f: string): Promise<string> => (await readFile(f)).toString('base64');
  const kubeconfigFile = join(dir, 'skewgate.conf');
  await writeFile(
    kubeconfigFile,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        { name: 'kubernetes', cluster: { server: 'https://127.0.0.1:1', 'certificate-authority-data': await b64(lab.pki.caFile) } },
      ],
      users: [
        {
          name: 'skewgate:cp-1',
          user: { 'client-certificate-data': await b64(cert.certFile), 'client-key-data': await b64(cert.keyFile) },
        },
      ],
      contexts: [{ name: 'skewgate:cp-1@kubernetes', context: { cluster: 'kubernetes', user: 'skewgate:cp-1' } }],
      'current-context': 'skewgate:cp-1@kubernetes',
    }),
    { mode: 0o600 },
  );

  const socket = join(dir, 'extproc.sock');
  t.ok(socket.length < 100, 'the socket path fits in sun_path');
  // The node's /var/lib/skewgate/xds (hostPath): kept across the "reboot" below.
  const xdsDir = join(dir, 'xds');
  const [gatewayPort, adminPort, metricsPort, otlpPort, healthPort, skewgateAdminPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const original = parseYaml(await readFile(STATIC_CONFIG, 'utf8')) as Obj;
  const paths = new Map<string, string>([
    ['/etc/kubernetes/pki/ca.crt', lab.pki.caFile],
    ['/etc/kubernetes/pki/apiserver.crt', lab.pki.serverCertFile],
    ['/etc/kubernetes/pki/apiserver.key', lab.pki.serverKeyFile],
    ['/etc/kubernetes/pki/front-proxy-client.crt', lab.pki.frontProxyClientCertFile],
    ['/etc/kubernetes/pki/front-proxy-client.key', lab.pki.frontProxyClientKeyFile],
    ['/etc/skewgate/skewgate.conf', kubeconfigFile],
    ['/var/lib/skewgate/xds', xdsDir],
    ['unix:/run/skewgate/extproc.sock', `unix:${socket}`],
    ['https://10.0.0.11:6443', server],
    ['https://10.0.0.12:6443', server],
    ['https://10.0.0.13:6443', server],
    ['http://10.0.0.20:4317', `http://127.0.0.1:${otlpPort}`],
    ['127.0.0.1:9464', `127.0.0.1:${metricsPort}`],
    ['127.0.0.1:9003', `127.0.0.1:${skewgateAdminPort}`],
    ['0.0.0.0', '127.0.0.1'],
  ]);
  const mapped = obj(mapStrings(original, paths));
  const envoySection = obj(mapped.envoy);
  obj(envoySection.listen).port = gatewayPort;
  obj(envoySection.admin).port = adminPort;
  obj(envoySection.health).port = healthPort;
  const healthReady = async (): Promise<number> => (await get(`http://127.0.0.1:${healthPort}/ready`)).status;
  const left = strings(mapped).filter(
    (s) => s.includes('/etc/') || s.includes('/run/') || s.includes('/var/') || /\b10\.0\.0\.\d/.test(s) || s.includes('0.0.0.0'),
  );
  t.same(left, [], "every node path and address was mapped to this machine's loopback and files");
  t.same(Object.keys(mapped).sort(), Object.keys(original).sort(), 'otherwise the same config');
  const configFile = join(dir, 'skewgate.yaml');
  await writeFile(configFile, stringify(mapped));

  const pod = (await yamlDocs(STATIC_POD))[0] as Obj;
  const containers = obj(pod.spec).containers as Obj[];

  // Envoy's bootstrap as the pod renders it at start: the init container's command line, its
  // paths mapped to this machine (node, the image's CLI script, the config, the emptyDir's file).
  const bootstrapFile = join(dir, 'envoy.yaml');
  const initC = (obj(pod.spec).initContainers as Obj[]).find((c) => c.name === 'render-envoy-bootstrap') as Obj;
  const initCmd = initC.command as string[];
  t.same(initCmd.slice(0, 2), ['sh', '-c'], 'the init container runs a shell line');
  const initMap = new Map([
    ['node', process.execPath],
    ['/app/dist/src/cli/main.js', skewgateMain],
    ['/etc/skewgate/skewgate.yaml', configFile],
    ['/run/envoy/envoy.yaml', bootstrapFile],
  ]);
  const initWords = String(initCmd[2]).split(' ');
  t.same(
    initWords.filter((w) => !initMap.has(w) && !['envoy-config', '--config', '>'].includes(w)),
    [],
    `every path of the line is mapped: ${String(initCmd[2])}`,
  );
  const quote = (w: string): string => (initMap.has(w) ? `'${String(initMap.get(w)).replaceAll("'", "'\\''")}'` : w);
  const runInit = (): Promise<Ran> => runProcess('sh', ['-c', initWords.map(quote).join(' ')]);
  const rendered = await runInit();
  t.equal(rendered.code, 0, `the init container's skewgate envoy-config: ${rendered.stderr.trim()}`);
  for (const f of ['cds.json', 'rds.json'])
    t.match(rendered.stderr, `wrote the seed ${f}`, `a first start: the seed's ${f} written into the xDS folder`);
  t.same(
    (await readdir(xdsDir)).sort(),
    ['cds.json', 'rds.json', 'sds'],
    'the xDS folder holds the seed files and the SDS folder, nothing else yet',
  );
  t.equal(
    (await readdir(join(xdsDir, 'sds'))).filter((f) => f.endsWith('.json')).length,
    3,
    "one SDS file per certificate and CA bundle: serving, front-proxy, and ca.crt (the client CA and the apiservers' CA alike)",
  );
  const bootstrap = await readFile(bootstrapFile, 'utf8');
  t.match(bootstrap, `${xdsDir}/cds.json`, "Envoy's clusters come from the xDS folder");
  const direct = await runProcess(process.execPath, [skewgateMain, 'envoy-config', '--config', configFile]);
  t.equal(bootstrap, direct.stdout, 'it wrote what `skewgate envoy-config` prints for the config');
  const envoyC = containers.find((c) => c.name === 'envoy') as Obj;
  const skewgateC = containers.find((c) => c.name === 'skewgate') as Obj;
  const deploymentDocs = await yamlDocs(DEPLOYMENT);
  const depSpec = obj(obj(obj(deploymentDocs.find((d) => d.kind === 'Deployment')?.spec).template).spec);
  const depSkewgate = (depSpec.containers as Obj[]).find((c) => c.name === 'skewgate') as Obj;
  // The Deployment's probe runs here against the static pod's (mapped) config: fair only while
  // both configs put the socket and Envoy's admin interface in the same places.
  const depConfigMap = deploymentDocs.find((d) => d.kind === 'ConfigMap');
  const depConfig = parseYaml(String(obj(depConfigMap?.data)['skewgate.yaml'])) as Obj;
  t.equal(obj(depConfig.extproc).listen, obj(original.extproc).listen, "the Deployment's config: the same ext_proc socket");
  t.same(obj(obj(depConfig.envoy).admin), obj(obj(original.envoy).admin), 'and the same Envoy admin address');

  /**
   * A container's probe as the kubelet runs it, on this machine: an exec command (skewgate on the
   * image's PATH run with node, its config from the container's SKEWGATE_CONFIG, mapped), or an
   * httpGet (host and port mapped: the static pod's admin endpoint), killed after timeoutSeconds.
   */
  interface Probe {
    readonly what: string;
    readonly timeoutMs: number;
    /** What it runs: argv, or the URL it gets. */
    readonly shape: readonly string[];
    run(): Promise<Ran>;
  }
  const adminListen = String(obj(mapped.admin).listen);
  const probeOf = (c: Obj, which: string, what: string): Probe => {
    const p = obj(c[which]);
    const timeoutMs = Number(p.timeoutSeconds) * 1000;
    if (p.httpGet !== undefined) {
      const h = obj(p.httpGet);
      // The manifest's host:port is the config's admin.listen on the node; here, the mapped one.
      const url = `http://${h.host === '127.0.0.1' && Number(h.port) === 9003 ? adminListen : `${String(h.host)}:${String(h.port)}`}${String(h.path)}`;
      return {
        what: `${what} ${which} (GET ${String(h.host)}:${String(h.port)}${String(h.path)})`,
        timeoutMs,
        shape: ['GET', url],
        run: async () => {
          try {
            const r = await request(url, { signal: AbortSignal.timeout(timeoutMs) });
            await r.body.dump();
            // The kubelet: 200-399 passes.
            return { code: r.statusCode >= 200 && r.statusCode < 400 ? 0 : 1, stdout: '', stderr: `HTTP ${r.statusCode}` };
          } catch (err) {
            return { code: 1, stdout: '', stderr: (err as Error).message };
          }
        },
      };
    }
    const command = obj(p.exec).command as string[];
    const argv = command[0] === 'skewgate' ? [process.execPath, skewgateMain, ...command.slice(1)] : command;
    const env = (c.env as { name: string; value: string }[] | undefined)?.find((e) => e.name === 'SKEWGATE_CONFIG');
    return {
      what: `${what} ${which} (${command.join(' ')})`,
      timeoutMs,
      shape: argv,
      run: () =>
        runProcess(argv[0] as string, argv.slice(1), undefined, timeoutMs, env === undefined ? {} : { SKEWGATE_CONFIG: configFile }),
    };
  };
  const staticProbes = ['startupProbe', 'readinessProbe', 'livenessProbe'].map((w) => probeOf(skewgateC, w, 'static pod'));
  const depReady = probeOf(depSkewgate, 'readinessProbe', 'Deployment');
  for (const p of staticProbes)
    t.same(p.shape, ['GET', `http://${adminListen}/healthz`], `${p.what}: the admin endpoint's /healthz, mapped`);
  t.same(depReady.shape, [process.execPath, skewgateMain, 'health', '--envoy'], `${depReady.what}: skewgate health --envoy, mapped`);
  for (const w of ['startupProbe', 'livenessProbe'])
    t.same(obj(depSkewgate[w]).grpc, { port: 9004 }, `Deployment ${w}: the kubelet's gRPC probe on extproc.healthListen's port`);
  t.equal(obj(depConfig.extproc).healthListen, '0.0.0.0:9004', "the Deployment's config: extproc.healthListen, the probes' port");
  const runProbe = (p: Probe): Promise<Ran> => p.run();
  const probePasses = async (t: Test, p: Probe, why: string): Promise<void> => {
    const r = await runProbe(p);
    t.equal(r.code, 0, `${p.what} passes: ${why}${r.code === 0 ? '' : ` (${r.stderr.trim()})`}`);
  };
  const probeFails = async (t: Test, p: Probe, why: string): Promise<void> => {
    const r = await runProbe(p);
    t.ok(r.code !== null && r.code !== 0, `${p.what} fails (exit ${String(r.code)}): ${why}`);
    t.match(r.stderr.trim(), /^[^\n]+$/, `one line of reason on stderr: ${r.stderr.trim()}`);
  };

  // skewgate, as the container runs it (args of the manifest, config path mapped).
  const sgArgs = (skewgateC.args as string[]).map((a) => (a === '/etc/skewgate/skewgate.yaml' ? configFile : a));
  t.same(sgArgs, ['serve', '--config', configFile], 'skewgate serve --config');
  const sg = startChild('skewgate', process.execPath, [skewgateMain, ...sgArgs]);
  const [startup, readiness, liveness] = staticProbes as [Probe, Probe, Probe];
  await until('skewgate serving', 30_000, async () => ((await runProbe(startup)).code === 0 ? null : await logTail(sg.log, 5)));
  t.pass(`${startup.what} passes once skewgate serves`);
  await probePasses(t, readiness, 'skewgate serving');
  await probePasses(t, liveness, 'skewgate serving');

  // Envoy, with the manifest's command line (bootstrap path mapped).
  const envoyArgs = (envoyC.args as string[]).map((a) => (a === '/run/envoy/envoy.yaml' ? bootstrapFile : a));
  t.ok(envoyArgs.includes(bootstrapFile), 'Envoy starts from the file the init container wrote');
  const envoy = startChild('envoy', envoyBin, envoyArgs);
  const admin = `http://127.0.0.1:${adminPort}`;
  const stat = async (name: string): Promise<string | undefined> => {
    const res = await get(`${admin}/stats?filter=${encodeURIComponent(`^${name.replace(/\./g, '\\.')}$`)}`);
    return new RegExp(`^${name.replace(/\./g, '\\.')}: (\\S+)$`, 'm').exec(res.body)?.[1];
  };
  await until('Envoy ready, every apiserver and skewgate healthy', 30_000, async () => {
    const ready = await get(`${admin}/ready`);
    if (ready.status !== 200) return `/ready ${ready.status}`;
    const ext = await stat('cluster.skewgate-extproc.membership_healthy');
    const pool = await stat('cluster.default_front-proxy.membership_healthy');
    return ext === '1' && pool === '3'
      ? null
      : `skewgate-extproc healthy ${ext ?? '?'}, default_front-proxy ${pool ?? '?'} of 3 (${await logTail(envoy.log, 5)})`;
  });
  t.pass('Envoy: /ready, the three apiservers and skewgate healthy');
  t.equal(await healthReady(), 200, 'the health listener: GET /ready 200 (a ready apiserver, a healthy skewgate)');
  await probePasses(t, depReady, 'skewgate SERVING, Envoy /ready');

  const gateway = `https://127.0.0.1:${gatewayPort}`;
  const version = await get(`${gateway}/version`, { dispatcher: agent, token: lab.pki.adminToken });
  t.equal(version.status, 200, 'a token request through the gateway');
  t.equal((JSON.parse(version.body) as { gitVersion: string }).gitVersion, `v${versions.kubeNew}`);
  const review = JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
  const whoami = async (): Promise<{ status: number; body: string }> =>
    get(`${gateway}/apis/authentication.k8s.io/v1/selfsubjectreviews`, { dispatcher: certAgent, method: 'POST', body: review });
  const me = await whoami();
  t.equal(me.status, 201, `a client certificate through the gateway: ${me.body.slice(0, 200)}`);
  const user = (JSON.parse(me.body) as { status: { userInfo: { username: string; groups: string[] } } }).status.userInfo;
  t.equal(user.username, 'kubernetes-admin', "stated as the certificate's user (front-proxy with kubeadm's file names)");
  t.ok(user.groups.includes('system:masters'), 'and its group');

  // Names the runbook and replicas.md tell operators to look at.
  const metrics = (await get(`http://127.0.0.1:${metricsPort}/metrics`)).body;
  for (const m of [
    'skewgate_decisions_total',
    'skewgate_discovery_view_age_seconds',
    'skewgate_apiserver_ready',
    'skewgate_skew_resources',
    'skewgate_discovery_fetch_duration_seconds',
  ]) {
    t.match(metrics, new RegExp(`^${m}`, 'm'), `skewgate metric ${m}`);
  }
  const docs = `${await readFile(join(DEPLOY, 'runbook.md'), 'utf8')}\n${await readFile(join(DEPLOY, 'replicas.md'), 'utf8')}`;
  for (const s of [
    'http.skewgate.ext_proc.failure_mode_allowed',
    'http.skewgate.ext_proc.streams_failed',
    'cluster.skewgate-extproc.membership_healthy',
    'cluster.default.membership_healthy',
  ]) {
    t.ok((await stat(s)) !== undefined, `Envoy stat ${s} exists`);
    t.ok(docs.includes(s), `and the docs name it as ${s}`);
  }
  // The runbook compares Envoy's /certs with `openssl x509 -serial` of the file on disk.
  const certs = JSON.parse((await get(`${admin}/certs`)).body) as {
    certificates: { cert_chain?: { path?: string; serial_number?: string; expiration_time?: string }[] }[];
  };
  const onDisk = new X509Certificate(await readFile(lab.pki.frontProxyClientCertFile)).serialNumber;
  // Loaded through SDS (envoy.xds), by the file's name.
  const loaded = certs.certificates.flatMap((c) => c.cert_chain ?? []).find((c) => c.serial_number?.toUpperCase() === onDisk.toUpperCase());
  t.comment(`/certs: ${JSON.stringify(loaded)}; openssl serial=${onDisk}`);
  t.ok(loaded, '/certs shows the serial of the front-proxy certificate Envoy loaded, as openssl prints it');
  t.ok(loaded?.expiration_time, 'and its expiry');

  // Draining a node (runbook): /ready goes 503, the pod's readiness with it; and back.
  t.equal((await get(`${admin}/healthcheck/fail`, { method: 'POST' })).status, 200, 'POST /healthcheck/fail');
  t.equal((await get(`${admin}/ready`)).status, 503, '/ready 503: the load balancer takes the node out');
  t.equal(await healthReady(), 503, 'the health listener (port of envoy.health) says 503 too');
  await probeFails(t, depReady, 'Envoy /ready 503');
  await probePasses(t, liveness, 'skewgate is fine; a drained Envoy restarts nothing');
  await probePasses(t, readiness, "the static pod's Envoy container reports the drain itself");
  t.equal(
    (await get(`${gateway}/version`, { dispatcher: agent, token: lab.pki.adminToken })).status,
    200,
    'requests still served meanwhile',
  );
  t.equal((await get(`${admin}/healthcheck/ok`, { method: 'POST' })).status, 200, 'POST /healthcheck/ok');
  t.equal((await get(`${admin}/ready`)).status, 200, '/ready 200 again');
  t.equal(await healthReady(), 200, 'the health listener 200 again');
  await probePasses(t, depReady, 'Envoy /ready 200 again');

  // A control-plane machine added (runbook: adding or removing a control-plane machine): its
  // apiserver at an address no config names, then its Node. The lab has no kubelets: the test
  // writes the Nodes where the machines' kubelets (and kubeadm's control-plane label) would.
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  const gauge = async (name: string, role?: string): Promise<number | undefined> => {
    const labels = role === undefined ? '(?:\\{[^}]*\\})?' : `\\{[^}]*role="${role}"[^}]*\\}`;
    const m = new RegExp(`^${name}${labels} (\\S+)`, 'm').exec((await get(metricsUrl)).body);
    return m?.[1] === undefined ? undefined : Number(m[1]);
  };
  /** skewgate's JSON log lines with this message (and server). */
  const logLines = async (log: string, msg: string, server?: string): Promise<Obj[]> =>
    (await readFile(log, 'utf8'))
      .split('\n')
      .flatMap((l): Obj[] => {
        try {
          return l.startsWith('{') ? [obj(JSON.parse(l))] : [];
        } catch {
          return []; // the line being written
        }
      })
      .filter((l) => l.msg === msg && (server === undefined || l.server === server));
  const xdsText = (f: string): Promise<string> => readFile(join(xdsDir, f), 'utf8');
  const node = (name: string, ip: string): Obj => ({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'node-role.kubernetes.io/control-plane': '', 'kubernetes.io/hostname': name } },
    status: { addresses: [{ type: 'InternalIP', address: ip }] },
  });
  const LEARNT = `learnt-${ADDED.ip.replaceAll('.', '-')}-${ADDED.port}`;
  const registered = await kubectl(['create', '-f', '-'], stringify(node(KAS.name, KAS.ip)));
  t.equal(registered.code, 0, `the existing machine's Node ${KAS.name} (${KAS.ip}): ${registered.stderr.trim()}`);
  // Its own serving certificate, as kubeadm issues one per node: the cluster CA, the `kubernetes`
  // names (what the template verifies), its hostname, the Service IP and its address.
  const addedCert = await issueCert({
    dir,
    name: `${ADDED.name}-apiserver`,
    subject: '/CN=kube-apiserver',
    usage: 'server',
    ca: { certFile: lab.pki.caFile, keyFile: lab.pki.caKeyFile },
    sans: [
      'DNS:kubernetes',
      'DNS:kubernetes.default',
      'DNS:kubernetes.default.svc',
      'DNS:kubernetes.default.svc.cluster.local',
      `DNS:${ADDED.name}`,
      'IP:10.96.0.1',
      `IP:${ADDED.ip}`,
    ],
  });
  await lab.startApiServer({
    ...ADDED,
    extraArgs: [`--tls-cert-file=${addedCert.certFile}`, `--tls-private-key-file=${addedCert.keyFile}`],
  });
  const added = await kubectl(['create', '-f', '-'], stringify(node(ADDED.name, ADDED.ip)));
  t.equal(added.code, 0, `the new machine's Node ${ADDED.name} (${ADDED.ip}): ${added.stderr.trim()}`);
  await until(`${LEARNT} admitted`, 30_000, async () =>
    (await logLines(sg.log, 'apiserver admitted as a member', LEARNT)).length > 0 ? null : await logTail(sg.log, 3),
  );
  const learnt = (await logLines(sg.log, 'apiserver learnt; probing it', LEARNT))[0];
  t.ok(learnt, `logged: apiserver learnt; probing it (${JSON.stringify(learnt)})`);
  t.equal(learnt?.url, `https://${ADDED.ip}:${ADDED.port}`, "at its Node's InternalIP and membership.port");
  t.equal(learnt?.hostname, ADDED.name, "with the Node's hostname (its identity Lease's)");
  t.pass('logged: apiserver admitted as a member (TLS verified as "kubernetes" with the template, /readyz, discovery)');
  await until('the xDS files name it', 10_000, async () =>
    (await logLines(sg.log, 'xds: Envoy clusters and routes written')).some((l) => (l.routable as string[]).includes(LEARNT)) &&
    (await xdsText('rds.json')).includes(LEARNT)
      ? null
      : 'not yet',
  );
  t.match(await xdsText('cds.json'), `"${LEARNT}"`, 'cds.json: its cluster');
  t.match(await xdsText('cds.json'), `"${LEARNT}_front-proxy"`, 'and its front-proxy twin');
  t.match(await xdsText('rds.json'), `"exact": "${LEARNT}"`, 'rds.json: its route');
  const members = (JSON.parse(await xdsText('members.json')) as { members: { name: string; url: string; hostname?: string }[] }).members;
  t.same(
    members.find((m) => m.name === LEARNT),
    { name: LEARNT, url: `https://${ADDED.ip}:${ADDED.port}`, hostname: ADDED.name },
    'members.json: the learnt member',
  );
  t.equal(members.length, 4, 'members.json: the three seeds and the learnt one');
  t.equal(await gauge('skewgate_membership_members', 'member'), 4, 'skewgate_membership_members{role="member"} 4');
  t.equal(await gauge('skewgate_membership_members', 'probing'), 0, '{role="probing"} 0');
  t.equal(
    await gauge('skewgate_membership_unmatched_identities'),
    0,
    "skewgate_membership_unmatched_identities 0: cp-4's Lease matched by its Node's hostname",
  );
  await until('Envoy: the learnt cluster healthy and in the pools', 30_000, async () => {
    const own = await stat(`cluster.${LEARNT}.membership_healthy`);
    const pool = await stat('cluster.default.membership_healthy');
    const fpPool = await stat('cluster.default_front-proxy.membership_healthy');
    return own === '1' && pool === '4' && fpPool === '4'
      ? null
      : `${LEARNT} ${own ?? '?'}, default ${pool ?? '?'}, default_front-proxy ${fpPool ?? '?'}`;
  });
  t.pass(`Envoy (no restart): ${LEARNT} healthy, default and default_front-proxy balance over 4`);
  for (let i = 0; i < 40; i++) {
    t.equal((await get(`${gateway}/version`, { dispatcher: agent, token: lab.pki.adminToken })).status, 200, `token request ${i}`);
    t.equal((await whoami()).status, 201, `certificate request ${i}`);
  }
  const clusters = (await get(`${admin}/clusters`)).body;
  // Requests to the new machine through the clusters whose names match (the pools, and the fast pools).
  const rq = (c: string): number =>
    [...clusters.matchAll(new RegExp(`^${c}::${ADDED.ip}:${ADDED.port}::rq_total::(\\d+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
  t.ok(rq('default') > 0, `tokens balanced onto the new machine too (default: ${rq('default')} of 40)`);
  // A SelfSubjectReview is served alike by every apiserver: Envoy's Lua states the certificate and
  // the fast pool's front-proxy cluster takes it (docs/design.md, "Certificates on the fast path").
  const certRequests = rq(`(?:default|${FAST_CLUSTER_PREFIX}[0-9a-f]+)${FRONT_PROXY_SUFFIX}`);
  t.ok(certRequests > 0, `certificates too, stated over the front-proxy certificate (${certRequests} of 40)`);

  // skewgate down on one node (runbook): its probe fails, Envoy fails open for tokens and
  // answers 401 for certificates.
  await stopChild(sg.child);
  for (const p of staticProbes) await probeFails(t, p, 'skewgate stopped (liveness: the kubelet restarts it)');
  await probeFails(t, depReady, 'skewgate stopped: the replica leaves the Service');
  await until('Envoy sees skewgate gone', 15_000, async () =>
    (await stat('cluster.skewgate-extproc.membership_healthy')) === '0' ? null : 'still healthy',
  );
  t.equal(await healthReady(), 503, 'no skewgate reachable (no peers here): the health listener fails, the balancer leaves this node');
  const allowedBefore = Number(await stat('http.skewgate.ext_proc.failure_mode_allowed'));
  t.equal(
    (await get(`${gateway}/version`, { dispatcher: agent, token: lab.pki.adminToken })).status,
    200,
    'tokens: balanced without skewgate (fail open)',
  );
  t.ok(
    Number(await stat('http.skewgate.ext_proc.failure_mode_allowed')) > allowedBefore,
    'http.skewgate.ext_proc.failure_mode_allowed counts it (what replicas.md says to watch)',
  );
  const unstated = await whoami();
  t.equal(unstated.status, 401, "certificates: 401 from Envoy's backstop");
  t.match(unstated.body, /"kind":"Status"/);
  await stopChild(envoy.child);
  t.equal(children.size, 0, 'skewgate and Envoy stopped');

  // A reboot (or the pod restarted): the init container runs again and keeps the files skewgate
  // wrote, so Envoy starts from the last members, whether skewgate runs yet or not (invariant 4).
  const again = await runInit();
  t.equal(again.code, 0, `the init container again: ${again.stderr.trim()}`);
  for (const f of ['cds.json', 'rds.json']) t.match(again.stderr, `kept ${f}`, `${f} kept (the members skewgate last wrote)`);
  t.match(await xdsText('cds.json'), `"${LEARNT}"`, 'cds.json still has the learnt member');
  const envoy2 = startChild('envoy-2', envoyBin, envoyArgs);
  await until('Envoy up from the kept files, skewgate not started', 30_000, async () => {
    const ready = (await get(`${admin}/ready`).catch(() => ({ status: 0 }))).status;
    const own = await stat(`cluster.${LEARNT}.membership_healthy`).catch(() => undefined);
    const pool = await stat('cluster.default.membership_healthy').catch(() => undefined);
    return ready === 200 && own === '1' && pool === '4' ? null : `/ready ${ready}, ${LEARNT} ${own ?? '?'}, default ${pool ?? '?'}`;
  });
  t.pass(`Envoy restarted without skewgate: ${LEARNT} and the seeds, as last written`);
  t.equal((await get(`${gateway}/version`, { dispatcher: agent, token: lab.pki.adminToken })).status, 200, 'tokens balanced meanwhile');
  const sg2 = startChild('skewgate-2', process.execPath, [skewgateMain, ...sgArgs]);
  await until('skewgate serving again', 30_000, async () => ((await runProbe(startup)).code === 0 ? null : await logTail(sg2.log, 5)));
  t.equal(
    await gauge('skewgate_membership_members', 'member'),
    4,
    'the restarted skewgate counts the learnt member from the start (members.json)',
  );
  t.same(await logLines(sg2.log, 'apiserver learnt; probing it'), [], 'it did not have to learn it again');
  await until('Envoy sees skewgate again', 15_000, async () =>
    (await stat('cluster.skewgate-extproc.membership_healthy')) === '1' ? null : 'not yet',
  );
  t.equal((await whoami()).status, 201, 'certificates stated again');

  // The machine removed, as kubeadm or Cluster API does it: its Node deleted, its apiserver stopped.
  const deleted = await kubectl(['delete', 'node', ADDED.name]);
  t.equal(deleted.code, 0, `Node ${ADDED.name} deleted: ${deleted.stderr.trim()}`);
  await until(`${LEARNT} draining`, 15_000, async () =>
    (await logLines(sg2.log, 'apiserver left every source: draining', LEARNT)).length > 0 ? null : await logTail(sg2.log, 3),
  );
  t.pass('logged: apiserver left every source: draining');
  // The gauge follows the published snapshot, which comes a moment after the log line (Envoy's
  // fast-path routes are withdrawn first: docs/design.md, invariant 7).
  await until('the draining gauge', 5_000, async () =>
    (await gauge('skewgate_membership_members', 'draining')) === 1
      ? null
      : `draining ${await gauge('skewgate_membership_members', 'draining')}`,
  ).catch(() => undefined);
  t.equal(await gauge('skewgate_membership_members', 'draining'), 1, 'skewgate_membership_members{role="draining"} 1');
  await lab.stopApiServer(ADDED.name);
  const drainMs = Number(/^(\d+)s$/.exec(String(obj(mapped.membership).drainTimeout))?.[1] ?? 30) * 1000;
  await until(`${LEARNT} removed`, drainMs + 15_000, async () =>
    (await logLines(sg2.log, 'drained apiserver removed', LEARNT)).length > 0 ? null : 'not yet',
  );
  t.pass(`logged: drained apiserver removed (after membership.drainTimeout, ${drainMs / 1000} s)`);
  await until('gone from the xDS files and Envoy', 15_000, async () => {
    const cds = await xdsText('cds.json');
    const own = await stat(`cluster.${LEARNT}.membership_healthy`);
    const pool = await stat('cluster.default.membership_healthy');
    return !cds.includes(LEARNT) && own === undefined && pool === '3'
      ? null
      : `cds ${cds.includes(LEARNT)}, ${LEARNT} ${own ?? '-'}, default ${pool ?? '?'}`;
  });
  t.notMatch(await xdsText('rds.json'), LEARNT, 'rds.json: no route to it');
  t.notMatch(await xdsText('members.json'), LEARNT, 'members.json: not a member');
  t.equal(await gauge('skewgate_membership_members', 'member'), 3, '{role="member"} 3 again');
  t.equal((await get(`${gateway}/version`, { dispatcher: agent, token: lab.pki.adminToken })).status, 200, 'served by the others');
  await stopChild(sg2.child);
  await stopChild(envoy2.child);
  t.equal(children.size, 0, 'skewgate and Envoy stopped');
});
