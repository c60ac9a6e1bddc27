// The discovery service's log lines: one per change of state, never one per poll — an apiserver's
// readiness and failures, its view changing (with a sample of what changed, so an upgrade can be
// followed in the log), a document growing past half the size cap, and live apiservers skewgate
// cannot see.
import type { Logger } from 'pino';
import { MAX_DOCUMENT_BYTES_KEY } from '../kube/core/bounds.js';
import { liveUnmatched } from '../membership/identity-leases.js';
import { bloatChange, bloatThreshold } from './core/document-bounds.js';
import { diffViewsSteps } from './core/view-compare.js';
import { runSliced, sliceBudget } from '../util/slice-runner.js';
import type { ServerState, ServerView, Snapshot } from './core/types.js';

/** One line per change of an apiserver's readiness, failures or version, and its view's changes. */
export function logTransition(
  log: Logger,
  prev: ServerState,
  next: ServerState,
  viewChange: (before: ServerView | null, after: ServerView) => void,
): void {
  const server = next.name;
  if (prev.ready !== next.ready) {
    if (next.ready) log.info({ server }, 'apiserver ready');
    else log.warn({ server }, 'apiserver not ready (/readyz)');
  }
  if (prev.consecutiveFailures === 0 && next.consecutiveFailures > 0) {
    log.warn(
      { server, err: next.lastError, code: next.lastErrorCode, kind: next.lastErrorKind, keptView: next.view !== null },
      'discovery failing',
    );
  } else if (next.consecutiveFailures > 0) {
    log.debug({ server, err: next.lastError, failures: next.consecutiveFailures }, 'discovery still failing');
  } else if (prev.consecutiveFailures > 0) {
    log.info({ server, failures: prev.consecutiveFailures }, 'discovery recovered');
  }
  if (next.gitVersion !== undefined && next.gitVersion !== prev.gitVersion) {
    // An apiserver restarted as another version (an upgrade in place, or a rollback) says so here.
    if (prev.gitVersion === undefined) log.info({ server, gitVersion: next.gitVersion }, 'apiserver version');
    else log.info({ server, from: prev.gitVersion, to: next.gitVersion }, 'apiserver version changed');
  }
  if (next.view && next.view !== prev.view) viewChange(prev.view, next.view);
}

/** A line when an apiserver's OpenAPI v3 index turns unreadable or readable again; returns the problem now. */
export function logOpenApiProblem(log: Logger, server: string, before: string | null, now: string | null): string | null {
  if (now === before) return now;
  // Not a discovery failure: OpenAPI documents keep following the last good index.
  if (now) log.warn({ server, err: now }, 'OpenAPI v3 index unreadable; keeping the last good one');
  else log.info({ server }, 'OpenAPI v3 index readable again');
  return now;
}

/** What changed in a view, logged once the diff is done: it walks every resource, in slices (never in the request path's way). */
export function logViewChange(
  log: Logger,
  server: string,
  before: ServerView | null,
  after: ServerView,
  o: { readonly signal: AbortSignal; readonly sliceBudgetMs: number | undefined },
): void {
  void runSliced(diffViewsSteps(before, after), { signal: o.signal, ...sliceBudget(o.sliceBudgetMs) }).then(
    (d) => {
      const fields = {
        server,
        source: after.source,
        resources: after.resources.size,
        groupVersions: after.groupVersions.size,
        added: d.added.length,
        removed: d.removed.length,
        changed: d.changed.length,
        // A sample, so an upgrade can be followed in the log without flooding it.
        ...(before ? { addedSample: d.added.slice(0, 10), removedSample: d.removed.slice(0, 10) } : {}),
      };
      log.info(fields, before ? 'discovery view changed' : 'discovery synced');
    },
    () => undefined, // closed meanwhile
  );
}

/** A warning when a document grows past half of discovery.maxDocumentBytes: once, not per round. Returns the documents flagged now. */
export function logBloat(
  log: Logger,
  server: string,
  flagged: ReadonlySet<string>,
  sizes: ReadonlyMap<string, number>,
  maxDocumentBytes: number,
): ReadonlySet<string> {
  const warnBytes = bloatThreshold(maxDocumentBytes);
  const change = bloatChange(flagged, sizes, warnBytes);
  const limits = { warnBytes, maxDocumentBytes };
  for (const [document, bytes] of change.grew)
    log.warn(
      { server, document, bytes, ...limits },
      `discovery document bloated: more than half of ${MAX_DOCUMENT_BYTES_KEY}; past it, discovery of this apiserver fails`,
    );
  for (const [document, bytes] of change.shrank) log.info({ server, document, bytes, ...limits }, 'discovery document no longer bloated');
  return change.flagged;
}

/** A line when the set of live apiservers skewgate cannot see changes (never one per renewal). Returns the names now logged. */
export function logUnmatched(log: Logger, snap: Snapshot, now: number, logged: string): string {
  const unseen = liveUnmatched(snap.membership, now);
  const names = unseen.map((l) => l.name).join(',');
  if (names === logged) return logged;
  if (unseen.length === 0) {
    log.info({ synced: snap.membership.synced }, 'identity leases: every live apiserver is a configured member');
    return names;
  }
  log.warn(
    { unmatched: unseen.map((l) => ({ identity: l.name, hostname: l.hostname })) },
    'identity leases: a live apiserver matches no configured member (no 404 is proven while it runs); ' +
      'add it to apiservers, or set apiservers[].hostname to the hostname its identity Lease names',
  );
  return names;
}
