// A node's Lease renewals as the apiservers recorded them (their audit logs: each successful update
// of kube-node-lease/<node>, stamped by the apiserver that stored it), and the lags between them:
// how long the node went without a renewal. A node whose Lease is older than its duration (40 s)
// is marked NotReady by kube-controller-manager. Pure.
import type { ServerAuditEvent } from '../../harness/lab/audit-events.js';

export interface Renewal {
  readonly at: number;
  readonly server: string;
}

export interface LagSummary {
  readonly renewals: number;
  /** Updates of the Lease an apiserver answered with anything but 200 (a conflict, a 5xx). */
  readonly failed: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly maxMs: number;
  /** The renewal that ended the longest lag (epoch ms), for a timeline. */
  readonly maxEndedAt: number;
}

const leasePath = (node: string): string => `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${node}`;

/** The node's renewals from `fromMs` on, in the order the apiservers stored them. */
export function leaseRenewals(events: Iterable<ServerAuditEvent>, node: string, fromMs: number): { renewals: Renewal[]; failed: number } {
  const renewals: Renewal[] = [];
  let failed = 0;
  for (const { server, event: e } of events) {
    if (e.stage !== 'ResponseComplete' || e.verb !== 'update' || e.requestURI?.split('?')[0] !== leasePath(node)) continue;
    const at = Date.parse(e.stageTimestamp ?? '');
    if (!Number.isFinite(at) || at < fromMs) continue;
    if (e.responseStatus?.code === 200) renewals.push({ at, server });
    else failed++;
  }
  renewals.sort((a, b) => a.at - b.at);
  return { renewals, failed };
}

/** The nearest-rank quantile of sorted values. */
function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

/**
 * The lags between consecutive renewals, and the last one's age at `untilMs` (a node that stopped
 * renewing shows here, not only between renewals).
 */
export function lagSummary(renewals: readonly Renewal[], failed: number, untilMs: number): LagSummary {
  const lags: { ms: number; endedAt: number }[] = [];
  for (let i = 1; i < renewals.length; i++) {
    const a = renewals[i - 1];
    const b = renewals[i];
    if (a !== undefined && b !== undefined) lags.push({ ms: b.at - a.at, endedAt: b.at });
  }
  const last = renewals.at(-1);
  if (last !== undefined && untilMs > last.at) lags.push({ ms: untilMs - last.at, endedAt: untilMs });
  const sorted = lags.map((x) => x.ms).sort((a, b) => a - b);
  const worst = lags.reduce<{ ms: number; endedAt: number } | undefined>((w, x) => (w === undefined || x.ms > w.ms ? x : w), undefined);
  return {
    renewals: renewals.length,
    failed,
    p50Ms: quantile(sorted, 0.5),
    p90Ms: quantile(sorted, 0.9),
    maxMs: worst?.ms ?? 0,
    maxEndedAt: worst?.endedAt ?? 0,
  };
}
