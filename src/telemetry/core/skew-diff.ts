// How the skew between apiservers changed from one snapshot to the next: which resources became
// served by only some apiservers, and which stopped being so. No I/O.
import type { ServerView, Snapshot } from '../../discovery/core/types.js';
import { runToEnd, sortSteps, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';
import { computeSkewSteps, type SkewRow } from '../../routing/skew.js';

export interface SkewChange {
  readonly before: number;
  readonly after: number;
  /** "group/version/resource missing from a,b", sorted: skewed now, not before. */
  readonly newlySkewed: readonly string[];
  readonly noLongerSkewed: readonly string[];
  /** "group/version/resource missing from a,b (was c)": skewed before and now, missing from other apiservers. */
  readonly changed: readonly string[];
}

/** "apps/v1/deployments", "v1/pods/resize" for the core group. */
export function resourceLabel(row: Pick<SkewRow, 'group' | 'version' | 'resource'>): string {
  return row.group === '' ? `${row.version}/${row.resource}` : `${row.group}/${row.version}/${row.resource}`;
}

/** Label → the apiservers it is missing from; a pause point every STEP_EVERY rows. */
function* rowMapSteps(rows: readonly SkewRow[]): Sliced<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as SkewRow;
    out.set(resourceLabel(r), r.missingFrom.join(','));
    if (i % STEP_EVERY === STEP_EVERY - 1) yield;
  }
  return out;
}

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Remembers the last skew; recomputes it only when some apiserver's view object changed (the
 * discovery client keeps the same object while nothing changes, so most rounds cost nothing).
 */
export class SkewTracker {
  private views: readonly (ServerView | null)[] = [];
  private rows = new Map<string, string>();
  private counts = new Map<string, number>();
  private initialised = false;

  /** The current skew: every resource not served by all apiservers, and what each one lacks. */
  get size(): number {
    return this.rows.size;
  }

  /** Per apiserver: how many skewed resources it does not serve. */
  missingCounts(): ReadonlyMap<string, number> {
    return this.counts;
  }

  /**
   * The change since the previous call, or null when there is none (or on the first call). Calls
   * must not overlap: the caller runs them one after the other.
   */
  *updateSteps(snap: Snapshot): Sliced<SkewChange | null> {
    const views = snap.servers.map((s) => s.view);
    if (this.initialised && views.length === this.views.length && views.every((v, i) => v === this.views[i])) return null;
    const rows = yield* computeSkewSteps(snap);
    this.views = views;
    // Every step in slices: a view of a quarter of a million resources comes and goes here too.
    const next = yield* rowMapSteps(rows);
    const counts = new Map<string, number>(snap.servers.map((s) => [s.name, 0]));
    let n = 0;
    for (const r of rows) {
      for (const name of r.missingFrom) counts.set(name, (counts.get(name) ?? 0) + 1);
      if (++n % STEP_EVERY === 0) yield;
    }
    this.counts = counts;
    const prev = this.rows;
    this.rows = next;
    const first = !this.initialised;
    this.initialised = true;
    const newlySkewed: string[] = [];
    const noLongerSkewed: string[] = [];
    const changed: string[] = [];
    for (const [k, missing] of next) {
      const was = prev.get(k);
      if (was === undefined) newlySkewed.push(`${k} missing from ${missing}`);
      else if (was !== missing) changed.push(`${k} missing from ${missing} (was ${was})`);
      if (++n % STEP_EVERY === 0) yield;
    }
    for (const [k, missing] of prev) {
      if (!next.has(k)) noLongerSkewed.push(`${k} (was missing from ${missing})`);
      if (++n % STEP_EVERY === 0) yield;
    }
    if (first || (newlySkewed.length === 0 && noLongerSkewed.length === 0 && changed.length === 0)) return null;
    return {
      before: prev.size,
      after: next.size,
      // Array.prototype.sort's own order (UTF-16 code units), in slices.
      newlySkewed: yield* sortSteps(newlySkewed, byCodeUnits),
      noLongerSkewed: yield* sortSteps(noLongerSkewed, byCodeUnits),
      changed: yield* sortSteps(changed, byCodeUnits),
    };
  }

  update(snap: Snapshot): SkewChange | null {
    return runToEnd(this.updateSteps(snap));
  }
}
