// (f) The arms of the stall bench and how its windows are judged. Pure but for the arms' settings.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Section, TargetRow } from './report.js';
import type { StallChildStart } from './protocol.js';
import { fmt } from './stats.js';
import { pairedDifferences, summariseRounds } from './verdict.js';
import type { Doc } from './stall-documents.js';

/** The bound on the event loop while a document is absorbed: a fifth of the message timeout. */
export const LOOP_BOUND_MS = 100;

export interface StallArm {
  readonly name: string;
  /** What the child starts with, over the bench's defaults. */
  readonly start: Partial<StallChildStart>;
  readonly execArgv: readonly string[];
  /** The child module: this tree's, or a file URL into another build (the code before). */
  readonly childModule: string;
  /** The arm the targets judge; the others are shown beside it. */
  readonly judged: boolean;
}

/**
 * The shipped code, and beside it, when STALL_BASELINE_DIST names a build of an earlier commit
 * (bench/stall-baseline.sh: its src/, this bench's child), that code on the same documents.
 */
export function stallArms(): readonly StallArm[] {
  const shipped: StallArm = { name: 'shipped', start: {}, execArgv: [], childModule: './stall-child.js', judged: true };
  const dist = process.env.STALL_BASELINE_DIST;
  if (!dist) return [shipped];
  const label = process.env.STALL_BASELINE_LABEL ?? 'before';
  return [
    shipped,
    { name: label, start: {}, execArgv: [], childModule: pathToFileURL(join(dist, 'bench', 'stall-child.js')).href, judged: false },
  ];
}

/** One change of one apiserver's /apis, from 1 s before it to 1 s after the child shows it. */
export interface Window {
  readonly arm: string;
  readonly kind: string;
  readonly round: number;
  readonly step: string;
  /** The child holds the new view, or refused the document (one more failed round). */
  readonly outcome: 'view' | 'refused';
  readonly probes: number;
  readonly maxMs: number;
  readonly overTimeout: number;
  /** Probes without a reply (a gRPC error or a rejected call): failures, not latencies. */
  readonly failed: number;
  readonly failures: string;
  readonly falseNotFound: number;
  readonly loopDelayMaxMs: number;
  readonly gcMaxMs: number;
  readonly gcMaxKind: string;
  readonly absorbMs: number;
  /** Bytes: the child's RSS 2 s after it started (median of 5 samples, a second apart). */
  readonly startRss: number;
  /**
   * Bytes: before the sequence (typical view), the peak within the window, 3 s after it. Steady:
   * the fresh child's is its start; the long-running one's, once its RSS levelled off.
   */
  readonly steadyRss: number;
  readonly peakRss: number;
  readonly settleRss: number;
  /** After the last change: when the RSS was back within 10 % of steady (from the change), NaN if not within SETTLE_MS. */
  readonly settledAfterMs: number;
  /** After the last change, with the probe stopped: the RSS within SETTLE_MS, and when it was within 10 % (NaN: not). */
  readonly idleSettleRss: number;
  readonly idleSettledAfterMs: number;
  /** Bytes, when settled: V8's heap in use and its size, and memory outside it. */
  readonly settleHeapUsed: number;
  readonly settleHeapTotal: number;
  readonly settleExternal: number;
  /** V8's heap in use after a forced full GC (only with --expose-gc in the child). */
  readonly liveHeap?: number;
}

const mib = (b: number): string => fmt(b / 2 ** 20);

export function judgeStall(o: {
  readonly windows: readonly Window[];
  readonly typical: Doc;
  readonly largest: Doc;
  readonly past: Doc;
  readonly maxBytes: number;
  readonly maxEntries: number;
  readonly probeRate: number;
  readonly messageTimeoutMs: number;
}): Section {
  const judged = new Set(
    stallArms()
      .filter((a) => a.judged)
      .map((a) => a.name),
  );
  const mine = o.windows.filter((w) => judged.has(w.arm));
  const worstLoop = mine.reduce((a, w) => Math.max(a, w.loopDelayMaxMs), 0);
  const worstAnswer = mine.reduce((a, w) => Math.max(a, w.maxMs), 0);
  const timeouts = mine.reduce((a, w) => a + w.overTimeout + w.failed, 0);
  const false404 = mine.reduce((a, w) => a + w.falseNotFound, 0);
  const PAST = 'past the bounds';
  const wrong = mine.filter((w) => (w.step === PAST) !== (w.outcome === 'refused')).length;
  const pastOnes = mine.filter((w) => w.step === PAST);
  const peakRatio = mine.reduce((a, w) => Math.max(a, w.peakRss / w.steadyRss), 0);
  // The settle is judged where "steady" is one: the long-running child's RSS once it levelled off.
  // A fresh child's start is not (it grows by itself under the probe for about a minute): shown.
  const back = mine.filter((w) => w.step === 'typical again' && w.kind === 'long-running');
  const settleRatio = back.reduce((a, w) => Math.max(a, w.settleRss / w.steadyRss), 0);
  const settleTimes = back.map((w) => (Number.isNaN(w.settledAfterMs) ? 'not within 30 s' : `${fmt(w.settledAfterMs / 1000)} s`));
  const idleRatio = back.reduce((a, w) => Math.max(a, w.idleSettleRss / w.steadyRss), 0);
  const idleTimes = back.map((w) => (Number.isNaN(w.idleSettledAfterMs) ? 'not within 30 s' : `${fmt(w.idleSettledAfterMs / 1000)} s`));
  const freshBack = mine.filter((w) => w.step === 'typical again' && w.kind === 'fresh');
  const levelled = (w: Window): Window | undefined => back.find((x) => x.round === w.round && x.arm === w.arm);
  const freshRows = freshBack.map((w) => {
    const l = levelled(w);
    return `${mib(w.settleRss)} MiB: ${fmt(w.settleRss / w.startRss)} × its start (${mib(w.startRss)})${l === undefined ? '' : `, ${fmt(w.settleRss / l.steadyRss)} × the levelled-off one of its round (${mib(l.steadyRss)})`}`;
  });
  const grown = back.map((w) => `${mib(w.startRss)} → ${mib(w.steadyRss)}`);
  // Paired as in the other benchmarks: each window of the judged arm against the same window (round,
  // process, change) of the code before, run next to it; information, the bound above is the verdict.
  const others = o.windows.filter((w) => !judged.has(w.arm));
  const pairs = mine.flatMap((w) => {
    const b = others.find((x) => x.round === w.round && x.kind === w.kind && x.step === w.step);
    return b === undefined ? [] : [[w.loopDelayMaxMs, b.loopDelayMaxMs] as const];
  });
  const paired = summariseRounds(
    pairedDifferences(
      pairs.map((p) => p[0]),
      pairs.map((p) => p[1]),
    ),
  );
  const targets: TargetRow[] = [
    {
      metric: 'worst event-loop delay while a document is absorbed or refused (every window, every sequence)',
      target: `≤ ${LOOP_BOUND_MS} ms; every document within the bounds taken, the one past them refused`,
      measured: `${fmt(worstLoop)} ms over ${mine.length} windows (worst answer ${fmt(worstAnswer)} ms); ${pastOnes.length} refusals, ${wrong} window(s) with the other outcome`,
      met: mine.length > 0 && worstLoop <= LOOP_BOUND_MS && wrong === 0 && pastOnes.length > 0,
    },
    {
      metric: 'ext_proc answers past the message timeout or without a reply; false 404s',
      target: '0 and 0',
      measured: `${timeouts} and ${false404}`,
      met: mine.length > 0 && timeouts === 0 && false404 === 0,
    },
    ...(pairs.length === 0
      ? []
      : [
          {
            metric: `event-loop delay max, ${[...judged].join(', ')} − ${others[0]?.arm ?? ''}, window by window (paired)`,
            target: 'information',
            measured: `median ${fmt(paired.median)} ms over ${paired.rounds} paired windows; worst ${fmt(paired.worst)} ms (pair ${paired.worstRound}); the shipped code worse in ${paired.positive} of ${paired.rounds}`,
            met: null,
          },
        ]),
    {
      metric: 'peak RSS while absorbing, against the steady RSS with a typical view',
      target: '≤ 4 ×',
      measured: `${fmt(peakRatio)} × at worst`,
      met: mine.length > 0 && peakRatio <= 4,
    },
    {
      metric:
        'RSS once the view is typical again (median of 5 s, followed for 30 s under the probe), against the steady RSS before the sequence (the long-running child, its RSS levelled off)',
      target: '≤ 1.1 ×',
      measured: `${fmt(settleRatio)} × at worst (${back.length} sequences; within 10 % after ${settleTimes.join(', ')}; steady: ${grown.join(', ')} MiB from start)`,
      met: back.length > 0 && settleRatio <= 1.1,
    },
    {
      metric: 'the same, then 30 s more with the probe stopped',
      target: '≤ 1.1 ×',
      measured: `${fmt(idleRatio)} × at worst (within 10 % after ${idleTimes.join(', ')} idle)`,
      met: back.length > 0 && idleRatio <= 1.1,
    },
    {
      metric: 'the fresh child once typical again (its start is not a steady RSS)',
      target: 'information',
      measured: freshRows.join('; '),
      met: null,
    },
  ];
  return {
    id: 'f',
    title: 'the request path while a large discovery change is absorbed',
    method:
      `Three apiservers (static HTTPS fakes in the bench process) serve a typical aggregated /apis (${fmt(o.typical.resources)} resources, ${mib(o.typical.body.length)} MiB: 60 CRD groups). ` +
      `skewgate's discovery service (1 s polls), its skew tracking and its ext_proc server run in a child process; the bench sends ${o.probeRate} ext_proc requests/s and measures each answer from its due time to the reply (then half-closes, as Envoy does). ` +
      `One apiserver's /apis then changes five times: typical (a resource more in every 7th group) → the largest document the default bounds accept (discovery.maxDocumentBytes ${mib(o.maxBytes)} MiB, discovery.maxResources ${fmt(o.maxEntries)}: ${fmt(o.largest.resources)} resources, 50 to a group, each padded with a distinct shortName to fill ${mib(o.largest.body.length)} MiB) → the largest again (every resource renamed) → a document past the bounds (${fmt(o.past.resources)} lean resources, ${mib(o.past.body.length)} MiB, as in the probe behind issue 31) → typical again; ` +
      'each window runs from 1 s before the change to 1 s after the child shows it (or counts it refused). ' +
      `The sequence runs in a fresh child, and in one that has first run under the probe with a typical change every 5 s until its RSS levelled off (10 s blocks, the median of one within 2 % of the one before; 30–150 s): the steady gateway. Arms alternate within each round, their order rotated every round; every window of the judged arm is judged, none pooled. ` +
      "Event-loop delay is the child's own (perf_hooks, 5 ms resolution); the longest GC pause is the child's PerformanceObserver's; RSS from /proc (peak: VmHWM, reset at each window's start; steady and settle: medians of 5 samples a second apart, as the RSS follows V8's collections in a sawtooth). The last change's window lasts until the settle, at least 15 s: the two collections skewgate asks for once a large view is dropped (src/memory/, 5 and 10 s after) are judged with it.",
    targets,
    tables: [
      {
        headers: [
          'arm',
          'process',
          'round',
          'change',
          'probes',
          'max ms',
          `> ${o.messageTimeoutMs} ms`,
          'no reply',
          'false 404',
          'loop delay max ms',
          'longest GC ms',
          'absorbed after ms',
          'RSS start / steady / peak / settle MiB',
          'settled heap used / total, external MiB',
        ],
        rows: o.windows.map((w) => [
          w.arm,
          w.kind,
          String(w.round),
          w.outcome === 'refused' ? `${w.step} (refused)` : w.step,
          String(w.probes),
          fmt(w.maxMs),
          String(w.overTimeout),
          w.failed === 0 ? '0' : `${w.failed} (${w.failures})`,
          String(w.falseNotFound),
          fmt(w.loopDelayMaxMs),
          `${fmt(w.gcMaxMs)} (${w.gcMaxKind})`,
          fmt(w.absorbMs),
          `${mib(w.startRss)} / ${mib(w.steadyRss)} / ${mib(w.peakRss)} / ${mib(w.settleRss)}`,
          `${mib(w.settleHeapUsed)} / ${mib(w.settleHeapTotal)}, ${mib(w.settleExternal)}${w.liveHeap === undefined ? '' : ` (live ${mib(w.liveHeap)})`}`,
        ]),
      },
    ],
    notes: [`Judged arm(s): ${[...judged].join(', ')}.`],
  };
}
