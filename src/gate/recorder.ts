// What the gate remembers of the gateway's own decisions: every decision (this process's, through
// the observer; the worker processes', from their tallies) into the decision window, and the
// usage of skewed resources into the usage table. Kept only while an admin endpoint can be asked.
import type { DecisionContext, DecisionObserver } from '../extproc/observer.js';
import type { RoutingResult } from '../routing/router.js';
import { usageSampleOf, UsageTable, type ClientUsage, type UsageSample } from './core/usage.js';
import { DecisionWindow, type DecisionSample, type WindowSummary } from './core/window.js';

/** Past the longest window a gate may be asked about: decisions older than this are dropped. */
export const GATE_KEEP_MS = 60 * 60_000;

export class GateRecorder implements DecisionObserver {
  private readonly window: DecisionWindow;
  private readonly usage = new UsageTable();

  constructor(private readonly now: () => number = Date.now) {
    this.window = new DecisionWindow(now(), GATE_KEEP_MS);
  }

  onDecision(result: RoutingResult, ctx: DecisionContext): void {
    const d = result.decision;
    const now = this.now();
    this.window.add(now, {
      outcome: d.outcome,
      seconds: Number(ctx.durationNs) / 1e9,
      upstream: d.outcome === 'routed' ? d.upstream : null,
    });
    const u = usageSampleOf(result, ctx.headers);
    if (u !== null) this.usage.record(now, u);
  }

  onRouteError(): void {
    this.window.addRouteErrors(this.now(), 1);
  }

  /** Decisions made in the worker processes (workers/protocol.ts's tallies). */
  tallies(tallies: readonly (DecisionSample & { readonly usage?: UsageSample })[], routeErrors: number): void {
    const now = this.now();
    for (const t of tallies) {
      this.window.add(now, t);
      if (t.usage !== undefined) this.usage.record(now, t.usage);
    }
    this.window.addRouteErrors(now, routeErrors);
  }

  summary(windowMs: number): WindowSummary {
    return this.window.summary(this.now(), windowMs);
  }

  usageOf = (resource: string, since: number): readonly ClientUsage[] => this.usage.usersOf(resource, since);

  /** Clients the usage table forgot to stay bounded. */
  usageDropped(): number {
    return this.usage.dropped();
  }
}
