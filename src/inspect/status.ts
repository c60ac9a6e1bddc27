// Pure: what a running gateway believes at one moment — its members and their readiness, each
// view's age and source, the snapshot and config generations, the skew — as GET /v1/status
// answers it and `skewgate status` prints it. Process facts and the clock come in.
import type { ErrorCode } from '../errors/catalog.js';
import type { Snapshot } from '../discovery/core/types.js';
import type { MemberRole } from '../membership/members.js';
import { isFresh, isHealthy } from '../routing/freshness.js';
import { skewReport, type SkewReport } from './skew-report.js';
import type { Cordon, CordonMode } from '../cordon/core/cordons.js';

/** One apiserver skewgate polls, as discovery's member list and the snapshot know it. */
export interface StatusMember {
  readonly name: string;
  readonly url: string;
  readonly role: MemberRole;
  /** Configured in apiservers[] (else learnt from a membership source). */
  readonly seed: boolean;
  readonly sources: readonly string[];
  /** An operator's cordon, as Envoy has it (routing's is the snapshot's). */
  readonly cordon?: CordonMode;
}

export interface StatusInput {
  readonly version: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly now: number;
  readonly configSource: string;
  readonly configGeneration: number;
  readonly staleAfterMs: number;
  readonly snapshot: Snapshot;
  readonly members: readonly StatusMember[];
  readonly cordons: readonly Cordon[];
}

export interface MemberStatus extends Omit<StatusMember, 'cordon'> {
  /** In the snapshot: routed to when healthy (probing and joining members are not yet). */
  readonly inSnapshot: boolean;
  readonly ready: boolean | null;
  readonly healthy: boolean;
  readonly fresh: boolean;
  readonly viewSource: 'aggregated' | 'legacy' | null;
  readonly viewAgeMs: number | null;
  /** Its /version's gitVersion, as last read (null until read). */
  readonly gitVersion: string | null;
  readonly consecutiveFailures: number;
  readonly lastError: string | null;
  /** The last failure's code (src/errors/catalog.ts: what it means, what to do); null when none. */
  readonly lastErrorCode: ErrorCode | null;
  /** An operator's cordon as routing has it (null: none). */
  readonly cordon: CordonMode | null;
}

export interface GatewayStatus {
  readonly skewgate: { readonly version: string; readonly pid: number; readonly startedAt: string; readonly uptimeSeconds: number };
  readonly config: { readonly source: string; readonly generation: number };
  readonly snapshot: { readonly generation: number };
  readonly members: readonly MemberStatus[];
  /** Who cordoned what, when and why (src/cordon/). */
  readonly cordons: readonly Cordon[];
  readonly skew: SkewReport;
  /** What an operator should look at (a member not ready, a view not fresh, skew not compared); empty when none. */
  readonly problems: readonly string[];
}

export function gatewayStatus(input: StatusInput): GatewayStatus {
  const { snapshot, now } = input;
  const byName = new Map(snapshot.servers.map((s) => [s.name, s]));
  const members = input.members.map((m): MemberStatus => {
    const s = byName.get(m.name);
    const { cordon: envoyCordon, ...rest } = m;
    return {
      ...rest,
      inSnapshot: s !== undefined,
      ready: s?.ready ?? null,
      healthy: s !== undefined && isHealthy(s),
      fresh: s !== undefined && isFresh(s, now, input.staleAfterMs),
      viewSource: s?.view?.source ?? null,
      viewAgeMs: s?.lastSuccessAt == null ? null : now - s.lastSuccessAt,
      gitVersion: s?.gitVersion ?? null,
      consecutiveFailures: s?.consecutiveFailures ?? 0,
      lastError: s?.lastError ?? null,
      lastErrorCode: s?.lastErrorCode ?? null,
      cordon: s !== undefined ? (s.cordon ?? null) : (envoyCordon ?? null),
    };
  });
  const skew = skewReport(snapshot, now, null);
  const problems = [
    ...members
      // Drained by an operator is not unhealthy: its readiness is its own.
      .filter((m) => m.role === 'member' && m.ready !== true)
      .map((m) => `${m.name} is not ready${m.lastError === null ? '' : `: ${m.lastError}`}`),
    ...members
      .filter((m) => m.role === 'member' && m.ready === true && !m.fresh)
      .map(
        (m) =>
          `${m.name}'s view is not fresh${m.viewAgeMs === null ? ' (none yet)' : ` (${Math.round(m.viewAgeMs / 1000)}s old)`}: no 404 is answered from it`,
      ),
    ...members.filter((m) => m.role === 'probing' || m.role === 'joining').map((m) => `${m.name} is not a member yet (${m.role})`),
    ...skew.notCompared.filter((n) => !n.member).map((n) => `${n.name}: ${n.error}`),
  ];
  return {
    skewgate: {
      version: input.version,
      pid: input.pid,
      startedAt: new Date(input.startedAt).toISOString(),
      uptimeSeconds: Math.round((now - input.startedAt) / 1000),
    },
    config: { source: input.configSource, generation: input.configGeneration },
    snapshot: { generation: snapshot.generation },
    members,
    cordons: input.cordons,
    skew,
    problems,
  };
}
