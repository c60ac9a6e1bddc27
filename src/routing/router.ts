// The seam between the gRPC stream and the routing core: headers in, an explained decision out.
import type { RequestInfo } from '../k8s/request-info.js';
import type { Decision } from './decision.js';

export interface RoutingResult {
  readonly info: RequestInfo;
  readonly decision: Decision;
  /** Generation of the snapshot the decision was made on. */
  readonly generation: number;
  /** Age in ms of the oldest view that took part in the decision; null when a view is missing. */
  readonly viewAgeMs: number | null;
}

/** What the ext_proc stream needs from routing: one synchronous, I/O-free call per request. */
export interface RequestRouter {
  route(method: string, path: string, headers: ReadonlyMap<string, string>): RoutingResult;
  /** Retry-After seconds for 503 answers. */
  readonly retryAfterSeconds: number;
}
