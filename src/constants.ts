// Every header name, media type and tuning default that more than one module uses lives here.

/** The header skewgate sets on a routed request; Envoy's route takes its cluster from it. */
export const UPSTREAM_HEADER = 'x-skewgate-upstream';

/** Set on every answer skewgate gives itself, so a client (and the access log) can tell who answered. */
export const REASON_HEADER = 'x-skewgate-reason';
export const MEDIA_JSON = 'application/json';

/**
 * Headers a client must never be able to set (DESIGN invariant 3). Envoy strips them before
 * the ext_proc filter runs, so the list holds even when skewgate is down. Lower case.
 */
export const SANITIZED_REQUEST_HEADERS: readonly string[] = Object.freeze([
  UPSTREAM_HEADER,
  'x-remote-user',
  'x-remote-uid',
  'x-remote-group',
  'x-kubernetes-peer-proxied',
  'x-forwarded-client-cert',
]);
/** Header prefixes stripped likewise (X-Remote-Extra-*, any other x-skewgate-*). */
export const SANITIZED_REQUEST_HEADER_PREFIXES: readonly string[] = Object.freeze([
  'x-remote-extra-',
  'x-skewgate-',
]);

/** Aggregated discovery v2 media type, parameters in the order client-go sends them. */
export const MEDIA_AGGREGATED_V2 = 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';
/** A server's own (non-peer-merged) aggregated document. */
export const MEDIA_AGGREGATED_V2_NOPEER = `${MEDIA_AGGREGATED_V2};profile=nopeer`;
/** What discovery asks for: nopeer first, plain v2 for 1.30–1.34, legacy JSON for the oldest. */
export const DISCOVERY_ACCEPT = `${MEDIA_AGGREGATED_V2_NOPEER},${MEDIA_AGGREGATED_V2},application/json`;

/** The gRPC service name Envoy health-checks and that grpc.health.v1 reports on. */
export const EXTPROC_SERVICE_NAME = 'envoy.service.ext_proc.v3.ExternalProcessor';

/** Exit codes of the CLI. */
export const EXIT_OK = 0;
export const EXIT_PROBLEMS = 1;
export const EXIT_BAD_CONFIG = 2;
