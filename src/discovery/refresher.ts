// When every apiserver is fetched again out of turn: on refresh() (bursts coalesce into one round
// per server), and after a CRD or APIService watch event — at once, then after each of
// WATCH_FOLLOW_UPS_MS, since a real apiserver publishes a new CRD in discovery shortly after the
// watch event, not with it.
export const WATCH_FOLLOW_UPS_MS: readonly number[] = [250, 750];

export class Refresher {
  private queued = false;
  private followUps: NodeJS.Timeout[] = [];

  constructor(
    /** Kicks every poller. */
    private readonly kickAll: () => void,
    /** False before start and after close: nothing is scheduled then. */
    private readonly live: () => boolean,
  ) {}

  /** Every server again now (also one in failure backoff); bursts coalesce. */
  refresh(): void {
    if (!this.live() || this.queued) return;
    this.queued = true;
    setImmediate(() => {
      this.queued = false;
      this.kickAll();
    });
  }

  /** A watch event: a refresh now and the follow-ups (the previous event's, if pending, replaced). */
  afterWatchEvent(): void {
    this.refresh();
    this.cancel();
    this.followUps = WATCH_FOLLOW_UPS_MS.map((ms) => {
      const t = setTimeout(() => this.refresh(), ms);
      t.unref();
      return t;
    });
  }

  /** Idempotent. */
  cancel(): void {
    for (const t of this.followUps) clearTimeout(t);
    this.followUps = [];
  }
}
