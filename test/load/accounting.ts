// The per-phase, per-arm account of a run: requests, status codes, false 404s, lost and duplicated
// writes, watch events and interruptions. Pure: records + timeline + final listing in, numbers out.
import type { FinalObject, RequestRecord, ResourceKind, WatchRecord } from './types.js';
import { capableReadyForMs, phaseAt, phaseNames, readySpans } from './timeline.js';
import type { ReadySpan, Timeline } from './timeline.js';

export interface AccountingRules {
  /** Which apiserver (name, version) serves each kind of resource. */
  readonly serves: Readonly<Record<ResourceKind, (server: string, version: string) => boolean>>;
  /** A 404 is false once a capable apiserver has been ready this long (docs/design.md, invariant 1: 1 s). */
  readonly graceMs: number;
}

export type False404Why = 'capable_server_ready' | 'acknowledged_object';

export interface False404 {
  readonly arm: string;
  readonly phase: string;
  readonly kind: ResourceKind;
  readonly op: string;
  readonly atMs: number;
  readonly why: False404Why;
  readonly name?: string;
  /** How long the capable apiserver had been ready, ms. */
  readonly capableReadyForMs: number;
  /** skewgate's reason when skewgate answered itself. */
  readonly reason?: string;
  readonly auditId?: string;
  /** acknowledged_object: the Audit-ID of the create that acknowledged the object. */
  readonly createdAuditId?: string;
}

export interface WriteProblem {
  readonly arm: string;
  readonly phase: string;
  readonly kind: ResourceKind;
  readonly token: string;
  readonly name?: string;
  /** lost: acknowledged but absent; duplicated: the same token stored more than once. */
  readonly problem: 'lost' | 'duplicated';
  readonly copies: number;
}

export interface ArmPhaseRow {
  readonly phase: string;
  readonly arm: string;
  readonly requests: number;
  /** Status code (or "no answer") → count. */
  readonly statuses: ReadonlyMap<string, number>;
  readonly skewedRequests: number;
  readonly skewedOk: number;
  readonly commonRequests: number;
  readonly commonOk: number;
  readonly false404s: number;
  readonly true404s: number;
  /** Requests without any HTTP answer. */
  readonly noAnswer: number;
  readonly server5xx: number;
  readonly createsAcked: number;
  /** Creates without an acknowledgement (error or 5xx) whose object exists anyway. */
  readonly unackedPersisted: number;
  readonly lostWrites: number;
  readonly duplicatedWrites: number;
  readonly watchEvents: number;
  readonly watchInterruptions: number;
  /** Answers other than 2xx and 404, and requests without an answer, by cause ("503 envoy: no healthy upstream"). */
  readonly problems: ReadonlyMap<string, number>;
}

export interface Accounting {
  readonly phases: readonly string[];
  readonly arms: readonly string[];
  readonly rows: readonly ArmPhaseRow[];
  readonly false404s: readonly False404[];
  readonly writeProblems: readonly WriteProblem[];
  /** Acknowledged creates that a watch of the same arm and kind never reported. */
  readonly watchMissed: ReadonlyMap<string, number>;
}

export const NO_ANSWER = 'no answer';

/** An answer other than 2xx and 404, or none at all (404s are judged apart: judge404). */
export function isProblem(r: Pick<RequestRecord, 'status'>): boolean {
  return r.status === null || !((r.status >= 200 && r.status < 300) || r.status === 404);
}

/** "503 skewgate: no_healthy_capable_server", "no answer: ECONNRESET": who said what. */
export function problemCause(r: Pick<RequestRecord, 'status' | 'error' | 'detail'>): string {
  return r.status === null ? `${NO_ANSWER}: ${r.error ?? '?'}` : `${r.status} ${r.detail ?? ''}`.trim();
}

const ok = (s: number | null): boolean => s !== null && s >= 200 && s < 300;
const key = (...parts: string[]): string => parts.join('\u0000');

/** The acknowledged creates: status 2xx with the name the apiserver gave. */
function acknowledged(records: readonly RequestRecord[]): RequestRecord[] {
  return records.filter((r) => r.op === 'create' && ok(r.status) && r.name !== undefined && r.token !== undefined);
}

/** Whether a 404 was false: a capable apiserver had been ready long enough, or the object was acknowledged. */
export function judge404(
  r: RequestRecord,
  tl: Timeline,
  spans: readonly ReadySpan[],
  rules: AccountingRules,
  acked: ReadonlyMap<string, { readonly atMs: number; readonly auditId?: string }>,
): False404 | null {
  if (r.status !== 404) return null;
  const readyFor = capableReadyForMs(spans, r.startMs, rules.serves[r.kind]);
  const base = {
    arm: r.arm,
    phase: phaseAt(tl, r.startMs),
    kind: r.kind,
    op: r.op,
    atMs: r.startMs,
    capableReadyForMs: readyFor,
    ...(r.name !== undefined ? { name: r.name } : {}),
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    ...(r.auditId !== undefined ? { auditId: r.auditId } : {}),
  };
  if (r.name !== undefined && r.op !== 'create') {
    const ack = acked.get(key(r.arm, r.kind, r.name));
    if (ack !== undefined && ack.atMs <= r.startMs)
      return { ...base, why: 'acknowledged_object', ...(ack.auditId !== undefined ? { createdAuditId: ack.auditId } : {}) };
  }
  if (readyFor >= rules.graceMs) return { ...base, why: 'capable_server_ready' };
  return null;
}

export function account(o: {
  readonly timeline: Timeline;
  readonly requests: readonly RequestRecord[];
  readonly watch: readonly WatchRecord[];
  /** Every object of the run's arms, listed directly from an apiserver at the end. */
  readonly final: readonly FinalObject[];
  readonly rules: AccountingRules;
}): Accounting {
  const tl = o.timeline;
  const phases = phaseNames(tl);
  const arms = [...new Set([...o.requests.map((r) => r.arm), ...o.watch.map((w) => w.arm)])].sort();

  const acks = acknowledged(o.requests);
  const ackedAt = new Map<string, { atMs: number; auditId?: string }>();
  for (const a of acks)
    ackedAt.set(key(a.arm, a.kind, a.name as string), { atMs: a.endMs, ...(a.auditId !== undefined ? { auditId: a.auditId } : {}) });

  const false404s: False404[] = [];
  const false404Of = new Set<RequestRecord>();
  const spans = readySpans(tl);
  for (const r of o.requests) {
    const f = judge404(r, tl, spans, o.rules, ackedAt);
    if (f) {
      false404s.push(f);
      false404Of.add(r);
    }
  }

  // Writes: the final listing, by token.
  const copies = new Map<string, FinalObject[]>();
  for (const f of o.final) {
    if (f.token === undefined) continue;
    const k = key(f.kind, f.token);
    const list = copies.get(k) ?? [];
    list.push(f);
    copies.set(k, list);
  }
  const createOf = new Map<string, RequestRecord>();
  for (const r of o.requests) if (r.op === 'create' && r.token !== undefined) createOf.set(key(r.kind, r.token), r);

  const writeProblems: WriteProblem[] = [];
  for (const a of acks) {
    const found = copies.get(key(a.kind, a.token as string)) ?? [];
    const same = found.filter((f) => f.name === a.name && f.arm === a.arm);
    if (same.length === 0)
      writeProblems.push({
        arm: a.arm,
        phase: phaseAt(tl, a.startMs),
        kind: a.kind,
        token: a.token as string,
        name: a.name as string,
        problem: 'lost',
        copies: found.length,
      });
  }
  for (const [k, found] of copies) {
    if (found.length < 2) continue;
    const first = found[0] as FinalObject;
    const c = createOf.get(k);
    writeProblems.push({
      arm: first.arm,
      phase: c ? phaseAt(tl, c.startMs) : 'unknown',
      kind: first.kind,
      token: first.token as string,
      problem: 'duplicated',
      copies: found.length,
    });
  }

  // Watch coverage: every acknowledged create should have been seen by the arm's watch of that kind.
  const seen = new Set<string>();
  const watched = new Set<string>();
  for (const w of o.watch) {
    watched.add(key(w.arm, w.kind));
    if (w.name !== undefined && (w.type === 'ADDED' || w.type === 'MODIFIED')) seen.add(key(w.arm, w.kind, w.name));
  }
  const watchMissed = new Map<string, number>();
  for (const a of acks) {
    if (!watched.has(key(a.arm, a.kind))) continue;
    if (!seen.has(key(a.arm, a.kind, a.name as string)))
      watchMissed.set(`${a.arm}/${a.kind}`, (watchMissed.get(`${a.arm}/${a.kind}`) ?? 0) + 1);
  }

  const rows: ArmPhaseRow[] = [];
  for (const phase of phases) {
    for (const arm of arms) {
      const rs = o.requests.filter((r) => r.arm === arm && phaseAt(tl, r.startMs) === phase);
      const statuses = new Map<string, number>();
      for (const r of rs) {
        const s = r.status === null ? NO_ANSWER : String(r.status);
        statuses.set(s, (statuses.get(s) ?? 0) + 1);
      }
      const creates = rs.filter((r) => r.op === 'create');
      const causes = new Map<string, number>();
      for (const r of rs) {
        if (!isProblem(r)) continue;
        const cause = problemCause(r);
        causes.set(cause, (causes.get(cause) ?? 0) + 1);
      }
      const ws = o.watch.filter((w) => w.arm === arm && phaseAt(tl, w.atMs) === phase);
      const problems = writeProblems.filter((p) => p.arm === arm && p.phase === phase);
      rows.push({
        phase,
        arm,
        requests: rs.length,
        statuses,
        skewedRequests: rs.filter((r) => r.kind === 'skewed').length,
        skewedOk: rs.filter((r) => r.kind === 'skewed' && ok(r.status)).length,
        commonRequests: rs.filter((r) => r.kind === 'common').length,
        commonOk: rs.filter((r) => r.kind === 'common' && ok(r.status)).length,
        false404s: rs.filter((r) => false404Of.has(r)).length,
        true404s: rs.filter((r) => r.status === 404 && !false404Of.has(r)).length,
        noAnswer: rs.filter((r) => r.status === null).length,
        server5xx: rs.filter((r) => r.status !== null && r.status >= 500).length,
        createsAcked: creates.filter((r) => ok(r.status)).length,
        unackedPersisted: creates.filter(
          (r) => !ok(r.status) && r.token !== undefined && (copies.get(key(r.kind, r.token))?.length ?? 0) > 0,
        ).length,
        lostWrites: problems.filter((p) => p.problem === 'lost').length,
        duplicatedWrites: problems.filter((p) => p.problem === 'duplicated').length,
        watchEvents: ws.filter((w) => w.type !== 'END' && w.type !== 'BOOKMARK').length,
        watchInterruptions: ws.filter((w) => w.type === 'END').length,
        problems: causes,
      });
    }
  }
  return { phases, arms, rows, false404s, writeProblems, watchMissed };
}

/** Sums of a column over the phases of one arm (or of all rows when arm is undefined). */
export function total(
  a: Accounting,
  column: 'requests' | 'false404s' | 'lostWrites' | 'duplicatedWrites' | 'noAnswer' | 'server5xx' | 'createsAcked',
  arm?: string,
  phases?: readonly string[],
): number {
  let n = 0;
  for (const r of a.rows) if ((arm === undefined || r.arm === arm) && (phases === undefined || phases.includes(r.phase))) n += r[column];
  return n;
}

/** skewgate's reason on its own 503: no apiserver that could serve the request is ready. */
export const UNAVAILABLE_REASON = 'no_healthy_capable_server';
