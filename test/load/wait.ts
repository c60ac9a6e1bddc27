// Waits on recorded events instead of sleeps: until the gateway's own log shows a change and a
// request through it proves the change in effect, or until enough answered requests of a kind
// exist for a claim. No deadline: a slow machine waits longer, and a verdict never depends on how
// long a step took. What never comes gives up on a count of requests instead (GIVE_UP_AFTER: the
// load sent that many and it still did not happen), so that the test fails saying what it awaited
// rather than running into its timeout. A progress line every 15 s says what is still awaited.
import { judge404, type AccountingRules } from './accounting.js';
import type { Clock } from './clock.js';
import { capableGaps, readGatewayView, usableFrom, usableSpans } from './gateway-view.js';
import { readySpans, type TimelineRecorder } from './timeline.js';
import type { RequestRecord, ResourceKind } from './types.js';

const STEP_MS = 100;
/** Answered requests through the arm after which a wait gives up (at 12 req/s per arm, over a minute of load). */
export const GIVE_UP_AFTER = 1000;
const SAY_EVERY_MS = 15_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(
  what: string,
  clock: Clock,
  progress: (line: string) => void,
  probe: () => Promise<T | null> | T | null,
  givenUp: () => boolean,
): Promise<T> {
  let said = clock();
  for (;;) {
    const v = await probe();
    if (v !== null) return v;
    if (givenUp()) throw new Error(`gave up waiting after ${GIVE_UP_AFTER} answered requests: ${what}`);
    if (clock() - said >= SAY_EVERY_MS) {
      progress(`still waiting: ${what}`);
      said = clock();
    }
    await sleep(STEP_MS);
  }
}

/**
 * At least `min` answered requests that `pick` selects; resolves with when the last of them ended.
 * `among`: the requests it counts against GIVE_UP_AFTER (default: every request of the run).
 */
export function untilAnswered(
  what: string,
  o: { readonly requests: () => readonly RequestRecord[]; readonly clock: Clock; readonly progress: (line: string) => void },
  pick: (r: RequestRecord) => boolean,
  min: number,
  among: (r: RequestRecord) => boolean = () => true,
): Promise<number> {
  const from = o.requests().filter(among).length;
  return until(
    `${min} ${what}`,
    o.clock,
    o.progress,
    () => {
      const rs = o.requests().filter(pick);
      return rs.length >= min ? Math.max(...rs.map((r) => r.endMs)) : null;
    },
    () => o.requests().filter(among).length - from >= GIVE_UP_AFTER,
  );
}

/**
 * The evidence an upgrade phase needs before it ends, as a wait per phase: `minSkewed` skewed
 * answers through each skewgate arm sent since it routed by the new apiserver (`since[arm]`, else
 * the phase's start), and in a mixed phase `minFalse404` of the baseline's 404s sent in the phase
 * that are false by the timeline recorded so far (accounting.ts judge404).
 */
export function phaseEvidence(o: {
  readonly waits: { readonly requests: () => readonly RequestRecord[]; readonly clock: Clock; readonly progress: (line: string) => void };
  readonly arms: readonly string[];
  readonly minSkewed: number;
  readonly mixedPhases: readonly string[];
  readonly minFalse404: number;
  readonly timeline: TimelineRecorder;
  readonly rules: AccountingRules;
}): (phase: string, since: Readonly<Record<string, number>>, phaseAt: number) => Promise<void> {
  const isFalse404 = (r: RequestRecord): boolean => {
    const tl = o.timeline.snapshot();
    return judge404(r, tl, readySpans(tl), o.rules, new Map()) !== null;
  };
  return async (phase, since, phaseAt) => {
    for (const arm of o.arms)
      await untilAnswered(
        `skewed answers through ${arm} in ${phase}`,
        o.waits,
        (r) => r.arm === arm && r.kind === 'skewed' && r.startMs >= (since[arm] ?? phaseAt),
        o.minSkewed,
        (r) => r.arm === arm,
      );
    if (!o.mixedPhases.includes(phase)) return;
    await untilAnswered(
      `false 404s through the baseline in ${phase}`,
      o.waits,
      (r) => r.arm === 'baseline' && r.status === 404 && r.startMs >= phaseAt && isFalse404(r),
      o.minFalse404,
      (r) => r.arm === 'baseline',
    );
  };
}

export interface InEffect {
  /** The gateway's log line that made the apiserver usable. */
  readonly usableAtMs: number;
  /** The end of the first 2xx of the kind through the gateway sent after it. */
  readonly inEffectAtMs: number;
}

/**
 * Until the gateway's skewgate has `server` usable (ready and a member) at or after `sinceMs` by
 * its log (read from `logFromMs`, the run's start), and a 2xx of `kind` through its arm sent after
 * that has ended.
 */
export function untilInEffect(o: {
  readonly logFile: string;
  readonly seeds: readonly string[];
  readonly server: string;
  readonly sinceMs: number;
  readonly logFromMs: number;
  readonly arm: string;
  readonly kind: ResourceKind;
  readonly requests: () => readonly RequestRecord[];
  readonly clock: Clock;
  readonly progress: (line: string) => void;
}): Promise<InEffect> {
  const mine = (r: RequestRecord): boolean => r.arm === o.arm && r.startMs >= o.sinceMs;
  return until(
    `${o.arm}'s skewgate to route ${o.kind} requests with ${o.server} usable`,
    o.clock,
    o.progress,
    async () => {
      const spans = usableSpans(await readGatewayView(o.logFile, o.logFromMs), o.seeds);
      const usableAtMs = usableFrom(spans, o.server, o.sinceMs);
      if (usableAtMs === null) return null;
      const ok = o
        .requests()
        .filter(
          (r) => r.arm === o.arm && r.kind === o.kind && r.startMs >= usableAtMs && r.status !== null && r.status >= 200 && r.status < 300,
        );
      if (ok.length === 0) return null;
      return { usableAtMs, inEffectAtMs: Math.min(...ok.map((r) => r.endMs)) };
    },
    () => o.requests().filter(mine).length >= GIVE_UP_AFTER,
  );
}

/**
 * Until the gateway's log has no apiserver that `capable` selects usable at some moment at or
 * after `sinceMs` (one server going silent, every one while etcd is away); resolves with that
 * moment, the line that opened the gap or `sinceMs` when it was open already.
 */
export function untilGap(o: {
  readonly logFile: string;
  readonly seeds: readonly string[];
  readonly capable: (server: string) => boolean;
  readonly what: string;
  readonly sinceMs: number;
  readonly logFromMs: number;
  readonly requests: () => readonly RequestRecord[];
  readonly clock: Clock;
  readonly progress: (line: string) => void;
}): Promise<number> {
  const from = o.requests().length;
  return until(
    `the gateway's log to show ${o.what}`,
    o.clock,
    o.progress,
    async () => {
      const spans = usableSpans(await readGatewayView(o.logFile, o.logFromMs), o.seeds);
      const gap = capableGaps(spans, o.capable, [], 'common').find((g) => g.loggedEndMs === null || g.loggedEndMs > o.sinceMs);
      return gap === undefined ? null : Math.max(gap.fromMs, o.sinceMs);
    },
    () => o.requests().length - from >= GIVE_UP_AFTER,
  );
}

/** Until `cond()` holds (the harness's own probes, say); gives up like the others. */
export function untilTrue(
  what: string,
  o: { readonly requests: () => readonly RequestRecord[]; readonly clock: Clock; readonly progress: (line: string) => void },
  cond: () => boolean,
): Promise<true> {
  const from = o.requests().length;
  return until(
    what,
    o.clock,
    o.progress,
    () => (cond() ? true : null),
    () => o.requests().length - from >= GIVE_UP_AFTER,
  );
}
