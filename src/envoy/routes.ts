// The bootstrap's routes: one per apiserver (and way of connecting) selected by skewgate's
// x-skewgate-upstream header, the balanced default, read retries, and the backstop answering 401
// to a client certificate whose identity nobody stated. Pure.
import {
  AUDIT_ID_HEADER,
  BOUNDED_HEADER,
  CLIENT_CERT_HEADER,
  ENVOY_IDENTITY_HEADER,
  IDENTITY_UNSTATED_REASON,
  MEDIA_JSON,
  REASON_HEADER,
  REMOTE_USER_HEADER,
  UPSTREAM_HEADER,
} from '../constants.js';
import { statusBody } from '../k8s/status.js';
import { DEFAULT_CLUSTER, FRONT_PROXY_SUFFIX } from './clusters.js';
import { duration, type JsonObject } from './json.js';
import type { Config } from '../config/core/schema.js';
import { statesIdentity, type Upstream } from './upstreams.js';
import { certIdentityPerRoute, envoyStatesCertificates } from './cert-identity.js';

/** The ext_proc filter's name in the chain: the key of its per-route config (fast-routes.ts). */
export const EXTPROC_FILTER = 'envoy.filters.http.ext_proc';

/** The first route when client certificates are verified: a certificate whose identity nobody stated. */
export const IDENTITY_BACKSTOP_ROUTE = 'client-identity-unstated';
/** A certificate Envoy's Lua stated that neither a fast route took nor skewgate judged. */
export const ENVOY_IDENTITY_BACKSTOP_ROUTE = 'client-identity-envoy-only';

/** Methods that are safe to retry (docs/design.md, invariant 2). */
const READ_METHODS_REGEX = '^(GET|HEAD)$';
/**
 * A read is retried when it could not be sent, and also when the apiserver reset it before any
 * response began (`reset`: an apiserver stopping mid-request, Envoy's `UC`): a GET or HEAD without
 * a body and without an upgrade changes nothing, so a second try elsewhere is safe. Never "5xx":
 * an apiserver's answer is the answer. Upgrades (exec, attach, port-forward over WebSocket are
 * GETs) are not reads here: their session may already have started.
 */
export const READ_RETRY_ON = 'connect-failure,refused-stream,reset-before-request,reset';
export const READ_NUM_RETRIES = 2;
/**
 * A write is retried only when none of it was sent: the connection never opened, or the stream
 * was reset before the request went out. It still reaches one apiserver once (invariant 2).
 */
export const WRITE_RETRY_ON = 'connect-failure,reset-before-request';
export const WRITE_NUM_RETRIES = 1;

export interface RouteOptions {
  /** Whether client certificates are re-stated (the backstop and the front-proxy routes). */
  readonly identity: boolean;
  readonly retryAfterSeconds: number;
  /** envoy.requestTimeout in ms: the bound on requests skewgate marked bounded; 0 renders none. */
  readonly requestTimeoutMs: number;
  /** Whether Envoy may state certificates itself (cert-identity.ts): the fast routes then also take them. */
  readonly envoyIdentity: boolean;
  /** The Lua that does it, run on the identity backstop (none: Envoy states nothing). */
  readonly envoyIdentityScript?: string | undefined;
}

export function routeOptions(config: Config, envoyIdentityScript?: string): RouteOptions {
  const envoyIdentity = envoyStatesCertificates(config);
  return {
    identity: statesIdentity(config),
    retryAfterSeconds: config.routing.retryAfterSeconds,
    requestTimeoutMs: config.envoy.requestTimeout,
    envoyIdentity,
    ...(envoyIdentity && envoyIdentityScript !== undefined ? { envoyIdentityScript } : {}),
  };
}

/**
 * One route per apiserver matching x-skewgate-upstream exactly, rather than cluster_header: only
 * names rendered from the config can ever be honoured (cluster_header would let any value pick
 * any cluster, skewgate-extproc included), and each route carries its own retry policy. A value
 * matching no apiserver is answered 503 (upstreamUnknown), never balanced: skewgate chose that
 * apiserver because others may not serve the request.
 *
 * Every route to a cluster has a bounded twin just before it, for requests skewgate marked with
 * x-skewgate-bounded (what kube-apiserver ends at its --request-timeout): the same, with
 * envoy.requestTimeout as its timeout, so that an apiserver that accepted the request and never
 * answers costs the client that long at most (504, `UT`). Unmarked requests — watches, exec,
 * attach, port-forward, logs, proxies, and every request while skewgate is unreachable — keep no
 * timeout at all (see stream_idle_timeout, listener.ts).
 *
 * fastRoutes (fast-routes.ts, rendered by the caller) sit after the first set of routes
 * skewgate's headers select and before any balanced default, for requests without a client
 * certificate or with one Envoy's Lua stated; with that Lua, a request it stated that no fast route
 * took meets a second backstop (401) before the front-proxy defaults.
 */
export function routeConfig(upstreams: readonly Upstream[], opts: RouteOptions, fastRoutes: readonly JsonObject[] = []): JsonObject {
  const { identity, retryAfterSeconds } = opts;
  const routes: JsonObject[] = identity ? [identityBackstop(opts.envoyIdentityScript)] : [];
  const push = (name: string, headers: readonly JsonObject[], cluster: string, retry: JsonObject | undefined): void => {
    if (opts.requestTimeoutMs > 0) routes.push(route(`${name}-bounded`, [...headers, boundedMark()], cluster, retry, opts.requestTimeoutMs));
    routes.push(route(name, headers, cluster, retry, 0));
  };
  // A stated identity (X-Remote-User: only skewgate, or Envoy's Lua, can set it; a client's copy
  // is gone) goes over the front-proxy clusters; everything else over the direct ones.
  const variants = identity ? [{ suffix: FRONT_PROXY_SUFFIX, when: [remoteUserPresent()] }, { suffix: '', when: [] }] : [{ suffix: '', when: [] }];
  for (const [i, v] of variants.entries()) {
    for (const u of upstreams) {
      const header = { name: UPSTREAM_HEADER, string_match: { exact: u.name } };
      push(`${u.name}${v.suffix}-read`, [header, ...v.when, ...readMatchers()], `${u.name}${v.suffix}`, readRetry(false));
      push(`${u.name}${v.suffix}-write`, [header, ...v.when], `${u.name}${v.suffix}`, writeRetry(false));
    }
    routes.push(upstreamUnknown(`upstream-unknown${v.suffix}`, v.when, retryAfterSeconds));
    // Requests that need no judgement (fast-routes.ts: without a client certificate, or with one
    // Envoy stated), before the first balanced default: no request they take ever carries
    // x-skewgate-upstream or an identity skewgate stated, so they stand aside for every route above.
    if (i === 0) routes.push(...fastRoutes);
    if (v.suffix === FRONT_PROXY_SUFFIX && opts.envoyIdentity) routes.push(envoyIdentityBackstop());
    push(`default${v.suffix}-read`, [...v.when, ...readMatchers()], `${DEFAULT_CLUSTER}${v.suffix}`, readRetry(true));
    push(`default${v.suffix}-write`, [...v.when], `${DEFAULT_CLUSTER}${v.suffix}`, writeRetry(true));
  }
  return {
    name: 'skewgate',
    // For Envoy and skewgate alone: removed once the route is chosen, never sent upstream, also
    // when skewgate is down and did not remove x-forwarded-client-cert itself.
    request_headers_to_remove: [UPSTREAM_HEADER, BOUNDED_HEADER, CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER],
    // kube-apiserver audits a request under the Audit-ID it came with (and answers it as Audit-Id):
    // Envoy's request id, the one its access log, its span and skewgate's decision span carry. A
    // client's own Audit-ID is kept.
    request_headers_to_add: [{ header: { key: AUDIT_ID_HEADER, value: '%REQ(X-REQUEST-ID)%' }, append_action: 'ADD_IF_ABSENT' }],
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
function identityBackstop(envoyIdentityScript: string | undefined): JsonObject {
  return {
    ...unauthorized(IDENTITY_BACKSTOP_ROUTE, [{ name: REMOTE_USER_HEADER, present_match: true, invert_match: true }]),
    // Envoy's Lua (cert-identity.ts) runs here: every certificate request selects this route first.
    ...(envoyIdentityScript === undefined ? {} : { typed_per_filter_config: certIdentityPerRoute(envoyIdentityScript) }),
  };
}

/**
 * Envoy's Lua stated the certificate, no fast route took the request and skewgate did not judge
 * it (skewgate removes the marker when it does): down, timed out or failing open. The same 401 as
 * the backstop above, so that an identity reaches a judged route only as skewgate stated it.
 */
function envoyIdentityBackstop(): JsonObject {
  return unauthorized(ENVOY_IDENTITY_BACKSTOP_ROUTE, [{ name: ENVOY_IDENTITY_HEADER, present_match: true }]);
}

function unauthorized(name: string, headers: readonly JsonObject[]): JsonObject {
  const body = statusBody('Unauthorized', 'Unauthorized: the client certificate could not be stated as front-proxy identity (skewgate unavailable)');
  return {
    name,
    match: { prefix: '/', tls_context: { presented: true }, headers: [...headers] },
    direct_response: { status: body.code, body: { inline_string: JSON.stringify(body) } },
    response_headers_to_add: [
      { header: { key: 'content-type', value: MEDIA_JSON }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
      { header: { key: REASON_HEADER, value: IDENTITY_UNSTATED_REASON }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
    ],
  };
}

/** x-skewgate-reason of the 503 for an x-skewgate-upstream this Envoy has no route for. */
export const UPSTREAM_UNKNOWN_REASON = 'upstream_unknown_to_envoy';

/**
 * skewgate routed to an apiserver whose route this Envoy has not loaded yet (a member admitted a
 * moment ago, the routes file on its way) or no longer has: a 503 with Retry-After, never the
 * balanced pool, where an apiserver known not to serve the request could answer a false 404.
 * Only skewgate sets the header (a client's copy is removed first).
 */
function upstreamUnknown(name: string, when: readonly JsonObject[], retryAfterSeconds: number): JsonObject {
  const body = statusBody('ServiceUnavailable', 'the apiserver chosen for this request is not known to this gateway yet; retry');
  return {
    name,
    match: { prefix: '/', headers: [{ name: UPSTREAM_HEADER, present_match: true }, ...when] },
    direct_response: { status: body.code, body: { inline_string: JSON.stringify(body) } },
    response_headers_to_add: [
      { header: { key: 'content-type', value: MEDIA_JSON }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
      { header: { key: 'retry-after', value: String(retryAfterSeconds) }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
      { header: { key: REASON_HEADER, value: UPSTREAM_UNKNOWN_REASON }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
    ],
  };
}

function boundedMark(): JsonObject {
  return { name: BOUNDED_HEADER, present_match: true };
}

function remoteUserPresent(): JsonObject {
  return { name: REMOTE_USER_HEADER, present_match: true };
}

/** A GET or HEAD that upgrades nothing. */
function readMatchers(): JsonObject[] {
  return [
    { name: ':method', string_match: { safe_regex: { regex: READ_METHODS_REGEX } } },
    { name: 'upgrade', present_match: true, invert_match: true },
  ];
}

/** timeoutMs 0: no route timeout, for what kube-apiserver does not bound either. */
function route(name: string, headers: readonly JsonObject[], cluster: string, retry: JsonObject | undefined, timeoutMs: number): JsonObject {
  return {
    name,
    match: headers.length === 0 ? { prefix: '/' } : { prefix: '/', headers },
    route: {
      cluster,
      // No idle timeout, and a timeout only on bounded routes: see stream_idle_timeout (listener.ts).
      timeout: duration(timeoutMs),
      idle_timeout: '0s',
      // Writes (every non-GET/HEAD) are retried only when nothing was sent (docs/design.md, invariant 2).
      ...(retry === undefined ? {} : { retry_policy: retry }),
    },
  };
}

/** The retry policy of the balanced default routes, for a read or a write. */
export function balancedRetry(read: boolean): JsonObject {
  return read ? readRetry(true) : writeRetry(true);
}

function readRetry(otherHost: boolean): JsonObject {
  return retryPolicy(READ_RETRY_ON, READ_NUM_RETRIES, otherHost);
}

function writeRetry(otherHost: boolean): JsonObject {
  return retryPolicy(WRITE_RETRY_ON, WRITE_NUM_RETRIES, otherHost);
}

function retryPolicy(retryOn: string, numRetries: number, otherHost: boolean): JsonObject {
  return {
    retry_on: retryOn,
    num_retries: numRetries,
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
