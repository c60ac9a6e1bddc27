// The bootstrap's listener: downstream TLS (client certificates optional), the HTTP connection
// manager and its filter chain — header sanitiser, skewgate's ext_proc filter, router. Pure.
import type { Config } from '../config/core/schema.js';
import { CLIENT_CERT_HEADER, DETAILS_PREFIX, SANITIZED_REQUEST_HEADER_PREFIXES, SANITIZED_REQUEST_HEADERS } from '../constants.js';
import { EXTPROC_CLUSTER } from './clusters.js';
import { BootstrapError, duration, type JsonObject, type PathFn } from './json.js';
import { ENVOY_SERVING_PAIR_REQUIRED } from '../config/core/envoy-rules.js';
import { EXTPROC_FILTER, routeConfig, routeOptions } from './routes.js';
import { FAST_PATH_METADATA } from './fast-routes.js';
import { rdsConfig } from './xds.js';
import { envoyTracing, tracingConfig } from './tracing.js';
import { certificateFields, validationFields } from './tls-material.js';
import { servingPair } from '../config/core/files.js';
import type { StatusReason } from '../k8s/status.js';
import { statesIdentity, type Upstream } from './upstreams.js';
import { certIdentityFilter, envoyStatesCertificates } from './cert-identity.js';

export const LISTENER_NAME = 'skewgate';

/** kube-apiserver's limit on request headers: Go's http.DefaultMaxHeaderBytes, 1 MiB. */
export const MAX_REQUEST_HEADERS_KB = 1024;
/** Go counts no headers; 1 MiB holds at most a few hundred thousand. Envoy needs a number. */
export const MAX_REQUEST_HEADERS_COUNT = 10_000;

/** Kubernetes Status reasons for the codes Envoy answers with. */
const REASON_BY_CODE: readonly (readonly [number, StatusReason])[] = [
  [400, 'BadRequest'],
  [404, 'NotFound'],
  [408, 'Timeout'],
  [413, 'RequestEntityTooLarge'],
  // HTTP/1.0 (Envoy's low_version): kube-apiserver would answer it, the gateway asks for 1.1.
  [426, 'BadRequest'],
  [431, 'BadRequest'],
  [503, 'ServiceUnavailable'],
  [504, 'Timeout'],
];

function statusFormat(reason: StatusReason): JsonObject {
  return {
    json_format: {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'the gateway could not pass this request on: %LOCAL_REPLY_BODY% (%RESPONSE_CODE_DETAILS%)',
      reason,
      code: '%RESPONSE_CODE%',
    },
    content_type: 'application/json',
  };
}

function codeIs(code: number): JsonObject {
  return { status_code_filter: { comparison: { op: 'EQ', value: { default_value: code, runtime_key: `skewgate.local_reply.${code}` } } } };
}

/**
 * The replies Envoy makes itself: every local reply but skewgate's own answers (ImmediateResponse,
 * details skewgate_*: DETAILS_PREFIX) and the backstop route's (direct_response), which keep their
 * bodies. Told by the response's details, not its flags: the codec's refusals (a malformed request
 * line, header or framing; HTTP/1.0) and the request-header timeout are answered before Envoy flags
 * them (DPE comes after the reply), and came out as text/plain "Bad Request" (issue 31). A CEL
 * filter, since no other filter reads the details; after the status code in each and_filter, so
 * that it runs only for the codes mapped.
 */
function envoysOwn(): JsonObject {
  return {
    extension_filter: {
      name: 'envoy.access_loggers.extension_filters.cel',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter',
        expression: `!response.code_details.startsWith('${DETAILS_PREFIX}') && response.code_details != 'direct_response'`,
      },
    },
  };
}

/**
 * Envoy's own 503s (no healthy apiserver, a connection that could not be opened, an overflowing
 * breaker) are as temporary as skewgate's: the same Retry-After, so that client-go waits and retries.
 */
function localReplyConfig(retryAfterSeconds: number): JsonObject {
  const own = envoysOwn();
  const retryAfter = [{ header: { key: 'retry-after', value: String(retryAfterSeconds) }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }];
  return {
    mappers: [
      ...REASON_BY_CODE.map(([code, reason]) => ({
        filter: { and_filter: { filters: [codeIs(code), own] } },
        body_format_override: statusFormat(reason),
        ...(code === 503 ? { headers_to_add: retryAfter } : {}),
      })),
      { filter: own, body_format_override: statusFormat('InternalError') },
    ],
  };
}
/** The ext_proc filter's name in the chain (the baseline gateway is the bootstrap without it). */
export { EXTPROC_FILTER };

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

export function listener(config: Config, upstreams: readonly Upstream[], file: PathFn): JsonObject {
  const clientCa = config.envoy.tls.clientCaFile;
  const serving = servingPair(config);
  if (serving === undefined) throw new BootstrapError(`envoy.tls.certFile and envoy.tls.keyFile: ${ENVOY_SERVING_PAIR_REQUIRED}`);
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
              ...certificateFields(config, serving, file),
              // Asked for, verified against the cluster's client CA; a certificate that does not
              // verify fails the handshake, so no request ever carries an unverified one.
              ...(clientCa === undefined ? {} : validationFields(config, clientCa, undefined, file)),
            },
            // Optional: bearer tokens (no certificate) must keep working.
            ...(clientCa === undefined ? {} : { require_client_certificate: false }),
            // On a resumed TLS session Envoy reports the client certificate as not validated
            // (1.40: nothing verified it on that connection), so the Lua states none and every
            // request of the connection meets skewgate: where the Lua states certificates, each
            // connection gets a full handshake (client-go's clients resume none anyway).
            ...(envoyStatesCertificates(config) ? { disable_stateless_session_resumption: true, disable_stateful_session_resumption: true } : {}),
          },
        },
        filters: [httpConnectionManager(config, upstreams, file)],
      },
    ],
  };
}

function httpConnectionManager(config: Config, upstreams: readonly Upstream[], file: PathFn): JsonObject {
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
      // Also where Envoy's Lua states certificates: a request it stated that no fast route takes
      // meets skewgate, which states the identity again from this header.
      ...(statesIdentity(config)
        ? { forward_client_cert_details: 'SANITIZE_SET', set_current_client_cert_details: { cert: true, chain: true } }
        : { forward_client_cert_details: 'SANITIZE' }),
      // Same path for skewgate's classification, Envoy's routing and the apiserver (Go decodes %2F).
      normalize_path: true,
      merge_slashes: true,
      path_with_escaped_slashes_action: 'UNESCAPE_AND_FORWARD',
      // Go would not read X_Remote_User as X-Remote-User, but other hops might: drop such names.
      // As many request headers as kube-apiserver takes (Go's 1 MiB, no count limit; Envoy's
      // defaults are 60 KiB and 100): the front-proxy identity adds a line per group, and
      // ext_proc refuses a mutation that would pass these limits.
      common_http_protocol_options: { headers_with_underscores_action: 'DROP_HEADER', max_headers_count: MAX_REQUEST_HEADERS_COUNT },
      max_request_headers_kb: MAX_REQUEST_HEADERS_KB,
      // Envoy's own refusals (headers too large, no healthy apiserver, …) as a Kubernetes Status,
      // like every other answer a client of the apiservers gets.
      local_reply_config: localReplyConfig(config.routing.retryAfterSeconds),
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
      ...accessLog(config),
      // With filesystem xDS the routes follow the members (xds.ts); else they are fixed here.
      ...(config.envoy.xds
        ? { rds: rdsConfig(config.envoy.xds.directory, file) }
        : { route_config: routeConfig(upstreams, routeOptions(config)) }),
      http_filters: [
        sanitiserFilter(statesIdentity(config)),
        // Runs only where a route gives it its script (cert-identity.ts), before skewgate is asked.
        ...(envoyStatesCertificates(config) ? [certIdentityFilter()] : []),
        extprocFilter(config),
        routerFilter(),
      ],
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

/** Another local ext_proc endpoint (extproc.workers), never the one that just failed. */
const EXTPROC_RETRY_LOCAL: JsonObject = {
  retry_on: 'connect-failure,refused-stream,reset-before-request,reset',
  num_retries: 2,
  retry_back_off: { base_interval: '0.005s', max_interval: '0.025s' },
  retry_host_predicate: [
    {
      name: 'envoy.retry_host_predicates.previous_hosts',
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate' },
    },
  ],
  host_selection_retry_max_attempts: 3,
};

const EXTPROC_RETRY: JsonObject = {
  ...EXTPROC_RETRY_LOCAL,
  // A retry after the local skewgate failed goes to the peers' priority, not back to it.
  retry_priority: {
    name: 'envoy.retry_priorities.previous_priorities',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.retry.priority.previous_priorities.v3.PreviousPrioritiesConfig',
      update_frequency: 1,
    },
  },
};

function extprocFilter(config: Config): JsonObject {
  return {
    name: EXTPROC_FILTER,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor',
      grpc_service: {
        envoy_grpc: { cluster_name: EXTPROC_CLUSTER },
        // With peers or workers: a stream that could not open (a killed skewgate or worker
        // refusing connections, before the ejection lands) or that was cut before any answer (one
        // killed mid-decision) is tried again on another endpoint. A decision changes nothing, so
        // deciding a request a second time is harmless; an answer once begun is never retried.
        ...(config.envoy.extprocPeers
          ? { retry_policy: EXTPROC_RETRY }
          : config.extproc.workers > 1
            ? { retry_policy: EXTPROC_RETRY_LOCAL }
            : {}),
      },
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

/** Envoy's access log (envoy.accessLog): a JSON line per request, filtered by status and sampled. */
function accessLog(config: Config): JsonObject {
  const { enabled, minStatus, sample } = config.envoy.accessLog;
  if (!enabled) return {};
  const filters: JsonObject[] = [];
  if (minStatus > 0) {
    const value = { default_value: minStatus, runtime_key: 'skewgate.access_log.min_status' };
    filters.push({ status_code_filter: { comparison: { op: 'GE', value } } });
  }
  if (sample < 1)
    filters.push({
      runtime_filter: {
        runtime_key: 'skewgate.access_log.sample',
        percent_sampled: { numerator: Math.max(1, Math.round(sample * 1_000_000)), denominator: 'MILLION' },
        use_independent_randomness: true,
      },
    });
  const one = filters.length === 1 ? (filters[0] as JsonObject) : { and_filter: { filters } };
  const filter: JsonObject = filters.length === 0 ? {} : { filter: one };
  return {
    access_log: [
      {
        ...filter,
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
              // What kube-apiserver audits the request under: the request id, or the client's own.
              audit_id: '%REQ(AUDIT-ID)%',
              // A fast-path route's decision (fast-routes.ts); "-" for a request skewgate judged
              // (its decision is in skewgate's span and log line).
              route: '%ROUTE_NAME%',
              skewgate_outcome: `%METADATA(ROUTE:${FAST_PATH_METADATA}:outcome)%`,
              skewgate_reason: `%METADATA(ROUTE:${FAST_PATH_METADATA}:reason)%`,
              skewgate_generation: `%METADATA(ROUTE:${FAST_PATH_METADATA}:generation)%`,
            },
          },
        },
      },
    ],
  };
}
