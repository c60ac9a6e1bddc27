// deploy/helm/skewgate, rendered by the REAL helm (lab/build-helm.sh, from the Go module proxy):
// `helm lint`; `helm template` with examples/kubeadm.yaml equals deploy/kubernetes/deployment.yaml
// + rbac.yaml object for object (the differences allowed are listed in ALLOWED below), so the
// chart and the plain manifests cannot drift apart; the chart refuses missing apiservers and
// values its schema does not allow; the ServiceMonitor scrapes skewgate's metrics port; and the
// ConfigMap's skewgate.yaml passes the real `skewgate validate` against fake apiservers.
// test/cluster/deploy-manifests.test.ts sends the rendered objects to a real kube-apiserver.
// Missing helm → the test fails with the command that builds it; it never skips.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer, FakeCluster, createPki } from '../../harness/fake/index.js';
import { CHART, KUBEADM_VALUES, pinnedHelmVersion, renderKubeadmExample, requireHelm, runHelm, yamlObjects } from '../helpers/helm.js';
import { arr, at, obj, objs, str, type Obj } from '../helpers/json.js';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

const helm = requireHelm();
const root = packageRoot();
const dir = mkdtempSync(join(tmpdir(), 'sg-helm-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const chart = obj(parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')), 'Chart.yaml');
const packageVersion = str(obj(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))).version, 'package.json version');
const plainFiles = ['deploy/kubernetes/deployment.yaml', 'deploy/kubernetes/rbac.yaml'];
const plain = plainFiles.flatMap((f) => yamlObjects(readFileSync(join(root, f), 'utf8'), f));

/**
 * What the chart's objects may have that deploy/kubernetes's do not, and nothing else:
 *  1. Helm's standard labels, exactly these, in every object's metadata.labels (not in selectors
 *     or the pod template's labels);
 *  2. the ConfigMap's skewgate.yaml is compared as the YAML it holds (the chart writes it with
 *     toYaml: its own comments, keys sorted);
 *  3. the render sets namespace.create=true (renderKubeadmExample): helm install cannot own the
 *     namespace it installs into, so the chart leaves the Namespace out by default.
 */
const ALLOWED = {
  labels: {
    'helm.sh/chart': `skewgate-${str(chart.version, 'Chart.yaml version')}`,
    'app.kubernetes.io/instance': 'skewgate',
    'app.kubernetes.io/version': str(chart.appVersion, 'Chart.yaml appVersion'),
    'app.kubernetes.io/managed-by': 'Helm',
  },
  parsedData: { ConfigMap: 'skewgate.yaml' },
  /** The pod template's annotation that rolls the pods on a config change: a SHA-256 of the rendered ConfigMap. */
  podAnnotations: { 'checksum/config': /^[0-9a-f]{64}$/ },
} as const;

const keyOf = (o: Obj): string => {
  const m = obj(o.metadata, 'metadata');
  return `${String(o.kind)} ${String(m.namespace ?? '')}/${String(m.name)}`;
};

/** Where a and b differ: JSON-like paths, empty when they are equal (arrays in order, types strict). */
function differences(a: unknown, b: unknown, path = ''): string[] {
  if (Array.isArray(a) && Array.isArray(b)) {
    const out = a.length === b.length ? [] : [`${path}: ${a.length} items, expected ${b.length}`];
    for (let i = 0; i < Math.min(a.length, b.length); i++) out.push(...differences(a[i], b[i], `${path}[${i}]`));
    return out;
  }
  const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    return [...new Set([...Object.keys(a), ...Object.keys(b)])]
      .sort()
      .flatMap((k) =>
        !(k in a)
          ? [`${path}.${k}: missing`]
          : !(k in b)
            ? [`${path}.${k}: not expected (${JSON.stringify(a[k])})`]
            : differences(a[k], b[k], `${path}.${k}`),
      );
  }
  return a === b ? [] : [`${path}: ${JSON.stringify(a)}, expected ${JSON.stringify(b)}`];
}

/** An object as compared: the ConfigMap's file parsed. */
function comparable(o: Obj): Obj {
  const copy = structuredClone(o);
  if (copy.kind === 'ConfigMap') {
    const data = obj(copy.data, 'ConfigMap data');
    const file = ALLOWED.parsedData.ConfigMap;
    data[file] = parseYaml(str(data[file], `ConfigMap ${file}`)) as unknown;
  }
  return copy;
}

/** A chart object with Helm's labels checked and taken out, so it compares with the plain one. */
function withoutHelmLabels(o: Obj): { object: Obj; problems: string[] } {
  const copy = structuredClone(o);
  const labels = obj(obj(copy.metadata, 'metadata').labels ?? {}, 'labels');
  const problems: string[] = [];
  for (const [k, v] of Object.entries(ALLOWED.labels)) {
    if (labels[k] !== v) problems.push(`${keyOf(o)}: label ${k} is ${JSON.stringify(labels[k])}, expected ${JSON.stringify(v)}`);
    delete labels[k];
  }
  if (copy.kind === 'Deployment') {
    const meta = obj(obj(obj(copy.spec, 'spec').template, 'template').metadata, 'template metadata');
    const annotations = obj(meta.annotations ?? {}, 'annotations');
    for (const [k, pattern] of Object.entries(ALLOWED.podAnnotations)) {
      if (!pattern.test(String(annotations[k]))) problems.push(`${keyOf(o)}: pod annotation ${k} is ${JSON.stringify(annotations[k])}`);
      delete annotations[k];
    }
    if (Object.keys(annotations).length === 0) delete meta.annotations;
  }
  return { object: copy, problems };
}

/** Every difference between the chart's objects and deploy/kubernetes's, beyond ALLOWED. */
function driftFromPlain(rendered: readonly Obj[]): string[] {
  const want = new Map(plain.map((o) => [keyOf(o), comparable(o)]));
  const got = new Map(rendered.map((o) => [keyOf(o), o]));
  const out: string[] = [];
  for (const k of want.keys()) if (!got.has(k)) out.push(`${k}: not rendered by the chart`);
  for (const [k, o] of got) {
    const expected = want.get(k);
    if (expected === undefined) {
      out.push(`${k}: rendered by the chart, not in ${plainFiles.join(' or ')}`);
      continue;
    }
    const { object, problems } = withoutHelmLabels(o);
    out.push(...problems, ...differences(comparable(object), expected, k));
  }
  return out;
}

const configOf = (objects: readonly Obj[]): Obj => {
  const cm = objects.find((o) => o.kind === 'ConfigMap');
  return obj(parseYaml(str(obj(cm?.data, 'ConfigMap data')['skewgate.yaml'], 'skewgate.yaml')), 'skewgate.yaml');
};

// ---------------------------------------------------------------------------------------------

t.test('helm is the pinned release; the chart is skewgate at package.json version', async (t) => {
  const v = await runHelm(helm, ['version', '--short']);
  t.equal(v.code, 0, v.stderr);
  t.equal(v.stdout.trim(), `v${pinnedHelmVersion()}`, `${helm} reports v${pinnedHelmVersion()} (lab/versions.env)`);
  t.equal(chart.apiVersion, 'v2', 'Chart.yaml apiVersion v2');
  t.equal(chart.appVersion, packageVersion, `appVersion ${String(chart.appVersion)} = package.json version`);
});

t.test('helm lint: the chart, with its defaults and with the example (--strict)', async (t) => {
  const lint = await runHelm(helm, ['lint', CHART]);
  t.equal(lint.code, 0, lint.stdout + lint.stderr);
  t.match(lint.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  const strict = await runHelm(helm, ['lint', '--strict', CHART, '-f', KUBEADM_VALUES]);
  t.equal(strict.code, 0, strict.stdout + strict.stderr);
  t.notMatch(strict.stdout + strict.stderr, /\[(WARNING|ERROR)\]/, 'no warning or error');
  // Negative control: lint does check (the schema here).
  const bad = await runHelm(helm, ['lint', CHART, '-f', KUBEADM_VALUES, '--set', 'replicas=three']);
  t.not(bad.code, 0, 'lint fails a value the schema refuses');
  t.match(bad.stdout + bad.stderr, /1 chart\(s\) failed/);
});

t.test('helm template with examples/kubeadm.yaml = deploy/kubernetes/deployment.yaml + rbac.yaml', async (t) => {
  const rendered = await renderKubeadmExample(helm);
  t.ok(plain.length >= 14, `${plain.length} objects in ${plainFiles.join(' and ')}`);
  t.same(rendered.map(keyOf).sort(), plain.map(keyOf).sort(), 'the same objects (kind, namespace, name)');
  t.same(driftFromPlain(rendered), [], 'each one equal, but for ALLOWED (Helm labels; skewgate.yaml compared parsed)');
  // The comparison can fail: one value changed is found, at its path, and nothing else.
  const changed = await renderKubeadmExample(helm, ['--set', 'replicas=2', '--set', 'config.log.level=debug']);
  t.same(
    driftFromPlain(changed),
    [
      'ConfigMap skewgate/skewgate-gateway.data.skewgate.yaml.log.level: "debug", expected "info"',
      'Deployment skewgate/skewgate-gateway.spec.replicas: 2, expected 3',
    ],
    'replicas=2 and config.log.level=debug are found, at their paths',
  );
  const relabelled = await renderKubeadmExample(helm, [], 'elsewhere');
  t.ok(
    driftFromPlain(relabelled).some((d) => d.includes('Namespace /elsewhere: rendered by the chart')),
    'another namespace is a difference too',
  );
});

t.test('checksum/config: a config change rolls the pods, a replica count does not (issue 30)', async (t) => {
  const checksum = (objects: readonly Obj[]): unknown => {
    const d = objects.find((o) => o.kind === 'Deployment');
    return obj(obj(obj(obj(d?.spec, 'spec').template, 'template').metadata, 'metadata').annotations, 'annotations')['checksum/config'];
  };
  const base = checksum(await renderKubeadmExample(helm));
  t.match(base, /^[0-9a-f]{64}$/);
  t.not(checksum(await renderKubeadmExample(helm, ['--set', 'config.log.level=debug'])), base, 'the config changed: another checksum');
  t.equal(checksum(await renderKubeadmExample(helm, ['--set', 'replicas=2'])), base, 'only the replicas changed: the same');
});

t.test('no apiservers: helm template fails with the required message', async (t) => {
  for (const args of [[], ['--set', 'apiservers=null']]) {
    const r = await runHelm(helm, ['template', 'skewgate', CHART, '--namespace', 'skewgate', ...args]);
    t.not(r.code, 0, `helm template ${args.join(' ')} fails`);
    // From the ConfigMap, wherever helm renders it first (the Deployment's checksum includes it).
    t.match(
      r.stderr,
      /execution error at \(skewgate\/templates\/(configmap|deployment)\.yaml.*\): apiservers is required: the seed/,
      r.stderr.trim(),
    );
    t.equal(r.stdout, '', 'and renders nothing');
  }
});

t.test("values.schema.json: helm refuses a wrong type or an unknown value with the schema's message", async (t) => {
  const cases: [string[], RegExp][] = [
    [['--set', 'replicas=three'], /at '\/replicas': got string, want integer/],
    [['--set', 'replicaCount=3'], /additional properties 'replicaCount' not allowed/],
    [['--set', 'apiservers[0].name=cp-1,apiservers[0].url=http://10.0.0.11:6443'], /at '\/apiservers\/0\/url'/],
    [['--set', 'nodePort=6443'], /at '\/nodePort'/],
    [['--set', 'telemetry.tracing.samplerRatio=2'], /at '\/telemetry\/tracing\/samplerRatio'/],
  ];
  for (const [args, message] of cases) {
    const r = await runHelm(helm, ['template', 'skewgate', CHART, '-f', KUBEADM_VALUES, ...args]);
    t.not(r.code, 0, `${args.join(' ')}: refused`);
    t.match(r.stderr, /values don't meet the specifications of the schema\(s\)/, `${args.join(' ')}: by the schema`);
    t.match(r.stderr, message, r.stderr.trim());
  }
  // Refused by the templates, with the value to use instead.
  const seedInConfig = await runHelm(helm, ['template', 'skewgate', CHART, '-f', KUBEADM_VALUES, '--set', 'config.apiservers[0].name=x']);
  t.not(seedInConfig.code, 0, 'config.apiservers: refused');
  t.match(seedInConfig.stderr, /config\.apiservers: set the seed in `apiservers`/);
});

t.test('imagePullSecrets: names, or {name} objects, on the pod (issue 30); anything else refused by the schema', async (t) => {
  const r = await runHelm(helm, [
    'template',
    'skewgate',
    CHART,
    '-f',
    KUBEADM_VALUES,
    '--set',
    'imagePullSecrets[0]=registry-a',
    '--set',
    'imagePullSecrets[1].name=registry-b',
  ]);
  t.equal(r.code, 0, r.stderr);
  const deployment = parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Record<string, unknown>)
    .find((d) => d?.['kind'] === 'Deployment') as { spec: { template: { spec: { imagePullSecrets?: unknown } } } } | undefined;
  t.same(deployment?.spec.template.spec.imagePullSecrets, [{ name: 'registry-a' }, { name: 'registry-b' }]);
  const none = await runHelm(helm, ['template', 'skewgate', CHART, '-f', KUBEADM_VALUES]);
  t.notMatch(none.stdout, /imagePullSecrets/, 'none by default: the manifests stay as deploy/kubernetes/ has them');
  const bad = await runHelm(helm, ['template', 'skewgate', CHART, '-f', KUBEADM_VALUES, '--set', 'imagePullSecrets[0].secret=x']);
  t.not(bad.code, 0, 'an object without a name: refused');
  t.match(bad.stderr, /values don't meet the specifications of the schema\(s\)/);
});

t.test("serviceMonitor.enabled: a ServiceMonitor scraping skewgate's metrics port", async (t) => {
  const plainRender = await renderKubeadmExample(helm);
  t.notOk(
    plainRender.some((o) => o.kind === 'ServiceMonitor'),
    'none by default',
  );
  const objects = await renderKubeadmExample(helm, [
    '--set',
    'serviceMonitor.enabled=true',
    '--set',
    'serviceMonitor.labels.release=prometheus',
  ]);
  const sm = objects.find((o) => o.kind === 'ServiceMonitor');
  t.ok(sm, 'a ServiceMonitor');
  t.equal(sm?.apiVersion, 'monitoring.coreos.com/v1');
  t.equal(at(sm, 'metadata.labels.release'), 'prometheus', 'with serviceMonitor.labels');
  const endpoints = objs(at(sm, 'spec.endpoints'), 'endpoints');
  t.same(
    endpoints.map((e) => [e.port, e.path, e.interval]),
    [['metrics', '/metrics', '30s']],
    'one endpoint: port metrics, /metrics',
  );
  t.same(at(sm, 'spec.namespaceSelector.matchNames'), ['skewgate'], 'in the release namespace');
  const selector = obj(at(sm, 'spec.selector.matchLabels'), 'selector');
  const services = objects.filter((o) => o.kind === 'Service');
  const selected = services.filter((s) => Object.entries(selector).every(([k, v]) => obj(at(s, 'metadata.labels'))[k] === v));
  t.same(selected.map(keyOf), ['Service skewgate/skewgate-gateway-metrics'], 'it selects the metrics Service, not the NodePort one');
  const port = objs(at(selected[0], 'spec.ports'))[0];
  t.equal(port?.name, 'metrics', "the Service's port is named metrics");
  t.equal(port?.targetPort, 'metrics', 'and targets the container port named metrics');
  const dep = objects.find((o) => o.kind === 'Deployment');
  const containers = objs(at(dep, 'spec.template.spec.containers'));
  const metricsPorts = containers.flatMap((c) =>
    objs(c.ports)
      .filter((p) => p.name === 'metrics')
      .map((p) => [c.name, p.containerPort]),
  );
  t.same(metricsPorts, [['skewgate', 9464]], "skewgate's container port metrics: 9464");
  t.equal(at(configOf(objects), 'telemetry.metrics.prometheus.listen'), '0.0.0.0:9464', 'where the config serves /metrics');
  t.same(
    Object.entries(obj(at(selected[0], 'spec.selector'))),
    [
      ['app.kubernetes.io/name', 'skewgate'],
      ['app.kubernetes.io/component', 'gateway'],
    ],
    "the Service's endpoints are the gateway pods",
  );
  await refusedWithoutMetrics(t, 'serviceMonitor.enabled');
});

/** helm template with `flag` true and skewgate's Prometheus listener off: refused with the template's message. */
async function refusedWithoutMetrics(t: Tap, flag: string): Promise<void> {
  const r = await runHelm(helm, [
    'template',
    'skewgate',
    CHART,
    '-f',
    KUBEADM_VALUES,
    '--set',
    `${flag}=true`,
    '--set',
    'telemetry.metrics.prometheus.enabled=false',
  ]);
  t.not(r.code, 0, `${flag} without the Prometheus listener: refused`);
  t.match(r.stderr, new RegExp(`${flag.replaceAll('.', '\\.')} needs telemetry\\.metrics\\.prometheus\\.enabled`));
}

t.test('telemetry: tracing off when the endpoint is empty; config merged into the defaults', async (t) => {
  const example = configOf(await renderKubeadmExample(helm));
  t.same(
    obj(at(example, 'telemetry.tracing')),
    { enabled: true, endpoint: 'http://10.0.0.20:4317', protocol: 'grpc', samplerRatio: 0.1, envoy: true },
    "the example's collector",
  );
  const off = configOf(await renderKubeadmExample(helm, ['--set', 'telemetry.tracing.endpoint=']));
  t.equal(at(off, 'telemetry.tracing'), undefined, 'no endpoint: no tracing section');
  t.equal(at(off, 'telemetry.serviceName'), 'skewgate');
  const merged = configOf(await renderKubeadmExample(helm, ['--set', 'config.discovery.interval=2s', '--set', 'config.routing=null']));
  t.same(obj(merged.discovery), { interval: '2s', timeout: '3s', watch: true }, 'a key set, the others kept');
  t.equal(merged.routing, undefined, 'null removes a section');
  t.equal(arr(merged.apiservers).length, 3, 'the seed unchanged');
});

t.test(
  'workers: nodeSelector null removes the control-plane selector ({} keeps it: Helm merges maps), tolerations [] the toleration',
  async (t) => {
    const podSpec = async (values: string): Promise<Obj> => {
      const file = join(dir, 'placement.yaml');
      writeFileSync(file, values);
      const objects = await renderKubeadmExample(helm, ['-f', file]);
      return obj(
        at(
          objects.find((o) => o.kind === 'Deployment'),
          'spec.template.spec',
        ),
        'pod spec',
      );
    };
    const workers = await podSpec('nodeSelector: null\ntolerations: []\n');
    t.equal(workers.nodeSelector, undefined, 'nodeSelector: null: no nodeSelector');
    t.equal(workers.tolerations, undefined, 'tolerations: []: no tolerations');
    const empty = await podSpec('nodeSelector: {}\n');
    t.same(empty.nodeSelector, { 'node-role.kubernetes.io/control-plane': '' }, 'nodeSelector: {}: the default selector stays');
  },
);

t.test("the ConfigMap's skewgate.yaml passes the real `skewgate validate` (pod paths mapped to this machine)", async (t) => {
  const pki = await createPki(join(root, '.cache/fake-pki'));
  const cluster = new FakeCluster();
  const servers = [
    new FakeApiServer({ name: 'cp-1', cluster, pki, builtins: BUILTINS_OLD }),
    new FakeApiServer({ name: 'cp-2', cluster, pki, builtins: BUILTINS_OLD }),
    new FakeApiServer({ name: 'cp-3', cluster, pki, builtins: BUILTINS_NEW }),
  ];
  for (const s of servers) await s.start();
  t.teardown(async () => {
    for (const s of servers) await s.close();
  });
  // The example's cluster, its apiservers and collector on loopback.
  const values = join(dir, 'loopback.yaml');
  writeFileSync(
    values,
    stringify({
      apiservers: servers.map((s) => ({ name: s.name, url: s.url })),
      telemetry: { tracing: { endpoint: 'http://127.0.0.1:4317' } },
    }),
  );
  const config = configOf(await renderKubeadmExample(helm, ['-f', values]));
  const paths = new Map([
    ['/etc/skewgate/cluster-ca/ca.crt', pki.caFile],
    ['/var/run/secrets/skewgate/token', pki.tokenFile],
    ['/etc/skewgate/tls/tls.crt', pki.gatewayCertFile],
    ['/etc/skewgate/tls/tls.key', pki.gatewayKeyFile],
    ['/etc/skewgate/front-proxy/tls.crt', pki.frontProxyClientCertFile],
    ['/etc/skewgate/front-proxy/tls.key', pki.frontProxyClientKeyFile],
    ['unix:/run/skewgate/extproc.sock', `unix:${join(dir, 'sg.sock')}`],
    ['/var/lib/skewgate/xds', join(dir, 'xds')],
  ]);
  const mapStrings = (v: unknown): unknown =>
    typeof v === 'string'
      ? (paths.get(v) ?? v)
      : Array.isArray(v)
        ? v.map(mapStrings)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapStrings(x)]))
          : v;
  const mapped = obj(mapStrings(config));
  const strings = JSON.stringify(mapped).match(/"[^"]*"/g) ?? [];
  t.same(
    strings.filter((s) => /^"(unix:)?\/(etc|var|run)\//.test(s) || /10\.0\.0\./.test(s)),
    [],
    "every pod path mapped to this machine's files; no address but loopback",
  );
  const file = join(dir, 'skewgate.yaml');
  writeFileSync(file, stringify(mapped));
  const validate = (f: string): Promise<{ code: number; out: string }> =>
    new Promise((resolve) => {
      execFile(
        process.execPath,
        [join(root, 'dist/src/cli/main.js'), 'validate', '--config', f],
        { timeout: 60_000 },
        (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, out: stdout + stderr }),
      );
    });
  const ok = await validate(file);
  t.equal(ok.code, 0, ok.out);
  t.match(ok.out, /config .*: ok \(3 apiservers\)/);
  t.match(ok.out, /all apiservers reachable, TLS verified, credentials accepted/);
  // Negative control: the same file with a token the apiservers refuse.
  const wrongToken = join(dir, 'wrong.token');
  writeFileSync(wrongToken, 'not-the-token\n');
  paths.set('/var/run/secrets/skewgate/token', wrongToken);
  const denied = join(dir, 'denied.yaml');
  writeFileSync(denied, stringify(mapStrings(config)));
  const refused = await validate(denied);
  t.equal(refused.code, 1, `a refused token: exit 1 (${refused.out.split('\n').slice(-3).join(' ').trim()})`);
  // A duration set without its unit (helm --set makes 5 a number): refused by name, not read as 5 ms (issue 30).
  const bare = join(dir, 'bare.yaml');
  writeFileSync(
    bare,
    stringify(mapStrings(configOf(await renderKubeadmExample(helm, ['-f', values, '--set', 'config.discovery.interval=5'])))),
  );
  const noUnit = await validate(bare);
  t.not(noUnit.code, 0, 'discovery.interval=5: refused');
  t.match(noUnit.out, /discovery\.interval: 5 has no unit: write "5ms" or "5s"/);
});

/** Every name an object of this set refers to is an object of the set (or the Group the static pods' certificates carry). */
function danglingReferences(objs: readonly Obj[]): string[] {
  const names = (kind: string): Set<string> => new Set(objs.filter((o) => o.kind === kind).map((o) => String(obj(o.metadata).name)));
  const out: string[] = [];
  const want = (kind: string, name: unknown, from: string): void => {
    if (!names(kind).has(String(name))) out.push(`${from}: ${kind} ${String(name)} is not rendered`);
  };
  for (const o of objs) {
    const from = keyOf(o);
    if (o.kind === 'Deployment') {
      const pod = obj(at(o, 'spec.template.spec'));
      want('ServiceAccount', pod.serviceAccountName, from);
      // kube-root-ca.crt: Kubernetes publishes it in every namespace.
      for (const v of objs_(pod.volumes))
        if (v.configMap !== undefined && at(v, 'configMap.name') !== 'kube-root-ca.crt') want('ConfigMap', at(v, 'configMap.name'), from);
      const podLabels = obj(at(o, 'spec.template.metadata.labels'));
      const sel = obj(at(o, 'spec.selector.matchLabels'));
      for (const [k, v] of Object.entries(sel)) if (podLabels[k] !== v) out.push(`${from}: selector ${k}=${String(v)} not on its pods`);
      for (const s of objs.filter((x) => x.kind === 'Service' || x.kind === 'PodDisruptionBudget')) {
        const ss = obj(s.kind === 'Service' ? at(s, 'spec.selector') : at(s, 'spec.selector.matchLabels'));
        for (const [k, v] of Object.entries(ss))
          if (podLabels[k] !== v) out.push(`${keyOf(s)}: selector ${k}=${String(v)} not on the pods`);
      }
    }
    if (o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') {
      want(String(at(o, 'roleRef.kind')), at(o, 'roleRef.name'), from);
      for (const s of objs_(o.subjects)) if (s.kind === 'ServiceAccount') want('ServiceAccount', s.name, from);
    }
  }
  return out;
}
const objs_ = (v: unknown): Obj[] => (v === undefined ? [] : objs(v));

t.test(
  'names (issue 30, item 4): a release named skewgate gets the names of deploy/kubernetes; another release or fullnameOverride its own, cluster-wide too; nameOverride the selector; every reference resolves',
  async (t) => {
    const render = async (release: string, extra: readonly string[]): Promise<Obj[]> => {
      const r = await runHelm(helm, ['template', release, CHART, '--namespace', 'gateways', '-f', KUBEADM_VALUES, ...extra]);
      t.equal(r.code, 0, `helm template ${release} ${extra.join(' ')}: ${r.stderr.trim()}`);
      return yamlObjects(r.stdout, 'helm template');
    };
    const monitored = [
      '--set',
      'serviceMonitor.enabled=true',
      '--set',
      'telemetry.metrics.prometheus.enabled=true',
      '--set',
      'rbac.kubernetesService=true',
    ];
    const first = await render('skewgate', monitored);
    const second = await render('edge', monitored);
    const third = await render('skewgate', [...monitored, '--set', 'fullnameOverride=sg-b', '--set', 'nameOverride=skewgate-b']);
    const name = (set: readonly Obj[], kind: string): string[] =>
      set.filter((o) => o.kind === kind).map((o) => String(obj(o.metadata).name));
    t.same(name(first, 'Deployment'), ['skewgate-gateway'], 'release skewgate: skewgate-gateway, as deploy/kubernetes');
    t.same(name(second, 'Deployment'), ['edge-skewgate-gateway'], 'release edge: edge-skewgate-gateway');
    t.same(name(third, 'Deployment'), ['sg-b-gateway'], 'fullnameOverride sg-b: sg-b-gateway');
    t.ok(
      name(second, 'ClusterRole').every((n) => n.startsWith('edge-skewgate:')),
      `cluster-wide names of their own: ${name(second, 'ClusterRole').join(', ')}`,
    );
    for (const [what, set] of [
      ['skewgate', first],
      ['edge', second],
      ['sg-b', third],
    ] as const)
      t.same(danglingReferences(set), [], `${what}: every ServiceAccount, ConfigMap, role and selector a reference names is there`);
    // Two releases side by side: no object of one is an object of the other (kind, namespace, name).
    for (const [a, b, what] of [
      [first, second, 'skewgate and edge'],
      [first, third, 'skewgate and sg-b'],
    ] as const) {
      const keys = new Set(a.map(keyOf));
      t.same(
        b.map(keyOf).filter((k) => keys.has(k)),
        [],
        `${what}: no object in common`,
      );
    }
    const pods = (set: readonly Obj[]): Obj =>
      obj(
        at(
          set.find((o) => o.kind === 'Deployment'),
          'spec.selector.matchLabels',
        ),
      );
    t.equal(
      pods(third)['app.kubernetes.io/name'],
      'skewgate-b',
      "nameOverride: the pods' selector, so that two releases in one namespace select their own pods",
    );
    t.equal(pods(first)['app.kubernetes.io/name'], 'skewgate');
    const monitor = third.find((o) => o.kind === 'ServiceMonitor');
    t.equal(
      obj(at(monitor, 'spec.selector.matchLabels'))['app.kubernetes.io/name'],
      'skewgate-b',
      'the ServiceMonitor selects its own metrics Service',
    );
    const refused = await runHelm(helm, ['template', 'x', CHART, '-f', KUBEADM_VALUES, '--set', 'fullnameOverride=Not_A_Name']);
    t.not(refused.code, 0, 'fullnameOverride that is no DNS label: refused by the schema');
    t.match(refused.stderr, /fullnameOverride/);
  },
);

t.test(
  'prometheusRule and dashboard (issue 30, item 4): off by default; on, deploy/monitoring/ as it is, with the labels asked for',
  async (t) => {
    const off = await renderKubeadmExample(helm);
    t.same(
      off.filter((o) => o.kind === 'PrometheusRule' || String(obj(o.metadata).name).endsWith('-dashboard')).map(keyOf),
      [],
      'neither by default',
    );
    const on = await renderKubeadmExample(helm, [
      '--set',
      'telemetry.metrics.prometheus.enabled=true',
      '--set',
      'prometheusRule.enabled=true',
      '--set',
      'prometheusRule.labels.release=prometheus',
      '--set',
      'dashboard.enabled=true',
      '--set',
      'dashboard.namespace=monitoring',
    ]);
    const rule = on.find((o) => o.kind === 'PrometheusRule');
    const alerts = obj(parseYaml(readFileSync(join(root, 'deploy/monitoring/skewgate-alerts.yaml'), 'utf8')));
    t.same(
      at(rule, 'spec.groups'),
      alerts.groups,
      "the PrometheusRule's groups are deploy/monitoring/skewgate-alerts.yaml's (promtool-checked)",
    );
    t.equal(obj(at(rule, 'metadata.labels')).release, 'prometheus', 'with the ruleSelector label asked for');
    t.match(JSON.stringify(at(rule, 'spec.groups')), /\{\{ \$value \}\}/, "Prometheus's own templates kept as text, not run by helm");
    const dashboard = on.find((o) => o.kind === 'ConfigMap' && String(obj(o.metadata).name) === 'skewgate-dashboard');
    t.equal(at(dashboard, 'metadata.namespace'), 'monitoring', "in the sidecar's namespace");
    t.equal(obj(at(dashboard, 'metadata.labels')).grafana_dashboard, '1', "with the sidecar's default label");
    t.same(
      JSON.parse(str(obj(at(dashboard, 'data'))['skewgate-dashboard.json'])) as unknown,
      JSON.parse(readFileSync(join(root, 'deploy/monitoring/skewgate-dashboard.json'), 'utf8')) as unknown,
      'the dashboard is deploy/monitoring/skewgate-dashboard.json',
    );
    // The chart carries copies (helm reads nothing outside it): the same bytes as deploy/monitoring/.
    for (const f of ['skewgate-alerts.yaml', 'skewgate-dashboard.json'])
      t.equal(
        readFileSync(join(CHART, 'files', f), 'utf8'),
        readFileSync(join(root, 'deploy/monitoring', f), 'utf8'),
        `deploy/helm/skewgate/files/${f} is deploy/monitoring/${f} (else: cp deploy/monitoring/${f} deploy/helm/skewgate/files/)`,
      );
    await refusedWithoutMetrics(t, 'prometheusRule.enabled');
  },
);
