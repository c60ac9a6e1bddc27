// Gives a dropped view's memory back to the system: when the views a process holds shrink a lot
// (core/reclaim.ts decides), two full collections, RECLAIM_DELAY_MS apart, once the change has
// settled. One reclaimer per process that holds snapshots: the main one and every ext_proc worker.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from 'pino';
import { INITIAL_RECLAIM, collected, heldEntries, reclaimDecision, type ReclaimDecision, type ReclaimState } from './core/reclaim.js';

/**
 * Time for the rest of the process to let go of the old snapshot (the skew diff, history, the
 * workers' copies are built on their own turns) before the first collection, and between it and the
 * second: the first frees, the second compacts the pages the first left sparse.
 */
export const RECLAIM_DELAY_MS = 5000;

/**
 * V8's full collection for this process: `gc` when node runs with --expose-gc, else the one V8
 * gives a context created while the flag is on (the flag is turned off again at once, so no other
 * context, nor this one's global, gets it).
 */
export function v8FullCollector(): () => void {
  const own = (globalThis as { gc?: unknown }).gc;
  if (typeof own === 'function') return own as () => void;
  setFlagsFromString('--expose-gc');
  try {
    const gc: unknown = runInNewContext('gc');
    if (typeof gc !== 'function') throw new Error('V8 gave no gc function');
    return gc as () => void;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

export interface ReclaimerOptions {
  readonly logger: Logger;
  /** One full collection; default v8FullCollector() (looked up at the first collection). */
  readonly collect?: () => void;
  readonly delayMs?: number;
  /** The resident set and the heap in use, for the log line; default process.memoryUsage(). */
  readonly memory?: () => { readonly rss: number; readonly heapUsed: number };
  /** A monotonic clock in ms, for the pauses; default performance.now. */
  readonly now?: () => number;
}

export class MemoryReclaimer {
  private state: ReclaimState = INITIAL_RECLAIM;
  private latest: { size: number; decision: ReclaimDecision } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private collect: (() => void) | null;
  private disabled = false;
  private closed = false;

  constructor(private readonly opts: ReclaimerOptions) {
    this.collect = opts.collect ?? null;
  }

  /** The entries the process's views hold now (core/reclaim.ts, heldEntries), after every published change. */
  observe(size: number): void {
    if (this.closed || this.disabled) return;
    const { state, decision } = reclaimDecision(this.state, size);
    this.state = state;
    this.latest = { size, decision };
    if (decision.reason === 'held-too-large')
      this.opts.logger.debug(
        { reason: decision.reason, from: decision.from, to: decision.to },
        'memory not collected: too much still held',
      );
    // Armed once: changes in a row must not put the collection off for ever; it checks the latest.
    if (decision.reason === 'shrank' && this.timer === null) this.arm(() => this.first());
  }

  /** Idempotent: no collection runs after it. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(fn: () => void): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.closed) fn();
    }, this.opts.delayMs ?? RECLAIM_DELAY_MS);
    this.timer.unref();
  }

  private first(): void {
    const due = this.latest;
    if (due === null || due.decision.reason !== 'shrank') return;
    const before = this.memory();
    const pause = this.collectOnce();
    if (pause === null) return;
    this.arm(() => {
      const second = this.collectOnce();
      if (second === null) return;
      // What is held now is the new high point: a later large drop is measured from it.
      const size = this.latest?.size ?? due.size;
      this.state = collected(size);
      const after = this.memory();
      this.opts.logger.info(
        {
          reason: due.decision.reason,
          from: due.decision.from,
          to: size,
          pausesMs: [round(pause), round(second)],
          rssBefore: before.rss,
          rssAfter: after.rss,
          heapUsedBefore: before.heapUsed,
          heapUsedAfter: after.heapUsed,
        },
        'memory given back: the views shrank',
      );
    });
  }

  /** One collection's pause in ms; null (and no more collections) when V8 cannot be asked. */
  private collectOnce(): number | null {
    const now = this.opts.now ?? (() => performance.now());
    try {
      this.collect ??= v8FullCollector();
      const t0 = now();
      this.collect();
      return now() - t0;
    } catch (err) {
      this.disabled = true;
      this.opts.logger.warn(
        { err: String(err) },
        'memory: cannot ask V8 for a full collection; a dropped view is given back by its own collections only',
      );
      return null;
    }
  }

  private memory(): { rss: number; heapUsed: number } {
    const m = this.opts.memory?.() ?? process.memoryUsage();
    return { rss: m.rss, heapUsed: m.heapUsed };
  }
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

/** What a discovery service publishes, as far as the reclaimer reads it (DiscoveryService implements it). */
export interface PublishedViews {
  onChange(listener: (snapshot: { readonly servers: Parameters<typeof heldEntries>[0] }) => void): () => void;
}

/** A reclaimer following every snapshot `source` publishes; close() stops both. */
export function reclaimOnChange(source: PublishedViews, opts: ReclaimerOptions): { close(): void } {
  const reclaimer = new MemoryReclaimer(opts);
  const off = source.onChange((snap) => reclaimer.observe(heldEntries(snap.servers)));
  return {
    close() {
      off();
      reclaimer.close();
    },
  };
}
