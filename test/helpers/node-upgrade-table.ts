// The node-upgrade results table (bench/RESULTS.md): one row per node, what the upgrade did to it.
// Pure.
import type { Table } from '../../bench/report.js';
import type { LagSummary } from './lease-renewals.js';

export interface NodeArmResult {
  /** How the node reached the control plane. */
  readonly label: string;
  readonly readyByPhase: readonly string[];
  /** The Ready condition's lastTransitionTime when it changed during the run, else undefined. */
  readonly flippedAt: string | undefined;
  readonly lag: LagSummary | undefined;
  readonly podRestarts: number | undefined;
  readonly podMovedOrEvicted: boolean;
  readonly kubelet404: number;
  readonly checksOk: number;
  readonly checks: number;
  readonly sessionsEnded: number;
  readonly sessionsEndedAtOwnStop: number;
  readonly restartsSurvived: number;
}

const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

export function nodeArmTable(rows: readonly NodeArmResult[]): Table {
  return {
    headers: [
      'node through',
      'Ready (P0–P3)',
      'Ready flipped',
      'renewals',
      'failed',
      'lag p50',
      'lag p90',
      'lag max',
      'pod restarts',
      'pod moved or evicted',
      '404 to the kubelet',
      'streaming checks',
      "open sessions ended (at their apiserver's stop)",
      "open sessions over another's restart",
    ],
    rows: rows.map((r) => [
      r.label,
      r.readyByPhase.join(' '),
      r.flippedAt === undefined ? 'no' : `yes (${r.flippedAt})`,
      String(r.lag?.renewals ?? 0),
      String(r.lag?.failed ?? 0),
      sec(r.lag?.p50Ms ?? 0),
      sec(r.lag?.p90Ms ?? 0),
      sec(r.lag?.maxMs ?? 0),
      String(r.podRestarts ?? '?'),
      r.podMovedOrEvicted ? 'yes' : 'no',
      String(r.kubelet404),
      `${r.checksOk}/${r.checks}`,
      `${r.sessionsEnded} (${r.sessionsEndedAtOwnStop})`,
      String(r.restartsSurvived),
    ]),
  };
}
