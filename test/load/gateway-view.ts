// What a gateway's skewgate itself believed, from the transitions it logs (src/discovery/service.ts:
// one line per change of readiness or membership, never one per poll), and the verdicts that rest
// on it. A 503 is judged against the gateway's own view in order of events, not against the
// harness's probe plus a guessed detection lag: a slow machine delays both sides alike.
//
// A logged change is in effect a moment after its line (the snapshot is built and published after
// it). When a capable apiserver comes back, the first answer of that kind through the same gateway
// sent after the line is the proof that routing uses it: it could only have been routed there by a
// snapshot that has it. Pure, but for readGatewayView.
import { readFile } from 'node:fs/promises';
import { UNAVAILABLE_REASON } from './accounting.js';
import { phaseAt, type Timeline } from './timeline.js';
import type { RequestRecord, ResourceKind } from './types.js';

/** ready/unready: its /readyz; member/draining/gone: membership; restart: a new skewgate process (the lab's run header). */
export type GatewayViewWhat = 'ready' | 'unready' | 'member' | 'draining' | 'gone' | 'restart';

export interface GatewayViewEvent {
  readonly atMs: number;
  /** skewgate's name for the apiserver (its config's, or a learnt member's); '' for restart. */
  readonly server: string;
  readonly what: GatewayViewWhat;
}

/** skewgate's log messages (src/discovery/service.ts) and what each says. */
export const GATEWAY_VIEW_LINES: Readonly<Record<string, GatewayViewWhat>> = {
  'apiserver ready': 'ready',
  'apiserver not ready (/readyz)': 'unready',
  'apiserver admitted as a member': 'member',
  'apiserver back in the members': 'member',
  'draining apiserver named by a source again: a member': 'member',
  'apiserver left every source: draining': 'draining',
  'drained apiserver removed': 'gone',
  'learnt apiserver left every source before it was a member': 'gone',
};

/** The lab's supervisor writes this before each start of a process into its (appended) log. */
const RUN_HEADER = '==== ';

/** The JSON lines of a skewgate log, parsed (other lines and bad JSON skipped). */
export function skewgateLogRecords(text: string): Record<string, unknown>[] {
  return text.split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return [];
    try {
      return [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

/** The view's events in a skewgate log (JSON lines, ISO `time`), from `sinceMs` on. */
export function gatewayViewFromLog(text: string, sinceMs = Number.NEGATIVE_INFINITY): GatewayViewEvent[] {
  const out: GatewayViewEvent[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith(RUN_HEADER)) {
      const atMs = Date.parse(line.slice(RUN_HEADER.length).split(' ')[0] ?? '');
      if (Number.isFinite(atMs) && atMs >= sinceMs) out.push({ atMs, server: '', what: 'restart' });
      continue;
    }
    if (!line.startsWith('{')) continue;
    let o: { time?: string; msg?: string; server?: string };
    try {
      o = JSON.parse(line) as typeof o;
    } catch {
      continue;
    }
    const what = o.msg === undefined ? undefined : GATEWAY_VIEW_LINES[o.msg];
    const atMs = o.time === undefined ? Number.NaN : Date.parse(o.time);
    if (what !== undefined && typeof o.server === 'string' && Number.isFinite(atMs) && atMs >= sinceMs)
      out.push({ atMs, server: o.server, what });
  }
  return out;
}

export async function readGatewayView(logFile: string, sinceMs: number): Promise<GatewayViewEvent[]> {
  return gatewayViewFromLog(await readFile(logFile, 'utf8').catch(() => ''), sinceMs);
}

/** A span in which skewgate could route to an apiserver: ready, a member, not draining. */
export interface UsableSpan {
  readonly server: string;
  readonly fromMs: number;
  /** The line that ended it; null: usable to the end. */
  readonly toMs: number | null;
}

/**
 * The spans in which each apiserver was usable in the gateway's view. `seeds`: the configured
 * apiservers, members from the start (a learnt one becomes one when admitted). A restart forgets
 * everything: the new process has probed nothing yet.
 */
export function usableSpans(events: readonly GatewayViewEvent[], seeds: readonly string[]): UsableSpan[] {
  interface State {
    ready: boolean;
    member: boolean;
    draining: boolean;
  }
  const states = new Map<string, State>();
  const open = new Map<string, number>();
  const spans: UsableSpan[] = [];
  const state = (server: string): State => {
    let s = states.get(server);
    if (s === undefined) {
      s = { ready: false, member: seeds.includes(server), draining: false };
      states.set(server, s);
    }
    return s;
  };
  const settle = (server: string, atMs: number): void => {
    const s = state(server);
    const usable = s.ready && s.member && !s.draining;
    const from = open.get(server);
    if (usable && from === undefined) open.set(server, atMs);
    if (!usable && from !== undefined) {
      spans.push({ server, fromMs: from, toMs: atMs });
      open.delete(server);
    }
  };
  for (const e of [...events].sort((a, b) => a.atMs - b.atMs)) {
    if (e.what === 'restart') {
      for (const [server, s] of states) {
        Object.assign(s, { ready: false, member: seeds.includes(server), draining: false });
        settle(server, e.atMs);
      }
      continue;
    }
    const s = state(e.server);
    if (e.what === 'ready') s.ready = true;
    else if (e.what === 'unready') s.ready = false;
    else if (e.what === 'member') Object.assign(s, { member: true, draining: false });
    else if (e.what === 'draining') s.draining = true;
    // A removed poller is gone; one learnt again starts unprobed.
    else Object.assign(s, { ready: false, member: seeds.includes(e.server), draining: false });
    settle(e.server, e.atMs);
  }
  for (const [server, from] of open) spans.push({ server, fromMs: from, toMs: null });
  return spans.sort((a, b) => a.fromMs - b.fromMs || a.server.localeCompare(b.server));
}

/** When the gateway could route a kind nowhere: no capable apiserver usable in its view. */
export interface CapableGap {
  /** The line that took the last capable one away; -Infinity: from the start. */
  readonly fromMs: number;
  /** The line that made one usable again; null: never. */
  readonly loggedEndMs: number | null;
  /** When that was in effect: the end of the first 2xx of the kind sent after loggedEndMs; Infinity without one. */
  readonly endMs: number;
}

/**
 * The gaps of one kind through one gateway. `capable(server, atMs)`: whether that apiserver (by
 * the gateway's name for it) served the kind when its usable span began. `requests`: through the
 * same gateway (its arm), the proof that a return was in effect.
 */
export function capableGaps(
  spans: readonly UsableSpan[],
  capable: (server: string, atMs: number) => boolean,
  requests: readonly RequestRecord[],
  kind: ResourceKind,
): CapableGap[] {
  const own = spans.filter((s) => capable(s.server, s.fromMs));
  // Walk the union of the capable spans; what lies between is a gap.
  const gaps: { fromMs: number; loggedEndMs: number | null }[] = [];
  let coveredTo = Number.NEGATIVE_INFINITY;
  for (const s of own) {
    if (s.fromMs > coveredTo) gaps.push({ fromMs: coveredTo, loggedEndMs: s.fromMs });
    coveredTo = Math.max(coveredTo, s.toMs ?? Number.POSITIVE_INFINITY);
  }
  if (coveredTo < Number.POSITIVE_INFINITY) gaps.push({ fromMs: coveredTo, loggedEndMs: null });
  const ok = requests.filter((r) => r.kind === kind && r.status !== null && r.status >= 200 && r.status < 300);
  return gaps.map((g) => {
    if (g.loggedEndMs === null) return { ...g, endMs: Number.POSITIVE_INFINITY };
    const from = g.loggedEndMs;
    const first = ok.filter((r) => r.startMs >= from).reduce<number>((a, r) => Math.min(a, r.endMs), Number.POSITIVE_INFINITY);
    return { ...g, endMs: first };
  });
}

/** A request that overlaps a gap: it may have been decided while the gateway had nowhere to send it. */
export function inGap(r: Pick<RequestRecord, 'startMs' | 'endMs'>, gaps: readonly CapableGap[]): boolean {
  return gaps.some((g) => r.endMs >= g.fromMs && r.startMs < g.endMs);
}

/**
 * The apiservers' own down spans, from the harness's timeline: from a stop (or a failed /readyz)
 * to its next ready; only servers that serve the kind (by the version of the event).
 */
export function downSpans(
  tl: Timeline,
  serves: (server: string, version: string) => boolean,
): { server: string; fromMs: number; toMs: number }[] {
  const out: { server: string; fromMs: number; toMs: number }[] = [];
  const open = new Map<string, number>();
  for (const e of tl.servers) {
    if ((e.what === 'stop' || e.what === 'unready') && serves(e.server, e.version) && !open.has(e.server)) open.set(e.server, e.atMs);
    if (e.what === 'ready') {
      const from = open.get(e.server);
      if (from !== undefined) out.push({ server: e.server, fromMs: from, toMs: e.atMs });
      open.delete(e.server);
    }
  }
  for (const [server, fromMs] of open) out.push({ server, fromMs, toMs: Number.POSITIVE_INFINITY });
  return out;
}

/** A 503 that neither the gateway's view nor the apiservers' own state explains. */
export interface Unexplained503 {
  readonly arm: string;
  readonly phase: string;
  readonly kind: ResourceKind;
  readonly op: string;
  readonly atMs: number;
  readonly endMs: number;
  readonly reason?: string;
  readonly detail?: string;
}

/**
 * The 503s of one gateway's requests that nothing explains. skewgate's own (its reason among
 * `reasons`, default no_healthy_capable_server) is explained only inside a gap of its kind: the
 * gateway had no capable apiserver usable. Any other (Envoy's connect or reset error, an
 * apiserver's own) also while it was in flight as an apiserver that serves the kind was down.
 */
export function unexplained503s(o: {
  readonly timeline: Timeline;
  readonly requests: readonly RequestRecord[];
  readonly gaps: Readonly<Record<ResourceKind, readonly CapableGap[]>>;
  readonly serves: Readonly<Record<ResourceKind, (server: string, version: string) => boolean>>;
  readonly reasons?: readonly string[];
}): Unexplained503[] {
  const reasons = o.reasons ?? [UNAVAILABLE_REASON];
  const down = { skewed: downSpans(o.timeline, o.serves.skewed), common: downSpans(o.timeline, o.serves.common) };
  const out: Unexplained503[] = [];
  for (const r of o.requests) {
    if (r.status !== 503) continue;
    const gap = inGap(r, o.gaps[r.kind]);
    const explained =
      r.reason !== undefined
        ? reasons.includes(r.reason) && gap
        : gap || down[r.kind].some((w) => r.startMs < w.toMs && r.endMs >= w.fromMs);
    if (explained) continue;
    out.push({
      arm: r.arm,
      phase: phaseAt(o.timeline, r.startMs),
      kind: r.kind,
      op: r.op,
      atMs: r.startMs,
      endMs: r.endMs,
      ...(r.reason !== undefined ? { reason: r.reason } : {}),
      ...(r.detail !== undefined ? { detail: r.detail } : {}),
    });
  }
  return out;
}

/** One line per unexplained 503, for an assertion's diff; times from `origin`. */
export const describe503 =
  (origin: number) =>
  (u: Unexplained503): string =>
    `${u.phase} ${u.arm} ${u.kind} ${u.op} at ${((u.atMs - origin) / 1000).toFixed(1)} s (${u.reason ?? u.detail ?? '?'})`;

/** The version each apiserver ran when, from the timeline's starts: for `capable` of a span. */
export function versionAt(tl: Timeline, server: string, atMs: number): string | undefined {
  return tl.servers.filter((e) => e.server === server && e.what === 'start' && e.atMs <= atMs).at(-1)?.version;
}

/** The first moment at or after `afterMs` at which `server` was usable in the view; null: none (yet). */
export function usableFrom(spans: readonly UsableSpan[], server: string, afterMs: number): number | null {
  const s = spans.find((x) => x.server === server && (x.toMs === null || x.toMs > afterMs));
  return s === undefined ? null : Math.max(s.fromMs, afterMs);
}

/** One gateway's gaps of both kinds, from its skewgate's log since `fromMs` and its arm's requests. */
export async function gatewayGaps(o: {
  readonly logFile: string;
  readonly fromMs: number;
  readonly seeds: readonly string[];
  readonly capable: Readonly<Record<ResourceKind, (server: string, atMs: number) => boolean>>;
  readonly requests: readonly RequestRecord[];
}): Promise<{ readonly spans: UsableSpan[]; readonly gaps: Record<ResourceKind, CapableGap[]> }> {
  const spans = usableSpans(await readGatewayView(o.logFile, o.fromMs), o.seeds);
  return {
    spans,
    gaps: {
      skewed: capableGaps(spans, o.capable.skewed, o.requests, 'skewed'),
      common: capableGaps(spans, o.capable.common, o.requests, 'common'),
    },
  };
}

/**
 * The requests certainly decided inside a gap: sent after the first answer of skewgate's own
 * `reason` sent in it had ended (the gap was in effect by then) and ended before the line that
 * closed it (a change is in effect only after its line). Empty when skewgate never answered so.
 */
export function certainlyInGap(requests: readonly RequestRecord[], gap: CapableGap, reason = UNAVAILABLE_REASON): RequestRecord[] {
  const proof = requests
    .filter((r) => r.reason === reason && r.startMs >= gap.fromMs)
    .reduce<number>((a, r) => Math.min(a, r.endMs), Number.POSITIVE_INFINITY);
  const end = gap.loggedEndMs ?? Number.POSITIVE_INFINITY;
  return requests.filter((r) => r.startMs >= proof && r.endMs < end);
}
