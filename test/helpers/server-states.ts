// A ServerState as the discovery service would hold it after a good round at `now - 100`: the
// tables of routing's pure tests build their snapshots from these.
import type { ServerState, ServerView } from '../../src/discovery/core/types.js';

export function readyState(name: string, view: ServerView | null, now: number, over: Partial<ServerState> = {}): ServerState {
  return {
    name,
    url: `https://${name}`,
    view,
    lastSuccessAt: view ? now - 100 : null,
    consecutiveFailures: 0,
    lastError: null,
    ready: true,
    ...over,
  };
}
