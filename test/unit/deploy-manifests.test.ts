// deploy/ (not deploy/compose/): every manifest parses, images are pinned to the versions the
// tests use, every container has probes and resources, the skewgate configs in them pass
// parseConfig and render, each pod renders Envoy's bootstrap at start from its own config (an init
// container running `skewgate envoy-config`), the files each container needs are mounted where
// the config says, and both learn the apiservers (membership sources on, the configured ones only
// the seed) with Envoy following through an xDS folder shared by the init container, Envoy and
// skewgate (on the node for the static pod).
// test/cluster/deploy-manifests.test.ts sends the same manifests to a real kube-apiserver.
import { parseDuration } from '../../src/config/core/units.js';
import t from 'tap';
import type { Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { parseAllDocuments, parseDocument } from 'yaml';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import {
  DEFAULT_CLUSTER,
  EXTPROC_CLUSTER,
  FRONT_PROXY_SUFFIX,
  IDENTITY_BACKSTOP_ROUTE,
  OTEL_CLUSTER,
  renderBootstrap,
} from '../../src/envoy/bootstrap.js';
import { CDS_FILE, RDS_FILE, renderClusters, renderRoutes, seedMembers } from '../../src/envoy/xds.js';
import { packageRoot } from '../../src/util/package-root.js';
import { skewgateRbac } from '../../harness/lab/rbac.js';
import { SKEWGATE_GROUP } from '../../harness/lab/pki.js';
import {
  ATTR,
  ATTR_MEMBERSHIP,
  EVENT_MEMBERSHIP_CHANGED,
  EVENT_SKEW_CHANGED,
  EVENT_VIEW_CHANGED,
  METRIC,
  SPAN_DECISION,
  SPAN_DISCOVERY,
  SPAN_MEMBERSHIP,
} from '../../src/telemetry/core/names.js';
import { certificateSecretName } from '../../src/envoy/tls-material.js';
import { arr, at, obj, objs, opt, str, type Obj } from '../helpers/json.js';

const root = packageRoot();
const DEPLOY = join(root, 'deploy');
const rel = (p: string): string => relative(root, p);

/**
 * Every YAML file under deploy/, except the compose demo's (rendered and tested elsewhere),
 * monitoring/'s Prometheus rules (promtool checks them: test/integration/promtool.test.ts) and the
 * Helm chart's (templates, not YAML: test/integration/helm.test.ts renders them with the real
 * helm and compares the objects with kubernetes/'s, which this file checks).
 */
const NOT_WALKED = new Set(['compose', 'monitoring', 'helm'].map((d) => join(DEPLOY, d)));
function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const p = join(dir, e.name);
      if (e.isDirectory()) return NOT_WALKED.has(p) ? [] : yamlFiles(p);
      return /\.ya?ml$/.test(e.name) ? [p] : [];
    })
    .sort();
}

/** The versions the tests run: Envoy from scripts/install-envoy.sh, skewgate from package.json. */
const ENVOY_VERSION = /ENVOY_VERSION="\$\{SKEWGATE_ENVOY_VERSION:-(\d+\.\d+\.\d+)\}"/.exec(
  readFileSync(join(root, 'scripts/install-envoy.sh'), 'utf8'),
)?.[1];
const SKEWGATE_VERSION = str((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Obj).version, 'package.json version');
const ENVOY_IMAGE = `envoyproxy/envoy:v${ENVOY_VERSION ?? '?'}`;
const SKEWGATE_IMAGE = `skewgate:${SKEWGATE_VERSION}`;

const STATIC_CONFIG = join(DEPLOY, 'static-pods/skewgate.yaml');
const STATIC_POD = join(DEPLOY, 'static-pods/skewgate-gateway.yaml');
const RBAC = join(DEPLOY, 'kubernetes/rbac.yaml');
const DEPLOYMENT = join(DEPLOY, 'kubernetes/deployment.yaml');
/** Files that are not Kubernetes objects: a skewgate config. */
const NOT_MANIFESTS = new Set([STATIC_CONFIG]);

function parseYamlFile(file: string): Obj[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  if (!Array.isArray(docs)) throw new Error(`${rel(file)}: not a YAML stream`);
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${rel(file)}: ${d.errors.map((e) => e.message).join('; ')}`);
    if (d.warnings.length > 0) throw new Error(`${rel(file)}: ${d.warnings.map((e) => e.message).join('; ')}`);
  }
  return docs
    .map((d) => d.toJS({ maxAliasCount: 100 }) as unknown)
    .filter((d) => d !== null)
    .map((d) => obj(d, rel(file)));
}

interface Manifest {
  readonly file: string;
  readonly doc: Obj;
  readonly kind: string;
  readonly name: string;
}

const files = yamlFiles(DEPLOY);
const manifests: Manifest[] = files
  .filter((f) => !NOT_MANIFESTS.has(f))
  .flatMap((file) =>
    parseYamlFile(file).map((doc) => ({
      file,
      doc,
      kind: str(doc.kind, `${rel(file)} kind`),
      name: str(at(doc, 'metadata.name'), `${rel(file)} metadata.name`),
    })),
  );
const find = (file: string, kind: string, name?: string): Obj => {
  const m = manifests.find((x) => x.file === file && x.kind === kind && (name === undefined || x.name === name));
  if (m === undefined) throw new Error(`${rel(file)}: no ${kind}${name === undefined ? '' : ` ${name}`}`);
  return m.doc;
};

/** A Pod's spec, or a workload's pod template spec. */
function podSpecOf(m: Manifest): Obj | undefined {
  if (m.kind === 'Pod') return obj(m.doc.spec);
  if (['Deployment', 'DaemonSet', 'StatefulSet'].includes(m.kind)) return obj(at(m.doc, 'spec.template.spec'));
  return undefined;
}
const workloads = manifests.flatMap((m) => {
  const spec = podSpecOf(m);
  return spec === undefined ? [] : [{ ...m, spec }];
});
const containersOf = (spec: Obj): Obj[] => objs(spec.containers, 'containers');
const initContainersOf = (spec: Obj): Obj[] => objs(spec.initContainers, 'initContainers');
const container = (spec: Obj, name: string): Obj => {
  const c = [...containersOf(spec), ...initContainersOf(spec)].find((x) => x.name === name);
  if (c === undefined) throw new Error(`no container ${name}`);
  return c;
};

/** The file names a Secret, ConfigMap or projected volume holds, when it lists them (items); else undefined (any). */
function listedFiles(volume: Obj): string[] | undefined {
  const items = (source: unknown): string[] | undefined => {
    const list = opt(source, 'items');
    return list === undefined ? undefined : objs(list).map((i) => str(i.path));
  };
  if (volume.secret !== undefined) return items(volume.secret);
  if (volume.configMap !== undefined) return items(volume.configMap);
  if (volume.projected !== undefined) {
    const sources = objs(opt(volume, 'projected.sources'));
    const lists = sources.map((s) =>
      s.serviceAccountToken !== undefined ? [str(at(s, 'serviceAccountToken.path'))] : items(s.secret ?? s.configMap),
    );
    return lists.some((l) => l === undefined) ? undefined : lists.flatMap((l) => l ?? []);
  }
  return undefined;
}

/**
 * Where a file path inside a container comes from: the volume mounted at it or at a folder above it
 * (holding that file). `rest` is the path inside the volume (a mount's subPath included).
 */
function mountFor(spec: Obj, c: Obj, path: string): { volume: Obj; mount: Obj; rest: string } | undefined {
  const mounts = objs(c.volumeMounts, 'volumeMounts')
    .filter((m) => {
      const mp = str(m.mountPath);
      return path === mp || path.startsWith(`${mp.replace(/\/$/, '')}/`);
    })
    .sort((a, b) => str(b.mountPath).length - str(a.mountPath).length);
  const mount = mounts[0];
  if (mount === undefined) return undefined;
  const volume = objs(spec.volumes, 'volumes').find((v) => v.name === mount.name);
  if (volume === undefined) throw new Error(`mount ${str(mount.name)} names no volume`);
  const rest = posix.join(typeof mount.subPath === 'string' ? mount.subPath : '', posix.relative(str(mount.mountPath), path));
  const listed = listedFiles(volume);
  if (listed !== undefined && rest !== '' && !listed.includes(rest)) return undefined;
  return { volume, mount, rest };
}

/** Every file a container of the gateway reads, by what the skewgate config says. */
function filesNeeded(config: Config, role: 'envoy' | 'skewgate'): string[] {
  // A learnt apiserver is reached with the template: skewgate polls it, Envoy verifies it.
  const specs = [...config.apiservers, config.membership.template];
  const apiservers = specs.flatMap((s) => [
    s.caFile,
    s.credentials?.tokenFile,
    s.credentials?.kubeconfig,
    s.credentials?.clientCertFile,
    s.credentials?.clientKeyFile,
  ]);
  const tls = config.envoy.tls;
  const fp = config.envoy.upstreamClientCert;
  const list =
    role === 'skewgate'
      ? [...apiservers, tls.clientCaFile, fp?.certFile]
      : [...specs.map((s) => s.caFile), tls.certFile, tls.keyFile, tls.clientCaFile, fp?.certFile, fp?.keyFile];
  return [...new Set(list.filter((x): x is string => x !== undefined))];
}

/** The image's CLI: the final (service) stage's ENTRYPOINT (exec form), from the Dockerfile. */
const DOCKERFILE = readFileSync(join(root, 'Dockerfile'), 'utf8');
const ENTRYPOINT = ((): string[] => {
  const finalStage = DOCKERFILE.slice(DOCKERFILE.lastIndexOf('\nFROM '));
  const m = /^ENTRYPOINT (\[.*\])\s*$/m.exec(finalStage);
  return m?.[1] === undefined ? [] : arr(JSON.parse(m[1]), 'ENTRYPOINT').map((x) => str(x));
})();

/** `skewgate health --help` of this build: the options the probes may use, and --timeout's default. */
const HEALTH_HELP = spawnSync(process.execPath, [join(root, 'dist/src/cli/main.js'), 'health', '--help'], {
  encoding: 'utf8',
  timeout: 30_000,
});

const PROBES = ['startupProbe', 'readinessProbe', 'livenessProbe'] as const;
type ProbeName = (typeof PROBES)[number];

/**
 * How each probe of a skewgate container asks it (issue 30, item 7): `grpc` (the kubelet's own, on
 * extproc.healthListen's port), `httpGet` (the admin endpoint's /healthz, where the pod shares the
 * node's loopback), `exec` (`skewgate health`, only where a check no kubelet probe reaches is
 * needed: `exec --envoy`, Envoy's /ready on the pod's loopback).
 */
type ProbeKind = 'grpc' | 'httpGet' | 'exec' | 'exec --envoy';

function checkHealthProbes(
  t: Test,
  spec: Obj,
  c: Obj,
  config: Config,
  configPath: string,
  kinds: Readonly<Record<ProbeName, ProbeKind>>,
  where: string,
): void {
  t.equal(HEALTH_HELP.status, 0, `skewgate health --help runs${HEALTH_HELP.stderr === '' ? '' : `: ${HEALTH_HELP.stderr}`}`);
  const defaultTimeout = /--timeout <duration>[\s\S]*?\(default: "([^"]+)"\)/.exec(HEALTH_HELP.stdout)?.[1];
  t.ok(defaultTimeout, `skewgate health has a default --timeout (${defaultTimeout ?? 'none'})`);
  t.ok(mountFor(spec, c, configPath), `${where}: ${configPath} is mounted in the skewgate container`);
  for (const p of PROBES) {
    const kind = kinds[p];
    const probe = obj(at(c, p), `${where} ${p}`);
    const kubelet = Number(probe.timeoutSeconds) * 1000;
    if (kind === 'grpc') {
      const listen = config.extproc.healthListen ?? '';
      t.match(listen, /:\d+$/, `${where}: extproc.healthListen is set (${listen})`);
      t.same(
        probe.grpc,
        { port: Number(listen.split(':').at(-1)) },
        `${where} ${p}: the kubelet's gRPC probe on extproc.healthListen's port`,
      );
      continue;
    }
    if (kind === 'httpGet') {
      const admin = config.admin?.listen ?? '';
      t.match(admin, /^127\.0\.0\.1:\d+$/, `${where}: admin.listen on loopback (${admin})`);
      t.same(
        probe.httpGet,
        { host: '127.0.0.1', port: Number(admin.split(':').at(-1)), path: '/healthz' },
        `${where} ${p}: GET /healthz on the admin endpoint`,
      );
      t.equal(at(spec, 'hostNetwork'), true, `${where}: hostNetwork, so the kubelet reaches that loopback`);
      continue;
    }
    // exec: skewgate on the image's PATH; its config from the container's SKEWGATE_CONFIG.
    const cmd = arr(at(c, `${p}.exec.command`), `${where} ${p}.exec.command`).map((x) => str(x));
    t.same(cmd.slice(0, 2), ['skewgate', 'health'], `${where} ${p}: skewgate health: ${cmd.join(' ')}`);
    const env = objs(c.env ?? []).find((e) => e.name === 'SKEWGATE_CONFIG');
    t.equal(env?.value, configPath, `${where}: SKEWGATE_CONFIG names the container's own config`);
    const rest = cmd.slice(2);
    const opts = new Map<string, string | true>();
    for (let i = 0; i < rest.length; i++) {
      const o = rest[i] ?? '';
      if (o === '--envoy') opts.set(o, true);
      else if (o === '--timeout') opts.set(o, rest[++i] ?? '');
      else t.fail(`${where} ${p}: unexpected argument ${o}`);
    }
    for (const k of opts.keys()) t.ok(HEALTH_HELP.stdout.includes(k), `${where} ${p}: skewgate health knows ${k}`);
    t.equal(opts.has('--envoy'), kind === 'exec --envoy', `${where} ${p}: ${kind === 'exec --envoy' ? 'with' : 'without'} --envoy`);
    // Each check (Envoy's /ready, then the gRPC call) may take the whole --timeout.
    const timeout = opts.get('--timeout') ?? defaultTimeout;
    const budget = (typeof timeout === 'string' ? (parseDuration(timeout) ?? Number.NaN) : Number.NaN) * (opts.has('--envoy') ? 2 : 1);
    t.ok(kubelet >= budget + 500, `${where} ${p}: timeoutSeconds ${kubelet / 1000} covers ${budget} ms of checks and the start of node`);
  }
}

// ---------------------------------------------------------------------------------------------

t.test(
  'every YAML file under deploy/ (compose, monitoring and the Helm chart excepted: tested elsewhere) parses, and is a manifest or a known config',
  async (t) => {
    t.ok(files.length >= 4, `found ${files.length} files: ${files.map(rel).join(', ')}`);
    for (const f of [STATIC_CONFIG, STATIC_POD, RBAC, DEPLOYMENT]) t.ok(files.includes(f), `${rel(f)} is there`);
    // Rendered at start by each pod (checkRenderedAtStart), never committed: one diff per renderer change, not one per variant.
    t.same(
      files.filter((f) => /envoy.*\.ya?ml$/.test(rel(f))),
      [],
      'no rendered Envoy bootstrap is committed under deploy/',
    );
    for (const f of files) {
      const docs = parseYamlFile(f);
      t.ok(docs.length > 0, `${rel(f)}: ${docs.length} document(s), no YAML errors or warnings`);
      if (NOT_MANIFESTS.has(f)) continue;
      for (const d of docs) {
        t.match(
          d,
          { apiVersion: String, kind: String, metadata: { name: String } },
          `${rel(f)}: ${String(d.kind)} ${String(at(d, 'metadata.name'))} is a Kubernetes object`,
        );
      }
    }
    t.same(
      [...new Set(manifests.map((m) => m.kind))].sort(),
      [
        'ClusterRole',
        'ClusterRoleBinding',
        'ConfigMap',
        'Deployment',
        'Namespace',
        'PodDisruptionBudget',
        'Pod',
        'Role',
        'RoleBinding',
        'Service',
        'ServiceAccount',
      ].sort(),
      'the kinds shipped',
    );
  },
);

t.test('images: pinned to the exact versions the tests run', async (t) => {
  t.ok(ENVOY_VERSION, `scripts/install-envoy.sh pins Envoy ${ENVOY_VERSION ?? '(not found)'}`);
  t.ok(workloads.length >= 2, 'the static pod and the Deployment');
  for (const w of workloads) {
    for (const c of [...containersOf(w.spec), ...initContainersOf(w.spec)]) {
      const image = str(c.image, 'image');
      const where = `${rel(w.file)} ${w.name}/${str(c.name)}`;
      t.ok(image === ENVOY_IMAGE || image === SKEWGATE_IMAGE, `${where}: ${image} is ${ENVOY_IMAGE} or ${SKEWGATE_IMAGE}`);
      t.match(image, /:v?\d+\.\d+\.\d+$/, `${where}: an exact version, never a moving tag`);
      t.equal(c.imagePullPolicy, 'IfNotPresent', `${where}: IfNotPresent (a pre-loaded image starts without a registry)`);
    }
    const images = containersOf(w.spec).map((c) => c.image);
    t.ok(images.includes(ENVOY_IMAGE) && images.includes(SKEWGATE_IMAGE), `${w.name}: one Envoy and one skewgate container`);
  }
});

t.test('every container: probes, resources, no privilege', async (t) => {
  for (const w of workloads) {
    for (const c of containersOf(w.spec)) {
      const where = `${w.name}/${str(c.name)}`;
      t.ok(c.readinessProbe, `${where}: readinessProbe`);
      t.ok(c.livenessProbe, `${where}: livenessProbe`);
      if (c.image === SKEWGATE_IMAGE) t.ok(c.startupProbe, `${where}: startupProbe (listens after its first discovery round)`);
    }
    for (const c of [...containersOf(w.spec), ...initContainersOf(w.spec)]) {
      const where = `${w.name}/${str(c.name)}`;
      t.ok(at(c, 'resources.requests.cpu') && at(c, 'resources.requests.memory'), `${where}: cpu and memory requests`);
      t.ok(at(c, 'resources.limits.memory'), `${where}: a memory limit`);
      t.notOk(
        at(c, 'resources.limits') !== undefined && 'cpu' in obj(at(c, 'resources.limits')),
        `${where}: no CPU limit (throttling adds latency to every API request)`,
      );
      t.equal(at(c, 'securityContext.allowPrivilegeEscalation'), false, `${where}: allowPrivilegeEscalation false`);
      t.same(at(c, 'securityContext.capabilities.drop'), ['ALL'], `${where}: every capability dropped`);
      t.equal(at(c, 'securityContext.readOnlyRootFilesystem'), true, `${where}: read-only root filesystem`);
      t.notOk(at(c, 'securityContext.privileged'), `${where}: not privileged`);
    }
    t.equal(at(w.spec, 'securityContext.seccompProfile.type'), 'RuntimeDefault', `${w.name}: seccomp RuntimeDefault`);
  }
});

t.test("the static pod's skewgate config: a 3-node kubeadm control plane, valid, renders", async (t) => {
  const config = loadConfig(STATIC_CONFIG);
  t.equal(config.apiservers.length, 3, 'three apiservers');
  const urls = config.apiservers.map((s) => new URL(s.url));
  t.same(
    urls.map((u) => u.port),
    ['6443', '6443', '6443'],
    'every apiserver on 6443',
  );
  t.equal(new Set(urls.map((u) => u.hostname)).size, 3, 'by node address, one each (never the load balancer)');
  for (const s of config.apiservers) {
    t.equal(s.caFile, '/etc/kubernetes/pki/ca.crt', `${s.name}: verified against kubeadm's cluster CA`);
    t.ok(s.credentials?.kubeconfig ?? s.credentials?.tokenFile ?? s.credentials?.clientCertFile, `${s.name}: a discovery credential`);
  }
  t.not(config.envoy.listen.port, 6443, "the gateway does not take the local kube-apiserver's port");
  t.equal(config.envoy.listen.port, 16443);
  t.equal(config.envoy.admin.address, '127.0.0.1', "Envoy's admin interface on loopback only");
  t.match(config.extproc.listen, /^unix:\//, 'ext_proc on a unix socket');
  t.equal(config.extproc.failureMode, 'open');
  t.equal(config.envoy.tls.clientCaFile, '/etc/kubernetes/pki/ca.crt', "client certificates verified against kubeadm's --client-ca-file");
  t.same(
    config.envoy.upstreamClientCert,
    { certFile: '/etc/kubernetes/pki/front-proxy-client.crt', keyFile: '/etc/kubernetes/pki/front-proxy-client.key' },
    "kubeadm's front-proxy client",
  );
  t.same(
    config.envoy.tls,
    {
      certFile: '/etc/kubernetes/pki/apiserver.crt',
      keyFile: '/etc/kubernetes/pki/apiserver.key',
      clientCaFile: '/etc/kubernetes/pki/ca.crt',
    },
    "serving with the apiserver's own certificate",
  );
  t.ok(config.routing.retryAfterSeconds >= 1, 'Retry-After on 503');
  checkMembership(t, config, 'static pod');
  t.equal(config.envoy.xds?.directory, '/var/lib/skewgate/xds', 'the xDS folder under /var/lib (kept across reboots)');
});

/**
 * The key properties of a gateway bootstrap rendered from a deploy config, and of the seed's
 * cds.json and rds.json `envoy-config` writes beside it (the apiserver clusters and the routes).
 */
function checkBootstrap(t: Test, config: Config, where: string): void {
  const b = renderBootstrap(config);
  const hcm = obj(at(b, 'static_resources.listeners.0.filter_chains.0.filters.0.typed_config'));
  const dir = config.envoy.xds?.directory ?? '';
  t.ok(dir, `${where}: envoy.xds.directory is set: Envoy's apiserver clusters and routes can change while it runs`);
  t.same(
    at(b, 'dynamic_resources.cds_config.path_config_source'),
    { path: posix.join(dir, CDS_FILE), watched_directory: { path: dir } },
    `${where}: clusters from ${posix.join(dir, CDS_FILE)}, the folder watched`,
  );
  t.same(
    at(hcm, 'rds.config_source.path_config_source'),
    { path: posix.join(dir, RDS_FILE), watched_directory: { path: dir } },
    `${where}: routes from ${posix.join(dir, RDS_FILE)}`,
  );
  t.notOk('route_config' in hcm, `${where}: no route table in the bootstrap`);
  const staticClusters = objs(at(b, 'static_resources.clusters'));
  t.same(
    staticClusters.map((c) => str(c.name)).sort(),
    [EXTPROC_CLUSTER, ...(config.telemetry.tracing.enabled === true ? [OTEL_CLUSTER] : [])].sort(),
    `${where}: only ext_proc${config.telemetry.tracing.enabled === true ? ' and the OTLP collector' : ''} in the bootstrap`,
  );
  // What envoy-config writes into the folder where no file is yet: the seed (the configured apiservers).
  const seed = seedMembers(config);
  const clusters = [...staticClusters, ...renderClusters(config, seed, (p) => p).map((c) => obj(c))];
  const cluster = (name: string): Obj => {
    const c = clusters.find((x) => x.name === name);
    if (c === undefined) throw new Error(`${where}: no cluster ${name}`);
    return c;
  };
  const names = clusters.map((c) => str(c.name));
  const apiservers = config.apiservers.map((s) => s.name);
  t.same(
    names.sort(),
    [...apiservers, DEFAULT_CLUSTER]
      .flatMap((n) => [n, `${n}${FRONT_PROXY_SUFFIX}`])
      .concat(EXTPROC_CLUSTER, ...(config.telemetry.tracing.enabled === true ? [OTEL_CLUSTER] : []))
      .sort(),
    `${where}: every apiserver and the default pool twice (plain and front-proxy), ext_proc${config.telemetry.tracing.enabled === true ? ', the OTLP collector' : ''}`,
  );
  const fp = config.envoy.upstreamClientCert;
  for (const n of [...apiservers, DEFAULT_CLUSTER]) {
    const twin = cluster(`${n}${FRONT_PROXY_SUFFIX}`);
    // With envoy.xds the certificate is an SDS secret named after its files (rotated in place).
    t.same(
      at(twin, 'transport_socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs.0.name'),
      fp && certificateSecretName(fp),
      `${where}: ${n}${FRONT_PROXY_SUFFIX} presents the front-proxy certificate`,
    );
    const plain = obj(at(cluster(n), 'transport_socket.typed_config.common_tls_context'));
    t.notOk(
      'tls_certificates' in plain || 'tls_certificate_sds_secret_configs' in plain,
      `${where}: ${n} presents none (tokens, anonymous)`,
    );
  }
  for (const s of config.apiservers) {
    const ep = at(cluster(s.name), 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address');
    const u = new URL(s.url);
    t.same(ep, { address: u.hostname, port_value: Number(u.port) }, `${where}: ${s.name} at ${u.host}`);
  }
  const routes = objs(at(renderRoutes(config, seed), 'virtual_hosts.0.routes'));
  t.equal(routes[0]?.name, IDENTITY_BACKSTOP_ROUTE, `${where}: the backstop route (401 for an unstated certificate) comes first`);
  t.equal(at(routes[0], 'direct_response.status'), 401);
  const socket = config.extproc.listen.slice('unix:'.length);
  t.same(
    at(cluster(EXTPROC_CLUSTER), 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address'),
    { pipe: { path: socket } },
    `${where}: ext_proc over the unix socket ${socket}`,
  );
  t.same(
    at(b, 'static_resources.listeners.0.address.socket_address'),
    { address: config.envoy.listen.address, port_value: config.envoy.listen.port },
    `${where}: listener ${config.envoy.listen.address}:${config.envoy.listen.port}`,
  );
  t.same(
    at(b, 'admin.address.socket_address'),
    { address: '127.0.0.1', port_value: config.envoy.admin.port },
    `${where}: admin on loopback`,
  );
  const ext = objs(hcm.http_filters).find((f) => f.name === 'envoy.filters.http.ext_proc');
  t.equal(
    at(ext, 'typed_config.failure_mode_allow'),
    config.extproc.failureMode === 'open',
    `${where}: failure_mode_allow follows failureMode`,
  );
}

/**
 * The configured apiservers are the seed: the membership sources are on (a machine added or
 * removed needs no config edit), a learnt apiserver is reached as the seeds are (their CA and
 * credential) and verified by the name kubeadm's apiserver certificate always carries.
 */
function checkMembership(t: Test, config: Config, where: string): void {
  t.same([...config.membership.sources].sort(), ['endpointSlice', 'nodes'], `${where}: membership.sources: nodes and endpointSlice`);
  t.equal(config.membership.port, 6443, `${where}: a control-plane Node's apiserver on 6443`);
  t.equal(config.membership.nodeSelector, 'node-role.kubernetes.io/control-plane', `${where}: kubeadm's control-plane label`);
  const tpl = config.membership.template;
  t.ok(tpl.caFile, `${where}: template.caFile set (a learnt apiserver is verified)`);
  for (const s of config.apiservers) {
    t.equal(tpl.caFile, s.caFile, `${where}: the template's CA is ${s.name}'s`);
    t.same(tpl.credentials, s.credentials, `${where}: the template's credentials are ${s.name}'s`);
  }
  t.equal(tpl.serverName, 'kubernetes', `${where}: verified as "kubernetes", a SAN of every kubeadm apiserver.crt`);
  t.ok(config.discovery.watch, `${where}: discovery.watch (the sources are watched)`);
  t.ok(config.envoy.xds?.directory, `${where}: envoy.xds.directory (Envoy follows the members)`);
}

/**
 * The xDS folder (envoy.xds.directory): one volume, writable by the init container (the seed's
 * files, `envoy-config`) and skewgate (the members), read-only for Envoy (which watches it).
 */
function checkXdsFolder(t: Test, spec: Obj, config: Config, where: string): { volume: Obj } {
  const dir = config.envoy.xds?.directory ?? '';
  t.ok(dir, `${where}: envoy.xds.directory set`);
  const init = container(spec, 'render-envoy-bootstrap');
  const envoy = container(spec, 'envoy');
  const skewgate = container(spec, 'skewgate');
  const files = [CDS_FILE, RDS_FILE].map((f) => posix.join(dir, f));
  const mounts = [init, envoy, skewgate].map((c) => {
    const m = mountFor(spec, c, dir);
    t.ok(m, `${where}: ${dir} mounted in ${str(c.name)}`);
    t.equal(m?.mount.mountPath, dir, `${where}: ${str(c.name)}: the folder itself (Envoy watches the folder; files are renamed into it)`);
    for (const f of files) t.equal(mountFor(spec, c, f)?.volume.name, m?.volume.name, `${where}: ${str(c.name)}: ${f} on it`);
    return m;
  });
  const [mi, me, ms] = mounts;
  t.ok(
    mi !== undefined && mi.volume.name === me?.volume.name && mi.volume.name === ms?.volume.name,
    `${where}: one volume shared by the init container, Envoy and skewgate`,
  );
  t.not(mi?.mount.readOnly, true, `${where}: writable by the init container (the seed's cds.json and rds.json)`);
  t.not(ms?.mount.readOnly, true, `${where}: writable by skewgate (the members, as they change)`);
  t.equal(me?.mount.readOnly, true, `${where}: read-only for Envoy`);
  t.equal(mi?.mount.subPath, undefined, `${where}: no subPath (a subPath mount does not see files renamed into the folder)`);
  return { volume: mi?.volume ?? {} };
}

/**
 * Envoy's bootstrap is rendered when the pod starts: the init container render-envoy-bootstrap runs
 * the image's CLI, `envoy-config --config <the skewgate container's own config>`, from the same
 * volume skewgate reads it from, into an emptyDir that Envoy starts from. Returns the init container.
 */
function checkRenderedAtStart(t: Test, spec: Obj, configPath: string, where: string): Obj {
  const init = container(spec, 'render-envoy-bootstrap');
  const skewgate = container(spec, 'skewgate');
  const envoy = container(spec, 'envoy');
  t.same(
    initContainersOf(spec).map((c) => c.name),
    ['render-envoy-bootstrap'],
    `${where}: one init container`,
  );
  t.equal(init.image, SKEWGATE_IMAGE, `${where}: rendered by the skewgate image the pod runs`);
  const cmd = arr(init.command).map((x) => str(x));
  t.same(cmd.slice(0, 2), ['sh', '-c'], `${where}: a shell, for the redirection`);
  const line = cmd.slice(2).join(' ');
  const rendered = /^(\S+ \S+) envoy-config --config (\S+) > (\S+)$/.exec(line);
  t.ok(rendered, `${where}: the init container runs skewgate envoy-config: ${line}`);
  t.equal(rendered?.[1], ENTRYPOINT.join(' '), `${where}: through the image's CLI, as its ENTRYPOINT runs it`);
  t.equal(rendered?.[2], configPath, `${where}: from the skewgate container's own config file`);
  const configMount = mountFor(spec, init, rendered?.[2] ?? '');
  t.equal(
    configMount?.volume.name,
    mountFor(spec, skewgate, configPath)?.volume.name,
    `${where}: from the same volume skewgate reads it from`,
  );
  const envoyArgs = arr(envoy.args).map((a) => str(a));
  const bootstrapPath = envoyArgs[envoyArgs.indexOf('-c') + 1] ?? '';
  t.equal(bootstrapPath, rendered?.[3], `${where}: Envoy starts from the rendered bootstrap`);
  const written = mountFor(spec, init, bootstrapPath);
  const read = mountFor(spec, envoy, bootstrapPath);
  t.ok(written && read && written.volume.name === read.volume.name, `${where}: on a volume the two share`);
  t.ok(written?.volume.emptyDir !== undefined, `${where}: an emptyDir, so every start renders afresh`);
  t.not(written?.mount.readOnly, true, `${where}: writable by the init container`);
  t.equal(read?.mount.readOnly, true, `${where}: read-only for Envoy`);
  t.notOk(mountFor(spec, skewgate, bootstrapPath), `${where}: skewgate does not need it`);
  return init;
}

t.test("the static pod's Envoy bootstrap: rendered from its config with the key properties", async (t) => {
  const config = loadConfig(STATIC_CONFIG);
  // The init container (checkRenderedAtStart) prints this rendering: `skewgate envoy-config` on the same file.
  checkBootstrap(t, config, 'static pod');
});

t.test('the static pod: hostNetwork, node-critical, kubeadm PKI read-only, shared socket, probes', async (t) => {
  const pod = find(STATIC_POD, 'Pod');
  const spec = obj(pod.spec);
  const config = loadConfig(STATIC_CONFIG);
  t.equal(at(pod, 'metadata.namespace'), 'kube-system');
  t.equal(spec.hostNetwork, true, 'hostNetwork');
  t.equal(spec.dnsPolicy, 'Default', "the node's resolver, not cluster DNS");
  t.equal(spec.priorityClassName, 'system-node-critical');
  // What a mirror pod may use: the kubelet runs it without the API.
  for (const v of objs(spec.volumes))
    t.ok(v.hostPath !== undefined || v.emptyDir !== undefined, `volume ${str(v.name)}: hostPath or emptyDir only`);
  t.notOk(spec.serviceAccountName, 'no ServiceAccount');

  const envoy = container(spec, 'envoy');
  const skewgate = container(spec, 'skewgate');
  t.equal(envoy.image, ENVOY_IMAGE);
  t.equal(skewgate.image, SKEWGATE_IMAGE);
  t.same(envoy.command, ['envoy'], 'runs the Envoy binary itself');
  const envoyArgs = arr(envoy.args).map((a) => str(a));
  t.ok(envoyArgs.includes('--disable-hot-restart'), 'no hot restart: its abstract socket would be shared with the node');
  const bootstrapPath = envoyArgs[envoyArgs.indexOf('-c') + 1] ?? '';
  const configPath = str(arr(skewgate.args)[arr(skewgate.args).indexOf('--config') + 1]);
  const hostPathOf = (c: Obj, p: string): string | undefined => {
    const m = mountFor(spec, c, p);
    const hp = m === undefined ? undefined : m.volume.hostPath;
    return hp === undefined ? undefined : posix.join(str(at(hp, 'path')), m?.rest ?? '');
  };
  t.equal(
    hostPathOf(skewgate, configPath),
    '/etc/skewgate/skewgate.yaml',
    `skewgate reads ${configPath} = the node's /etc/skewgate/skewgate.yaml`,
  );
  t.equal(configPath, '/etc/skewgate/skewgate.yaml', 'the config sits where its own paths assume');
  const init = checkRenderedAtStart(t, spec, configPath, 'static pod');
  t.equal(
    hostPathOf(init, configPath),
    '/etc/skewgate/skewgate.yaml',
    `the init container renders from the node's /etc/skewgate/skewgate.yaml`,
  );
  for (const f of filesNeeded(config, 'skewgate').filter((x) => x.startsWith('/etc/skewgate/')))
    t.notOk(mountFor(spec, init, f), `the init container does not see ${f} (only skewgate.yaml, by subPath)`);
  const xds = checkXdsFolder(t, spec, config, 'static pod');
  t.same(
    xds.volume.hostPath,
    { path: config.envoy.xds?.directory, type: 'DirectoryOrCreate' },
    `the xDS folder is the node's own ${config.envoy.xds?.directory ?? ''} (DirectoryOrCreate): after a reboot Envoy starts from the members last written`,
  );
  // The kubelet creates it root-owned, mode 0755, and fsGroup does not apply to hostPath: both
  // writers (envoy-config's seed files, skewgate replacing them) must be root, and Envoy reads.
  for (const c of [init, skewgate, envoy])
    t.equal(
      at(c, 'securityContext.runAsUser'),
      0,
      `${str(c.name)}: root (without capabilities), to write or read the root-owned xDS folder`,
    );
  t.notOk(mountFor(spec, envoy, configPath), `Envoy does not see ${configPath} (nor the discovery credential beside it)`);
  t.equal(mountFor(spec, envoy, bootstrapPath)?.volume.hostPath, undefined, `Envoy reads ${bootstrapPath} from no file on the node`);

  for (const [c, role] of [
    [envoy, 'envoy'],
    [skewgate, 'skewgate'],
  ] as const) {
    for (const f of filesNeeded(config, role)) {
      const m = mountFor(spec, c, f);
      t.ok(m, `${role} can read ${f}`);
      if (m === undefined) continue;
      t.equal(m.mount.readOnly, true, `${role}: ${f} mounted read-only`);
      if (f.startsWith('/etc/kubernetes/pki/')) t.equal(hostPathOf(c, f), f, `${role}: ${f} is the node's own kubeadm file`);
    }
    const xdsDir = config.envoy.xds?.directory;
    for (const m of objs(c.volumeMounts)) {
      const v = objs(spec.volumes).find((x) => x.name === m.name);
      // skewgate writes one folder on the node: Envoy's clusters and routes (checkXdsFolder).
      if (role === 'skewgate' && m.mountPath === xdsDir) continue;
      if (v?.hostPath !== undefined) t.equal(m.readOnly, true, `${role}: hostPath ${str(at(v.hostPath, 'path'))} read-only`);
    }
  }
  t.notOk(
    objs(spec.volumes).some((v) => v.hostPath !== undefined && at(v.hostPath, 'path') === '/etc/kubernetes/pki'),
    'not the whole PKI folder: the CA keys stay out',
  );
  t.notOk(mountFor(spec, skewgate, config.envoy.upstreamClientCert?.keyFile ?? ''), 'skewgate never sees the front-proxy key');

  const socket = config.extproc.listen.slice('unix:'.length);
  const se = mountFor(spec, envoy, socket);
  const ss = mountFor(spec, skewgate, socket);
  t.ok(
    se && ss && se.volume.name === ss.volume.name && se.volume.emptyDir !== undefined,
    `the socket ${socket} is on one emptyDir shared by both containers`,
  );

  t.same(
    at(envoy, 'readinessProbe.httpGet'),
    { host: '127.0.0.1', port: config.envoy.admin.port, path: '/ready' },
    'Envoy readiness: admin /ready',
  );
  t.not(at(envoy, 'livenessProbe.httpGet.path'), '/ready', 'Envoy liveness is not /ready (a drained Envoy is alive)');
  t.equal(at(envoy, 'livenessProbe.httpGet.host'), '127.0.0.1');
  // Envoy's readiness is its own container's probe; a drained Envoy must not restart skewgate.
  checkHealthProbes(
    t,
    spec,
    skewgate,
    config,
    configPath,
    { startupProbe: 'httpGet', readinessProbe: 'httpGet', livenessProbe: 'httpGet' },
    'static pod skewgate',
  );
  t.same(
    arr(at(envoy, 'ports')).map((p) => at(p, 'containerPort')),
    [config.envoy.listen.port],
    "the declared port is the gateway's",
  );
});

t.test('the Deployment: config valid and rendered by the init container, replicas, spreading, budget, service', async (t) => {
  const cm = find(DEPLOYMENT, 'ConfigMap', 'skewgate-gateway');
  const dep = find(DEPLOYMENT, 'Deployment', 'skewgate-gateway');
  const spec = obj(at(dep, 'spec.template.spec'));
  const skewgate = container(spec, 'skewgate');
  const envoy = container(spec, 'envoy');
  const configPath = str(arr(skewgate.args)[arr(skewgate.args).indexOf('--config') + 1]);
  const m = mountFor(spec, skewgate, configPath);
  t.equal(at(m?.volume, 'configMap.name'), 'skewgate-gateway', `skewgate reads ${configPath} from the ConfigMap`);
  const text = str(obj(cm.data, 'ConfigMap data')[m?.rest ?? ''], 'ConfigMap data');
  const doc = parseDocument(text);
  t.same(doc.errors, [], "the ConfigMap's skewgate.yaml is YAML");
  const config = parseConfig(doc.toJS(), `${rel(DEPLOYMENT)}#ConfigMap/skewgate-gateway/${m?.rest ?? ''}`, '/');
  t.pass("the ConfigMap's skewgate.yaml passes parseConfig");
  t.equal(config.apiservers.length, 3);
  t.same(
    config.apiservers.map((s) => new URL(s.url).port),
    ['6443', '6443', '6443'],
  );
  for (const s of config.apiservers) t.ok(s.credentials?.tokenFile, `${s.name}: the pod's ServiceAccount token`);
  checkMembership(t, config, 'Deployment');
  checkBootstrap(t, config, 'Deployment');

  const init = checkRenderedAtStart(t, spec, configPath, 'Deployment');
  t.equal(mountFor(spec, init, configPath)?.volume.name, m?.volume.name, 'the init container renders from the same ConfigMap volume');
  const xds = checkXdsFolder(t, spec, config, 'Deployment');
  // A new pod starts from the ConfigMap's seed; a container restart keeps the members (the pod's emptyDir).
  t.ok(xds.volume.emptyDir !== undefined, 'the xDS folder is an emptyDir of the pod (hostPath is not "restricted")');
  t.equal(at(spec, 'securityContext.fsGroup'), at(spec, 'securityContext.runAsUser'), "every container's user owns the emptyDir (fsGroup)");
  for (const c of [init, skewgate, envoy])
    t.equal(at(c, 'securityContext.runAsUser'), undefined, `${str(c.name)}: the pod's user, the same for the writers and Envoy`);

  for (const [c, role] of [
    [envoy, 'envoy'],
    [skewgate, 'skewgate'],
  ] as const) {
    for (const f of filesNeeded(config, role)) t.ok(mountFor(spec, c, f), `${role} can read ${f}`);
  }
  t.notOk(mountFor(spec, skewgate, config.envoy.upstreamClientCert?.keyFile ?? ''), 'skewgate never sees the front-proxy key');
  const socket = config.extproc.listen.slice('unix:'.length);
  t.equal(mountFor(spec, envoy, socket)?.volume.name, mountFor(spec, skewgate, socket)?.volume.name, 'one socket volume for both');
  // Ready only when Envoy's /ready is too; never restarted for a drained Envoy.
  checkHealthProbes(
    t,
    spec,
    skewgate,
    config,
    configPath,
    { startupProbe: 'grpc', readinessProbe: 'exec --envoy', livenessProbe: 'grpc' },
    'Deployment skewgate',
  );
  t.match(
    config.envoy.admin.address,
    /^(127\.\d+\.\d+\.\d+|::1)$/,
    `envoy.admin ${config.envoy.admin.address}: loopback, which skewgate's container shares with Envoy's (health --envoy)`,
  );
  t.equal(at(envoy, 'readinessProbe.tcpSocket.port'), 'gateway');
  const gatewayPort = objs(envoy.ports).find((p) => p.name === 'gateway');
  t.equal(gatewayPort?.containerPort, config.envoy.listen.port, "the gateway port is the config's listener");

  const replicas = Number(at(dep, 'spec.replicas'));
  t.ok(replicas >= 2 && replicas <= 3, `${replicas} replicas`);
  t.equal(at(dep, 'spec.strategy.rollingUpdate.maxSurge'), 0, 'no surge pod (it would have no node)');
  const labels = obj(at(dep, 'spec.template.metadata.labels'));
  const matches = (sel: unknown): boolean => Object.entries(obj(sel)).every(([k, v]) => labels[k] === v);
  t.ok(matches(at(dep, 'spec.selector.matchLabels')), 'the selector matches the pod labels');
  const anti = objs(at(spec, 'affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution'));
  t.ok(
    anti.some((a) => a.topologyKey === 'kubernetes.io/hostname' && matches(at(a, 'labelSelector.matchLabels'))),
    'required anti-affinity: one replica per node',
  );
  const pdb = find(DEPLOYMENT, 'PodDisruptionBudget');
  t.ok(matches(at(pdb, 'spec.selector.matchLabels')), 'the PodDisruptionBudget selects the replicas');
  t.equal(at(pdb, 'spec.maxUnavailable'), 1);
  const svc = find(DEPLOYMENT, 'Service');
  t.ok(matches(at(svc, 'spec.selector')), 'the Service selects the replicas');
  t.equal(at(svc, 'spec.externalTrafficPolicy'), 'Local', "Local: no second hop, the client's address reaches Envoy");
  t.equal(at(svc, 'spec.ports.0.targetPort'), 'gateway');
  t.equal(spec.automountServiceAccountToken, false, 'no token in the Envoy container');
  const sa = find(DEPLOYMENT, 'ServiceAccount');
  t.equal(spec.serviceAccountName, at(sa, 'metadata.name'));
  const tokenFile = config.apiservers[0]?.credentials?.tokenFile ?? '';
  const tokenVolume = mountFor(spec, skewgate, tokenFile)?.volume;
  t.ok(
    objs(at(tokenVolume, 'projected.sources')).some((s) => s.serviceAccountToken !== undefined),
    `${tokenFile}: a projected, rotated ServiceAccount token`,
  );
  const ns = find(DEPLOYMENT, 'Namespace');
  t.equal(
    obj(at(ns, 'metadata.labels'))['pod-security.kubernetes.io/enforce'],
    'restricted',
    'the namespace enforces the restricted Pod Security profile',
  );
  t.equal(at(dep, 'metadata.namespace'), at(ns, 'metadata.name'), 'the Deployment lives there');
  for (const v of objs(spec.volumes)) {
    const mode = opt(v, 'secret.defaultMode') ?? opt(v, 'projected.defaultMode');
    if (mode !== undefined) t.equal(mode, 0o440, `${str(v.name)}: mode 0440 (written in decimal: YAML 1.1 and 1.2 read octal differently)`);
  }
});

t.test('RBAC: the discovery role is exactly what skewgate needs, bound to both credentials', async (t) => {
  const want = skewgateRbac();
  const role = find(RBAC, 'ClusterRole');
  t.same(role.rules, want.clusterRole.rules, 'get/list/watch on CRDs and APIServices, nothing more (harness/lab/rbac.ts skewgateRbac)');
  const group = find(RBAC, 'ClusterRoleBinding');
  t.same(group.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: at(role, 'metadata.name') });
  t.same(
    group.subjects,
    [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: SKEWGATE_GROUP }],
    `the static pods' certificates: group ${SKEWGATE_GROUP}`,
  );
  const saBinding = find(DEPLOYMENT, 'ClusterRoleBinding');
  const sa = find(DEPLOYMENT, 'ServiceAccount');
  t.same(saBinding.roleRef, group.roleRef, 'the Deployment binds the same role');
  t.same(
    saBinding.subjects,
    [{ kind: 'ServiceAccount', name: at(sa, 'metadata.name'), namespace: at(sa, 'metadata.namespace') }],
    'to its ServiceAccount',
  );
  // The identity-Lease watch: read Leases in kube-system, nowhere else, for the same two credentials.
  const leaseRole = find(RBAC, 'Role');
  t.same(leaseRole.rules, want.leaseRole.rules, 'get/list/watch on Leases (harness/lab/rbac.ts skewgateRbac)');
  t.equal(at(leaseRole, 'metadata.namespace'), 'kube-system', 'in kube-system only');
  const leaseGroup = find(RBAC, 'RoleBinding');
  t.same(leaseGroup.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: at(leaseRole, 'metadata.name') });
  t.same(leaseGroup.subjects, group.subjects, "the static pods' group");
  t.equal(at(leaseGroup, 'metadata.namespace'), 'kube-system');
  const saLeaseBinding = find(DEPLOYMENT, 'RoleBinding');
  t.same(saLeaseBinding.roleRef, leaseGroup.roleRef, 'the Deployment binds the same Role');
  t.same(saLeaseBinding.subjects, saBinding.subjects, 'to the same ServiceAccount');
  t.equal(at(saLeaseBinding, 'metadata.namespace'), 'kube-system');
  const readme = readFileSync(join(DEPLOY, 'static-pods/README.md'), 'utf8');
  t.ok(readme.includes(`--org ${SKEWGATE_GROUP}`), 'the static-pod instructions issue the certificate in that group');
});

t.test('the operator docs name only metrics, spans and attributes that skewgate emits', async (t) => {
  const docs = ['README.md', 'runbook.md', 'replicas.md', 'static-pods/README.md', 'kubernetes/README.md'];
  const prometheus = new Set(Object.values(METRIC).map((m) => m.replaceAll('.', '_')));
  const otel = new Set<string>([
    SPAN_DECISION,
    SPAN_DISCOVERY,
    EVENT_VIEW_CHANGED,
    EVENT_SKEW_CHANGED,
    SPAN_MEMBERSHIP,
    EVENT_MEMBERSHIP_CHANGED,
    ...Object.values(ATTR),
    ...Object.values(ATTR_MEMBERSHIP),
    ...Object.values(METRIC),
  ]);
  let names = 0;
  for (const d of docs) {
    const text = readFileSync(join(DEPLOY, d), 'utf8');
    for (const n of new Set(text.match(/(?<![\w./-])skewgate_[a-z_]+/g) ?? [])) {
      names++;
      t.ok(
        prometheus.has(n.replace(/_(total|bucket|sum|count)$/, '')),
        `${d}: ${n} is a metric skewgate exports (src/telemetry/core/names.ts)`,
      );
    }
    for (const n of new Set(text.match(/(?<![\w./-])skewgate\.[a-z_.]*[a-z_]/g) ?? [])) {
      if (/\.(yaml|conf|sock|crt|key|md)$/.test(n)) continue; // file names
      names++;
      t.ok(otel.has(n), `${d}: ${n} is a span, event, attribute or metric name skewgate emits`);
    }
  }
  t.ok(names >= 15, `${names} names checked`);
  const runbook = readFileSync(join(DEPLOY, 'runbook.md'), 'utf8');
  for (const must of [
    SPAN_DECISION,
    ATTR.outcome,
    ATTR.reason,
    'Retry-After',
    'skewgate status',
    'sg skew',
    'sg explain',
    '--discover',
    'validate',
    '/healthcheck/fail',
    'crictl stop',
    // A control-plane machine added or removed: what shows it.
    'skewgate_membership_members',
    'skewgate_membership_unmatched_identities',
    'apiserver learnt; probing it',
    'apiserver admitted as a member',
    'apiserver left every source: draining',
    'drained apiserver removed',
    'xds: Envoy clusters and routes written',
    'members.json',
  ]) {
    t.ok(runbook.includes(must), `the runbook uses ${must}`);
  }
  // The runbook asks the running gateway where both variants' configs open the admin endpoint.
  const cmData = obj(find(DEPLOYMENT, 'ConfigMap', 'skewgate-gateway').data, 'ConfigMap data');
  for (const [file, config] of [
    [rel(STATIC_CONFIG), loadConfig(STATIC_CONFIG)],
    [rel(DEPLOYMENT), parseConfig(parseDocument(str(cmData['skewgate.yaml'], 'skewgate.yaml')).toJS(), rel(DEPLOYMENT), '/')],
  ] as const) {
    const listen = config.admin?.listen;
    t.ok(listen !== undefined && runbook.includes(`admin.listen\` (\`${listen}\``), `${file}: admin.listen ${listen} is the runbook's`);
  }
  // The log lines the runbook quotes (in backticks) are skewgate's own, wherever in src/ they are written.
  const srcFiles = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? srcFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    );
  const logSources = srcFiles(join(root, 'src'))
    .map((f) => readFileSync(f, 'utf8'))
    .join('\n');
  const quoted = new Set([...runbook.matchAll(/`((?:apiserver|drained|learnt|xds:) [^`\n]*)`/g)].map((m) => m[1] ?? ''));
  t.ok(quoted.size >= 5, `the runbook quotes skewgate's membership log lines (${[...quoted].join(' | ')})`);
  for (const line of quoted) t.ok(logSources.includes(`'${line}'`), `the runbook's log line '${line}' is one skewgate writes`);
});
