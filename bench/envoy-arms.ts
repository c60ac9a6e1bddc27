// (c) what every arm of the Envoy bench keeps per window and per path, shared by the rates' rounds
// (envoy-bench.ts) and the restart phase (envoy-restart.ts).
import type { EnvoyArm } from './protocol.js';
import { addFailures, type Failures } from './verdict.js';

export const ARMS: readonly EnvoyArm[] = ['baseline', 'every', 'fast'];
export const EXTPROC_ARMS: readonly EnvoyArm[] = ['every', 'fast'];
export const ARM_LABEL: Record<EnvoyArm, string> = {
  baseline: 'bare Envoy (baseline)',
  every: 'ext_proc every request',
  fast: 'fast path',
};

export interface PathStats {
  readonly latNs: number[];
  readonly statuses: Map<string, number>;
  readonly servers: Map<string, number>;
  readonly errors: Map<string, number>;
  /** Answers other than the expected one for the arm and path ("503 from edge (no apiserver)"). */
  readonly unexpected: Map<string, number>;
  sent: number;
  /** Errors whose code says timeout (undici's headers / body / connect timeouts). */
  timeouts: number;
  /** Sent but neither answered nor failed when the window was closed. */
  unanswered: number;
}

/** One measured window of one arm. */
export interface RoundFigures {
  readonly commonP50Ms: number;
  readonly commonP99Ms: number;
  readonly skewedP50Ms: number;
  readonly skewedP99Ms: number;
  readonly envoyCpuPerReqUs: number;
  readonly nodeCpuPerReqUs: number;
  /** Failed requests of the window (errors, timeouts, unexpected answers, unanswered). */
  readonly failed: number;
}

export interface ArmStats {
  readonly common: PathStats;
  readonly skewed: PathStats;
  /** Scheduled send → actual send: the generator's own lateness. */
  readonly lagNs: number[];
  sent: number;
  completed: number;
  wallNs: number;
  envoyCpuUs: number;
  nodeCpuUs: number;
  genCpuUs: number;
  /** ext_proc streams its Envoy started over the measured windows. */
  streams: number;
  /** The CPU-bound neighbour's CPU time over the measured windows, and the windows' length (contended windows only). */
  neighbourCpuUs: number;
  measuredNs: number;
  readonly rounds: RoundFigures[];
}

export const newPath = (): PathStats => ({
  latNs: [],
  statuses: new Map(),
  servers: new Map(),
  errors: new Map(),
  unexpected: new Map(),
  sent: 0,
  timeouts: 0,
  unanswered: 0,
});
export const newArm = (): ArmStats => ({
  common: newPath(),
  skewed: newPath(),
  lagNs: [],
  sent: 0,
  completed: 0,
  wallNs: 0,
  envoyCpuUs: 0,
  nodeCpuUs: 0,
  genCpuUs: 0,
  streams: 0,
  neighbourCpuUs: 0,
  measuredNs: 0,
  rounds: [],
});

export const sumValues = (m: ReadonlyMap<string, number>): number => [...m.values()].reduce((x, y) => x + y, 0);

/** A path's failed requests: errors (timeouts apart), unexpected answers, unanswered ones. */
export function pathFailures(ps: PathStats): Failures {
  return {
    errors: sumValues(ps.errors) - ps.timeouts,
    timeouts: ps.timeouts,
    unexpected: sumValues(ps.unexpected),
    unanswered: ps.unanswered,
  };
}
export const armFailures = (s: ArmStats): Failures => addFailures(pathFailures(s.common), pathFailures(s.skewed));

/** Streams the common path caused in the windows: each skewed request meets ext_proc once in both ext_proc arms. */
export const commonStreams = (s: ArmStats): number => s.streams - s.skewed.sent;
