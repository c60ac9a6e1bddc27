// Names, addresses, ports and paths of the docker-compose demo, and the specs of its etcd and
// kube-apiservers: what docker-compose.yml and the files under deploy/compose/ are rendered from.
// Pure.
import { type ApiServerSpec, type EtcdSpec } from '../lab/flags.js';
import { labPkiFiles, type LabPkiFiles } from '../lab/pki.js';
import type { ComposeVersions } from './versions.js';

/** The rendered files, relative to the repository root (the compose project directory). */
export const COMPOSE_FILE = 'docker-compose.yml';
export const DEPLOY_HOST_DIR = 'deploy/compose';
export const DEPLOY_FILES = {
  skewgate: 'skewgate.yaml',
  tracing: 'tracing.yaml',
  rbac: 'rbac.yaml',
} as const;
/**
 * Envoy's bootstraps are not among them: the envoy-config one-shot renders both at every start,
 * from skewgate.yaml, into a volume the two Envoys read (nothing rendered is committed twice).
 */
export const BOOTSTRAP_DIR = '/run/envoy';
export const BOOTSTRAP_FILES = {
  gateway: 'envoy.yaml',
  baseline: 'envoy-baseline.yaml',
} as const;
/** The client image (deploy/compose/client/Dockerfile): its build context and the script on its PATH. */
export const CLIENT_BUILD_DIR = 'deploy/compose/client';
export const CLIENT_SCRIPT = 'demo.sh';

/** Paths inside the containers. */
export const PKI_DIR = '/pki';
export const DEPLOY_DIR = '/deploy';
export const SOCKET_DIR = '/run/skewgate';
export const EXTPROC_LISTEN = `unix:${SOCKET_DIR}/extproc.sock`;
/** kube-apiserver's default; it writes nothing there while TLS files are given. */
export const APISERVER_CERT_DIR = '/var/run/kubernetes';
export const ETCD_DATA_DIR = '/var/lib/etcd';

export const deployPath = (file: string): string => `${DEPLOY_DIR}/${file}`;
export const bootstrapPath = (file: string): string => `${BOOTSTRAP_DIR}/${file}`;
export const pkiFiles = (): LabPkiFiles => labPkiFiles(PKI_DIR);

/** Volumes and the network. */
export const PKI_VOLUME = 'pki';
export const SOCKET_VOLUME = 'skewgate-socket';
export const BOOTSTRAP_VOLUME = 'envoy-bootstrap';
export const NETWORK = 'skewgate';
/**
 * A fixed /24 for the static addresses, in the last of the /16s Docker hands out by default
 * (172.17, 172.18, … in turn): taken only on a host that already has many networks.
 */
export const SUBNET = '172.31.250.0/24';
const HOST_PREFIX = '172.31.250.';

/** skewgate, Envoy and the client image's user (node in the skewgate image): owns the PKI files. */
export const APP_USER = '1000:1000';

/** Service names (also DNS names on the network). */
export const SERVICES = {
  pki: 'pki',
  envoyConfig: 'envoy-config',
  etcd: 'etcd',
  setup: 'setup',
  skewgate: 'skewgate',
  envoy: 'envoy',
  baseline: 'envoy-baseline',
  jaeger: 'jaeger',
  client: 'client',
} as const;
export const UPGRADE_PROFILE = 'upgrade';

/** Ports inside the network, and where the host sees them (127.0.0.1 only). */
export const APISERVER_PORT = 6443;
export const GATEWAY_PORT = 6443;
export const ENVOY_ADMIN_PORT = 9901;
export const METRICS_PORT = 9464;
export const OTLP_GRPC_PORT = 4317;
export const JAEGER_UI_PORT = 16686;
export const HOST_IP = '127.0.0.1';
export const HOST_PORTS = { gateway: 6443, baseline: 6444, envoyAdmin: 9901, metrics: 9464, jaegerUi: 16686 } as const;

export const GATEWAY_URL = `https://${SERVICES.envoy}:${GATEWAY_PORT}`;
export const BASELINE_URL = `https://${SERVICES.baseline}:${GATEWAY_PORT}`;
/** kube-apiserver's tracing endpoint: host:port, no scheme. */
export const OTLP_ENDPOINT = `${SERVICES.jaeger}:${OTLP_GRPC_PORT}`;

export const ETCD_SPEC: EtcdSpec = {
  name: SERVICES.etcd,
  dataDir: ETCD_DATA_DIR,
  ip: '0.0.0.0',
  advertiseHost: SERVICES.etcd,
  clientPort: 2379,
  peerPort: 2380,
};

export interface ComposeApiServer {
  /** Compose service name. */
  readonly service: string;
  /** spec.name is the container's hostname (its identity lease) and its DNS name on the network. */
  readonly spec: ApiServerSpec;
  /** Only with `--profile`: kas-1-upgraded. */
  readonly profile?: string;
  /** Further DNS names on the network (kas-1-upgraded answers as kas-1). */
  readonly aliases?: readonly string[];
}

function kas(i: number, version: string): ApiServerSpec {
  return {
    name: `kas-${i}`,
    version,
    ip: `${HOST_PREFIX}${10 + i}`,
    port: APISERVER_PORT,
    placement: 'container',
    tracingConfigFile: deployPath(DEPLOY_FILES.tracing),
  };
}

/**
 * kas-1 and kas-2 at KUBE_OLD, kas-3 at KUBE_NEW; kas-1-upgraded is kas-1 at KUBE_NEW (same
 * hostname, address and DNS name): the upgrade step stops kas-1 and starts it.
 */
export function composeApiServers(v: ComposeVersions): ComposeApiServer[] {
  const one = kas(1, v.kubeOld);
  return [
    { service: 'kas-1', spec: one },
    { service: 'kas-2', spec: kas(2, v.kubeOld) },
    { service: 'kas-3', spec: kas(3, v.kubeNew) },
    { service: 'kas-1-upgraded', spec: { ...one, version: v.kubeNew }, profile: UPGRADE_PROFILE, aliases: [one.name] },
  ];
}

/** The apiservers skewgate and Envoy front: every one that runs without a profile. */
export function frontedApiServers(v: ComposeVersions): ApiServerSpec[] {
  return composeApiServers(v)
    .filter((a) => a.profile === undefined)
    .map((a) => a.spec);
}

export function apiServerUrlOnNetwork(spec: Pick<ApiServerSpec, 'name' | 'port'>): string {
  return `https://${spec.name}:${spec.port}`;
}

/**
 * The serving certificates' names beyond the lab's (LAB_SANS already has localhost and
 * 127.0.0.1 for the published ports): every apiserver's DNS name and address, both gateways.
 */
export function composeExtraSans(v: ComposeVersions): string[] {
  const specs = composeApiServers(v).map((a) => a.spec);
  const names = [...new Set([...specs.map((s) => s.name), SERVICES.envoy, SERVICES.baseline])];
  const ips = [...new Set(specs.map((s) => s.ip))];
  return [...names.map((n) => `DNS:${n}`), ...ips.map((ip) => `IP:${ip}`)];
}
