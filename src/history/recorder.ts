// The history the admin endpoint answers (GET /v1/history, `skewgate history`): the last
// transitions of the running gateway's members and of the skew, oldest first, in a bounded list.
// It follows the published snapshots; the skew is recomputed only when a view changed, in slices
// (util/slice-runner.ts), so the request path never waits on it.
import type { Snapshot } from '../discovery/core/types.js';
import { SkewTracker } from '../telemetry/core/skew-diff.js';
import { runSliced } from '../util/slice-runner.js';
import { cordonTransition, serverTransitions, type HistoryEvent } from './core/transitions.js';
import type { CordonChange } from '../cordon/core/cordons.js';

/** Transitions kept: an upgrade of a few apiservers writes tens; a flapping one is cut to the latest. */
export const HISTORY_CAPACITY = 500;
/** Resources named per skew transition (the counts say the rest). */
const SKEW_SAMPLE = 5;

export interface HistoryAnswer {
  readonly capacity: number;
  /** Events dropped from the front since start (the list keeps the latest `capacity`). */
  readonly dropped: number;
  readonly events: readonly HistoryEvent[];
}

export class HistoryRecorder {
  private readonly events: HistoryEvent[] = [];
  private dropped = 0;
  private last: Snapshot | null = null;
  private readonly skew = new SkewTracker();
  private skewStarted = false;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly capacity = HISTORY_CAPACITY,
  ) {}

  /** A published snapshot: its transitions now, the skew's once computed (in order). */
  observe(snap: Snapshot): void {
    const prev = this.last;
    this.last = snap;
    this.add(serverTransitions(prev?.servers ?? null, snap.servers, this.now()));
    this.chain = this.chain
      .then(async () => {
        const first = !this.skewStarted;
        this.skewStarted = true;
        const change = await runSliced(this.skew.updateSteps(snap));
        const at = new Date(this.now()).toISOString();
        // The tracker reports no change for its first look: a skew already there is one from nothing.
        if (first && this.skew.size > 0)
          this.add([{ at, kind: 'skew', before: 0, after: this.skew.size, newlySkewed: [], noLongerSkewed: [] }]);
        if (change === null) return;
        this.add([
          {
            at,
            kind: 'skew',
            before: change.before,
            after: change.after,
            newlySkewed: change.newlySkewed.slice(0, SKEW_SAMPLE),
            noLongerSkewed: change.noLongerSkewed.slice(0, SKEW_SAMPLE),
          },
        ]);
      })
      .catch(() => undefined);
  }

  /** An operator's cordon change (src/app/cordon-control.ts), with who asked. */
  cordonChanged(c: CordonChange): void {
    const e = cordonTransition(c, this.now());
    if (e !== null) this.add([e]);
  }

  /** Resolves once every observed snapshot's skew is in (tests). */
  settled(): Promise<void> {
    return this.chain;
  }

  answer(): HistoryAnswer {
    return { capacity: this.capacity, dropped: this.dropped, events: [...this.events] };
  }

  private add(events: readonly HistoryEvent[]): void {
    this.events.push(...events);
    const over = this.events.length - this.capacity;
    if (over > 0) {
      this.events.splice(0, over);
      this.dropped += over;
    }
  }
}
