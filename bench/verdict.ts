// How a target is judged, for every benchmark section that measures in rounds. Pure.
//
// A verdict is never taken from a pooled percentile: a few stalled rounds dominate a pooled p99
// of every arm alike and can hide an arm that was worse in nearly every round. The verdict is the
// median over rounds of the paired difference (arm − baseline in the same round), and the worst
// round's difference is reported beside it. Failed requests (transport errors, timeouts, answers
// other than the expected one, requests still unanswered when the window closed) count against
// every verdict of the arm: a target is met only when there were none.
import type { TargetRow } from './report.js';
import { fmt } from './stats.js';

/** Requests of one arm that did not get the expected answer. */
export interface Failures {
  /** Transport errors other than timeouts (reset, refused, TLS, …). */
  readonly errors: number;
  /** Client timeouts (headers, body, connect). */
  readonly timeouts: number;
  /** Answered, but not with the expected status (or not by the expected server). */
  readonly unexpected: number;
  /** Sent, but neither answered nor failed when the window was closed. */
  readonly unanswered: number;
}

export const NO_FAILURES: Failures = { errors: 0, timeouts: 0, unexpected: 0, unanswered: 0 };

export function addFailures(a: Failures, b: Failures): Failures {
  return {
    errors: a.errors + b.errors,
    timeouts: a.timeouts + b.timeouts,
    unexpected: a.unexpected + b.unexpected,
    unanswered: a.unanswered + b.unanswered,
  };
}

export const failureTotal = (f: Failures): number => f.errors + f.timeouts + f.unexpected + f.unanswered;

/** "no failed requests" or "3 failed: 2 errors, 1 unanswered" (only the non-zero kinds). */
export function formatFailures(f: Failures): string {
  const total = failureTotal(f);
  if (total === 0) return 'no failed requests';
  const parts = (
    [
      ['errors', f.errors],
      ['timeouts', f.timeouts],
      ['unexpected status', f.unexpected],
      ['unanswered', f.unanswered],
    ] as const
  )
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n.toLocaleString('en-US')} ${k}`);
  return `${total.toLocaleString('en-US')} failed: ${parts.join(', ')}`;
}

/** The median of the values (the mean of the two middle ones for an even count); NaN when empty or any is NaN. */
export function median(values: readonly number[]): number {
  if (values.length === 0 || values.some((v) => !Number.isFinite(v))) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** A figure per round: its median, and the worst (largest) round. */
export interface RoundSummary {
  readonly rounds: number;
  /** NaN when a round has no figure (e.g. nothing answered in it). */
  readonly median: number;
  readonly worst: number;
  /** 1-based. */
  readonly worstRound: number;
  /** Rounds whose figure is > 0 (for a paired difference: the arm was worse). */
  readonly positive: number;
  /** Rounds without a finite figure. */
  readonly missing: number;
}

export function summariseRounds(values: readonly number[]): RoundSummary {
  let worst = Number.NaN;
  let worstRound = 0;
  let positive = 0;
  let missing = 0;
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) {
      missing++;
      return;
    }
    if (v > 0) positive++;
    if (Number.isNaN(worst) || v > worst) {
      worst = v;
      worstRound = i + 1;
    }
  });
  return { rounds: values.length, median: median(values), worst, worstRound, positive, missing };
}

/** Per round, arm − baseline; NaN where either is missing. The arrays must have the same length. */
export function pairedDifferences(arm: readonly number[], baseline: readonly number[]): number[] {
  if (arm.length !== baseline.length) throw new Error(`paired rounds differ in number: ${arm.length} vs ${baseline.length}`);
  return arm.map((x, i) => x - (baseline[i] as number));
}

const signed = (v: number, unit: string): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${fmt(v)} ${unit}` : 'n/a');

export interface PairedTarget {
  readonly metric: string;
  /** The largest median difference that meets the target. */
  readonly limit: number;
  readonly unit: string;
  /** The arm's figure per round, and the baseline's in the same rounds. */
  readonly arm: readonly number[];
  readonly baseline: readonly number[];
  /** Pooled figures over all rounds (arm, baseline): shown for information, never judged. */
  readonly pooled?: { readonly arm: number; readonly baseline: number };
  /** The arm's failed requests, and the baseline's (a comparison with a baseline that failed requests is no comparison). */
  readonly failures: Failures;
  readonly baselineFailures: Failures;
}

/**
 * A target on the difference an arm adds over its baseline: met when the median over rounds of the
 * paired difference is within the limit, every round has a figure, and neither arm failed a request.
 */
export function judgePaired(t: PairedTarget): TargetRow {
  const s = summariseRounds(pairedDifferences(t.arm, t.baseline));
  const clean = failureTotal(t.failures) === 0 && failureTotal(t.baselineFailures) === 0;
  const met = clean && s.missing === 0 && Number.isFinite(s.median) && s.median <= t.limit;
  const parts = [
    `${signed(s.median, t.unit)} median of ${s.rounds} rounds' paired differences`,
    `worst round ${s.worstRound > 0 ? `${s.worstRound}: ${signed(s.worst, t.unit)}` : 'n/a'}`,
    `arm worse in ${s.positive} of ${s.rounds}`,
  ];
  if (s.missing > 0) parts.push(`${s.missing} round(s) without a figure`);
  if (t.pooled !== undefined)
    parts.push(
      `pooled, not judged: ${signed(t.pooled.arm - t.pooled.baseline, t.unit)} (${fmt(t.pooled.arm)} vs ${fmt(t.pooled.baseline)})`,
    );
  parts.push(`arm: ${formatFailures(t.failures)}`, `baseline: ${formatFailures(t.baselineFailures)}`);
  return {
    metric: t.metric,
    target: `≤ ${t.limit} ${t.unit} (median of paired rounds, no failed request)`,
    measured: parts.join('; '),
    met,
  };
}

export interface RoundsTarget {
  readonly metric: string;
  readonly limit: number;
  readonly unit: string;
  /** The figure per round (an absolute target: no baseline). */
  readonly values: readonly number[];
  /** Over all rounds, for information. */
  readonly pooled?: number;
  readonly failures: Failures;
}

/** An absolute target judged on the median over rounds; the worst round reported; no failed request allowed. */
export function judgeRounds(t: RoundsTarget): TargetRow {
  const s = summariseRounds(t.values);
  const met = failureTotal(t.failures) === 0 && s.missing === 0 && Number.isFinite(s.median) && s.median <= t.limit;
  const parts = [
    `${fmt(s.median)} ${t.unit} median of ${s.rounds} rounds`,
    `worst round ${s.worstRound > 0 ? `${s.worstRound}: ${fmt(s.worst)} ${t.unit}` : 'n/a'}`,
  ];
  if (s.missing > 0) parts.push(`${s.missing} round(s) without a figure`);
  if (t.pooled !== undefined) parts.push(`all rounds together: ${fmt(t.pooled)} ${t.unit}`);
  parts.push(formatFailures(t.failures));
  return { metric: t.metric, target: `≤ ${t.limit} ${t.unit} (median of rounds, no failed request)`, measured: parts.join('; '), met };
}

/** A count that must be zero (false 404s, streams that should not exist), with the arm's other failures against it too. */
export function judgeZero(metric: string, counted: number, what: string, failures: Failures): TargetRow {
  return {
    metric,
    target: '0, and no failed request',
    measured: `${counted.toLocaleString('en-US')} ${what}; ${formatFailures(failures)}`,
    met: counted === 0 && failureTotal(failures) === 0,
  };
}
