// What a server's state can prove at a moment: the judgements every rung of the ladder, explain
// and the view-age attribute share. Pure: the clock is passed in.
import type { ServerState, Snapshot } from '../discovery/core/types.js';

/**
 * A view can prove absence only if it is complete and current: fetched without a failure since,
 * and recently. A server that failed even once may have been restarted as a newer version.
 */
export function isFresh(s: ServerState, now: number, staleAfterMs: number): boolean {
  return s.view !== null && s.consecutiveFailures === 0 && s.lastSuccessAt !== null && now - s.lastSuccessAt <= staleAfterMs;
}

/**
 * Healthy is the apiserver's own word: /readyz answered 200 at the last probe. A failing discovery
 * fetch alone (a malformed document, say) makes a view untrustworthy for 404s, not the server
 * unable to serve; an unreachable server fails its /readyz probe as well. A draining member, or
 * one an operator drained (cordon --drain), is not healthy: it takes no new request.
 */
export function isHealthy(s: ServerState): boolean {
  return s.ready === true && s.draining !== true && s.cordon !== 'drain';
}

/** Cordoned (not drained): healthy, but given only what no open apiserver can serve. */
export function isCordoned(s: ServerState): boolean {
  return s.cordon === 'cordon';
}

/** Age of the oldest view in the snapshot, or null if some server has none yet. */
export function oldestViewAgeMs(snap: Snapshot, now: number): number | null {
  let oldest = now;
  for (const s of snap.servers) {
    if (s.view === null || s.lastSuccessAt === null) return null;
    if (s.lastSuccessAt < oldest) oldest = s.lastSuccessAt;
  }
  return now - oldest;
}
