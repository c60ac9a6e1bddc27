// The command lines of the lab's etcd and kube-apiservers, and of the docker-compose demo's (the
// same flags, other addresses and paths): the single source of truth for their flags. Pure. Every
// flag here was checked against `--help` of both pinned kube-apiserver builds (test/cluster/lab-smoke).
import { isIPv4 } from 'node:net';
import type { LabPkiFiles } from './pki.js';
import { FRONT_PROXY_CLIENT_CN } from './pki.js';
import { LAB_ALIAS_NET } from './addresses.js';

/**
 * Where an apiserver runs. `loopback` (the lab): bound to and advertising its own 127.x address.
 * `container` (docker-compose.yml): bound on every interface of its container and advertising
 * the container's static address on the compose network.
 */
export type ApiServerPlacement = 'loopback' | 'container' | 'alias';

/**
 * Addresses the lab adds to the loopback interface for `alias` placement (net.ts): not 127/8, so
 * an apiserver there may advertise itself and run the real endpoint reconciler, which writes the
 * `default/kubernetes` EndpointSlice (a loopback address is an invalid Endpoints address). Each
 * lab slot has its own (addresses.ts: 10.213.<slot>.N).
 */
export const LAB_ALIAS_PREFIX = LAB_ALIAS_NET;

export interface ApiServerSpec {
  /** "kas-1": also its hostname, in a UTS namespace of its own (a distinct identity lease). */
  readonly name: string;
  /** "1.35.4": the binary `kube-apiserver-<version>` built by lab/build.sh. */
  readonly version: string;
  /** Advertise address; with placement loopback also the bind address: 127.0.0.1, 127.0.0.2, … */
  readonly ip: string;
  /** Default loopback. */
  readonly placement?: ApiServerPlacement;
  readonly port: number;
  /** --runtime-config, e.g. "admissionregistration.k8s.io/v1beta1=false". */
  readonly runtimeConfig?: string;
  /** Kubernetes' built-in Mixed Version Proxy: --peer-ca-file and the peer advertise address. */
  readonly peerProxy?: boolean;
  readonly tracingConfigFile?: string;
  /**
   * The ServiceAccount admission plugin on, as in every real cluster: pods get their account's
   * token mounted (in-cluster config). Needs kube-controller-manager's serviceaccount controller
   * (it makes each namespace's `default`); off by default in the lab, which mostly runs none.
   */
  readonly serviceAccountAdmission?: boolean;
  /** Appended last (a later flag wins), for experiments such as another --shutdown-delay-duration. */
  readonly extraArgs?: readonly string[];
}

export interface ApiServerDirs {
  /** --cert-dir: kube-apiserver writes nothing there while TLS files are given, but it must be its own. */
  readonly certDir: string;
  /** --audit-log-path; needs auditPolicyFile (without a policy nothing is logged). */
  readonly auditLog?: string;
  readonly auditPolicyFile?: string;
}

/** Shared by every apiserver of the lab (one allocator in etcd). */
export const SERVICE_CLUSTER_IP_RANGE = '10.96.0.0/16';
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
export const MVP_FEATURE_GATE = 'UnknownVersionInteroperabilityProxy';
/** How long a stopping apiserver lets open watches drain (the flag exists in 1.35 and 1.36). */
export const SHUTDOWN_WATCH_GRACE = '5s';
/**
 * How long a stopping apiserver keeps serving with /readyz failing before it stops listening
 * (--shutdown-delay-duration): the window in which Envoy's /readyz health check and skewgate's
 * probe take it out of the pool, so that no new request is sent to a closing server. It must
 * exceed their detection: Envoy's with skewgate's defaults, interval 2 s × unhealthy threshold 2 +
 * timeout 1 s = 5 s (the lab's checks are faster, 1 s × 2 + 1 s); skewgate's, discovery.interval
 * 1 s + discovery.timeout 3 s = 4 s. Twice the larger, so that one late or lost check does not
 * let the server close while a balancer still picks it. kube-apiserver's default is 0 (no window).
 */
export const SHUTDOWN_DELAY_MS = 10_000;
/**
 * How long a supervisor (the lab, docker compose) waits after SIGTERM before SIGKILL: the delay
 * above, then the drain (open watches end after SHUTDOWN_WATCH_GRACE), with room to spare.
 */
export const APISERVER_STOP_GRACE_MS = SHUTDOWN_DELAY_MS + 30_000;
/** The Mixed Version Proxy's gate is beta and on by default from this minor (alpha, off, before). */
const MVP_DEFAULT_ON_MINOR = 36;

/** Metadata for every request: who, what, which verb, status, source IPs; no bodies. */
export const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`;

export function minorOf(version: string): number {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!m) throw new Error(`not a Kubernetes version: "${version}"`);
  return Number(m[2]);
}

export function apiServerUrl(spec: Pick<ApiServerSpec, 'ip' | 'port'>): string {
  return `https://${spec.ip}:${spec.port}`;
}

const LOOPBACK_IPV4 = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** The address kube-apiserver listens on; throws when spec.ip does not suit the placement. */
function bindAddress(spec: ApiServerSpec): string {
  const placement = spec.placement ?? 'loopback';
  if (placement === 'alias') {
    if (!spec.ip.startsWith(LAB_ALIAS_PREFIX) || !isIPv4(spec.ip))
      throw new Error(`${spec.name}: an alias address is ${LAB_ALIAS_PREFIX}N, not ${spec.ip}`);
    return spec.ip;
  }
  if (placement === 'loopback') {
    if (!LOOPBACK_IPV4.test(spec.ip)) throw new Error(`${spec.name}: ${spec.ip} is not a loopback IPv4 address`);
    return spec.ip;
  }
  // Peers and the endpoint reconciler would be sent to an address nobody else can reach.
  if (!isIPv4(spec.ip) || LOOPBACK_IPV4.test(spec.ip) || spec.ip === '0.0.0.0') {
    throw new Error(`${spec.name}: a container advertises its network IPv4 address, not ${spec.ip}`);
  }
  return '0.0.0.0';
}

export function apiServerArgs(spec: ApiServerSpec, pki: LabPkiFiles, etcdUrl: string, dirs: ApiServerDirs): string[] {
  const bind = bindAddress(spec);
  if (dirs.auditLog !== undefined && dirs.auditPolicyFile === undefined) throw new Error(`${spec.name}: auditLog needs auditPolicyFile`);
  const args = [
    `--etcd-servers=${etcdUrl}`,
    `--secure-port=${spec.port}`,
    `--bind-address=${bind}`,
    // Explicit: the fallback is the default-route interface, which a sandbox may not have.
    `--advertise-address=${spec.ip}`,
    `--cert-dir=${dirs.certDir}`,
    `--tls-cert-file=${pki.serverCertFile}`,
    `--tls-private-key-file=${pki.serverKeyFile}`,
    `--client-ca-file=${pki.caFile}`,
    `--token-auth-file=${pki.tokenAuthFile}`,
    // As kubeadm: the Node authorizer and NodeRestriction hold a kubelet (system:node:<name>) to its
    // own Node, Lease and pods.
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    // logs, exec, attach, port-forward: the apiserver is the kubelet's client, with its own
    // certificate, and verifies the kubelet's serving certificate (lab CA) at its InternalIP (the
    // lab's node names resolve nowhere).
    `--kubelet-client-certificate=${pki.kubeletClientCertFile}`,
    `--kubelet-client-key=${pki.kubeletClientKeyFile}`,
    `--kubelet-certificate-authority=${pki.caFile}`,
    '--kubelet-preferred-address-types=InternalIP,Hostname',
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-account-signing-key-file=${pki.saKeyFile}`,
    `--service-account-key-file=${pki.saPubFile}`,
    `--api-audiences=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    // Front-proxy identity: what a peer apiserver (Mixed Version Proxy) or the gateway asserts for
    // a client certificate it verified. The UID header needs RemoteRequestHeaderUID (beta, on in 1.35 and 1.36).
    `--requestheader-client-ca-file=${pki.frontProxyCaFile}`,
    `--requestheader-allowed-names=${FRONT_PROXY_CLIENT_CN}`,
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-uid-headers=X-Remote-Uid',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--proxy-client-cert-file=${pki.frontProxyClientCertFile}`,
    `--proxy-client-key-file=${pki.frontProxyClientKeyFile}`,
    // A loopback advertise address is an invalid Endpoints address (kubernetes#121942), and one
    // bad entry poisons the shared master-lease list: the lab publishes no `kubernetes` endpoints,
    // except at alias addresses, where each apiserver publishes itself as in a real cluster.
    `--endpoint-reconciler-type=${(spec.placement ?? 'loopback') === 'alias' ? 'lease' : 'none'}`,
    // Without a kube-controller-manager nothing creates ServiceAccounts, and the admission plugin
    // would reject every Pod; a lab that runs one (with pods using in-cluster config) turns it on.
    ...(spec.serviceAccountAdmission === true ? [] : ['--disable-admission-plugins=ServiceAccount']),
    '--profiling=false',
    // Without it a stopping apiserver waits for its open watches (Envoy keeps them open) up to
    // 60 s; with it they end a few seconds after the delay below, as in a real rollout.
    `--shutdown-watch-termination-grace-period=${SHUTDOWN_WATCH_GRACE}`,
    // /readyz fails from the SIGTERM on while requests are still served (kubernetes#88911): the
    // gateway leaves a stopping apiserver before it closes, as kubeadm's docs advise (kubeadm reset).
    `--shutdown-delay-duration=${SHUTDOWN_DELAY_MS / 1000}s`,
  ];
  if (dirs.auditLog !== undefined && dirs.auditPolicyFile !== undefined) {
    args.push(
      `--audit-policy-file=${dirs.auditPolicyFile}`,
      `--audit-log-path=${dirs.auditLog}`,
      '--audit-log-maxbackup=1',
      '--audit-log-maxsize=100',
    );
  }
  if (spec.runtimeConfig !== undefined) args.push(`--runtime-config=${spec.runtimeConfig}`);
  if (spec.peerProxy) {
    if (minorOf(spec.version) < MVP_DEFAULT_ON_MINOR) args.push(`--feature-gates=${MVP_FEATURE_GATE}=true`);
    // The proxy verifies a peer's serving certificate (issued by the cluster CA) at its advertised address.
    args.push(`--peer-ca-file=${pki.caFile}`, `--peer-advertise-ip=${spec.ip}`, `--peer-advertise-port=${spec.port}`);
  }
  if (spec.tracingConfigFile !== undefined) args.push(`--tracing-config-file=${spec.tracingConfigFile}`);
  args.push(...(spec.extraArgs ?? []));
  return args;
}

export interface EtcdSpec {
  readonly name: string;
  readonly dataDir: string;
  /** Listen address; also the advertised host unless advertiseHost is given. */
  readonly ip: string;
  /** The host name or address clients and peers use, e.g. "etcd" on a compose network (listen on 0.0.0.0). */
  readonly advertiseHost?: string;
  /** Not the defaults 2379/2380, so that a lab never clashes with another etcd on the machine. */
  readonly clientPort: number;
  readonly peerPort: number;
}

/** The URL clients use (the advertised one). */
export function etcdUrl(spec: Pick<EtcdSpec, 'ip' | 'advertiseHost' | 'clientPort'>): string {
  return `http://${spec.advertiseHost ?? spec.ip}:${spec.clientPort}`;
}

export function etcdArgs(spec: EtcdSpec): string[] {
  const host = spec.advertiseHost ?? spec.ip;
  const peer = `http://${host}:${spec.peerPort}`;
  return [
    `--name=${spec.name}`,
    `--data-dir=${spec.dataDir}`,
    `--listen-client-urls=http://${spec.ip}:${spec.clientPort}`,
    `--advertise-client-urls=${etcdUrl(spec)}`,
    `--listen-peer-urls=http://${spec.ip}:${spec.peerPort}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=${spec.name}=${peer}`,
    '--initial-cluster-state=new',
    // A throw-away lab: no fsync makes etcd fast on any disk; a crash may lose its data (wiped on every start anyway).
    '--unsafe-no-fsync=true',
    // As kubeadm: progress notifications let the apiservers' watch cache serve consistent reads.
    '--watch-progress-notify-interval=5s',
    '--log-level=warn',
  ];
}
