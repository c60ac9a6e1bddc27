// Pure: the gateway's decision for one request, with everything that led to it. The request
// path's own function decides (routeRequest: the whole ladder, identity and merged /apis
// included), over the snapshot and clock given, with the headers as Envoy hands them to skewgate.
// `skewgate explain --discover` (a discovery round of its own) and the running gateway's
// POST /v1/explain both build this object; `explain -o json` prints it.
import type { CordonMode } from '../cordon/core/cordons.js';
import type { ErrorCode } from '../errors/catalog.js';
import { createHash } from 'node:crypto';
import { CLIENT_CERT_HEADER, SANITIZED_REQUEST_HEADER_PREFIXES, SANITIZED_REQUEST_HEADERS } from '../constants.js';
import { gvrKey, type Snapshot } from '../discovery/core/types.js';
import { compileFastPath, FAST_PATH_MARGIN_MS } from '../routing/fast-path.js';
import { fastPathTakes } from '../envoy/fast-routes.js';
import { parsePemCertificates } from '../identity/core/client-identity.js';
import { formatXfcc } from '../identity/core/xfcc.js';
import { isFresh, isHealthy } from '../routing/freshness.js';
import { routeRequest, type ClientIdentityOf } from '../routing/router.js';
import type { Decision } from '../routing/decision.js';
import type { RequestInfo } from '../k8s/request-info.js';
import { membershipView, type MembershipView } from './membership-view.js';

/** What is asked: a request as a client sends it. */
export interface ExplainRequest {
  readonly method: string;
  /** Path with query, as on the request line. */
  readonly path: string;
  /** "Name: value" lines, as curl's -H takes them. */
  readonly headers: readonly string[];
  /** The client certificate the request presents (PEM, intermediates after it). */
  readonly clientCertificate?: string | undefined;
}

/** Everything besides the request: the gateway's state at one moment. */
export interface ExplainContext {
  readonly snapshot: Snapshot;
  readonly now: number;
  readonly rng: () => number;
  readonly staleAfterMs: number;
  /** The verifier of envoy.tls.clientCaFile's bundle (a certificate is never stated without one). */
  readonly clientIdentity: ClientIdentityOf;
  /**
   * Whether Envoy has fast-path routes at all: envoy.xds set, routing.fastPath on; and whether it
   * verifies client certificates (envoy.tls.clientCaFile), so its Lua may state them for the fast path.
   */
  readonly fastPath: { readonly xds: boolean; readonly enabled: boolean; readonly certificates: boolean };
  /** Why the membership is not known (the identity Leases could not be listed), or null. */
  readonly membershipProblem: string | null;
}

/** A request that cannot be explained as given: a header line or certificate that does not parse. */
export class ExplainInputError extends Error {
  readonly code = 'SKEWGATE_ERR_EXPLAIN_INPUT' satisfies ErrorCode;
}

export interface ServerExplained {
  readonly name: string;
  readonly healthy: boolean;
  readonly ready: boolean | null;
  readonly fresh: boolean;
  readonly viewAgeMs: number | null;
  readonly source: 'aggregated' | 'legacy' | null;
  /** Its /version's gitVersion as last read (null until read). */
  readonly gitVersion: string | null;
  /** An operator's cordon (null: none): a cordoned server gets only what no open one serves, a drained one nothing. */
  readonly cordon: CordonMode | null;
  /** What its view lists for the request's resource ("-" for a request that names none). */
  readonly listing: string;
  readonly error: string | null;
}

export type IdentityExplained =
  | { readonly kind: 'stated'; readonly user: string; readonly uid: string | null; readonly groups: readonly string[] }
  | { readonly kind: 'unstated'; readonly problem: string }
  | { readonly kind: 'none' };

/** The decision, the merged document's body left out (its ETag and group count say which it is). */
export type DecisionExplained =
  | Exclude<Decision, { readonly outcome: 'discovery' }>
  | {
      readonly outcome: 'discovery';
      readonly reason: Extract<Decision, { readonly outcome: 'discovery' }>['reason'];
      readonly candidates: readonly string[];
      readonly etag: string;
      readonly groups: number;
    };

export interface Explanation {
  readonly request: {
    readonly method: string;
    readonly path: string;
    readonly headers: Readonly<Record<string, string>>;
    /** Headers Envoy strips before skewgate sees the request: dropped here as there. */
    readonly stripped: readonly string[];
  };
  readonly classification: RequestInfo;
  readonly identity: IdentityExplained;
  readonly servers: readonly ServerExplained[];
  readonly membership: MembershipView;
  readonly decision: DecisionExplained;
  readonly fastPath: { readonly takes: boolean; readonly why: string };
  /** The snapshot decided on. */
  readonly generation: number;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

const sanitized = (name: string): boolean =>
  SANITIZED_REQUEST_HEADERS.includes(name) || SANITIZED_REQUEST_HEADER_PREFIXES.some((p) => name.startsWith(p));

/** The request headers as skewgate sees them: names lower case, what Envoy strips gone (listed). */
export function requestHeaders(lines: readonly string[]): { headers: Map<string, string>; stripped: string[] } {
  const headers = new Map<string, string>();
  const stripped: string[] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon).trim().toLowerCase();
    if (!HEADER_NAME.test(name)) throw new ExplainInputError(`header ${JSON.stringify(line)}: not a header line ("Name: value")`);
    const value = line.slice(colon + 1).trim();
    if (sanitized(name)) {
      stripped.push(name);
      continue;
    }
    // Repeated headers reach ext_proc joined with ", ", as Envoy joins them.
    const before = headers.get(name);
    headers.set(name, before === undefined ? value : `${before}, ${value}`);
  }
  return { headers, stripped };
}

/** The x-forwarded-client-cert value Envoy would send for this PEM chain (leaf first). */
export function clientCertificateXfcc(pem: string): string {
  let certs;
  try {
    certs = parsePemCertificates(pem);
  } catch (err) {
    throw new ExplainInputError(`a certificate does not parse: ${(err as Error).message}`);
  }
  const leaf = certs[0];
  if (leaf === undefined) throw new ExplainInputError('no PEM certificate in it');
  return formatXfcc(
    certs.map((c) => c.toString()),
    createHash('sha256').update(leaf.raw).digest('hex'),
  );
}

export function explainRequest(req: ExplainRequest, ctx: ExplainContext): Explanation {
  const { headers, stripped } = requestHeaders(req.headers);
  if (req.clientCertificate !== undefined) headers.set(CLIENT_CERT_HEADER, clientCertificateXfcc(req.clientCertificate));
  const method = req.method.toUpperCase();
  const { snapshot, now } = ctx;
  const { info, decision, identity } = routeRequest(method, req.path, headers, snapshot, ctx);
  const byServer = info.kind === 'resource' ? snapshot.resources.get(gvrKey(info.group, info.version, info.resource)) : undefined;
  const servers = snapshot.servers.map((s): ServerExplained => {
    const cap = byServer?.get(s.name);
    const listing =
      info.kind !== 'resource'
        ? '-'
        : cap === undefined
          ? 'resource not listed'
          : info.subresource === ''
            ? [...cap.verbs].join(',')
            : cap.subresources.has(info.subresource)
              ? `${info.subresource}: ${[...(cap.subresources.get(info.subresource) ?? [])].join(',')}`
              : `subresource ${info.subresource} not listed`;
    return {
      name: s.name,
      healthy: isHealthy(s),
      ready: s.ready,
      fresh: isFresh(s, now, ctx.staleAfterMs),
      viewAgeMs: s.lastSuccessAt === null ? null : now - s.lastSuccessAt,
      source: s.view?.source ?? null,
      gitVersion: s.gitVersion ?? null,
      cordon: s.cordon ?? null,
      listing,
      error: s.lastError,
    };
  });
  const identityView: IdentityExplained =
    identity.kind === 'stated'
      ? { kind: identity.kind, user: identity.identity.user, uid: identity.identity.uid, groups: identity.identity.groups }
      : identity;
  const decisionView: DecisionExplained =
    decision.outcome === 'discovery'
      ? {
          outcome: decision.outcome,
          reason: decision.reason,
          candidates: decision.candidates,
          etag: decision.document.quotedEtag,
          groups: decision.document.groups,
        }
      : decision;
  return {
    request: { method, path: req.path, headers: Object.fromEntries(headers), stripped },
    classification: info,
    identity: identityView,
    servers,
    membership: membershipView(snapshot, now, ctx.membershipProblem),
    decision: decisionView,
    fastPath: fastPathView(ctx, method, req.path, headers, req.clientCertificate !== undefined),
    generation: snapshot.generation,
  };
}

/**
 * Whether the gateway's Envoy would decide this request alone (the fast path: docs/design.md),
 * by the table this snapshot compiles to, and why (not).
 */
function fastPathView(
  ctx: ExplainContext,
  method: string,
  path: string,
  headers: ReadonlyMap<string, string>,
  clientCertificate: boolean,
): { readonly takes: boolean; readonly why: string } {
  if (!ctx.fastPath.xds) return { takes: false, why: 'off (needs envoy.xds)' };
  if (!ctx.fastPath.enabled) return { takes: false, why: 'off (routing.fastPath: false)' };
  const table = compileFastPath(ctx.snapshot, { now: ctx.now, staleAfterMs: ctx.staleAfterMs, marginMs: FAST_PATH_MARGIN_MS });
  if (table.groupVersions.length === 0) return { takes: false, why: `nothing is fast now: ${table.why}` };
  if (clientCertificate && !ctx.fastPath.certificates)
    return { takes: false, why: 'a client certificate: Envoy verifies none here (no envoy.tls.clientCaFile)' };
  // The certificate twins match what the routes without one do, once Envoy's Lua stated it.
  if (fastPathTakes(table, { method, path, headers, clientCertificate: false })) {
    const where = table.servesAll
      ? 'default/served_by_all, every apiserver serves it identically'
      : `routed/served_by_subset, to the fast pool (${table.members.join(', ')}): ${table.why}`;
    return {
      takes: true,
      why: clientCertificate
        ? `if Envoy's Lua states the certificate (a CN; PrintableString or UTF8String values; no UID; issued by a bundle CA, no intermediates; docs/design.md), ${where}; if not, skewgate states it and judges the request`
        : where,
    };
  }
  return {
    takes: false,
    why: 'skewgate judges it (a skewed group/version, a watch, a long-running or discovery request, or a name no view lists)',
  };
}
