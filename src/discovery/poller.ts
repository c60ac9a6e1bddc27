// One apiserver's discovery loop: its fetcher, its transport target (the watches use it too), its
// state, and one round — the discovery view and /readyz fetched side by side, every request
// recorded for the round's event. The service decides what a round means (membership, logs,
// publishing); the poller only fetches and keeps its timers.
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { failureOf } from '../errors/catalog.js';
import { createCredentials, type ServerCredentials } from '../kube/credentials.js';
import { countedResponse, defaultFetch, type FetchLike, type ServerTarget } from '../kube/transport.js';
import type { MemberRole, MemberSpec } from '../membership/members.js';
import type { DiscoveryRequestRecord } from './core/events.js';
import { DiscoveryClient } from './fetcher.js';
import { probeReady, probeVersion } from './probes.js';
import { unprobedState } from './core/snapshot.js';
import { versionDue } from './core/version.js';
import type { ServerState } from './core/types.js';

export interface Poller {
  spec: MemberSpec;
  role: MemberRole;
  readonly seed: boolean;
  sources: readonly string[];
  state: ServerState;
  readonly client: DiscoveryClient;
  readonly target: ServerTarget;
  /** The target whose requests are recorded for the round's event: the client's and the probes'. */
  readonly recorded: ServerTarget;
  readonly credentials: ServerCredentials;
  /** Aborts this poller's requests when it is removed (and with the service). */
  readonly abort: AbortController;
  removed: boolean;
  /** The drain timer of a draining member, or the join timer of a joining one. */
  drainTimer: NodeJS.Timeout | null;
  timer: NodeJS.Timeout | null;
  running: Promise<void> | null;
  again: boolean;
  firstDone: () => void;
  readonly first: Promise<void>;
  /** Requests of the round in progress, recorded by the client's fetch. */
  requests: DiscoveryRequestRecord[];
  /** The OpenAPI v3 index problem last logged (null: readable). */
  openapiProblem: string | null;
  /** Documents above the bloat threshold, warned of once until they shrink. */
  bloated: ReadonlySet<string>;
}

export interface PollerSettings {
  readonly timeoutMs: number;
  readonly intervalMs: number;
  readonly maxDocumentBytes: number;
  readonly maxResources: number;
  readonly maxDownloadBackoffMs: number;
  readonly sliceBudgetMs: number | undefined;
  readonly fetchImpl: FetchLike | undefined;
  readonly now: () => number;
}

export function createPoller(spec: MemberSpec, role: MemberRole, seed: boolean, sources: readonly string[], s: PollerSettings): Poller {
  const credentials = createCredentials(spec);
  const abort = new AbortController();
  setMaxListeners(0, abort.signal);
  // The watch uses this target; the poller's client a recording copy of it.
  const target: ServerTarget = {
    name: spec.name,
    url: spec.url,
    credentials,
    timeoutMs: s.timeoutMs,
    maxDocumentBytes: s.maxDocumentBytes,
    ...(s.fetchImpl ? { fetchImpl: s.fetchImpl } : {}),
  };
  const recorded: ServerTarget = { ...target, fetchImpl: recordingFetch(s.fetchImpl ?? defaultFetch, (r) => poller.requests.push(r)) };
  let firstDone: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (firstDone = resolve));
  const poller: Poller = {
    spec,
    role,
    seed,
    sources,
    state: unprobedState(spec),
    client: new DiscoveryClient({
      ...recorded,
      ...(s.sliceBudgetMs === undefined ? {} : { sliceBudgetMs: s.sliceBudgetMs }),
      intervalMs: s.intervalMs,
      maxBackoffMs: s.maxDownloadBackoffMs,
      maxResources: s.maxResources,
      now: s.now,
    }),
    target,
    recorded,
    credentials,
    abort,
    removed: false,
    drainTimer: null,
    timer: null,
    running: null,
    again: false,
    firstDone,
    first,
    requests: [],
    openapiProblem: null,
    bloated: new Set(),
  };
  return poller;
}

export interface RoundResult {
  readonly startedAt: number;
  readonly durationMs: number;
  readonly before: ServerState;
  readonly after: ServerState;
}

/** One round: the view, /readyz and (when due) /version fetched side by side; the state before and after (the caller stores it, unless the poller went meanwhile). */
export async function pollOnce(p: Poller, signal: AbortSignal, now: () => number): Promise<RoundResult> {
  const startedAt = now();
  const t0 = performance.now();
  p.requests = [];
  const due = versionDue(p.state, startedAt);
  const [result, ready, gitVersion] = await Promise.all([
    p.client.fetchView(signal).then(
      (view) => ({ view, failure: null }),
      (err: unknown) => ({ view: null, failure: failureOf(err) }),
    ),
    probeReady(p.recorded, signal),
    due ? probeVersion(p.recorded, signal) : Promise.resolve(null),
  ]);
  // Read after the awaits: membership may have marked the server (draining) meanwhile.
  const before = p.state;
  // A good round clears the last failure, its code and kind included; a version read replaces the last one.
  const { lastErrorCode: _code, lastErrorKind: _kind, ...rest } = before;
  const kept = gitVersion === null ? rest : { ...rest, gitVersion, versionReadAt: startedAt };
  const after: ServerState = Object.freeze(
    result.view
      ? { ...kept, view: result.view, lastSuccessAt: now(), consecutiveFailures: 0, lastError: null, ready }
      : {
          ...kept,
          consecutiveFailures: before.consecutiveFailures + 1,
          lastError: result.failure.message,
          lastErrorCode: result.failure.code,
          lastErrorKind: result.failure.kind,
          ready,
        },
  );
  return { startedAt, durationMs: performance.now() - t0, before, after };
}

/**
 * The wait before a poller's next round. Rounds retry fast after a failure (a restarted apiserver
 * is back within a second); what a failing round may cost is bounded in the fetcher: a bad
 * document is a 304, its downloads back off.
 */
export function nextRoundDelay(consecutiveFailures: number, intervalMs: number, minRetryMs: number): number {
  const f = consecutiveFailures;
  return f === 0 ? intervalMs : Math.min(intervalMs, minRetryMs * 2 ** Math.min(f - 1, 20));
}

/**
 * Runs a round now, or once more after the one running (whatever it saw may predate the reason
 * for this kick); then arms the timer of the next. Bursts of kicks coalesce.
 */
export function kickPoller(
  p: Poller,
  o: { readonly round: () => Promise<void>; readonly closed: () => boolean; readonly nextDelay: () => number; readonly log: Logger },
): void {
  if (o.closed() || p.removed) return;
  if (p.running) {
    p.again = true;
    return;
  }
  if (p.timer) clearTimeout(p.timer);
  p.timer = null;
  p.running = o
    .round()
    .catch((err: unknown) => o.log.error({ server: p.state.name, err: String(err) }, 'discovery round crashed'))
    .finally(() => {
      p.running = null;
      p.firstDone();
      if (o.closed() || p.removed) return;
      if (p.again) {
        p.again = false;
        kickPoller(p, o);
        return;
      }
      p.timer = setTimeout(() => {
        p.timer = null;
        kickPoller(p, o);
      }, o.nextDelay());
      p.timer.unref();
    });
}

/** Ends a poller's timers and requests (removed, or the service closing). */
export function stopPoller(p: Poller): void {
  if (p.timer) clearTimeout(p.timer);
  if (p.drainTimer) clearTimeout(p.drainTimer);
  p.timer = null;
  p.drainTimer = null;
  p.firstDone();
}

/** Wraps a fetch so that each request's path, status, body size and duration are recorded. */
function recordingFetch(inner: FetchLike, record: (r: DiscoveryRequestRecord) => void): FetchLike {
  return async (url, init) => {
    const t0 = performance.now();
    const path = new URL(url).pathname;
    let res;
    try {
      res = await inner(url, init);
    } catch (err) {
      record({ path, status: null, bytes: 0, durationMs: performance.now() - t0 });
      throw err;
    }
    const { status } = res;
    return countedResponse(res, (bytes) => record({ path, status, bytes, durationMs: performance.now() - t0 }));
  };
}
