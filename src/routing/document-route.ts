// Discovery-like documents other than the merged /apis: legacy discovery and OpenAPI. Each is one
// apiserver's own answer, so the rung picks the apiserver: one whose document is the cluster's
// union (every ready server's content in that scope), and for an OpenAPI document asked by hash,
// one whose index lists that very hash. The bytes are then the apiserver's own. Pure.
import { groupScope, groupVersionScope, SCOPE_ALL, SCOPE_GROUPS } from '../discovery/core/document-index.js';
import { liveUnmatched } from '../membership/identity-leases.js';
import type { ServerState, Snapshot } from '../discovery/core/types.js';
import type { NonResourceRequest } from '../k8s/request-info.js';
import {
  pickAtRandom,
  type DecideOptions,
  type DefaultDecision,
  type PassthroughDecision,
  type RoutedDecision,
  type UnavailableDecision,
} from './decision.js';
import { negotiateApisCached } from './discovery-accept.js';
import { isCordoned, isFresh, isHealthy } from './freshness.js';

/** Which document a request asks for, and how its server is chosen. */
export interface DocumentRequest {
  /** The scope whose union the document lists (document-index.ts), or null when only a hash can pin it. */
  readonly scope: string | null;
  /** OpenAPI: the kind of document, for the default rule (schemas differ where discovery agrees). */
  readonly openapi: boolean;
  /** OpenAPI v3 per-document path ("apis/apps/v1") and the hash the client asked for ('' for none). */
  readonly openapiPath?: string;
  readonly hash?: string;
}

const OPENAPI_V3 = '/openapi/v3';

function segments(path: string): string[] {
  return path.split('/').filter((p) => p !== '');
}

/** The scope of an OpenAPI v3 document path ("api/v1", "apis/apps/v1"); null for the others (version, .well-known/…). */
function openapiPathScope(parts: readonly string[]): string | null {
  if (parts[0] === 'api' && parts.length === 2) return groupVersionScope('', parts[1] as string);
  if (parts[0] === 'apis' && parts.length === 3) return groupVersionScope(parts[1] as string, parts[2] as string);
  return null;
}

function hashOf(query: string): string {
  if (query === '') return '';
  return new URLSearchParams(query).get('hash') ?? '';
}

/**
 * The document a GET asks for, or null when the request is no discovery-like document (or is one
 * any apiserver answers alike: /api's APIVersions, /apis asking for one server's own `nopeer` view).
 * The merged /apis (aggregated JSON) is decided before this (discovery-route.ts).
 */
export function documentOf(info: NonResourceRequest, accept: string): DocumentRequest | null {
  if (info.method !== 'GET') return null;
  const path = info.path;
  // Every other non-resource path (/healthz, /version, /readyz …) leaves here, allocating nothing.
  if (!path.startsWith('/api') && !path.startsWith('/openapi/')) return null;
  if (path === '/openapi/v2') return { scope: SCOPE_ALL, openapi: true };
  if (path === OPENAPI_V3) return { scope: SCOPE_ALL, openapi: true };
  if (path.startsWith(`${OPENAPI_V3}/`)) {
    const parts = segments(path.slice(OPENAPI_V3.length));
    if (parts.length === 0) return { scope: SCOPE_ALL, openapi: true };
    return { scope: openapiPathScope(parts), openapi: true, openapiPath: parts.join('/'), hash: hashOf(info.query) };
  }
  const parts = segments(path);
  if (parts[0] === 'api') {
    if (path === '/api/') return null;
    if (parts.length === 2) return { scope: groupVersionScope('', parts[1] as string), openapi: false };
    if (parts.length !== 1) return null;
    // /api as aggregated discovery lists the core resources; as APIVersions it is the same everywhere.
    const n = negotiateApisCached(accept);
    return n.kind === 'aggregated' && n.profile !== 'nopeer' ? { scope: groupVersionScope('', 'v1'), openapi: false } : null;
  }
  if (parts[0] !== 'apis') return null;
  // kube-apiserver answers /apis/ (the slash kept) with its legacy handler, whatever the Accept.
  if (path === '/apis/') return { scope: SCOPE_GROUPS, openapi: false };
  if (parts.length === 1) {
    const n = negotiateApisCached(accept);
    if (n.kind === 'aggregated') return n.profile === 'nopeer' ? null : { scope: SCOPE_ALL, openapi: false };
    return { scope: SCOPE_GROUPS, openapi: false };
  }
  if (parts.length === 2) return { scope: groupScope(parts[1] as string), openapi: false };
  if (parts.length === 3) return { scope: groupVersionScope(parts[1] as string, parts[2] as string), openapi: false };
  return null;
}

const NONE: readonly string[] = Object.freeze([]);

type DocumentDecision = DefaultDecision | RoutedDecision | PassthroughDecision | UnavailableDecision;

/**
 * The rung for a document request. The union is that of the ready apiservers, as in the merged
 * /apis: a server that is down contributes nothing until it is back. Then:
 *   - asked by OpenAPI hash: to a ready server whose index lists that hash (default when all do);
 *   - every member ready and holding the same content (and, for OpenAPI, the same index) → default;
 *   - a ready server holding the whole union → routed to it (complete_document);
 *   - none holds it whole → routed to the fullest (no_complete_document, in the span and the metric like every reason);
 *   - no ready server serves the scope → 503 while a not-ready one does (or an unseen apiserver
 *     might), else the balanced pool (its 404 is then true).
 * Nothing is judged until every ready server's view is current: then the balanced pool answers.
 */
export function decideDocument(doc: DocumentRequest, snap: Snapshot, opts: DecideOptions): DocumentDecision {
  const servers = snap.servers;
  if (servers.some((s) => s.ready === null)) return { outcome: 'passthrough', reason: 'not_synced', candidates: NONE };
  const ready = servers.filter(isHealthy);
  if (ready.length === 0) return { outcome: 'passthrough', reason: 'view_incomplete', candidates: NONE };
  if (ready.some((s) => s.view === null)) return { outcome: 'passthrough', reason: 'not_synced', candidates: NONE };
  if (ready.some((s) => !isFresh(s, opts.now, opts.staleAfterMs)))
    return { outcome: 'passthrough', reason: 'view_incomplete', candidates: NONE };
  // A cordoned server is sent a document only when no open one holds what is asked.
  const cordoned = new Set(names(ready.filter(isCordoned)));
  const pick = (candidates: readonly string[]): string => {
    const open = candidates.filter((n) => !cordoned.has(n));
    return pickAtRandom(open.length > 0 ? open : candidates, opts.rng);
  };
  const index = snap.documents;

  if (doc.openapiPath !== undefined && doc.hash) {
    const holding = index.openapi.get(doc.openapiPath)?.get(doc.hash);
    const holders = names(ready.filter((s) => holding?.has(s.name) === true));
    if (holders.length === servers.length) return { outcome: 'default', reason: 'served_by_all', candidates: holders };
    if (holders.length > 0) return { outcome: 'routed', reason: 'openapi_hash', upstream: pick(holders), candidates: holders };
    // No ready server has that hash (the client's index is older): the scope's server answers
    // with a redirect to its own hash, which is then routed by hash.
  }
  if (doc.scope === null) return { outcome: 'passthrough', reason: 'non_resource', candidates: NONE };
  const cov = index.scopes.get(doc.scope);
  const serving = ready.filter((s) => cov?.serving.has(s.name) === true);
  if (serving.length === 0) {
    const later = servers.filter((s) => !isHealthy(s) && isFresh(s, opts.now, opts.staleAfterMs) && cov?.serving.has(s.name) === true);
    if (later.length > 0) return { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: names(later) };
    const unseen = liveUnmatched(snap.membership, opts.now);
    if (unseen.length > 0) return { outcome: 'unavailable', reason: 'unmatched_apiserver_identity', candidates: unseen.map((l) => l.name) };
    return { outcome: 'passthrough', reason: 'non_resource', candidates: NONE };
  }
  const holdsUnion = (a: ServerState): boolean => {
    const held = cov?.covers.get(a.name);
    return ready.every((b) => held?.has(b.name) === true);
  };
  const complete = names(ready.filter(holdsUnion));
  if (complete.length === servers.length && (!doc.openapi || index.openapiIdentical)) {
    return { outcome: 'default', reason: 'served_by_all', candidates: complete };
  }
  if (complete.length > 0) return { outcome: 'routed', reason: 'complete_document', upstream: pick(complete), candidates: complete };
  let most = -1;
  let fullest: string[] = [];
  for (const s of serving) {
    const n = cov?.items.get(s.name) ?? 0;
    if (n > most) [most, fullest] = [n, [s.name]];
    else if (n === most) fullest.push(s.name);
  }
  return { outcome: 'routed', reason: 'no_complete_document', upstream: pick(fullest), candidates: names(serving) };
}

function names(servers: readonly ServerState[]): string[] {
  return servers.map((s) => s.name);
}
