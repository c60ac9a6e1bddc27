// GET /apis for the peer-aggregated document: answered at the edge from the merge the snapshot
// carries, or passed to the balanced pool when skewgate cannot vouch for a complete union. Pure.
import type { RequestInfo } from '../k8s/request-info.js';
import type { Snapshot } from '../discovery/core/types.js';
import { isFresh, isHealthy } from './freshness.js';
import type { DiscoveryDecision, PassthroughDecision } from './decision.js';
import { negotiateApisCached } from './discovery-accept.js';

const NONE: readonly string[] = Object.freeze([]);

/**
 * True for exactly the requests kube-apiserver answers with its peer-aggregated document: GET of
 * the path /apis (not /apis/) whose Accept negotiates to aggregated discovery v2 without
 * profile=nopeer. Of those, skewgate builds only JSON; YAML and protobuf go upstream.
 */
export function wantsPeerAggregatedApis(info: RequestInfo, headers: ReadonlyMap<string, string>): boolean {
  if (info.kind !== 'non-resource' || info.method !== 'GET' || info.path !== '/apis') return false;
  return acceptsPeerAggregatedJson(headers.get('accept') ?? '');
}

function acceptsPeerAggregatedJson(accept: string): boolean {
  const n = negotiateApisCached(accept);
  return n.kind === 'aggregated' && n.mediaType === 'application/json' && n.profile !== 'nopeer';
}

export interface PeerDiscoveryRouteOptions {
  readonly now: number;
  readonly staleAfterMs: number;
  /** The request's If-None-Match header. */
  readonly ifNoneMatch?: string | undefined;
}

/**
 * The answer to a request for which wantsPeerAggregatedApis() holds, from the merge this
 * snapshot carries. Served only when every ready apiserver's view is fresh (checked here because it
 * moves with the clock), and only to a request that carries credentials (a bearer token or a
 * client certificate skewgate has verified): kube-apiserver answers /apis to authenticated users
 * only, and skewgate cannot check a token, so a request with none goes to an apiserver, which
 * answers 401 or 403 (or serves it, if it allows anonymous).
 */
export function decidePeerDiscovery(
  snap: Snapshot,
  hasCredentials: boolean,
  opts: PeerDiscoveryRouteOptions,
): DiscoveryDecision | PassthroughDecision {
  const result = snap.peerDiscovery;
  if (!hasCredentials) return { outcome: 'passthrough', reason: 'no_credentials', candidates: NONE };
  if (!result.ok) return { outcome: 'passthrough', reason: result.reason, candidates: NONE };
  const doc = result.document;
  // The merge was keyed on readiness: the ready servers here are the merged ones.
  for (const s of snap.servers) {
    if (isHealthy(s) && !isFresh(s, opts.now, opts.staleAfterMs))
      return { outcome: 'passthrough', reason: 'view_incomplete', candidates: doc.servers };
  }
  // kube-apiserver compares the first If-None-Match value, verbatim, with the quoted hash.
  const notModified = opts.ifNoneMatch === doc.quotedEtag;
  return { outcome: 'discovery', reason: notModified ? 'merged_apis_not_modified' : 'merged_apis', candidates: doc.servers, document: doc };
}
