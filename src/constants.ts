// Every header name, media type and tuning default that more than one module uses lives here.

/** The header skewgate sets on a routed request; Envoy's route takes its cluster from it. */
export const UPSTREAM_HEADER = 'x-skewgate-upstream';

/**
 * Set by skewgate on a request kube-apiserver ends at its --request-timeout (not long-running,
 * src/k8s/long-running.ts): Envoy's routes then bound the wait for the apiserver's answer
 * (envoy.requestTimeout). Removed before the request goes upstream; a client's copy is stripped.
 */
export const BOUNDED_HEADER = 'x-skewgate-bounded';

/** Set on every answer skewgate gives itself, so a client (and the access log) can tell who answered. */
export const REASON_HEADER = 'x-skewgate-reason';
export const MEDIA_JSON = 'application/json';

/**
 * Front-proxy identity (kube-apiserver --requestheader-*-headers, the names kubeadm sets): only
 * skewgate states them, from a client certificate it has verified; a client's copies are stripped.
 */
export const REMOTE_USER_HEADER = 'x-remote-user';
export const REMOTE_UID_HEADER = 'x-remote-uid';
export const REMOTE_GROUP_HEADER = 'x-remote-group';
export const REMOTE_EXTRA_HEADER_PREFIX = 'x-remote-extra-';
/** Set by Envoy alone (SANITIZE_SET) from the verified client certificate; read by skewgate, never sent upstream. */
export const CLIENT_CERT_HEADER = 'x-forwarded-client-cert';
/** The id kube-apiserver audits a request under (and answers as Audit-Id); Envoy sets it to its request id. */
export const AUDIT_ID_HEADER = 'audit-id';
/** Envoy's id of a request: in its access log and span, the Audit-ID it sends upstream. */
export const REQUEST_ID_HEADER = 'x-request-id';
/**
 * Set, with ENVOY_IDENTITY_VALUE, by Envoy's Lua filter on a request whose client certificate it
 * stated itself (envoy/cert-identity.ts): the fast routes for certificates require it, skewgate
 * removes it when it states the identity again, and a request still carrying it where no fast
 * route took it is refused (skewgate's verdict is missing). A client's copy is stripped (x-skewgate-*).
 */
export const ENVOY_IDENTITY_HEADER = 'x-skewgate-envoy-identity';
export const ENVOY_IDENTITY_VALUE = 'x509';
/** The client's own credential (a bearer token): passed through untouched, never read by skewgate. */
export const AUTHORIZATION_HEADER = 'authorization';
/** kube-apiserver's Mixed Version Proxy hop marker: a client could use it to pin a request to one server. */
export const PEER_PROXIED_HEADER = 'x-kubernetes-peer-proxied';

/**
 * Headers a client must never be able to set (docs/design.md, invariant 3). Envoy strips them before
 * the ext_proc filter runs, so the list holds even when skewgate is down. Lower case.
 */
export const SANITIZED_REQUEST_HEADERS: readonly string[] = Object.freeze([
  UPSTREAM_HEADER,
  REMOTE_USER_HEADER,
  REMOTE_UID_HEADER,
  REMOTE_GROUP_HEADER,
  PEER_PROXIED_HEADER,
  CLIENT_CERT_HEADER,
]);
/** Header prefixes stripped likewise (X-Remote-Extra-*, any other x-skewgate-*). */
export const SANITIZED_REQUEST_HEADER_PREFIXES: readonly string[] = Object.freeze([REMOTE_EXTRA_HEADER_PREFIX, 'x-skewgate-']);

/**
 * The one identity Envoy states by itself: its /readyz checks over front-proxy connections (where
 * kube-apiserver would reject an anonymous request). It gets system:authenticated's default rights.
 */
export const HEALTH_CHECK_USER = 'skewgate:health-check';

/** The reason (x-skewgate-reason, span, metric) when a client certificate's identity cannot be stated. */
export const IDENTITY_UNSTATED_REASON = 'client_identity_unstated';

/** The reason (x-skewgate-reason, log line) when skewgate holds more ext_proc streams than extproc.limits.maxStreams. */
export const TOO_MANY_STREAMS_REASON = 'too_many_streams';

/** Aggregated discovery v2 media type, parameters in the order client-go sends them. */
export const MEDIA_AGGREGATED_V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
/** A server's own (non-peer-merged) aggregated document. */
export const MEDIA_AGGREGATED_V2_NOPEER = `${MEDIA_AGGREGATED_V2};profile=nopeer`;
/**
 * The default cap on one discovery body (discovery.maxDocumentBytes): 8 MiB. kube-apiserver sets
 * no limit of its own; a CRD as it lists one is ~370 bytes of aggregated /apis, so 8 MiB holds
 * ~22,000 of them, several times the largest clusters known. Chosen from bench (f): with
 * discovery.maxResources, the worst document both accept is absorbed within the event-loop bound
 * (docs/discovery.md, "bounds").
 */
export const DEFAULT_MAX_DOCUMENT_BYTES = 8 * 1024 * 1024;
/**
 * The default bound on one apiserver's view (discovery.maxResources): resources and group/versions
 * together. Past it the view is refused, as a body past the size cap is. What absorbing a view
 * costs (time on the event loop, memory) follows this count more than the bytes (docs/design.md,
 * "Bounds on a discovery document"; bench (f)).
 */
export const DEFAULT_MAX_RESOURCES = 50_000;
/** The default longest wait before a discovery document whose download failed is downloaded again. */
export const DEFAULT_MAX_DOWNLOAD_BACKOFF_MS = 30_000;
/** What discovery asks for: nopeer first, plain v2 for 1.30–1.34, legacy JSON for the oldest. */
export const DISCOVERY_ACCEPT = `${MEDIA_AGGREGATED_V2_NOPEER},${MEDIA_AGGREGATED_V2},application/json`;

/** The gRPC service name Envoy health-checks and that grpc.health.v1 reports on. */
export const EXTPROC_SERVICE_NAME = 'envoy.service.ext_proc.v3.ExternalProcessor';

/** The path of the gateway's health listener (envoy.health) that load balancers probe. */
export const HEALTH_PATH = '/ready';

/**
 * What one skewgate's ext_proc listener holds (extproc.limits; docs/design.md, overload). A
 * ProcessingRequest carries the request headers, up to the 1 MiB (and 10,000 lines) Envoy's
 * listener admits as kube-apiserver does, plus its framing: 2 MiB holds the largest with room.
 */
export const EXTPROC_LIMIT_DEFAULTS = Object.freeze({
  maxStreams: 1000,
  maxStreamsPerConnection: 100,
  maxMessageBytes: 2 * 1024 * 1024,
  firstMessageTimeoutMs: 5000,
});
/**
 * Envoy's circuit breaker on the ext_proc cluster (src/envoy/clusters.ts): twice
 * extproc.limits.maxStreams. Of the streams one Envoy holds, skewgate routes maxStreams and
 * answers the rest 429 (no routing, one constant reply each), so a client sees skewgate's 429
 * long before Envoy's overflow, which fails the stream as if skewgate were unreachable.
 */
export function extprocStreamCeiling(maxStreams: number): number {
  return 2 * maxStreams;
}
/** The smallest extproc.limits.maxMessageBytes that still takes 1 MiB of request headers and their framing. */
export const EXTPROC_MIN_MESSAGE_BYTES = 1024 * 1024 + 128 * 1024;
/** Repeated warnings on the ext_proc path: the same kind at most once per this interval. */
export const EXTPROC_LOG_INTERVAL_MS = 10_000;

/** Exit codes of the CLI. */
export const EXIT_OK = 0;
export const EXIT_PROBLEMS = 1;
export const EXIT_BAD_CONFIG = 2;

/**
 * Set on the EndpointSlice the gateways publish (src/kubernetes-service/), so that no reader — the
 * membership's endpointSlice source among them — takes it for the apiservers' own.
 */
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
export const MANAGED_BY = 'skewgate.dev';

/** %RESPONSE_CODE_DETAILS% prefix of skewgate's immediate responses (Envoy's local-reply mappers leave them be). */
export const DETAILS_PREFIX = 'skewgate_';
