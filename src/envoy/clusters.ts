// The bootstrap's clusters: each apiserver on its own and all of them balanced (the default), once
// per way of connecting (with or without the front-proxy certificate), with upstream TLS, /readyz
// health checks and circuit breakers; and skewgate's own ext_proc cluster. Pure.
import { createHash } from 'node:crypto';
import { certificateFields, validationFields } from './tls-material.js';
import type { Config } from '../config/core/schema.js';
import { extprocListenAddresses } from '../config/core/extproc-listen.js';
import { EXTPROC_SERVICE_NAME, extprocStreamCeiling, HEALTH_CHECK_USER, REMOTE_USER_HEADER } from '../constants.js';
import { BootstrapError, duration, type JsonObject, type PathFn } from './json.js';
import { ENVOY_CA_FILE_REQUIRED } from '../config/core/envoy-rules.js';
import { statesIdentity, type Upstream } from './upstreams.js';
import { envoyStatesCertificates } from './cert-identity.js';

/** Cluster names skewgate renders itself (the config rejects them as apiserver names). */
export const DEFAULT_CLUSTER = 'default';
export const EXTPROC_CLUSTER = 'skewgate-extproc';
/** Prefix of the fast-path pools' clusters ("_": never in an apiserver name, a DNS label). */
export const FAST_CLUSTER_PREFIX = 'fast_';
/**
 * Suffix of the clusters that connect with the front-proxy certificate (an apiserver name is a
 * DNS label, so "_" can never clash with one).
 */
export const FRONT_PROXY_SUFFIX = '_front-proxy';

/** Each in-flight request holds an upstream HTTP/1.1 connection (watches last minutes). */
export const HIGH_LIMIT = 100_000;

/**
 * One set of apiserver clusters per way of connecting. With client certificates re-stated, a
 * request carrying a stated identity goes over connections that present the front-proxy
 * certificate, and every other request over connections that present none: kube-apiserver
 * authenticates a token or an anonymous request exactly as if the client had connected directly
 * (on a front-proxy connection without X-Remote-User it would answer 401 to anonymous requests,
 * its x509 authenticator rejecting the front-proxy certificate). Without client certificates
 * there is one set, with upstreamClientCert if configured.
 */
interface ClusterSet {
  readonly suffix: string;
  readonly clientCert: { readonly certFile: string; readonly keyFile: string } | undefined;
  /** The front-proxy clusters' /readyz checks need a user: the health-check identity, default rights only. */
  readonly healthCheckHeaders: readonly JsonObject[];
}

function clusterSets(config: Config): ClusterSet[] {
  if (!statesIdentity(config)) return [{ suffix: '', clientCert: config.envoy.upstreamClientCert, healthCheckHeaders: [] }];
  return [
    { suffix: '', clientCert: undefined, healthCheckHeaders: [] },
    {
      suffix: FRONT_PROXY_SUFFIX,
      clientCert: config.envoy.upstreamClientCert,
      healthCheckHeaders: [{ header: { key: REMOTE_USER_HEADER, value: HEALTH_CHECK_USER }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }],
    },
  ];
}

/**
 * Every apiserver's own cluster and the balanced default, once per way of connecting. `draining`
 * apiservers keep their own clusters (requests open on them may finish) but are not in the pool.
 */
export function apiserverClusters(config: Config, upstreams: readonly Upstream[], file: PathFn, draining: readonly Upstream[] = []): JsonObject[] {
  // A pool is never empty: with every member draining, they stay balanced rather than nothing.
  const pool = upstreams.length > 0 ? upstreams : draining;
  return clusterSets(config).flatMap((set) => [
    ...[...upstreams, ...draining].map((u) => apiserverCluster(config, u, file, set)),
    defaultCluster(config, pool, file, set),
  ]);
}

function upstreamTls(config: Config, u: Upstream, file: PathFn, set: ClusterSet): JsonObject {
  if (u.caFile === undefined) {
    // Verification cannot be turned off, and a system trust store is machine-specific.
    throw new BootstrapError(`apiserver "${u.name}": caFile ${ENVOY_CA_FILE_REQUIRED}`);
  }
  const client = set.clientCert;
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      // SNI carries DNS names only (RFC 6066); an IP URL without serverName sends none.
      ...(u.verifyIsIp ? {} : { sni: u.verifyName }),
      common_tls_context: {
        // HTTP/1.1 so that SPDY and WebSocket upgrades pass through to the apiserver.
        alpn_protocols: ['http/1.1'],
        ...validationFields(config, u.caFile, [{ san_type: u.verifyIsIp ? 'IP_ADDRESS' : 'DNS', matcher: { exact: u.verifyName } }], file),
        ...(client === undefined ? {} : certificateFields(config, client, file)),
      },
    },
  };
}

function endpoint(u: Upstream, metadata: boolean): JsonObject {
  return {
    endpoint: {
      address: { socket_address: { address: u.host, port_value: u.port } },
      // Host header of the /readyz check.
      health_check_config: { hostname: u.verifyName },
    },
    ...(metadata ? { metadata: { filter_metadata: { 'envoy.transport_socket_match': { apiserver: u.name } } } } : {}),
  };
}

function circuitBreakers(): JsonObject {
  return {
    thresholds: [
      { priority: 'DEFAULT', max_connections: HIGH_LIMIT, max_pending_requests: HIGH_LIMIT, max_requests: HIGH_LIMIT, max_retries: 1000 },
    ],
  };
}

/**
 * The ext_proc cluster's breaker, at extprocStreamCeiling: of the streams this Envoy holds open,
 * skewgate routes extproc.limits.maxStreams and answers the rest 429, so the client sees
 * skewgate's 429 first. Beyond the ceiling the breaker overflows: the ext_proc filter fails that
 * request's stream as with skewgate unreachable (failureMode open: balanced, and a client
 * certificate gets the 401 backstop; closed: 503). Per cluster, not per skewgate: with peers, the
 * ones in use share it. No more connections, queued streams or retries than that either.
 */
function extprocCircuitBreakers(config: Config): JsonObject {
  const ceiling = extprocStreamCeiling(config.extproc.limits.maxStreams);
  return {
    thresholds: [{ priority: 'DEFAULT', max_connections: ceiling, max_pending_requests: ceiling, max_requests: ceiling, max_retries: ceiling }],
  };
}

function readyz(set: ClusterSet): JsonObject {
  return { http_health_check: { path: '/readyz', ...(set.healthCheckHeaders.length > 0 ? { request_headers_to_add: set.healthCheckHeaders } : {}) } };
}

function healthCheck(config: Config, check: JsonObject): JsonObject {
  const hc = config.envoy.healthCheck;
  return {
    timeout: duration(hc.timeout),
    interval: duration(hc.interval),
    // Envoy checks a cluster that saw no traffic only once a minute by default; routed-only
    // clusters may see none for long, and their health must stay current.
    no_traffic_interval: duration(hc.interval),
    no_traffic_healthy_interval: duration(hc.interval),
    unhealthy_threshold: hc.unhealthyThreshold,
    healthy_threshold: hc.healthyThreshold,
    ...check,
  };
}


/**
 * TCP keepalive on apiserver connections: a connection whose apiserver vanished without closing it
 * (a dropped host, packets blackholed) is closed after ~30 s of silence instead of lingering in
 * the pool for the next request, or under a watch, for the kernel's two hours.
 */
const UPSTREAM_KEEPALIVE: JsonObject = { tcp_keepalive: { keepalive_time: 15, keepalive_interval: 5, keepalive_probes: 3 } };

function http1Options(): JsonObject {
  return {
    'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
      explicit_http_config: { http_protocol_options: {} },
    },
  };
}

function discoveryType(upstreams: readonly Upstream[]): JsonObject {
  return upstreams.every((u) => u.ip) ? { type: 'STATIC' } : { type: 'STRICT_DNS', dns_lookup_family: 'V4_PREFERRED' };
}

function apiserverCluster(config: Config, u: Upstream, file: PathFn, set: ClusterSet): JsonObject {
  const name = `${u.name}${set.suffix}`;
  return {
    name,
    ...discoveryType([u]),
    connect_timeout: duration(config.envoy.connectTimeout),
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [endpoint(u, false)] }] },
    transport_socket: upstreamTls(config, u, file, set),
    typed_extension_protocol_options: http1Options(),
    upstream_connection_options: UPSTREAM_KEEPALIVE,
    circuit_breakers: circuitBreakers(),
    health_checks: [healthCheck(config, readyz(set))],
  };
}

/**
 * Every apiserver, balanced. Each endpoint gets its own TLS settings through
 * transport_socket_matches, so apiservers with different CAs or names can share the cluster.
 * Envoy's default panic threshold (50 %) is kept: with most apiservers failing /readyz it keeps
 * trying all of them rather than refusing everything (docs/design.md, invariant 4 favours availability).
 */
function defaultCluster(config: Config, upstreams: readonly Upstream[], file: PathFn, set: ClusterSet, name = `${DEFAULT_CLUSTER}${set.suffix}`): JsonObject {
  const first = upstreams[0];
  if (first === undefined) throw new BootstrapError('at least one apiserver is required');
  return {
    name,
    ...discoveryType(upstreams),
    connect_timeout: duration(config.envoy.connectTimeout),
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: upstreams.map((u) => endpoint(u, true)) }] },
    transport_socket_matches: upstreams.map((u) => ({ name: u.name, match: { apiserver: u.name }, transport_socket: upstreamTls(config, u, file, set) })),
    // Never plaintext, even for an endpoint no match would cover.
    transport_socket: upstreamTls(config, first, file, set),
    typed_extension_protocol_options: http1Options(),
    upstream_connection_options: UPSTREAM_KEEPALIVE,
    circuit_breakers: circuitBreakers(),
    health_checks: [healthCheck(config, readyz(set))],
  };
}

/**
 * A fast-path table's pool (routing/fast-path.ts), named for its members so that a route table
 * and the pool it sends to change together, in one rds.json write: a new pool is a new cluster,
 * written before the routes that name it. Balanced and checked as the default pool is, over the
 * connections a request without a client certificate takes; and, where Envoy states certificates
 * itself (cert-identity.ts), a twin over the front-proxy connections for those.
 */
export function fastPoolClusters(config: Config, upstreams: readonly Upstream[], file: PathFn, name = fastClusterName(upstreams.map((u) => u.name))): JsonObject[] {
  const [direct, frontProxy] = clusterSets(config) as [ClusterSet, ClusterSet | undefined];
  return [
    defaultCluster(config, upstreams, file, direct, name),
    ...(frontProxy !== undefined && envoyStatesCertificates(config) ? [defaultCluster(config, upstreams, file, frontProxy, `${name}${frontProxy.suffix}`)] : []),
  ];
}

/** The clusters of the pool of these members (fastPoolClusters), by name. */
export function fastPoolClusterNames(config: Config, members: readonly string[]): string[] {
  const name = fastClusterName(members);
  return envoyStatesCertificates(config) ? [name, `${name}${FRONT_PROXY_SUFFIX}`] : [name];
}

/** The name of the fast pool of these members (any order): `fast_` and a digest of the sorted names. */
export function fastClusterName(members: readonly string[]): string {
  return `${FAST_CLUSTER_PREFIX}${createHash('sha256').update([...members].sort().join('\n')).digest('hex').slice(0, 12)}`;
}

/** "host:port" or "[v6]:port" → an Envoy socket_address; `problem` names the field when it is neither. */
function socketAddress(hostPort: string, problem: string): JsonObject {
  const m = /^\[?(.*?)\]?:(\d+)$/.exec(hostPort);
  if (!m) throw new BootstrapError(problem);
  return { socket_address: { address: m[1] as string, port_value: Number(m[2]) } };
}

function extprocAddress(listen: string, file: PathFn): JsonObject {
  if (listen.startsWith('unix:')) return { pipe: { path: file(listen.slice('unix:'.length)) } };
  return socketAddress(listen, `extproc.listen "${listen}" is neither host:port nor unix:/path`);
}

/** Endpoint metadata that picks a peer skewgate's transport socket (mutual TLS). */
const PEER_MATCH = { skewgate: 'peer' } as const;


/** Envoy's side of the peer channel: its client certificate, the peers' CA (and name), HTTP/2 by ALPN. */
function peerTls(config: Config, peers: NonNullable<Config['envoy']['extprocPeers']>, file: PathFn): JsonObject {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      ...(peers.serverName ? { sni: peers.serverName } : {}),
      common_tls_context: {
        alpn_protocols: ['h2'],
        ...certificateFields(config, peers, file),
        ...validationFields(
          config,
          peers.caFile,
          peers.serverName ? [{ san_type: 'DNS', matcher: { exact: peers.serverName } }] : undefined,
          file,
        ),
      },
    },
  };
}

/**
 * skewgate itself, gRPC over HTTP/2: the local one (priority 0) and, with envoy.extprocPeers,
 * the other nodes' (priority 1, mutual TLS), used only while the local one is not healthy. Its
 * gRPC health (grpc.health.v1, service EXTPROC_SERVICE_NAME) gates use: with panic threshold 0,
 * a NOT_SERVING or absent skewgate is skipped at once (fail open: plain balancing; fail closed:
 * status_on_error) instead of every request paying for a failed stream. A skewgate that refuses
 * a connection is ejected at the first failure (outlier detection on local-origin errors), so
 * that a killed one is left before the next health check notices.
 */
export function extprocCluster(config: Config, file: PathFn): JsonObject {
  const peers = config.envoy.extprocPeers;
  // One endpoint per ext_proc worker of the local skewgate (extproc.workers), balanced per stream.
  const locals = extprocListenAddresses(config.extproc.listen, config.extproc.workers);
  const local = { priority: 0, lb_endpoints: locals.map((l) => ({ endpoint: { address: extprocAddress(l, file) } })) };
  const remote = peers && {
    priority: 1,
    lb_endpoints: peers.endpoints.map((e) => ({
      endpoint: { address: socketAddress(e, `envoy.extprocPeers endpoint "${e}" is not host:port`) },
      metadata: { filter_metadata: { 'envoy.transport_socket_match': PEER_MATCH } },
    })),
  };
  return {
    name: EXTPROC_CLUSTER,
    type: 'STATIC',
    // The local one is a process or socket on this machine: it answers at once or is not there.
    connect_timeout: peers ? '0.5s' : '0.25s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: EXTPROC_CLUSTER, endpoints: remote ? [local, remote] : [local] },
    ...(peers ? { transport_socket_matches: [{ name: 'peer', match: PEER_MATCH, transport_socket: peerTls(config, peers, file) }] } : {}),
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: { connection_keepalive: { interval: '30s', timeout: '5s' } } },
      },
    },
    circuit_breakers: extprocCircuitBreakers(config),
    common_lb_config: { healthy_panic_threshold: { value: 0 } },
    // With peers or several workers only: ejecting the one local endpoint would gain nothing (no
    // other to go to) and would hold off its recovery.
    ...(peers || locals.length > 1 ? { outlier_detection: PEER_EJECTION } : {}),
    health_checks: [healthCheck(config, { grpc_health_check: { service_name: EXTPROC_SERVICE_NAME } })],
  };
}

const PEER_EJECTION: JsonObject = {
  split_external_local_origin_errors: true,
  consecutive_local_origin_failure: 1,
  enforcing_consecutive_local_origin_failure: 100,
  // gRPC errors are answers, not a dead skewgate: only connection failures eject.
  enforcing_consecutive_5xx: 0,
  enforcing_consecutive_gateway_failure: 0,
  enforcing_success_rate: 0,
  enforcing_local_origin_success_rate: 0,
  interval: '1s',
  // Long enough for the health checks to mark a dead skewgate unhealthy; a passed health check
  // ends an ejection at once (successful_active_health_check_uneject_host), so recovery is not held.
  base_ejection_time: '5s',
  max_ejection_time: '30s',
  max_ejection_percent: 100,
};
