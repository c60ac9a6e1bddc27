// RoutingResult → the ProcessingResponse Envoy acts on. Pure: no clock, no I/O.
import {
  BOUNDED_HEADER,
  DETAILS_PREFIX,
  MEDIA_AGGREGATED_V2,
  MEDIA_JSON,
  REASON_HEADER,
  TOO_MANY_STREAMS_REASON,
  UPSTREAM_HEADER,
} from '../../constants.js';
import type { RequestInfo, ResourceRequest } from '../../k8s/request-info.js';
import { statusBody, type Status, type StatusDetails } from '../../k8s/status.js';
import type { ClientIdentity, IdentityResult } from '../../identity/core/client-identity.js';
import { frontProxyHeaders, frontProxyRemovals } from '../../identity/core/front-proxy-headers.js';
import type { Decision, DiscoveryDecision, RejectedDecision } from '../../routing/decision.js';
import type { RoutingResult } from '../../routing/router.js';
import type { HeaderValueOptionOut, ImmediateResponseOut, ProcessingResponseOut, RequestPhase } from './messages.js';

/** One header to set. raw_value only: Envoy rejects a mutation carrying both value and raw_value. */
export function setHeader(key: string, value: string): HeaderValueOptionOut {
  return { header: { key, raw_value: Buffer.from(value, 'utf8') } };
}

/** Headers for the request that goes upstream (the decision span's traceparent). */
export type UpstreamHeaders = readonly (readonly [name: string, value: string])[];

const NO_IDENTITY: IdentityResult = { kind: 'none' };

/**
 * Built once per identity: the verifier hands out the same identity object for a certificate on
 * every request, and the encoded header list is what costs (bench (e)). Replies are never mutated.
 */
const identityHeaders = new WeakMap<ClientIdentity, readonly HeaderValueOptionOut[]>();

function frontProxyMutation(identity: ClientIdentity): readonly HeaderValueOptionOut[] {
  let set = identityHeaders.get(identity);
  if (set === undefined) {
    set = frontProxyHeaders(identity).map((h) =>
      h.append ? { ...setHeader(h.name, h.value), append: { value: true } } : setHeader(h.name, h.value),
    );
    identityHeaders.set(identity, set);
  }
  return set;
}

/** The one value of BOUNDED_HEADER; Envoy's bounded routes match its presence. */
const BOUNDED_MARK = setHeader(BOUNDED_HEADER, 'true');

/**
 * The trace headers, the bounded mark for a request that is not long-running, and, for a verified
 * client certificate, its front-proxy identity (XFCC removed).
 */
function upstreamMutation(
  upstreamHeaders: UpstreamHeaders,
  identity: IdentityResult,
  bounded: boolean,
): { set: HeaderValueOptionOut[]; remove: readonly string[] } {
  const set = upstreamHeaders.map(([k, v]) => setHeader(k, v));
  if (bounded) set.push(BOUNDED_MARK);
  if (identity.kind !== 'stated') return { set, remove: [] };
  set.push(...frontProxyMutation(identity.identity));
  return { set, remove: frontProxyRemovals(identity.identity) };
}

/**
 * CONTINUE: Envoy carries on to the route it already picked; with upstream headers (the trace
 * context of the decision) and a client certificate's identity, those are set on the request.
 * Envoy's own tracer, when on, replaces traceparent with its upstream span's, which descends from
 * the same trace. The route is picked again when the identity is stated (Envoy's backstop route
 * answers a certificate-authenticated request without X-Remote-User with 401) and when the request
 * is bounded (Envoy's bounded routes carry envoy.requestTimeout).
 */
export function continueRequestHeaders(
  upstreamHeaders: UpstreamHeaders = [],
  identity: IdentityResult = NO_IDENTITY,
  bounded = false,
): ProcessingResponseOut {
  if (upstreamHeaders.length > 0) return continueWith(upstreamHeaders, identity, bounded);
  return shared(identity, bounded, '', () => continueWith(upstreamHeaders, identity, bounded));
}

function continueWith(upstreamHeaders: UpstreamHeaders, identity: IdentityResult, bounded: boolean): ProcessingResponseOut {
  const { set, remove } = upstreamMutation(upstreamHeaders, identity, bounded);
  if (set.length === 0) return { request_headers: { response: {} } };
  return {
    request_headers: {
      response: {
        header_mutation: { set_headers: set, ...(remove.length > 0 ? { remove_headers: remove } : {}) },
        ...(identity.kind === 'stated' || bounded ? { clear_route_cache: true } : {}),
      },
    },
  };
}

/** Sets the upstream header and asks Envoy to pick the route again (the cache clear needs a mutation). */
export function routeTo(
  upstream: string,
  upstreamHeaders: UpstreamHeaders = [],
  identity: IdentityResult = NO_IDENTITY,
  bounded = false,
): ProcessingResponseOut {
  if (upstreamHeaders.length > 0) return routeWith(upstream, upstreamHeaders, identity, bounded);
  return shared(identity, bounded, upstream, () => routeWith(upstream, upstreamHeaders, identity, bounded));
}

function routeWith(upstream: string, upstreamHeaders: UpstreamHeaders, identity: IdentityResult, bounded: boolean): ProcessingResponseOut {
  const { set, remove } = upstreamMutation(upstreamHeaders, identity, bounded);
  return {
    request_headers: {
      response: {
        header_mutation: {
          set_headers: [setHeader(UPSTREAM_HEADER, upstream), ...set],
          ...(remove.length > 0 ? { remove_headers: remove } : {}),
        },
        clear_route_cache: true,
      },
    },
  };
}

/**
 * Replies without trace headers are the same for every request of one identity, bound and
 * upstream ("" for CONTINUE): built once, frozen, handed out again — and, being frozen, encoded once
 * (codec.ts). Per identity object (the verifier hands out one per certificate), so a certificate
 * that goes away takes its replies with it; upstreams are the members' names, few.
 */
const NO_IDENTITY_KEY = {};
/** Per owner: the unbounded replies, then the bounded ones, by upstream. */
const sharedReplies = new WeakMap<object, readonly [Map<string, ProcessingResponseOut>, Map<string, ProcessingResponseOut>]>();

function shared(identity: IdentityResult, bounded: boolean, upstream: string, build: () => ProcessingResponseOut): ProcessingResponseOut {
  const owner = identity.kind === 'stated' ? identity.identity : identity.kind === 'none' ? NO_IDENTITY_KEY : null;
  if (owner === null) return build();
  let byBound = sharedReplies.get(owner);
  if (byBound === undefined) {
    byBound = [new Map(), new Map()];
    sharedReplies.set(owner, byBound);
  }
  const replies = byBound[bounded ? 1 : 0];
  let reply = replies.get(upstream);
  if (reply === undefined) {
    reply = Object.freeze(build());
    replies.set(upstream, reply);
  }
  return reply;
}

/** An empty reply of the kind Envoy expects for a phase skewgate has nothing to say about. */
export function emptyResponseFor(phase: RequestPhase): ProcessingResponseOut {
  switch (phase) {
    case 'request_headers':
      return { request_headers: {} };
    case 'response_headers':
      return { response_headers: {} };
    case 'request_body':
      return { request_body: {} };
    case 'response_body':
      return { response_body: {} };
    case 'request_trailers':
      return { request_trailers: {} };
    case 'response_trailers':
      return { response_trailers: {} };
    default: {
      const unreachable: never = phase;
      throw new Error(`unknown ext_proc phase ${String(unreachable)}`);
    }
  }
}

/** A local reply carrying a Kubernetes Status body, so kubectl and client-go print it properly. */
export function statusResponse(status: Status, reason: string, extraHeaders: readonly HeaderValueOptionOut[] = []): ProcessingResponseOut {
  const immediate: ImmediateResponseOut = {
    status: { code: status.code },
    headers: {
      set_headers: [setHeader('content-type', MEDIA_JSON), setHeader(REASON_HEADER, reason), ...extraHeaders],
    },
    body: Buffer.from(JSON.stringify(status), 'utf8'),
    details: `${DETAILS_PREFIX}${reason}`,
  };
  return { immediate_response: immediate };
}

/**
 * The peer-aggregated /apis as kube-apiserver answers it: ETag (quoted), Vary: Accept,
 * Cache-Control: public; 304 without body or Content-Type when If-None-Match named the ETag,
 * else 200 with the JSON under the v2 type (no profile, as kube-apiserver writes it).
 */
export function peerDiscoveryResponse(decision: DiscoveryDecision): ProcessingResponseOut {
  const doc = decision.document;
  const notModified = decision.reason === 'merged_apis_not_modified';
  // Built once per document and kind of answer, then handed out as is (nothing mutates replies).
  const cached = peerDiscoveryReplies.get(doc);
  const hit = notModified ? cached?.notModified : cached?.ok;
  if (hit) return hit;
  const immediate: ImmediateResponseOut = {
    status: { code: notModified ? 304 : 200 },
    headers: {
      set_headers: [
        ...(notModified ? [] : [setHeader('content-type', MEDIA_AGGREGATED_V2)]),
        setHeader('etag', doc.quotedEtag),
        setHeader('vary', 'Accept'),
        setHeader('cache-control', 'public'),
        setHeader(REASON_HEADER, decision.reason),
      ],
    },
    ...(notModified ? {} : { body: doc.body }),
    details: `${DETAILS_PREFIX}${decision.reason}`,
  };
  const reply: ProcessingResponseOut = { immediate_response: immediate };
  peerDiscoveryReplies.set(doc, { ...cached, ...(notModified ? { notModified: reply } : { ok: reply }) });
  return reply;
}

const peerDiscoveryReplies = new WeakMap<
  DiscoveryDecision['document'],
  { readonly ok?: ProcessingResponseOut; readonly notModified?: ProcessingResponseOut }
>();

/** The answer when routing itself failed (a bug): 500 with a Status body. */
export function internalErrorResponse(
  message = 'skewgate could not route this request because of an internal error',
): ProcessingResponseOut {
  return statusResponse(statusBody('InternalError', message), 'internal_error');
}

/**
 * The answer to a request that arrived while skewgate held more streams than it takes
 * (extproc.limits.maxStreams): 429 TooManyRequests with Retry-After, as kube-apiserver's own
 * priority and fairness answers, so that client-go waits and retries it. Nothing was routed and
 * nothing reached an apiserver, so a retry is safe for writes too.
 */
export function tooManyStreamsResponse(retryAfterSeconds: number, maxStreams: number): ProcessingResponseOut {
  const seconds = Math.max(1, retryAfter(retryAfterSeconds));
  return statusResponse(
    statusBody(
      'TooManyRequests',
      `the gateway is processing too many requests (more than ${maxStreams} at once); retry after ${seconds}s`,
      {
        retryAfterSeconds: seconds,
      },
    ),
    TOO_MANY_STREAMS_REASON,
    [setHeader('retry-after', String(seconds))],
  );
}

/** "apps/v1", or "v1" for the core group. */
function groupVersion(r: ResourceRequest): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

function describe(info: RequestInfo): string {
  if (info.kind !== 'resource') return `path "${info.path}"`;
  const what = info.subresource !== '' ? `subresource "${info.subresource}" of resource "${info.resource}"` : `resource "${info.resource}"`;
  return `${what} in API version "${groupVersion(info)}"`;
}

/** Status details like kube-apiserver's: group omitted for the core group, kind is the resource. */
function resourceDetails(info: RequestInfo): StatusDetails {
  if (info.kind !== 'resource') return {};
  return {
    ...(info.group !== '' ? { group: info.group } : {}),
    kind: info.resource,
    ...(info.name !== '' ? { name: info.name } : {}),
  };
}

function notFoundMessage(info: RequestInfo, reason: Decision['reason']): string {
  const prefix = 'the server could not find the requested resource';
  if (info.kind === 'resource' && reason === 'group_version_not_served') {
    return `${prefix}: no apiserver serves API version "${groupVersion(info)}" (requested resource "${info.resource}")`;
  }
  return `${prefix}: no apiserver serves ${describe(info)}`;
}

function rejectedResponse(decision: RejectedDecision): ProcessingResponseOut {
  switch (decision.reason) {
    case 'malformed_path':
      return statusResponse(statusBody('BadRequest', `the request path cannot be parsed: ${decision.problem}`), decision.reason);
    case 'client_identity_unstated':
      return statusResponse(
        statusBody(
          'Unauthorized',
          `Unauthorized: the gateway cannot state the identity of this client certificate to the apiserver: ${decision.problem}`,
        ),
        decision.reason,
      );
    default: {
      const unreachable: never = decision.reason;
      throw new Error(`unhandled rejection ${String(unreachable)}`);
    }
  }
}

/** Whole seconds for Retry-After; a bad setting still yields a usable header. */
function retryAfter(seconds: number): number {
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds) : 1;
}

/**
 * The ProcessingResponse for a routing result on the request_headers phase. upstreamHeaders and
 * the bounded mark (a request that is not long-running, envoy.requestTimeout) go only on requests
 * that continue upstream; skewgate's own answers need none.
 */
export function responseFor(
  result: RoutingResult,
  retryAfterSeconds: number,
  upstreamHeaders: UpstreamHeaders = [],
  bounded = false,
): ProcessingResponseOut {
  const { decision, info, identity } = result;
  switch (decision.outcome) {
    case 'routed':
      return routeTo(decision.upstream, upstreamHeaders, identity, bounded);
    case 'default':
    case 'passthrough':
      return continueRequestHeaders(upstreamHeaders, identity, bounded);
    case 'not_found':
      return statusResponse(statusBody('NotFound', notFoundMessage(info, decision.reason), resourceDetails(info)), decision.reason);
    case 'unavailable': {
      const seconds = retryAfter(retryAfterSeconds);
      const servers = decision.candidates.length > 0 ? decision.candidates.join(', ') : 'none listed';
      const message =
        decision.reason === 'unmatched_apiserver_identity'
          ? `no known apiserver serves ${describe(info)}, but an apiserver the gateway does not know ` +
            `(identity ${servers}) is running and may: its absence is not proven; retry after ${seconds}s`
          : `no healthy apiserver can serve ${describe(info)} right now: ` +
            `the apiservers that serve it (${servers}) are unhealthy; retry after ${seconds}s`;
      return statusResponse(
        statusBody('ServiceUnavailable', message, { ...resourceDetails(info), retryAfterSeconds: seconds }),
        decision.reason,
        [setHeader('retry-after', String(seconds))],
      );
    }
    case 'discovery':
      return peerDiscoveryResponse(decision);
    case 'rejected':
      return rejectedResponse(decision);
    default: {
      const unreachable: never = decision;
      throw new Error(`unhandled routing outcome ${JSON.stringify(unreachable)}`);
    }
  }
}
