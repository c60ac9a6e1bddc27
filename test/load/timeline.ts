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
