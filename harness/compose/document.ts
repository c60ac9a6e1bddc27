// docker-compose.yml as a document: services, the network with static apiserver addresses, the
// named volumes. Every command line comes from the lab's own functions (harness/lab/flags.ts). Pure.
import { apiServerArgs, etcdArgs, etcdUrl } from '../lab/flags.js';
import {
  APISERVER_CERT_DIR, APP_USER, BASELINE_URL, CLIENT_BUILD_DIR, CLIENT_SCRIPT, DEPLOY_DIR, DEPLOY_FILES, DEPLOY_HOST_DIR, ENVOY_ADMIN_PORT,
  ETCD_SPEC, GATEWAY_PORT, GATEWAY_URL, HOST_IP, HOST_PORTS, JAEGER_UI_PORT, METRICS_PORT, NETWORK, PKI_DIR, PKI_VOLUME, SERVICES,
  SOCKET_DIR, SOCKET_VOLUME, SUBNET, composeApiServers, composeExtraSans, deployPath, pkiFiles, type ComposeApiServer,
} from './layout.js';
import type { ComposeVersions } from './versions.js';

export type ComposeService = Record<string, unknown>;

export interface ComposeDocument {
  readonly services: Readonly<Record<string, ComposeService>>;
  readonly networks: Readonly<Record<string, unknown>>;
  readonly volumes: Readonly<Record<string, unknown>>;
}

export const images = (v: ComposeVersions) => ({
  etcd: `registry.k8s.io/etcd:${v.etcdImageTag}`,
  kubeApiserver: (version: string): string => `registry.k8s.io/kube-apiserver:v${version}`,
  envoy: `envoyproxy/envoy:v${v.envoy}`,
  jaeger: `jaegertracing/jaeger:${v.jaegerImageTag}`,
});

const completed = { condition: 'service_completed_successfully' } as const;
const started = { condition: 'service_started' } as const;
const healthy = { condition: 'service_healthy' } as const;
const onNetwork = { [NETWORK]: {} };
const pkiRo = `${PKI_VOLUME}:${PKI_DIR}:ro`;
const deployRo = `./${DEPLOY_HOST_DIR}:${DEPLOY_DIR}:ro`;
const socketRw = `${SOCKET_VOLUME}:${SOCKET_DIR}`;
const publish = (hostPort: number, containerPort: number): string => `${HOST_IP}:${hostPort}:${containerPort}`;
const skewgateBuild = { context: '.', dockerfile: 'Dockerfile' };
/** The harness stage of the same Dockerfile: `skewgate-lab lab pki`, never in the service image. */
const pkiBuild = { ...skewgateBuild, target: 'pki' };
const clientBuild = { context: `./${CLIENT_BUILD_DIR}` };

function apiServerService(a: ComposeApiServer, v: ComposeVersions): ComposeService {
  return {
    image: images(v).kubeApiserver(a.spec.version),
    ...(a.profile === undefined ? {} : { profiles: [a.profile] }),
    hostname: a.spec.name,
    // Reads the PKI files (owned by APP_USER, keys 0600) as root, like a kubeadm static pod.
    user: '0:0',
    entrypoint: ['/usr/local/bin/kube-apiserver'],
    command: apiServerArgs(a.spec, pkiFiles(), etcdUrl(ETCD_SPEC), { certDir: APISERVER_CERT_DIR }),
    volumes: [pkiRo, deployRo],
    networks: { [NETWORK]: { ipv4_address: a.spec.ip, ...(a.aliases === undefined ? {} : { aliases: [...a.aliases] }) } },
    depends_on: { [SERVICES.pki]: completed, [SERVICES.etcd]: started, [SERVICES.jaeger]: started },
    restart: 'unless-stopped',
  };
}

export function composeDocument(v: ComposeVersions): ComposeDocument {
  const img = images(v);
  const apiservers = composeApiServers(v);
  const envoy = (bootstrap: string, ports: string[]): ComposeService => ({
    image: img.envoy,
    user: APP_USER,
    // The image's entrypoint runs envoy with these arguments.
    command: ['-c', deployPath(bootstrap), '--log-level', 'warn', '--disable-hot-restart'],
    volumes: bootstrap === DEPLOY_FILES.envoy ? [pkiRo, socketRw, deployRo] : [pkiRo, deployRo],
    networks: onNetwork,
    ports,
    depends_on: { [SERVICES.pki]: completed },
    restart: 'unless-stopped',
  });
  const services: Record<string, ComposeService> = {
    [SERVICES.pki]: {
      build: pkiBuild,
      command: ['lab', 'pki', '--dir', PKI_DIR, ...composeExtraSans(v).flatMap((s) => ['--san', s])],
      // Mounted here first, so both volumes start from the skewgate image's folders (owned by its user).
      volumes: [`${PKI_VOLUME}:${PKI_DIR}`, socketRw],
      network_mode: 'none',
      restart: 'no',
    },
    [SERVICES.etcd]: {
      image: img.etcd,
      entrypoint: ['/usr/local/bin/etcd'],
      command: etcdArgs(ETCD_SPEC),
      networks: onNetwork,
      restart: 'unless-stopped',
    },
    ...Object.fromEntries(apiservers.map((a) => [a.service, apiServerService(a, v)])),
    [SERVICES.setup]: {
      build: clientBuild,
      // The image's user too: admin.token is readable by its owner only.
      user: APP_USER,
      command: [CLIENT_SCRIPT, 'setup'],
      environment: { PKI_DIR, GATEWAY_URL, RBAC_FILE: deployPath(DEPLOY_FILES.rbac) },
      volumes: [pkiRo, deployRo],
      networks: onNetwork,
      depends_on: { [SERVICES.pki]: completed, [SERVICES.envoy]: started },
      restart: 'no',
    },
    [SERVICES.skewgate]: {
      build: skewgateBuild,
      command: ['serve', '--config', deployPath(DEPLOY_FILES.skewgate)],
      volumes: [pkiRo, socketRw, deployRo],
      networks: onNetwork,
      ports: [publish(HOST_PORTS.metrics, METRICS_PORT)],
      depends_on: { [SERVICES.pki]: completed, [SERVICES.setup]: completed },
      // The grpc.health.v1 check Envoy makes too: SERVING once the first discovery round is done.
      healthcheck: {
        test: ['CMD', 'node', '/app/dist/src/cli/main.js', 'health', '--config', deployPath(DEPLOY_FILES.skewgate)],
        interval: '5s',
        timeout: '5s',
        retries: 3,
        start_period: '30s',
      },
      restart: 'unless-stopped',
    },
    [SERVICES.envoy]: envoy(DEPLOY_FILES.envoy, [publish(HOST_PORTS.gateway, GATEWAY_PORT), publish(HOST_PORTS.envoyAdmin, ENVOY_ADMIN_PORT)]),
    [SERVICES.baseline]: envoy(DEPLOY_FILES.envoyBaseline, [publish(HOST_PORTS.baseline, GATEWAY_PORT)]),
    [SERVICES.jaeger]: {
      image: img.jaeger,
      // The image's default too: OTLP and the UI on every interface of the container.
      environment: { JAEGER_LISTEN_HOST: '0.0.0.0' },
      networks: onNetwork,
      ports: [publish(HOST_PORTS.jaegerUi, JAEGER_UI_PORT)],
      restart: 'unless-stopped',
    },
    [SERVICES.client]: {
      build: clientBuild,
      user: APP_USER,
      command: [CLIENT_SCRIPT, 'demo'],
      environment: { PKI_DIR, GATEWAY_URL, BASELINE_URL },
      volumes: [pkiRo, deployRo],
      networks: onNetwork,
      depends_on: { [SERVICES.setup]: completed, [SERVICES.skewgate]: healthy, [SERVICES.envoy]: started, [SERVICES.baseline]: started },
      restart: 'no',
    },
  };
  return {
    services,
    networks: { [NETWORK]: { ipam: { config: [{ subnet: SUBNET }] } } },
    volumes: { [PKI_VOLUME]: {}, [SOCKET_VOLUME]: {} },
  };
}
