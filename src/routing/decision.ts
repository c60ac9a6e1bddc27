// The routing decision: a discriminated union whose `reason` is the same literal in the span,
// the metric label and the log line.
import type { PeerDiscoveryDocument } from '../discovery/core/types.js';

/** What a decision may read besides the request and the snapshot: all of it injected. */
export interface DecideOptions {
  /** Epoch ms. */
  readonly now: number;
  /** A view whose last successful fetch is older than this is not fresh. */
  readonly staleAfterMs: number;
  /** Uniform in [0, 1). */
  readonly rng: () => number;
}

/** One of names, chosen with the injected rng (uniform in [0, 1)); names must not be empty. */
export function pickAtRandom(names: readonly string[], rng: () => number): string {
  return names[Math.min(names.length - 1, Math.floor(rng() * names.length))] as string;
}

/** Outcomes are part of skewgate's external contract (span attribute skewgate.outcome). */
export type Outcome = Decision['outcome'];
export type Reason = Decision['reason'];

interface Base {
  /** Servers whose view says they can serve this exact request (resource, subresource, verb). */
  readonly candidates: readonly string[];
}

/** Continue to the balanced default cluster; every apiserver can answer. */
export interface DefaultDecision extends Base {
  readonly outcome: 'default';
  readonly reason: 'served_by_all';
}

/**
 * Send to one named apiserver. served_by_subset: a current view says it serves the request and
 * not every apiserver is known to, or some are cordoned (src/cordon/): sent to an open one.
 * served_by_cordoned: only cordoned apiservers can serve it (a cordon keeps what nobody else serves). unverified_candidate: no current view says so, and the views
 * that are current say their servers do not; the chosen server's view could not be refreshed
 * (it may just have come back as another version), so it is the only one that might.
 * For a discovery-like document (routing/document-route.ts): complete_document, the chosen server's
 * document holds the cluster's union; openapi_hash, its OpenAPI v3 index lists the hash asked for;
 * no_complete_document, no ready server holds the union and the fullest answers.
 */
export interface RoutedDecision extends Base {
  readonly outcome: 'routed';
  readonly reason:
    'served_by_subset' | 'served_by_cordoned' | 'unverified_candidate' | 'complete_document' | 'openapi_hash' | 'no_complete_document';
  readonly upstream: string;
}

/** No apiserver serves it and every view is fresh and complete: a true 404. */
export interface NotFoundDecision extends Base {
  readonly outcome: 'not_found';
  readonly reason: 'group_version_not_served' | 'resource_not_served' | 'subresource_not_served';
}

/**
 * The apiservers that can (or, with a view that is not current, might) serve it are not ready,
 * and the others are known not to: 503 at once, with Retry-After.
 */
export interface UnavailableDecision extends Base {
  readonly outcome: 'unavailable';
  /**
   * unmatched_apiserver_identity: every member is known not to serve it, but a live apiserver
   * identity (kube-system identity Lease) matches no member: that server might (candidates: its
   * identities). No 404 can be proven, and balancing would reach a member whose 404 is false.
   */
  readonly reason: 'no_healthy_capable_server' | 'unmatched_apiserver_identity';
}

/**
 * Continue to the balanced default without a judgement of ours: the request is not about a
 * resource, or skewgate cannot be sure (never a false 404), or the verb is one no server lists
 * (the apiserver answers 405 itself).
 */
export interface PassthroughDecision extends Base {
  readonly outcome: 'passthrough';
  readonly reason:
    | 'non_resource'
    | 'not_synced'
    | 'view_incomplete'
    | 'verb_not_listed'
    | 'empty_path_segment'
    /** GET /apis for the merged document without credentials: the apiserver authenticates it. */
    | 'no_credentials';
}

/**
 * Answered at once with a Status body saying why. malformed_path: the path cannot be decoded
 * (400). client_identity_unstated: the client presented a certificate whose identity skewgate
 * cannot state faithfully to an apiserver (401): it must never pass as someone else.
 */
export interface RejectedDecision extends Base {
  readonly outcome: 'rejected';
  readonly reason: 'malformed_path' | 'client_identity_unstated';
  readonly problem: string;
}

/**
 * GET /apis asking for aggregated discovery v2 (JSON, no profile=nopeer): skewgate answers with
 * the peer-aggregated document of the healthy apiservers (candidates: the merged servers).
 */
export interface DiscoveryDecision extends Base {
  readonly outcome: 'discovery';
  /** merged_apis_not_modified: If-None-Match named the current ETag, 304 without a body. */
  readonly reason: 'merged_apis' | 'merged_apis_not_modified';
  readonly document: PeerDiscoveryDocument;
}

export type Decision =
  DefaultDecision | RoutedDecision | NotFoundDecision | UnavailableDecision | PassthroughDecision | RejectedDecision | DiscoveryDecision;

/** All outcomes, for metrics pre-registration and docs. */
export const OUTCOMES: readonly Outcome[] = Object.freeze([
  'default',
  'routed',
  'not_found',
  'unavailable',
  'passthrough',
  'rejected',
  'discovery',
]);
