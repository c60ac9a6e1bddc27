// The decision ladder, whole: every rung of docs/design.md's decision table in one pure function,
// request × snapshot × clock × rng → Decision. The ext_proc router and `skewgate explain` both
// call it, so what explain prints is what the gateway does. An early-return ladder:
//   1. a client certificate whose identity cannot be stated → rejected (401), before anything else
//   2. GET /apis for the peer-aggregated document → the merge the snapshot carries
//   2b. any other discovery-like document (legacy discovery, OpenAPI) → a server holding it whole
//   3. by path: malformed → non-resource → resource (./resource-decision.ts)
import { AUTHORIZATION_HEADER } from '../constants.js';
import type { Snapshot } from '../discovery/core/types.js';
import type { IdentityResult } from '../identity/core/client-identity.js';
import type { RequestInfo } from '../k8s/request-info.js';
import type { DecideOptions, Decision } from './decision.js';
import { decidePeerDiscovery, wantsPeerAggregatedApis } from './discovery-route.js';
import { decideDocument, documentOf } from './document-route.js';
import { decideByPath } from './resource-decision.js';

export type { DecideOptions } from './decision.js';

/** One request as skewgate judges it. */
export interface RoutingRequest {
  readonly info: RequestInfo;
  /** The request headers as Envoy hands them to skewgate (names lower case, client copies of sanitized headers gone). */
  readonly headers: ReadonlyMap<string, string>;
  /** The client certificate's identity, stated at opts.now (identity/core/client-identity.ts). */
  readonly identity: IdentityResult;
}

const NONE: readonly string[] = Object.freeze([]);

export function decide(req: RoutingRequest, snap: Snapshot, opts: DecideOptions): Decision {
  if (req.identity.kind === 'unstated') {
    // Never on to an apiserver without the identity: it would be anonymous, or worse.
    return { outcome: 'rejected', reason: 'client_identity_unstated', problem: req.identity.problem, candidates: NONE };
  }
  if (wantsPeerAggregatedApis(req.info, req.headers)) {
    const credentials = req.identity.kind === 'stated' || (req.headers.get(AUTHORIZATION_HEADER) ?? '') !== '';
    return decidePeerDiscovery(snap, credentials, {
      now: opts.now,
      staleAfterMs: opts.staleAfterMs,
      ifNoneMatch: req.headers.get('if-none-match'),
    });
  }
  if (req.info.kind === 'non-resource') {
    const doc = documentOf(req.info, req.headers.get('accept') ?? '');
    if (doc) return decideDocument(doc, snap, opts);
  }
  return decideByPath(req.info, snap, opts);
}
