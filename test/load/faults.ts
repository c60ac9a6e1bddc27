// The account of a fault phase, per arm: what was sent, what failed and why, the longest request,
// what was in flight when the fault struck, and how long new requests kept failing. Pure: the
// load's records and the fault's marks in, rows out (the per-phase false 404s and writes come
// from accounting.ts).
import { isProblem, problemCause } from './accounting.js';
import { phaseAt, type Timeline } from './timeline.js';
import type { RequestRecord } from './types.js';

/** When a phase's fault struck and, if it was undone, when. */
export interface FaultMark {
  readonly phase: string;
  /** The fault injected (signal sent, rules added, etcd stopped). */
  readonly faultAtMs: number;
  /** The fault complete (the process gone); default faultAtMs. A request is in flight at the fault when it spans [faultAtMs, faultDoneMs]. */
  readonly faultDoneMs?: number;
  /** The fault undone (process restarted and ready, rules removed, etcd started); none: left to heal alone. */
  readonly repairAtMs?: number;
}

export interface FaultRow {
  readonly phase: string;
  readonly arm: string;
  readonly requests: number;
  /** Answers other than 2xx and 404 and requests without one, plus `failing` 404s (false ones). */
  readonly failed: number;
  readonly failedBy: ReadonlyMap<string, number>;
  readonly inFlightAtFault: number;
  readonly failedInFlight: number;
  /** Failed requests sent after the fault had struck (not in flight at it). */
  readonly failedAfterFault: number;
  /** Failed requests sent after the repair. */
  readonly failedAfterRepair: number;
  /** The longest request (watches excluded: they stream), ms; and which. */
  readonly maxMs: number;
  readonly maxWhat: string;
  /**
   * How long new requests kept failing: from the fault to the start of the last failed request
   * sent after it (0: none failed). Requests that hung are in maxMs, not here.
   */
  readonly recoverMs: number;
  /** The same from the repair; null without one. */
  readonly recoverAfterRepairMs: number | null;
}

export function faultRows(o: {
  readonly timeline: Timeline;
  readonly requests: readonly RequestRecord[];
  readonly marks: readonly FaultMark[];
  /** A 404 that is a failure (accounting.ts judge404). */
  readonly false404: (r: RequestRecord) => boolean;
}): FaultRow[] {
  const rows: FaultRow[] = [];
  const arms = [...new Set(o.requests.map((r) => r.arm))].sort();
  for (const m of o.marks) {
    const doneMs = m.faultDoneMs ?? m.faultAtMs;
    for (const arm of arms) {
      const rs = o.requests.filter((r) => r.arm === arm && phaseAt(o.timeline, r.startMs) === m.phase);
      const failing = (r: RequestRecord): boolean => isProblem(r) || (r.status === 404 && o.false404(r));
      const failed = rs.filter(failing);
      const inFlight = (r: RequestRecord): boolean => r.startMs <= doneMs && r.endMs >= m.faultAtMs;
      const failedBy = new Map<string, number>();
      for (const r of failed) {
        const cause = r.status === 404 ? '404 (false)' : problemCause(r);
        failedBy.set(cause, (failedBy.get(cause) ?? 0) + 1);
      }
      const after = failed.filter((r) => r.startMs > doneMs);
      const lastAfter = Math.max(Number.NEGATIVE_INFINITY, ...after.map((r) => r.startMs));
      const timed = rs.filter((r) => r.op !== 'watch');
      const longest = timed.reduce<RequestRecord | undefined>(
        (a, r) => (a === undefined || r.endMs - r.startMs > a.endMs - a.startMs ? r : a),
        undefined,
      );
      const afterRepair = m.repairAtMs === undefined ? [] : failed.filter((r) => r.startMs > (m.repairAtMs as number));
      rows.push({
        phase: m.phase,
        arm,
        requests: rs.length,
        failed: failed.length,
        failedBy,
        inFlightAtFault: rs.filter(inFlight).length,
        failedInFlight: failed.filter(inFlight).length,
        failedAfterFault: after.length,
        failedAfterRepair: afterRepair.length,
        maxMs: longest === undefined ? 0 : longest.endMs - longest.startMs,
        maxWhat: longest === undefined ? '—' : `${longest.kind} ${longest.op} ${longest.status ?? longest.error ?? '?'}`,
        recoverMs: after.length === 0 ? 0 : lastAfter - m.faultAtMs,
        recoverAfterRepairMs:
          m.repairAtMs === undefined ? null : afterRepair.length === 0 ? 0 : Math.max(...afterRepair.map((r) => r.startMs)) - m.repairAtMs,
      });
    }
  }
  return rows;
}
