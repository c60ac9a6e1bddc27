// What the discovery service tells the rest of skewgate: each new snapshot, and what each round
// of each apiserver did (the requests it sent, the state before and after) for tracing and
// metrics (src/telemetry/): the service itself knows nothing of OpenTelemetry.
import type { ServerState, Snapshot } from './types.js';

export type SnapshotListener = (snapshot: Snapshot) => void;

/** One HTTP request of a discovery round (/api, /apis, legacy group/versions, /readyz, /version). */
export interface DiscoveryRequestRecord {
  /** URL path without query, e.g. "/apis" or "/apis/apps/v1". */
  readonly path: string;
  /** null when no response came (connect, TLS, timeout). */
  readonly status: number | null;
  /** Body bytes read (0 for a 304). */
  readonly bytes: number;
  readonly durationMs: number;
}

/**
 * What one discovery round of one apiserver did, for tracing and metrics (src/telemetry/): the
 * service itself knows nothing of OpenTelemetry.
 */
export interface DiscoveryRoundEvent {
  readonly server: string;
  /** Epoch ms when the round started. */
  readonly startedAt: number;
  readonly durationMs: number;
  readonly requests: readonly DiscoveryRequestRecord[];
  /** The server's state before and after the round; the same view object means no change. */
  readonly before: ServerState;
  readonly after: ServerState;
  /** The snapshot published after the round. */
  readonly snapshot: Snapshot;
  /**
   * Body bytes of /api, /apis and /openapi/v3 as last answered in full (a 304 keeps the size; a
   * body too large: what showed it). Always set by the service.
   */
  readonly documentBytes?: ReadonlyMap<string, number>;
}

export type RoundListener = (event: DiscoveryRoundEvent) => void;

/** A round's probes, beside its documents: readiness and version. */
const PROBE_PATHS: ReadonlySet<string> = new Set(['/readyz', '/version']);

/** The discovery documents a round fetched (its /readyz and /version probes left out). */
export function documentRequests(requests: readonly DiscoveryRequestRecord[]): DiscoveryRequestRecord[] {
  return requests.filter((r) => !PROBE_PATHS.has(r.path));
}
