// skewgate's metrics. Labels are bounded: outcome and reason are literals, upstream and apiserver
// are names from the config; no per-resource or per-path label.
import type { FailureKind } from '../errors/catalog.js';
import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import { documentRequests, type DiscoveryRoundEvent } from '../discovery/core/events.js';
import { liveUnmatched } from '../membership/identity-leases.js';
import type { Snapshot } from '../discovery/core/types.js';
import type { RoutingResult } from '../routing/router.js';
import type { ReloadResultName } from './core/names.js';
import { METRIC } from './core/names.js';
import { fastResourceCount } from '../routing/fast-table.js';
import { type FastTable } from '../routing/fast-path.js';
import type { SkewTracker } from './core/skew-diff.js';

/** classify + decide takes microseconds; the ext_proc round trip adds the gRPC write. */
const DECISION_BUCKETS_S = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05];
const FETCH_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export type FetchResult = 'ok' | 'not_modified' | 'error';

/** What the decision metrics take of one decision; upstream only for routed ones. */
export interface DecisionTally {
  readonly outcome: string;
  readonly reason: string;
  readonly upstream: string | null;
  readonly seconds: number;
  /** Who used a skewed resource (the gate's usage table, src/gate/core/usage.ts's UsageSample); absent for the rest. */
  readonly usage?: { readonly resource: string; readonly user: string; readonly userAgent: string };
}

export interface MetricsSource {
  current(): Snapshot;
}

/** ok, not_modified (every discovery document answered 304) or error. */
/** Why a discovery round failed: a bounded label (skewgate_discovery_fetch_errors_total{reason}). */
export const FETCH_ERROR_REASONS = [
  'timeout',
  'connection',
  'tls',
  'unauthorized',
  'http_4xx',
  'http_5xx',
  'too_large',
  'malformed',
  'credentials',
  'other',
] as const;
export type FetchErrorReason = (typeof FETCH_ERROR_REASONS)[number];

/** The failure kinds (src/errors/catalog.ts) that are a reason of their own. */
const REASON_OF_KIND: Partial<Record<FailureKind, FetchErrorReason>> = {
  timeout: 'timeout',
  connection: 'connection',
  tls: 'tls',
  too_large: 'too_large',
  malformed: 'malformed',
  credentials: 'credentials',
};

/**
 * The reason of a failed round: from its requests' statuses, else from the kind of failure
 * discovery recorded with it (never from the message's text). Pure.
 */
export function fetchErrorReason(e: DiscoveryRoundEvent): FetchErrorReason {
  const failed = e.requests.find((r) => r.status !== null && r.status >= 400 && r.status !== 404);
  if (failed?.status === 401 || failed?.status === 403) return 'unauthorized';
  if (failed !== undefined) return (failed.status ?? 0) >= 500 ? 'http_5xx' : 'http_4xx';
  const kind = e.after.lastErrorKind;
  return (kind === undefined ? undefined : REASON_OF_KIND[kind]) ?? 'other';
}

export function fetchResult(e: DiscoveryRoundEvent): FetchResult {
  if (e.after.consecutiveFailures > 0) return 'error';
  const docs = documentRequests(e.requests);
  return docs.length > 0 && docs.every((r) => r.status === 304) ? 'not_modified' : 'ok';
}

export class SkewgateMetrics {
  private readonly decisions: Counter;
  private readonly decisionDuration: Histogram;
  private readonly routeErrors: Counter;
  private readonly fetchDuration: Histogram;
  private readonly fetchErrors: Counter;
  /** The last document sizes of each apiserver's round (the gauge shows the members' only). */
  private readonly documentBytes = new Map<string, ReadonlyMap<string, number>>();

  constructor(
    meter: Meter,
    source: MetricsSource,
    skew: SkewTracker,
    now: () => number = Date.now,
    fastPath: () => FastTable | null = () => null,
  ) {
    this.decisions = meter.createCounter(METRIC.decisions, {
      description: 'Routing decisions by outcome, reason and upstream (routed only)',
    });
    this.decisionDuration = meter.createHistogram(METRIC.decisionDuration, {
      description: 'Seconds from the request headers arriving to the reply handed to gRPC',
      unit: 's',
      advice: { explicitBucketBoundaries: DECISION_BUCKETS_S },
    });
    this.routeErrors = meter.createCounter(METRIC.routeErrors, { description: 'Requests whose routing failed with an internal error' });
    this.fetchDuration = meter.createHistogram(METRIC.fetchDuration, {
      description: 'Seconds per discovery round of an apiserver (/api, /apis or the legacy documents, and /readyz), by result',
      unit: 's',
      advice: { explicitBucketBoundaries: FETCH_BUCKETS_S },
    });
    this.fetchErrors = meter.createCounter(METRIC.fetchErrors, {
      description: `Failed discovery rounds per apiserver, by reason (${FETCH_ERROR_REASONS.join(', ')})`,
    });

    const viewAge = meter.createObservableGauge(METRIC.viewAge, {
      description: 'Seconds since the last good discovery view of each apiserver',
      unit: 's',
    });
    const ready = meter.createObservableGauge(METRIC.ready, {
      description: '1 when the apiserver answered /readyz with 200 at the last probe, else 0',
    });
    const info = meter.createObservableGauge(METRIC.info, {
      description:
        '1 for each apiserver whose /version skewgate read, labelled with its gitVersion (an upgrade shows as the label changing)',
    });
    const skewed = meter.createObservableGauge(METRIC.skewedResources, {
      description: 'Resources (and subresources) not served by every apiserver',
    });
    const missing = meter.createObservableGauge(METRIC.missingResources, { description: 'Skewed resources an apiserver does not serve' });
    const unmatched = meter.createObservableGauge(METRIC.unmatchedIdentities, {
      description:
        'Live apiserver identities (kube-system identity Leases) that match no configured apiserver: while above 0, no 404 is proven',
    });
    const membershipSynced = meter.createObservableGauge(METRIC.membershipSynced, {
      description: '1 when the identity Leases were listed (membership verified), 0 when the configured list is assumed complete',
    });
    const documentBytes = meter.createObservableGauge(METRIC.documentBytes, {
      description:
        'Bytes of the last /api, /apis and /openapi/v3 body each apiserver answered in full (label document: the path); ' +
        'above discovery.maxDocumentBytes discovery of that apiserver fails, above half of it skewgate warns',
      unit: 'By',
    });
    const members = meter.createObservableGauge(METRIC.members, {
      description: 'Apiservers by membership role: member (routed to), draining (left every source), probing (learnt, not verified yet)',
    });
    const cordoned = meter.createObservableGauge(METRIC.cordoned, {
      description:
        '1 for each apiserver an operator cordoned (mode cordon: it gets only what no other member serves) or drained (mode drain: nothing new)',
    });
    const fastResources = meter.createObservableGauge(METRIC.fastPathResources, {
      description:
        'Resources whose requests Envoy sends straight to the balanced pool without asking skewgate (the fast path, in the routes last written); 0: every request is asked about',
    });
    const fastGroupVersions = meter.createObservableGauge(METRIC.fastPathGroupVersions, {
      description: 'Group/versions on the fast path (served identically by every apiserver, in the routes last written)',
    });
    meter.addBatchObservableCallback(
      (r) => {
        const fast = fastPath();
        r.observe(fastResources, fast === null ? 0 : fastResourceCount(fast));
        r.observe(fastGroupVersions, fast?.groupVersions.length ?? 0);
        const snap = source.current();
        const draining = snap.servers.filter((s) => s.draining).length;
        r.observe(members, snap.servers.length - draining, { role: 'member' });
        r.observe(members, draining, { role: 'draining' });
        r.observe(members, snap.membership.probing.length, { role: 'probing' });
        const t = now();
        for (const s of snap.servers) {
          if (s.lastSuccessAt !== null) r.observe(viewAge, Math.max(0, t - s.lastSuccessAt) / 1000, { apiserver: s.name });
          if (s.ready !== null) r.observe(ready, s.ready ? 1 : 0, { apiserver: s.name });
          if (s.gitVersion !== undefined) r.observe(info, 1, { apiserver: s.name, git_version: s.gitVersion });
          if (s.cordon !== undefined) r.observe(cordoned, 1, { apiserver: s.name, mode: s.cordon });
          for (const [document, bytes] of this.documentBytes.get(s.name) ?? [])
            r.observe(documentBytes, bytes, { apiserver: s.name, document });
        }
        r.observe(skewed, skew.size);
        r.observe(unmatched, liveUnmatched(snap.membership, t).length);
        r.observe(membershipSynced, snap.membership.synced ? 1 : 0);
        for (const [name, n] of skew.missingCounts()) r.observe(missing, n, { apiserver: name });
      },
      [
        viewAge,
        ready,
        info,
        cordoned,
        skewed,
        missing,
        unmatched,
        membershipSynced,
        members,
        documentBytes,
        fastResources,
        fastGroupVersions,
      ],
    );
  }

  recordDecision(result: RoutingResult, durationNs: bigint): void {
    const d = result.decision;
    this.recordTally({
      outcome: d.outcome,
      reason: d.reason,
      upstream: d.outcome === 'routed' ? d.upstream : null,
      seconds: Number(durationNs) / 1e9,
    });
  }

  /** A decision as a worker process reports it (workers/protocol.ts): the same labels. */
  recordTally(t: DecisionTally): void {
    this.decisions.add(
      1,
      t.upstream !== null ? { outcome: t.outcome, reason: t.reason, upstream: t.upstream } : { outcome: t.outcome, reason: t.reason },
    );
    this.decisionDuration.record(t.seconds, { outcome: t.outcome });
  }

  recordRouteError(): void {
    this.routeErrors.add(1);
  }

  recordRound(e: DiscoveryRoundEvent): void {
    const result = fetchResult(e);
    this.fetchDuration.record(e.durationMs / 1000, { apiserver: e.server, result });
    if (result === 'error') this.fetchErrors.add(1, { apiserver: e.server, reason: fetchErrorReason(e) });
    if (e.documentBytes) this.documentBytes.set(e.server, e.documentBytes);
  }
}

/** The config a running skewgate holds: what the config gauges show. */
export interface ConfigState {
  /** 1 at start, one more per applied reload. */
  readonly generation: number;
  /** false after a reload was refused or failed, until one is applied or finds nothing to change. */
  readonly lastReloadSucceeded: boolean;
}

/** Config reloads (src/app/reload.ts): counted by result; the generation and the last result as gauges. */
export class ConfigMetrics {
  private readonly reloads: Counter;

  constructor(meter: Meter, state: () => ConfigState) {
    this.reloads = meter.createCounter(METRIC.configReloads, {
      description: 'Config reloads (SIGHUP or a change of the file) by result: applied, unchanged, invalid, restart_required, failed',
    });
    const generation = meter.createObservableGauge(METRIC.configGeneration, {
      description: 'The config generation running: 1 at start, one more per applied reload',
    });
    const lastSuccess = meter.createObservableGauge(METRIC.configLastReloadSuccess, {
      description: '0 when the last reload was refused or failed (the previous config still runs), else 1 (also before any reload)',
    });
    meter.addBatchObservableCallback(
      (r) => {
        const s = state();
        r.observe(generation, s.generation);
        r.observe(lastSuccess, s.lastReloadSucceeded ? 1 : 0);
      },
      [generation, lastSuccess],
    );
  }

  recordReload(result: ReloadResultName): void {
    this.reloads.add(1, { result });
  }
}
