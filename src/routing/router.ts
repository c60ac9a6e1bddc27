// The seam between the gRPC stream and the routing core: headers in, an explained decision out.
import { CLIENT_CERT_HEADER } from '../constants.js';
import type { IdentityResult } from '../identity/client-identity.js';
import { classifyRequest } from '../k8s/classify.js';
import type { RequestInfo } from '../k8s/request-info.js';
import type { Snapshot } from '../discovery/types.js';
import type { Decision } from './decision.js';
import { decide } from './decide.js';
import { PeerDiscoveryCache } from '../discovery/peer-discovery.js';
import { decidePeerDiscovery, wantsPeerAggregatedApis } from './discovery-route.js';

export interface RoutingResult {
  readonly info: RequestInfo;
  readonly decision: Decision;
  /** Generation of the snapshot the decision was made on. */
  readonly generation: number;
  /** Age in ms of the oldest view that took part in the decision; null when a view is missing. */
  readonly viewAgeMs: number | null;
  /** The client certificate's identity, stated to the apiserver on every request that goes upstream. */
  readonly identity: IdentityResult;
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
  /** When offered, the peer-aggregated /apis is merged as each snapshot is published, not on a request. */
  onChange?(listener: (snapshot: Snapshot) => void): () => void;
}

export interface RouterOptions {
  readonly staleAfterMs: number;
  readonly retryAfterSeconds: number;
  readonly now?: () => number;
  readonly rng?: () => number;
  /** Identity-lease name of an apiserver (orders the /apis merge); default: derived from the name as a hostname. */
  readonly identityOf?: (name: string) => string;
  /**
   * The identity behind Envoy's x-forwarded-client-cert at a time (ms); the current CA bundle's
   * verifier (it changes when the bundle is rotated). Without it, a certificate is never stated.
   */
  readonly clientIdentity?: (xfcc: string | undefined, now: number) => IdentityResult;
}

const NO_CLIENT_CA = (xfcc: string | undefined): IdentityResult =>
  xfcc === undefined || xfcc === ''
    ? { kind: 'none' }
    : { kind: 'unstated', problem: 'skewgate has no client CA (envoy.tls.clientCaFile) to verify the client certificate against' };

/** Age of the oldest view in the snapshot, or null if some server has none yet. */
export function oldestViewAgeMs(snap: Snapshot, now: number): number | null {
  let oldest = now;
  for (const s of snap.servers) {
    if (s.view === null || s.lastSuccessAt === null) return null;
    if (s.lastSuccessAt < oldest) oldest = s.lastSuccessAt;
  }
  return now - oldest;
}

/** classify → decide over whatever snapshot is current when the request arrives. */
export function createRouter(source: SnapshotSource, opts: RouterOptions): RequestRouter {
  const now = opts.now ?? Date.now;
  const rng = opts.rng ?? Math.random;
  const clientIdentity = opts.clientIdentity ?? NO_CLIENT_CA;
  const peerDiscovery = new PeerDiscoveryCache(opts.identityOf ? { identityOf: opts.identityOf } : {});
  source.onChange?.((snap) => void peerDiscovery.forSnapshot(snap));
  return {
    retryAfterSeconds: opts.retryAfterSeconds,
    route(method, path, headers) {
      // One snapshot per decision, read once: a swap mid-decision cannot mix two views.
      const snap = source.current();
      const t = now();
      const info = classifyRequest(method, path);
      const identity = clientIdentity(headers.get(CLIENT_CERT_HEADER), t);
      let decision: Decision;
      if (identity.kind === 'unstated') {
        // Never on to an apiserver without the identity: it would be anonymous, or worse.
        decision = { outcome: 'rejected', reason: 'client_identity_unstated', problem: identity.problem, candidates: [] };
      } else if (wantsPeerAggregatedApis(info, headers)) {
        const credentials = identity.kind === 'stated' || (headers.get('authorization') ?? '') !== '';
        decision = decidePeerDiscovery(snap, peerDiscovery.forSnapshot(snap), credentials, { now: t, staleAfterMs: opts.staleAfterMs, ifNoneMatch: headers.get('if-none-match') });
      } else {
        decision = decide(info, snap, { now: t, staleAfterMs: opts.staleAfterMs, rng });
      }
      return { info, decision, generation: snap.generation, viewAgeMs: oldestViewAgeMs(snap, t), identity };
    },
  };
}
