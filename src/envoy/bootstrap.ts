// Renders Envoy's v3 bootstrap from the skewgate config. Pure: no I/O, paths are only rewritten.
import { isIP } from 'node:net';
import { isAbsolute, relative, sep } from 'node:path';
import type { Config } from '../config.js';
import {
  CLIENT_CERT_HEADER, EXTPROC_SERVICE_NAME, HEALTH_CHECK_USER, IDENTITY_UNSTATED_REASON, MEDIA_JSON, REASON_HEADER, REMOTE_USER_HEADER,
  SANITIZED_REQUEST_HEADER_PREFIXES, SANITIZED_REQUEST_HEADERS, UPSTREAM_HEADER,
} from '../constants.js';
import { statusBody } from '../k8s/status.js';

type ApiServerConfig = Config['apiservers'][number];

export type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json };
export type JsonObject = { readonly [key: string]: Json };

/** Cluster names skewgate renders itself (the config rejects them as apiserver names). */
export const DEFAULT_CLUSTER = 'default';
export const EXTPROC_CLUSTER = 'skewgate-extproc';
/** The OTLP collector Envoy's own tracer exports to (rendered only when tracing is configured). */
export const OTEL_CLUSTER = 'skewgate-otel';
export const LISTENER_NAME = 'skewgate';
/** The first route when client certificates are verified: a certificate whose identity nobody stated. */
export const IDENTITY_BACKSTOP_ROUTE = 'client-identity-unstated';
/**
 * Suffix of the clusters that connect with the front-proxy certificate (an apiserver name is a
 * DNS label, so "_" can never clash with one).
 */
export const FRONT_PROXY_SUFFIX = '_front-proxy';

/**
 * Request headers stripped besides the shared identity list. x-envoy-* would let a client steer
 * Envoy itself (x-envoy-retry-on could make a write retried, breaking docs/design.md, invariant 2); Envoy strips
 * them only from requests it deems external, and loopback counts as internal. kube-apiserver's
 * audit log lists X-Forwarded-For and X-Real-Ip entries as source IPs: the client's are dropped
 * by the early mutation, which runs before Envoy appends the real peer address (verified with
 * 1.40; use_remote_address below), so the list an apiserver sees starts with the true peer.
 */
export const ENVOY_SANITIZED_REQUEST_HEADERS: readonly string[] = Object.freeze(['x-forwarded-for', 'x-real-ip']);
export const ENVOY_SANITIZED_REQUEST_HEADER_PREFIXES: readonly string[] = Object.freeze(['x-envoy-']);

/** Runtime guard (off by default in Envoy 1.34–1.40) for half-closing, not resetting, ext_proc streams. */
export const EXTPROC_GRACEFUL_CLOSE = 'envoy.reloadable_features.ext_proc_graceful_grpc_close';

/** Methods that are safe to retry when the connection could not be made (docs/design.md, invariant 2). */
const READ_METHODS_REGEX = '^(GET|HEAD)$';
/** Only failures where no request byte reached an apiserver. Never "reset" or "5xx". */
export const READ_RETRY_ON = 'connect-failure,refused-stream,reset-before-request';
export const READ_NUM_RETRIES = 2;

/** Each in-flight request holds an upstream HTTP/1.1 connection (watches last minutes) and one ext_proc stream. */
const HIGH_LIMIT = 100_000;

export interface RenderOptions {
  /**
   * Render every file path inside this folder relative to it (Envoy resolves relative paths
   * against its working directory), so a committed bootstrap holds no machine-specific path.
   */
  readonly relativeTo?: string;
}

export class BootstrapError extends Error {
  readonly code = 'SKEWGATE_ERR_BOOTSTRAP';
  constructor(message: string) {
    super(message);
    this.name = 'BootstrapError';
  }
}

/** Envoy's Duration JSON form. */
export function duration(ms: number): string {
  const s = (ms / 1000).toFixed(3).replace(/\.?0+$/, '');
  return `${s === '' ? '0' : s}s`;
}

interface Upstream {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly ip: boolean;
  /** Name the serving certificate must carry: serverName, else the URL host (DNS or IP SAN). */
  readonly verifyName: string;
  readonly verifyIsIp: boolean;
  readonly caFile: string | undefined;
}

function upstreamOf(s: ApiServerConfig): Upstream {
  const url = new URL(s.url);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const ip = isIP(host) !== 0;
  const verifyName = s.serverName ?? host;
  return {
    name: s.name,
    host,
    port: url.port === '' ? 443 : Number(url.port),
    ip,
    verifyName,
    verifyIsIp: isIP(verifyName) !== 0,
    caFile: s.caFile,
  };
}

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

export function renderBootstrap(config: Config, options: RenderOptions = {}): JsonObject {
  const file = (p: string): string => renderPath(p, options.relativeTo);
  const upstreams = config.apiservers.map(upstreamOf);
  const sets = clusterSets(config);
  return {
    node: { id: 'skewgate-envoy', cluster: 'skewgate' },
    admin: {
      address: { socket_address: { address: config.envoy.admin.address, port_value: config.envoy.admin.port } },
    },
    static_resources: {
      listeners: [listener(config, upstreams, file)],
      clusters: [
        ...sets.flatMap((set) => [...upstreams.map((u) => apiserverCluster(config, u, file, set)), defaultCluster(config, upstreams, file, set)]),
        extprocCluster(config, file),
        ...(envoyTracing(config) ? [otelCluster(config, file)] : []),
      ],
    },
    // Envoy (>= 1.37) ends each ext_proc stream right after the last reply it needs. By default it
    // resets the stream (RST_STREAM); Node's HTTP/2 server counts a stream of resets as a
    // rapid-reset attack and closes the connection about every 1,000 requests, failing the
    // streams in flight. A graceful half-close ends the stream cleanly instead.
    layered_runtime: {
      layers: [{ name: 'skewgate', static_layer: { [EXTPROC_GRACEFUL_CLOSE]: true } }],
    },
    overload_manager: {
      resource_monitors: [
        {
          name: 'envoy.resource_monitors.global_downstream_max_connections',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
            max_active_downstream_connections: HIGH_LIMIT,
          },
        },
      ],
    },
  };
}

/** Paths inside `base` become relative ("examples/pki/ca.crt"); others stay as the config named them. */
export function renderPath(p: string, base: string | undefined): string {
  if (base === undefined || !isAbsolute(p)) return p;
  const rel = relative(base, p);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return p;
  return rel.split(sep).join('/');
}

type PathFn = (p: string) => string;

/** True when Envoy verifies client certificates and skewgate re-states them as front-proxy identity. */
function statesIdentity(config: Config): boolean {
  return config.envoy.tls.clientCaFile !== undefined;
}

/**
 * The removals, once for the early mutation and once for the filter. The filter runs after Envoy
 * appended the true peer to X-Forwarded-For and, with client certificates, set its own
 * x-forwarded-client-cert (SANITIZE_SET), so only the early pass may remove those two: a client's
 * copies are gone before Envoy writes its own.
 */
function removals(early: boolean, envoyXfcc: boolean): JsonObject[] {
  const names = [
    ...SANITIZED_REQUEST_HEADERS.filter((h) => early || !envoyXfcc || h !== CLIENT_CERT_HEADER),
    ...ENVOY_SANITIZED_REQUEST_HEADERS.filter((h) => early || h !== 'x-forwarded-for'),
  ];
  const prefixes = [...SANITIZED_REQUEST_HEADER_PREFIXES, ...ENVOY_SANITIZED_REQUEST_HEADER_PREFIXES];
  return [
    ...names.map((h) => ({ remove: h })),
    ...prefixes.map((p) => ({ remove_on_match: { key_matcher: { prefix: p } } })),
  ];
}

function listener(config: Config, upstreams: readonly Upstream[], file: PathFn): JsonObject {
  const clientCa = config.envoy.tls.clientCaFile;
  return {
    name: LISTENER_NAME,
    address: { socket_address: { address: config.envoy.listen.address, port_value: config.envoy.listen.port } },
    filter_chains: [
      {
        transport_socket: {
          name: 'envoy.transport_sockets.tls',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
            common_tls_context: {
              alpn_protocols: ['h2', 'http/1.1'],
              tls_params: { tls_minimum_protocol_version: 'TLSv1_2' },
              tls_certificates: [
                { certificate_chain: { filename: file(config.envoy.tls.certFile) }, private_key: { filename: file(config.envoy.tls.keyFile) } },
              ],
              // Asked for, verified against the cluster's client CA; a certificate that does not
              // verify fails the handshake, so no request ever carries an unverified one.
              ...(clientCa === undefined ? {} : { validation_context: { trusted_ca: { filename: file(clientCa) } } }),
            },
            // Optional: bearer tokens (no certificate) must keep working.
            ...(clientCa === undefined ? {} : { require_client_certificate: false }),
          },
        },
        filters: [httpConnectionManager(config, upstreams)],
      },
    ],
  };
}

function httpConnectionManager(config: Config, upstreams: readonly Upstream[]): JsonObject {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: 'skewgate',
      codec_type: 'AUTO',
      // Our own peer address is the only one an apiserver's audit log may see; no hop is trusted.
      use_remote_address: true,
      xff_num_trusted_hops: 0,
      skip_xff_append: false,
      // Without client certificates nobody may send x-forwarded-client-cert on. With them, Envoy
      // alone writes it (after the early mutation dropped a client's copy), for skewgate to
      // re-verify the certificate and state its identity; the routes remove it before any apiserver.
      ...(statesIdentity(config)
        ? { forward_client_cert_details: 'SANITIZE_SET', set_current_client_cert_details: { cert: true, chain: true } }
        : { forward_client_cert_details: 'SANITIZE' }),
      // Same path for skewgate's classification, Envoy's routing and the apiserver (Go decodes %2F).
      normalize_path: true,
      merge_slashes: true,
      path_with_escaped_slashes_action: 'UNESCAPE_AND_FORWARD',
      // Go would not read X_Remote_User as X-Remote-User, but other hops might: drop such names.
      common_http_protocol_options: { headers_with_underscores_action: 'DROP_HEADER' },
      // Extended CONNECT lets WebSocket (kubectl exec v5) ride an HTTP/2 client connection.
      http2_protocol_options: { allow_connect: true },
      // kubectl exec/attach/port-forward: SPDY/3.1 (older) or WebSocket upgrades.
      upgrade_configs: [{ upgrade_type: 'websocket' }, { upgrade_type: 'spdy/3.1' }],
      // Watches and `logs -f` sit idle for minutes; exec sessions for hours. Envoy must never cut
      // them: kube-apiserver bounds ordinary requests itself (--request-timeout, 60 s) and
      // watches with its own randomised --min-request-timeout, so a second clock here only adds
      // spurious failures. Only the header phase is bounded, against slow-loris clients.
      stream_idle_timeout: '0s',
      request_timeout: '0s',
      request_headers_timeout: '10s',
      // Runs before route selection and before any filter: the route cache is computed from
      // sanitised headers, so a forged x-skewgate-upstream can never select a route, even when
      // skewgate is down and ext_proc fails open (docs/design.md, invariant 3).
      early_header_mutation_extensions: [
        {
          name: 'envoy.http.early_header_mutation.header_mutation',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation',
            mutations: removals(true, statesIdentity(config)),
          },
        },
      ],
      access_log: [
        {
          name: 'envoy.access_loggers.stdout',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
            log_format: {
              json_format: {
                start: '%START_TIME%',
                method: '%REQ(:METHOD)%',
                path: '%REQ(:PATH)%',
                status: '%RESPONSE_CODE%',
                details: '%RESPONSE_CODE_DETAILS%',
                flags: '%RESPONSE_FLAGS%',
                upstream: '%UPSTREAM_CLUSTER%',
                upstream_host: '%UPSTREAM_HOST%',
                duration_ms: '%DURATION%',
                request_id: '%REQ(X-REQUEST-ID)%',
              },
            },
          },
        },
      ],
      route_config: routeConfig(upstreams, statesIdentity(config)),
      http_filters: [sanitiserFilter(statesIdentity(config)), extprocFilter(config), routerFilter()],
      ...(envoyTracing(config) ? { tracing: tracingConfig(config) } : {}),
    },
  };
}

/**
 * Defence in depth: the same removals as the early mutation, first in the filter chain, so the
 * chain itself states that ext_proc never sees a client's identity or routing headers (Envoy's
 * own X-Forwarded-For and x-forwarded-client-cert excepted, see removals).
 */
function sanitiserFilter(envoyXfcc: boolean): JsonObject {
  return {
    name: 'envoy.filters.http.header_mutation',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
      mutations: { request_mutations: removals(false, envoyXfcc) },
    },
  };
}

function extprocFilter(config: Config): JsonObject {
  return {
    name: 'envoy.filters.http.ext_proc',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor',
      grpc_service: { envoy_grpc: { cluster_name: EXTPROC_CLUSTER } },
      // open: skewgate unreachable means plain balancing over all apiservers (docs/design.md, invariant 4).
      failure_mode_allow: config.extproc.failureMode === 'open',
      // One round trip per request, headers only; the stream closes right after the answer.
      processing_mode: {
        request_header_mode: 'SEND',
        response_header_mode: 'SKIP',
        request_body_mode: 'NONE',
        response_body_mode: 'NONE',
        request_trailer_mode: 'SKIP',
        response_trailer_mode: 'SKIP',
      },
      message_timeout: duration(config.extproc.messageTimeout),
      // Re-select the route after skewgate sets x-skewgate-upstream (needs a header mutation).
      route_cache_action: 'CLEAR',
      // Defaults already allow x-skewgate-upstream and the headers of an immediate response;
      // pseudo-headers, host and x-envoy-* stay off limits. A violation is dropped and counted.
      mutation_rules: { disallow_system: true, allow_envoy: false, disallow_is_error: false },
      status_on_error: { code: 'ServiceUnavailable' },
    },
  };
}

function routerFilter(): JsonObject {
  return {
    name: 'envoy.filters.http.router',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
      // No x-envoy-* request or response headers: apiservers and clients need none of them.
      suppress_envoy_headers: true,
    },
  };
}

/**
 * One route per apiserver matching x-skewgate-upstream exactly, rather than cluster_header: only
 * names rendered from the config can ever be honoured (cluster_header would let any value pick
 * any cluster, skewgate-extproc included), and each route carries its own retry policy. A
 * value matching no apiserver falls through to the balanced default, as when skewgate is down.
 */
function routeConfig(upstreams: readonly Upstream[], identity: boolean): JsonObject {
  const routes: JsonObject[] = identity ? [identityBackstop()] : [];
  // A stated identity (X-Remote-User: only skewgate can set it, a client's copy is gone) goes
  // over the front-proxy clusters; everything else over the direct ones.
  const variants = identity ? [{ suffix: FRONT_PROXY_SUFFIX, when: [remoteUserPresent()] }, { suffix: '', when: [] }] : [{ suffix: '', when: [] }];
  for (const v of variants) {
    for (const u of upstreams) {
      const header = { name: UPSTREAM_HEADER, string_match: { exact: u.name } };
      routes.push(route(`${u.name}${v.suffix}-read`, [header, ...v.when, readMethod()], `${u.name}${v.suffix}`, readRetry(false)));
      routes.push(route(`${u.name}${v.suffix}-write`, [header, ...v.when], `${u.name}${v.suffix}`, undefined));
    }
    routes.push(route(`default${v.suffix}-read`, [...v.when, readMethod()], `${DEFAULT_CLUSTER}${v.suffix}`, readRetry(true)));
    routes.push(route(`default${v.suffix}-write`, [...v.when], `${DEFAULT_CLUSTER}${v.suffix}`, undefined));
  }
  return {
    name: 'skewgate',
    // For Envoy and skewgate alone: removed once the route is chosen, never sent upstream, also
    // when skewgate is down and did not remove x-forwarded-client-cert itself.
    request_headers_to_remove: [UPSTREAM_HEADER, CLIENT_CERT_HEADER],
    virtual_hosts: [{ name: 'kube-apiserver', domains: ['*'], routes }],
  };
}

/**
 * A request over a connection with a (verified) client certificate must reach an apiserver with
 * that certificate's identity stated, or not at all: skewgate states X-Remote-User (and clears the
 * route cache) once it has re-verified the certificate. Without it — skewgate down, timed out or
 * failing open — this route answers 401 itself, so the request fails authentication instead of
 * arriving without the client's identity (anonymous, or as a token it sent along). A client's own
 * X-Remote-User never gets this far (early mutation).
 */
function identityBackstop(): JsonObject {
  const body = statusBody('Unauthorized', 'Unauthorized: the client certificate could not be stated as front-proxy identity (skewgate unavailable)');
  return {
    name: IDENTITY_BACKSTOP_ROUTE,
    match: {
      prefix: '/',
      tls_context: { presented: true },
      headers: [{ name: REMOTE_USER_HEADER, present_match: true, invert_match: true }],
    },
    direct_response: { status: body.code, body: { inline_string: JSON.stringify(body) } },
    response_headers_to_add: [
      { header: { key: 'content-type', value: MEDIA_JSON }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
      { header: { key: REASON_HEADER, value: IDENTITY_UNSTATED_REASON }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
    ],
  };
}

function remoteUserPresent(): JsonObject {
  return { name: REMOTE_USER_HEADER, present_match: true };
}

function readMethod(): JsonObject {
  return { name: ':method', string_match: { safe_regex: { regex: READ_METHODS_REGEX } } };
}

function route(name: string, headers: readonly JsonObject[], cluster: string, retry: JsonObject | undefined): JsonObject {
  return {
    name,
    match: headers.length === 0 ? { prefix: '/' } : { prefix: '/', headers },
    route: {
      cluster,
      // No route timeout and no idle timeout: see stream_idle_timeout above.
      timeout: '0s',
      idle_timeout: '0s',
      // Writes (every non-GET/HEAD) get no retry policy at all: exactly one attempt (docs/design.md, invariant 2).
      ...(retry === undefined ? {} : { retry_policy: retry }),
    },
  };
}

function readRetry(otherHost: boolean): JsonObject {
  return {
    retry_on: READ_RETRY_ON,
    num_retries: READ_NUM_RETRIES,
    // On the balanced default, a retry goes to another apiserver than the one that failed.
    ...(otherHost
      ? {
          retry_host_predicate: [
            {
              name: 'envoy.retry_host_predicates.previous_hosts',
              typed_config: { '@type': 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate' },
            },
          ],
          host_selection_retry_max_attempts: 5,
        }
      : {}),
  };
}

function upstreamTls(u: Upstream, file: PathFn, set: ClusterSet): JsonObject {
  if (u.caFile === undefined) {
    // Verification cannot be turned off, and a system trust store is machine-specific.
    throw new BootstrapError(`apiserver "${u.name}": caFile is required to render the Envoy bootstrap (Envoy verifies every apiserver's serving certificate)`);
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
        validation_context: {
          trusted_ca: { filename: file(u.caFile) },
          match_typed_subject_alt_names: [{ san_type: u.verifyIsIp ? 'IP_ADDRESS' : 'DNS', matcher: { exact: u.verifyName } }],
        },
        ...(client === undefined
          ? {}
          : { tls_certificates: [{ certificate_chain: { filename: file(client.certFile) }, private_key: { filename: file(client.keyFile) } }] }),
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
    transport_socket: upstreamTls(u, file, set),
    typed_extension_protocol_options: http1Options(),
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
function defaultCluster(config: Config, upstreams: readonly Upstream[], file: PathFn, set: ClusterSet): JsonObject {
  const first = upstreams[0];
  if (first === undefined) throw new BootstrapError('at least one apiserver is required');
  const name = `${DEFAULT_CLUSTER}${set.suffix}`;
  return {
    name,
    ...discoveryType(upstreams),
    connect_timeout: duration(config.envoy.connectTimeout),
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: upstreams.map((u) => endpoint(u, true)) }] },
    transport_socket_matches: upstreams.map((u) => ({ name: u.name, match: { apiserver: u.name }, transport_socket: upstreamTls(u, file, set) })),
    // Never plaintext, even for an endpoint no match would cover.
    transport_socket: upstreamTls(first, file, set),
    typed_extension_protocol_options: http1Options(),
    circuit_breakers: circuitBreakers(),
    health_checks: [healthCheck(config, readyz(set))],
  };
}

function extprocAddress(listen: string, file: PathFn): JsonObject {
  if (listen.startsWith('unix:')) return { pipe: { path: file(listen.slice('unix:'.length)) } };
  const m = /^\[?(.*?)\]?:(\d+)$/.exec(listen);
  if (!m) throw new BootstrapError(`extproc.listen "${listen}" is neither host:port nor unix:/path`);
  return { socket_address: { address: m[1] as string, port_value: Number(m[2]) } };
}

/**
 * skewgate itself, gRPC over HTTP/2. Its gRPC health (grpc.health.v1, service
 * EXTPROC_SERVICE_NAME) gates use: with panic threshold 0, a NOT_SERVING or absent skewgate
 * is skipped at once (fail open: plain balancing; fail closed: status_on_error) instead of
 * every request paying for a failed stream.
 */
function extprocCluster(config: Config, file: PathFn): JsonObject {
  return {
    name: EXTPROC_CLUSTER,
    type: 'STATIC',
    // A local process or socket: either it answers at once or it is not there.
    connect_timeout: '0.25s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: EXTPROC_CLUSTER, endpoints: [{ lb_endpoints: [{ endpoint: { address: extprocAddress(config.extproc.listen, file) } }] }] },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: { connection_keepalive: { interval: '30s', timeout: '5s' } } },
      },
    },
    circuit_breakers: circuitBreakers(),
    common_lb_config: { healthy_panic_threshold: { value: 0 } },
    health_checks: [healthCheck(config, { grpc_health_check: { service_name: EXTPROC_SERVICE_NAME } })],
  };
}

// --- Envoy's own tracer ----------------------------------------------------------------------

type TracingConfig = Config['telemetry']['tracing'];

/** Defaults of the OTLP endpoint per protocol (the same as skewgate's, src/telemetry/settings.ts). */
const OTLP_DEFAULT_ENDPOINT = { grpc: 'http://localhost:4317', http: 'http://localhost:4318' } as const;

/**
 * Rendered from the config file alone (OTEL_* variables reach skewgate's process, not Envoy's):
 * on when telemetry.tracing.envoy is true, or unset with telemetry.tracing.enabled true.
 */
export function envoyTracing(config: Config): TracingConfig | null {
  const t = config.telemetry.tracing;
  return (t.envoy ?? t.enabled === true) ? t : null;
}

interface OtlpEndpoint {
  readonly protocol: 'grpc' | 'http';
  readonly url: URL;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
}

function otlpEndpoint(t: TracingConfig): OtlpEndpoint {
  const protocol = t.protocol ?? 'grpc';
  const url = new URL(t.endpoint ?? OTLP_DEFAULT_ENDPOINT[protocol]);
  const tls = url.protocol === 'https:';
  return { protocol, url, host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port === '' ? (tls ? 443 : 80) : Number(url.port), tls };
}

/**
 * The connection manager's tracer. The ext_proc call becomes a child span of the request's span
 * and carries its context to skewgate in the gRPC metadata; skewgate's decision span hangs below
 * it. spawn_upstream_span gives each upstream attempt its own span, whose context the router
 * injects into the request to the apiserver (replacing the traceparent skewgate set), so the
 * apiserver's spans join the same trace.
 */
function tracingConfig(config: Config): JsonObject {
  const t = config.telemetry.tracing;
  const ep = otlpEndpoint(t);
  const headers = Object.entries(t.headers ?? {});
  const serviceName = `${config.telemetry.serviceName ?? 'skewgate'}-envoy`;
  const exporter: JsonObject =
    ep.protocol === 'grpc'
      ? {
          grpc_service: {
            envoy_grpc: { cluster_name: OTEL_CLUSTER, authority: ep.url.host },
            timeout: '1s',
            ...(headers.length > 0 ? { initial_metadata: headers.map(([key, value]) => ({ key: key.toLowerCase(), value })) } : {}),
          },
        }
      : {
          http_service: {
            http_uri: { uri: otlpTracesUrl(ep.url), cluster: OTEL_CLUSTER, timeout: '1s' },
            ...(headers.length > 0 ? { request_headers_to_add: headers.map(([key, value]) => ({ header: { key, value } })) } : {}),
          },
        };
  return {
    // Percent of requests without a sampled parent that are traced; a client's sampled
    // traceparent is followed either way.
    random_sampling: { value: Math.round((t.samplerRatio ?? 1) * 10000) / 100 },
    spawn_upstream_span: true,
    provider: {
      name: 'envoy.tracers.opentelemetry',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
        ...exporter,
        service_name: serviceName,
      },
    },
  };
}

function otlpTracesUrl(base: URL): string {
  const s = base.toString().replace(/\/+$/, '');
  return s.endsWith('/v1/traces') ? s : `${s}/v1/traces`;
}

function otelCluster(config: Config, file: PathFn): JsonObject {
  const t = config.telemetry.tracing;
  const ep = otlpEndpoint(t);
  if (ep.tls && t.caFile === undefined) {
    throw new BootstrapError(`telemetry.tracing.endpoint ${ep.url.toString()} is https: set telemetry.tracing.caFile so that Envoy can verify the collector`);
  }
  const ip = isIP(ep.host) !== 0;
  return {
    name: OTEL_CLUSTER,
    ...(ip ? { type: 'STATIC' } : { type: 'STRICT_DNS', dns_lookup_family: 'V4_PREFERRED' }),
    connect_timeout: '1s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: OTEL_CLUSTER, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: ep.host, port_value: ep.port } } } }] }] },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        // OTLP/gRPC needs HTTP/2; OTLP/HTTP works on HTTP/1.1 everywhere.
        explicit_http_config: ep.protocol === 'grpc' ? { http2_protocol_options: {} } : { http_protocol_options: {} },
      },
    },
    ...(ep.tls && t.caFile !== undefined
      ? {
          transport_socket: {
            name: 'envoy.transport_sockets.tls',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
              ...(ip ? {} : { sni: ep.host }),
              common_tls_context: {
                ...(ep.protocol === 'grpc' ? { alpn_protocols: ['h2'] } : {}),
                validation_context: {
                  trusted_ca: { filename: file(t.caFile) },
                  match_typed_subject_alt_names: [{ san_type: ip ? 'IP_ADDRESS' : 'DNS', matcher: { exact: ep.host } }],
                },
              },
            },
          },
        }
      : {}),
  };
}
