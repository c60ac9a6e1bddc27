// docker-compose.yml as a document: services, the network with static apiserver addresses, the
// named volumes. Every command line comes from the lab's own functions (harness/lab/flags.ts). Pure.
import { APISERVER_STOP_GRACE_MS, apiServerArgs, etcdArgs, etcdUrl } from '../lab/flags.js';
import { BASELINE_SERVICE_NAME } from './deploy-files.js';
import {
  APISERVER_CERT_DIR,
  APP_USER,
  BASELINE_URL,
  BOOTSTRAP_DIR,
  BOOTSTRAP_FILES,
  BOOTSTRAP_VOLUME,
  CLIENT_BUILD_DIR,
  CLIENT_SCRIPT,
  DEPLOY_DIR,
  DEPLOY_FILES,
  DEPLOY_HOST_DIR,
  ENVOY_ADMIN_PORT,
  ETCD_SPEC,
  GATEWAY_PORT,
  GATEWAY_URL,
  HOST_IP,
  HOST_PORTS,
  JAEGER_UI_PORT,
  METRICS_PORT,
  NETWORK,
  PKI_DIR,
  PKI_VOLUME,
  SERVICES,
  SOCKET_DIR,
  SOCKET_VOLUME,
  SUBNET,
  bootstrapPath,
  composeApiServers,
  composeExtraSans,
  deployPath,
  pkiFiles,
  type ComposeApiServer,
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
const bootstrapRw = `${BOOTSTRAP_VOLUME}:${BOOTSTRAP_DIR}`;
const bootstrapRo = `${bootstrapRw}:ro`;
const publish = (hostPort: number, containerPort: number): string => `${HOST_IP}:${hostPort}:${containerPort}`;
const skewgateBuild = { context: '.', dockerfile: 'Dockerfile' };
/** The harness stage of the same Dockerfile (the PKI and bootstrap one-shots), never in the service image. */
const harnessBuild = { ...skewgateBuild, target: 'harness' };
/** The CLIs as the images hold them (WORKDIR /app): the service's and the harness's. */
const SKEWGATE_CLI = 'node /app/dist/src/cli/main.js';
const HARNESS_CLI = 'node /app/dist/harness/cli/main.js';

/**
 * The envoy-config one-shot's shell line: the gateway's bootstrap exactly as `skewgate envoy-config`
 * prints it for the config skewgate serves, then the baseline's (the same without ext_proc).
 */
export function renderBootstrapsLine(): string {
  const config = deployPath(DEPLOY_FILES.skewgate);
  return [
    `${SKEWGATE_CLI} envoy-config --config ${config} > ${bootstrapPath(BOOTSTRAP_FILES.gateway)}`,
    `${HARNESS_CLI} envoy-baseline --config ${config} --service-name ${BASELINE_SERVICE_NAME} > ${bootstrapPath(BOOTSTRAP_FILES.baseline)}`,
  ].join(' && ');
}
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
    // Compose's default 10 s would SIGKILL it inside its --shutdown-delay-duration window.
    stop_grace_period: `${APISERVER_STOP_GRACE_MS / 1000}s`,
  };
}

export function composeDocument(v: ComposeVersions): ComposeDocument {
  const img = images(v);
  const apiservers = composeApiServers(v);
  const envoy = (bootstrap: string, ports: string[]): ComposeService => ({
    image: img.envoy,
    user: APP_USER,
    // The image's entrypoint runs envoy with these arguments.
    command: ['-c', bootstrapPath(bootstrap), '--log-level', 'warn', '--disable-hot-restart'],
    volumes: bootstrap === BOOTSTRAP_FILES.gateway ? [pkiRo, socketRw, bootstrapRo] : [pkiRo, bootstrapRo],
    networks: onNetwork,
    ports,
    depends_on: { [SERVICES.pki]: completed, [SERVICES.envoyConfig]: completed },
    restart: 'unless-stopped',
  });
  const services: Record<string, ComposeService> = {
    [SERVICES.pki]: {
      build: harnessBuild,
      command: ['lab', 'pki', '--dir', PKI_DIR, ...composeExtraSans(v).flatMap((s) => ['--san', s])],
      // Mounted here first, so both volumes start from the skewgate image's folders (owned by its user).
      volumes: [`${PKI_VOLUME}:${PKI_DIR}`, socketRw],
      network_mode: 'none',
      restart: 'no',
    },
    [SERVICES.envoyConfig]: {
      build: harnessBuild,
      entrypoint: ['sh', '-c'],
      command: [renderBootstrapsLine()],
      // The image's folder, owned by its user, fills the new volume: the renderer may write there.
      volumes: [deployRo, bootstrapRw],
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
      // Every skewgate command in the container reads it without --config (`skewgate status`).
      environment: { SKEWGATE_CONFIG: deployPath(DEPLOY_FILES.skewgate) },
      command: ['serve'],
      volumes: [pkiRo, socketRw, deployRo],
      networks: onNetwork,
      ports: [publish(HOST_PORTS.metrics, METRICS_PORT)],
      depends_on: { [SERVICES.pki]: completed, [SERVICES.setup]: completed },
      // The grpc.health.v1 check Envoy makes too: SERVING once the first discovery round is done.
      healthcheck: {
        test: ['CMD', 'skewgate', 'health'],
        interval: '5s',
        timeout: '5s',
        retries: 3,
        start_period: '30s',
      },
      restart: 'unless-stopped',
    },
    [SERVICES.envoy]: envoy(BOOTSTRAP_FILES.gateway, [
      publish(HOST_PORTS.gateway, GATEWAY_PORT),
      publish(HOST_PORTS.envoyAdmin, ENVOY_ADMIN_PORT),
    ]),
    [SERVICES.baseline]: envoy(BOOTSTRAP_FILES.baseline, [publish(HOST_PORTS.baseline, GATEWAY_PORT)]),
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
    volumes: { [PKI_VOLUME]: {}, [SOCKET_VOLUME]: {}, [BOOTSTRAP_VOLUME]: {} },
  };
}
