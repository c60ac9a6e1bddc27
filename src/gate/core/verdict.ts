// The gate (docs/design.md, "The gate"): may a rollout tool go on to the next apiserver? "proceed"
// or "hold", with every reason to hold, from what the running gateway knows — its members and
// their views, the identity Leases, its own recent decisions, the local Envoy's counters, and, for
// a named removal, who still uses what only that apiserver serves. One pure function serves the
// admin endpoint, `skewgate gate` and the Cluster API hooks. The clock comes in.
import { addressOf, type MemberRole } from '../../membership/members.js';
import { liveUnmatched } from '../../membership/identity-leases.js';
import { isFresh } from '../../routing/freshness.js';
import type { Snapshot } from '../../discovery/core/types.js';
import { total, type EnvoyCounters } from './envoy-counters.js';
import { removalReport, spanText, type RemovalReport, type UsageOf } from './removal.js';
import type { WindowSummary } from './window.js';

export interface GateSettings {
  /** How far back decisions and Envoy's counters are judged. */
  readonly windowMs: number;
  /** How far back a client's use of a resource counts as "in use". */
  readonly usageWindowMs: number;
  /** Unavailable + rejected decisions + routing errors, over decisions, above which the gate holds. */
  readonly maxErrorRate: number;
  /** The decision time's p99 above which the gate holds. */
  readonly maxDecisionLatencyMs: number;
  /** Fewer decisions than this in the window: the rate is not judged (a quiet gateway proves nothing either way). */
  readonly minDecisions: number;
}

/** What the asker names: a member that must have joined, one about to be removed, the version every member must run. */
export interface GateQuestion {
  readonly expect?: string | undefined;
  readonly removing?: string | undefined;
  /** "v1.36.3": every member's /version gitVersion (build metadata aside) must be this. */
  readonly version?: string | undefined;
}

export interface GateMember {
  readonly name: string;
  readonly url: string;
  readonly hostname?: string | undefined;
  readonly role: MemberRole;
}

export type EnvoyReading =
  { readonly ok: true; readonly since: EnvoyCounters; readonly spanMs: number } | { readonly ok: false; readonly why: string };

export interface GateInput {
  readonly now: number;
  readonly snapshot: Snapshot;
  readonly members: readonly GateMember[];
  readonly staleAfterMs: number;
  readonly window: WindowSummary;
  readonly envoy: EnvoyReading;
  readonly usageOf: UsageOf;
  readonly settings: GateSettings;
  readonly question: GateQuestion;
}

/** Why the gate holds: a literal, the same in the JSON, the CLI, the log line and the Cluster API message. */
export type GateReason =
  | 'member_not_ready'
  | 'view_not_current'
  | 'member_leaving'
  | 'member_not_verified'
  | 'unmatched_identity'
  | 'window_not_covered'
  | 'ext_proc_failures'
  | 'unexplained_503'
  | 'error_rate'
  | 'decision_latency'
  | 'version_not_reached'
  | 'expected_member_missing'
  | 'expected_member_not_current'
  | 'expected_member_not_routed'
  | 'removal_unknown_member'
  | 'removal_last_member'
  | 'removal_in_use';

export interface GateHold {
  readonly reason: GateReason;
  readonly detail: string;
}

export interface GateAnswer {
  readonly verdict: 'proceed' | 'hold';
  readonly at: string;
  readonly holds: readonly GateHold[];
  /** What was checked and found well, one line each. */
  readonly passed: readonly string[];
  /** What could not be checked, and why (no Envoy admin to read, say): not a hold, but said. */
  readonly unchecked: readonly string[];
  readonly window: {
    readonly seconds: number;
    readonly coveredSeconds: number;
    readonly decisions: number;
    readonly errors: number;
    readonly routeErrors: number;
    readonly p99DecisionMs: number | null;
    /** null when Envoy could not be read. */
    readonly extprocFailures: Readonly<Record<string, number>> | null;
    readonly unexplained503: Readonly<Record<string, number>> | null;
  };
  readonly question: GateQuestion;
  /** With `removing`: what would no longer be served, and who used it. */
  readonly removal: RemovalReport | null;
  /** How long a hook should wait before asking again. */
  readonly retryAfterSeconds: number;
}

/** A member named by its name, its hostname, host:port or host (what a rollout tool knows: a Node or Machine name, an address). */
export function findMember<M extends GateMember>(members: readonly M[], wanted: string): M | undefined {
  const byName = members.find((m) => m.name === wanted || m.hostname === wanted);
  if (byName !== undefined) return byName;
  return members.find((m) => {
    const address = addressOf(m.url);
    return address === wanted || address.slice(0, address.lastIndexOf(':')) === wanted;
  });
}

export function gateVerdict(input: GateInput): GateAnswer {
  const { snapshot: snap, now, settings: s, window: w, question: q } = input;
  const holds: GateHold[] = [];
  const passed: string[] = [];
  const unchecked: string[] = [];
  const hold = (reason: GateReason, detail: string): void => void holds.push({ reason, detail });

  // 1. Every member ready and its view current; membership settled.
  const servers = snap.servers.filter((x) => x.draining !== true);
  for (const x of servers) {
    if (x.ready !== true) hold('member_not_ready', `${x.name} is not ready${x.lastError === null ? '' : `: ${x.lastError}`}`);
    else if (!isFresh(x, now, input.staleAfterMs)) hold('view_not_current', `${x.name}'s discovery view is not current`);
  }
  for (const x of snap.servers.filter((y) => y.draining === true))
    hold('member_leaving', `${x.name} left every membership source and is draining`);
  for (const p of snap.membership.probing)
    hold('member_not_verified', `${p.name} (${p.url}) is being verified${p.problem === null ? '' : `: ${p.problem}`}`);
  const unseen = liveUnmatched(snap.membership, now);
  for (const l of unseen)
    hold(
      'unmatched_identity',
      `a live apiserver identity (${l.name}${l.hostname === null ? '' : `, host ${l.hostname}`}) matches no member`,
    );
  if (holds.length === 0)
    passed.push(`${servers.length} member${servers.length === 1 ? '' : 's'} ready with current views; no apiserver unaccounted for`);

  // 2. The recent window: skewgate's own decisions, and Envoy's counters.
  const before = holds.length;
  if (w.coveredMs < w.windowMs)
    hold(
      'window_not_covered',
      `this gateway has recorded ${Math.floor(w.coveredMs / 1000)}s of the ${Math.round(w.windowMs / 1000)}s window`,
    );
  const failed = w.errors + w.routeErrors;
  if (w.routeErrors > 0)
    hold('ext_proc_failures', `${w.routeErrors} request${w.routeErrors === 1 ? '' : 's'} skewgate failed to route in the window`);
  if (w.decisions >= s.minDecisions && failed / w.decisions > s.maxErrorRate)
    hold(
      'error_rate',
      `${failed} of ${w.decisions} decisions answered 503/4xx or failed (${pct(failed / w.decisions)}), above ${pct(s.maxErrorRate)}`,
    );
  else if (w.decisions < s.minDecisions) unchecked.push(`error rate: ${w.decisions} decisions in the window, fewer than ${s.minDecisions}`);
  if (w.p99Ms !== null && w.p99Ms > s.maxDecisionLatencyMs)
    hold('decision_latency', `p99 decision time ≤ ${w.p99Ms} ms, above ${s.maxDecisionLatencyMs} ms`);
  const envoy = input.envoy;
  if (envoy.ok) {
    const ext = total(envoy.since.extproc);
    if (ext > 0) hold('ext_proc_failures', `Envoy: ${described(envoy.since.extproc)} in the last ${Math.round(envoy.spanMs / 1000)}s`);
    const u503 = total(envoy.since.unexplained503);
    if (u503 > 0)
      hold('unexplained_503', `Envoy: ${described(envoy.since.unexplained503)} in the last ${Math.round(envoy.spanMs / 1000)}s`);
  } else unchecked.push(`Envoy's counters (ext_proc failures, 503s skewgate did not answer): ${envoy.why}`);
  if (holds.length === before)
    passed.push(
      `the last ${Math.round(w.windowMs / 1000)}s: ${w.decisions} decisions, ${failed} failed, p99 ≤ ${w.p99Ms ?? 0} ms${envoy.ok ? '; Envoy saw no ext_proc failure and no 503 skewgate did not answer' : ''}`,
    );

  // 2b. A version every member must run (a control plane upgrade finished).
  if (q.version !== undefined) {
    const want = normalVersion(q.version);
    const behind = servers.filter((x) => x.gitVersion === undefined || normalVersion(x.gitVersion) !== want);
    if (behind.length > 0)
      hold(
        'version_not_reached',
        `not every member runs ${q.version}: ${behind.map((x) => `${x.name} ${x.gitVersion ?? '(version not read)'}`).join(', ')}`,
      );
    else passed.push(`every member runs ${q.version}`);
  }

  // 3. A named new member: joined, discovered, routed to.
  const members = input.members;
  if (q.expect !== undefined) {
    const m = findMember(members, q.expect);
    const state = m === undefined ? undefined : snap.servers.find((x) => x.name === m.name);
    if (m === undefined || m.role === 'probing' || m.role === 'joining' || state === undefined)
      hold(
        'expected_member_missing',
        m === undefined ? `${q.expect} is not an apiserver of this gateway` : `${m.name} is ${m.role}, not yet a member`,
      );
    else if (state.ready !== true || !isFresh(state, now, input.staleAfterMs))
      hold('expected_member_not_current', `${m.name} is a member, but not ready with a current view`);
    else {
      const sent = routedTo(m, w, envoy);
      if (sent === 0)
        hold(
          'expected_member_not_routed',
          `no request has reached ${m.name} through this gateway in the window${envoy.ok ? '' : ' (Envoy not read: only requests skewgate routed count)'}`,
        );
      else passed.push(`${m.name} joined, discovered and sent ${sent} request${sent === 1 ? '' : 's'} in the window`);
    }
  }

  // 4. A named removal: not the last member, nothing it alone serves still in use.
  let removal: RemovalReport | null = null;
  if (q.removing !== undefined) {
    const m = findMember(members, q.removing);
    if (m === undefined) hold('removal_unknown_member', `${q.removing} is not an apiserver of this gateway`);
    else {
      const readyOthers = servers.filter((x) => x.name !== m.name && x.ready === true);
      if (readyOthers.length === 0) hold('removal_last_member', `${m.name} is the only ready member: nothing would serve after it`);
      removal = removalReport(snap, m.name, {
        now,
        staleAfterMs: input.staleAfterMs,
        usageWindowMs: s.usageWindowMs,
        usageOf: input.usageOf,
      });
      const used = removal.resources.filter((r) => r.users.length > 0);
      if (used.length > 0)
        hold(
          'removal_in_use',
          `${used.length} resource${used.length === 1 ? '' : 's'} only ${m.name} serves ${used.length === 1 ? 'is' : 'are'} in use: ${used
            .slice(0, 5)
            .map((r) => `${r.resource} (${r.users.map((u) => u.user).join(', ')})`)
            .join('; ')}`,
        );
      else
        passed.push(
          removal.resources.length === 0
            ? `every resource ${m.name} serves is served by another member`
            : `${removal.resources.length} resource${removal.resources.length === 1 ? '' : 's'} only ${m.name} serves, none used in the last ${spanText(s.usageWindowMs)}`,
        );
    }
  }

  return {
    verdict: holds.length === 0 ? 'proceed' : 'hold',
    at: new Date(now).toISOString(),
    holds,
    passed,
    unchecked,
    window: {
      seconds: Math.round(w.windowMs / 1000),
      coveredSeconds: Math.floor(w.coveredMs / 1000),
      decisions: w.decisions,
      errors: w.errors,
      routeErrors: w.routeErrors,
      p99DecisionMs: w.p99Ms,
      extprocFailures: envoy.ok ? Object.fromEntries(envoy.since.extproc) : null,
      unexplained503: envoy.ok ? Object.fromEntries(envoy.since.unexplained503) : null,
    },
    question: q,
    removal,
    // Often enough to move on soon after the cause clears; a window's tenth, within [5, 30] s.
    retryAfterSeconds: Math.min(30, Math.max(5, Math.round(s.windowMs / 10_000))),
  };
}

/** Requests sent to a member: Envoy's per-host counts when read, else what skewgate routed to it. */
function routedTo(m: GateMember, w: WindowSummary, envoy: EnvoyReading): number {
  const own = w.routedTo.get(m.name) ?? 0;
  if (!envoy.ok) return own;
  // Envoy names a host by its address and, for a DNS name, by that name too (envoy-counters.ts).
  const n = envoy.since.hostRequests.get(addressOf(m.url)) ?? 0;
  return Math.max(n, own);
}

/** "1.36.3", "v1.36.3+k3s1" → "v1.36.3": build metadata is not the version. */
function normalVersion(v: string): string {
  const bare = v.trim().split('+')[0] ?? '';
  return bare.startsWith('v') ? bare : `v${bare}`;
}

function described(m: ReadonlyMap<string, number>): string {
  return [...m]
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} +${n}`)
    .join(', ');
}

function pct(x: number): string {
  return `${(x * 100).toFixed(x < 0.01 ? 2 : 1)}%`;
}
