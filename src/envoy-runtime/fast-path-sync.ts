// Keeps Envoy's fast-path routes in line with the snapshot skewgate routes by (docs/design.md,
// "The fast path", invariant 7): the table Envoy runs is always one the published snapshot
// justifies. So a change is ordered — what a new snapshot takes away is withdrawn from Envoy (and
// Envoy's loading of it confirmed) before the snapshot is published; what it adds is written after.
// A table also expires with the views it rests on: before the oldest would go stale, a timer
// withdraws what the current snapshot no longer proves.
import type { Logger } from 'pino';
import type { Snapshot } from '../discovery/core/types.js';
import {
  compileFastPath,
  FAST_PATH_MARGIN_MS,
  fastBodyHolds,
  fastBodySteps,
  fastPool,
  type FastBody,
  type FastTable,
} from '../routing/fast-path.js';
import { fastTableCovers, intersectFastTables } from '../routing/fast-table.js';
import { runSliced, sliceBudget } from '../util/slice-runner.js';

/** What the sync needs of the xDS writer (xds-files.ts). */
export interface FastPathWriter {
  setFastPath(table: FastTable | null): Promise<void>;
  fastPathWritten(): FastTable | null;
  /** The table asked for last (null: none), written or not yet. */
  fastPathRequested(): FastTable | null;
  idle(): Promise<void>;
}

export interface FastPathSyncOptions {
  readonly writer: FastPathWriter;
  /** The snapshot routing uses now. */
  readonly current: () => Snapshot;
  readonly staleAfterMs: () => number;
  readonly enabled: () => boolean;
  readonly logger: Logger;
  /** Epoch ms. */
  readonly now?: () => number;
  /** How long before a view goes stale the table lets go of it (Envoy's reload, with room). */
  readonly marginMs?: number;
}

const EXPIRY_RECHECK_MS = 10;

export class FastPathSync {
  private timer: NodeJS.Timeout | null = null;
  private body: FastBody | null = null;
  private seq = 0;
  private following: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly now: () => number;
  private readonly marginMs: number;

  constructor(private readonly opts: FastPathSyncOptions) {
    this.now = opts.now ?? Date.now;
    this.marginMs = opts.marginMs ?? FAST_PATH_MARGIN_MS;
  }

  private async compile(snap: Snapshot): Promise<FastTable | null> {
    if (!this.opts.enabled()) return null;
    const opts = { now: this.now(), staleAfterMs: this.opts.staleAfterMs(), marginMs: this.marginMs };
    // The views' part is kept while the pool and its views are the same objects: a snapshot a
    // round publishes with nothing new costs the judgement of the moment only. A new one is a
    // walk over every resource, in slices (invariant 5b).
    const pool = fastPool(snap, opts).servers;
    if (pool.length > 0 && (this.body === null || !fastBodyHolds(this.body, pool)))
      this.body = await runSliced(fastBodySteps(snap, pool), sliceBudget(undefined));
    return compileFastPath(snap, opts, this.body ?? undefined);
  }

  /**
   * Before `next` is published: Envoy keeps only what both the running table and next's allow,
   * and runs it, before this resolves. Never adds anything.
   */
  async beforePublish(next: Snapshot): Promise<void> {
    if (this.closed) return;
    // An earlier publication still compiling must not write its table after this point: it may
    // allow what `next` takes away.
    this.seq++;
    await this.withdrawBeyond(await this.compile(next));
  }

  /** After a snapshot is published: its table in full, and the timer for its expiry. */
  published(snap: Snapshot): void {
    if (this.closed) return;
    // The latest publication wins: an earlier one still compiling is dropped.
    const seq = ++this.seq;
    this.following = this.compile(snap)
      .then((table) => {
        if (seq !== this.seq || this.closed) return undefined;
        this.arm(table);
        return this.opts.writer.setFastPath(table);
      })
      .catch((err: unknown) => this.opts.logger.error({ err: String(err) }, 'fast path: cannot write the routes'));
  }

  /** Settles when the last publication's routes are on disk (tests, shutdown). */
  async idle(): Promise<void> {
    await this.following;
    await this.opts.writer.idle();
  }

  /** Withdraws every fast-path route (skewgate stopping: nobody would keep them current). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.following.catch(() => undefined);
    if (this.opts.writer.fastPathWritten() !== null || this.opts.writer.fastPathRequested() !== null)
      await this.opts.writer.setFastPath(null);
  }

  /** Envoy keeps only what `allowed` allows: of the table written, and of one asked for but not written yet. */
  private async withdrawBeyond(allowed: FastTable | null, because?: string): Promise<void> {
    const w = this.opts.writer;
    const written = w.fastPathWritten();
    const requested = w.fastPathRequested();
    const holds = (t: FastTable | null): boolean => t === null || (allowed !== null && fastTableCovers(allowed, t));
    if (holds(written) && holds(requested)) return;
    if (because !== undefined) this.opts.logger.info({ why: allowed === null ? 'routing.fastPath is off' : allowed.why }, because);
    // What would be written next, narrowed; awaited with every write queued before it.
    const base = requested ?? written;
    await w.setFastPath(allowed === null || base === null ? null : intersectFastTables(base, allowed));
  }

  private arm(table: FastTable | null): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (table === null || !Number.isFinite(table.validUntil) || table.groupVersions.length === 0) return;
    const at = table.validUntil - this.marginMs;
    // At least a few ms: a view exactly at its limit is still current, and is judged again then.
    this.timer = setTimeout(() => this.expire(), Math.max(EXPIRY_RECHECK_MS, at - this.now()));
    this.timer.unref();
  }

  /** The views aged without a new snapshot: withdraw what the current one no longer proves. */
  private expire(): void {
    this.timer = null;
    if (this.closed) return;
    void this.compile(this.opts.current())
      .then(async (allowed) => {
        await this.withdrawBeyond(allowed, 'fast path: views ageing without a new snapshot; withdrawing what they no longer prove');
        this.arm(allowed);
      })
      .catch((err: unknown) => this.opts.logger.error({ err: String(err) }, 'fast path: cannot withdraw the routes'));
  }
}
