// The seam between the gRPC stream and the routing core: headers in, an explained decision out.
import { CLIENT_CERT_HEADER } from '../constants.js';
import type { IdentityResult } from '../identity/core/client-identity.js';
import { classifyRequest } from '../k8s/classify.js';
import type { RequestInfo } from '../k8s/request-info.js';
import type { Snapshot } from '../discovery/core/types.js';
import type { Decision } from './decision.js';
import { decide } from './decide.js';
import { oldestViewAgeMs } from './freshness.js';

export interface RoutingResult {
  readonly info: RequestInfo;
  readonly decision: Decision;
  /** Generation of the snapshot the decision was made on. */
  readonly generation: number;
  /** Age in ms of the oldest view that took part in the decision; null when a view is missing. */
  readonly viewAgeMs: number | null;
  /** The client certificate's identity, stated to the apiserver on every request that goes upstream. */
  readonly identity: IdentityResult;
  /** A routed decision's upstream's gitVersion, as discovery last read it (absent: not routed, or not read). */
  readonly upstreamVersion?: string;
}

/** What the ext_proc stream needs from routing: one synchronous, I/O-free call per request. */
export interface RequestRouter {
  route(method: string, path: string, headers: ReadonlyMap<string, string>): RoutingResult;
  /** Retry-After seconds for 503 answers. */
  readonly retryAfterSeconds: number;
}

/** Where the router reads the current snapshot from; the discovery service implements it. */
export interface SnapshotSource {
  current(): Snapshot;
}

/**
 * The identity behind Envoy's x-forwarded-client-cert at a time (ms): the current CA bundle's
 * verifier (it changes when the bundle is rotated).
 */
export type ClientIdentityOf = (xfcc: string | undefined, now: number) => IdentityResult;

/** Everything a routing decision reads besides the request and the snapshot. */
export interface RouteContext {
  readonly now: number;
  readonly staleAfterMs: number;
  readonly rng: () => number;
  readonly clientIdentity: ClientIdentityOf;
}

/** Without a client CA, a certificate is never stated. */
export const NO_CLIENT_CA: ClientIdentityOf = (xfcc) =>
  xfcc === undefined || xfcc === ''
    ? { kind: 'none' }
    : { kind: 'unstated', problem: 'skewgate has no client CA (envoy.tls.clientCaFile) to verify the client certificate against' };

/** classify → state the identity → decide, over one snapshot. Pure; what `explain` runs too. */
export function routeRequest(
  method: string,
  path: string,
  headers: ReadonlyMap<string, string>,
  snap: Snapshot,
  ctx: RouteContext,
): RoutingResult {
  const info = classifyRequest(method, path);
  const identity = ctx.clientIdentity(headers.get(CLIENT_CERT_HEADER), ctx.now);
  const decision = decide({ info, headers, identity }, snap, ctx);
  const result = { info, decision, generation: snap.generation, viewAgeMs: oldestViewAgeMs(snap, ctx.now), identity };
  if (decision.outcome !== 'routed') return result;
  const upstreamVersion = snap.servers.find((s) => s.name === decision.upstream)?.gitVersion;
  return upstreamVersion === undefined ? result : { ...result, upstreamVersion };
}

export interface RouterOptions {
  readonly staleAfterMs: number;
  readonly retryAfterSeconds: number;
  readonly now?: () => number;
  readonly rng?: () => number;
  /** Without it, a certificate is never stated (NO_CLIENT_CA). */
  readonly clientIdentity?: ClientIdentityOf;
}

/** routeRequest over whatever snapshot is current when the request arrives, at the clock's time. */
export function createRouter(source: SnapshotSource, opts: RouterOptions): RequestRouter {
  const now = opts.now ?? Date.now;
  const rng = opts.rng ?? Math.random;
  const clientIdentity = opts.clientIdentity ?? NO_CLIENT_CA;
  return {
    retryAfterSeconds: opts.retryAfterSeconds,
    route(method, path, headers) {
      // One snapshot per decision, read once: a swap mid-decision cannot mix two views.
      return routeRequest(method, path, headers, source.current(), { now: now(), staleAfterMs: opts.staleAfterMs, rng, clientIdentity });
    },
  };
}
