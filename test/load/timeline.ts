// The ground truth of a run: when each phase began and when each apiserver was stopped, started
// and seen ready. Pure: the clock is injected; the accounting judges every 404 against this.

/** `unready`: its /readyz failed while it ran (etcd away, packets dropped); `ready` again when it passes. */
export type ServerEventKind = 'stop' | 'stopped' | 'start' | 'ready' | 'unready';

export interface ServerEvent {
  readonly atMs: number;
  readonly server: string;
  readonly version: string;
  readonly what: ServerEventKind;
}

export interface PhaseMark {
  readonly atMs: number;
  readonly phase: string;
}

export interface Timeline {
  readonly phases: readonly PhaseMark[];
  readonly servers: readonly ServerEvent[];
}

/** A span in which one apiserver (one version) was ready: from `ready` to the next `stop` or `unready`. */
export interface ReadySpan {
  readonly server: string;
  readonly version: string;
  readonly readyAtMs: number;
  /** When the stop was issued; null while it still runs. */
  readonly downAtMs: number | null;
}

export class TimelineRecorder {
  private readonly phaseMarks: PhaseMark[] = [];
  private readonly events: ServerEvent[] = [];

  constructor(private readonly clock: () => number) {}

  phase(name: string): number {
    const atMs = this.clock();
    this.phaseMarks.push({ atMs, phase: name });
    return atMs;
  }

  server(server: string, version: string, what: ServerEventKind, atMs = this.clock()): number {
    this.events.push({ atMs, server, version, what });
    return atMs;
  }

  snapshot(): Timeline {
    return {
      phases: [...this.phaseMarks].sort((a, b) => a.atMs - b.atMs),
      servers: [...this.events].sort((a, b) => a.atMs - b.atMs),
    };
  }
}

/** The phase a moment belongs to; moments before the first mark belong to the first phase. */
export function phaseAt(tl: Timeline, atMs: number): string {
  let current = tl.phases[0]?.phase ?? 'all';
  for (const p of tl.phases) {
    if (p.atMs <= atMs) current = p.phase;
    else break;
  }
  return current;
}

export function phaseNames(tl: Timeline): string[] {
  const names: string[] = [];
  for (const p of tl.phases) if (!names.includes(p.phase)) names.push(p.phase);
  return names.length > 0 ? names : ['all'];
}

export function readySpans(tl: Timeline): ReadySpan[] {
  const spans: ReadySpan[] = [];
  const open = new Map<string, { version: string; readyAtMs: number }>();
  for (const e of tl.servers) {
    if (e.what === 'ready') {
      if (!open.has(e.server)) open.set(e.server, { version: e.version, readyAtMs: e.atMs });
    } else if (e.what === 'stop' || e.what === 'unready') {
      const o = open.get(e.server);
      if (o) spans.push({ server: e.server, version: o.version, readyAtMs: o.readyAtMs, downAtMs: e.atMs });
      open.delete(e.server);
    }
  }
  for (const [server, o] of open) spans.push({ server, version: o.version, readyAtMs: o.readyAtMs, downAtMs: null });
  return spans.sort((a, b) => a.readyAtMs - b.readyAtMs);
}

/**
 * For how long, at `atMs`, the longest-ready apiserver that serves the resource has been ready
 * (and not being stopped); -Infinity when none is ready. `serves` says which server/version
 * serves it.
 */
export function capableReadyForMs(spans: readonly ReadySpan[], atMs: number, serves: (server: string, version: string) => boolean): number {
  let best = Number.NEGATIVE_INFINITY;
  for (const s of spans) {
    if (!serves(s.server, s.version)) continue;
    if (s.readyAtMs > atMs) continue;
    if (s.downAtMs !== null && s.downAtMs <= atMs) continue;
    best = Math.max(best, atMs - s.readyAtMs);
  }
  return best;
}

/** Milliseconds between two events, for the timings table; null when either is missing. */
export function eventTime(tl: Timeline, server: string, what: ServerEventKind, afterMs = Number.NEGATIVE_INFINITY): number | null {
  return tl.servers.find((e) => e.server === server && e.what === what && e.atMs >= afterMs)?.atMs ?? null;
}

/** A span in which every one of a set of apiservers failed /readyz; `endMs` is the first `ready` after it (null: never). */
export interface AllUnreadySpan {
  readonly startMs: number;
  readonly endMs: number | null;
}

/**
 * The spans within [fromMs, toMs] in which every one of `servers` was unready (its last readiness
 * event `unready` or `stop`), in order. A server's state at `fromMs` is its last event before it
 * (ready when it has none). An apiserver may flap ready for one probe mid-outage: that splits the
 * outage into two spans, each begun by the event that made the last server unready.
 */
export function allUnreadySpans(tl: Timeline, servers: readonly string[], fromMs: number, toMs: number): AllUnreadySpan[] {
  const down = new Map<string, boolean>(servers.map((s) => [s, false]));
  const allDown = (): boolean => servers.length > 0 && [...down.values()].every(Boolean);
  const readiness = tl.servers.filter((e) => down.has(e.server) && e.atMs <= toMs && e.what !== 'start' && e.what !== 'stopped');
  const apply = (e: ServerEvent): void => void down.set(e.server, e.what !== 'ready');
  for (const e of readiness) if (e.atMs < fromMs) apply(e);
  const spans: AllUnreadySpan[] = [];
  let openAt: number | null = allDown() ? fromMs : null;
  for (const e of readiness) {
    if (e.atMs < fromMs) continue;
    apply(e);
    if (openAt === null && allDown()) openAt = e.atMs;
    else if (openAt !== null && !allDown()) {
      spans.push({ startMs: openAt, endMs: e.atMs });
      openAt = null;
    }
  }
  if (openAt !== null) spans.push({ startMs: openAt, endMs: null });
  return spans;
}

/**
 * When `server` became ready for the rest of [fromMs, toMs]: its last readiness event in the range
 * is `ready`. Null when it ends the range unready, or had no readiness event in it.
 */
export function readyForGoodAt(tl: Timeline, server: string, fromMs: number, toMs: number): number | null {
  const last = tl.servers
    .filter((e) => e.server === server && e.atMs >= fromMs && e.atMs <= toMs && e.what !== 'start' && e.what !== 'stopped')
    .at(-1);
  return last?.what === 'ready' ? last.atMs : null;
}
