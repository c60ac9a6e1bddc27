// The swap of immutable snapshots routing reads. A build runs in slices (slice-runner.ts): a change
// of tens of thousands of resources never holds the event loop that answers Envoy, which keeps
// routing on the current snapshot meanwhile. Builds run one at a time; requests made during one
// coalesce into a single build after it. Before routing sees a snapshot, `beforePublish` is
// awaited (Envoy's fast-path routes withdrawn where it no longer allows them).
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { runSliced, sliceBudget } from '../util/slice-runner.js';
import { buildSnapshotSteps, routingInputsChanged, type SnapshotOptions } from './core/snapshot.js';
import type { ServerState, Snapshot } from './core/types.js';

export interface PublisherParts {
  readonly log: Logger;
  readonly signal: AbortSignal;
  readonly sliceBudgetMs: number | undefined;
  /** The servers of the next snapshot and how to build it, as they are when the build starts. */
  readonly inputs: () => { readonly servers: readonly ServerState[]; readonly options: SnapshotOptions; readonly rebuild: boolean };
  readonly beforePublish: ((next: Snapshot) => Promise<void>) | undefined;
  /** Called with each snapshot built, once routing may see it. */
  readonly publish: (snap: Snapshot) => void;
  readonly closed: () => boolean;
}

export class SnapshotPublisher {
  private running: Promise<void> | null = null;
  private again: Promise<void> | null = null;

  constructor(
    private snapshot: Snapshot,
    private readonly parts: PublisherParts,
  ) {}

  current(): Snapshot {
    return this.snapshot;
  }

  /** Resolves once a snapshot that includes the states of the moment of the call is published. */
  request(): Promise<void> {
    if (this.running) {
      this.again ??= this.running.then(() => {
        this.again = null;
        return this.request();
      });
      return this.again;
    }
    const run = this.build().finally(() => {
      this.running = null;
    });
    this.running = run;
    return run;
  }

  /** Settles when every build asked for so far is done. */
  settled(): Promise<void> {
    return this.again ?? this.running ?? Promise.resolve();
  }

  private async build(): Promise<void> {
    const { log, signal } = this.parts;
    const { servers, options, rebuild } = this.parts.inputs();
    // A member whose identity changed reorders the merge: built afresh.
    const previous = rebuild ? undefined : this.snapshot;
    const t0 = performance.now();
    let slices = 0;
    let longest = 0;
    let snap: Snapshot;
    try {
      // Only a change routing can tell moves the generation (a view's age alone does not).
      const generation = this.snapshot.generation + (rebuild || routingInputsChanged(this.snapshot, servers, options.membership) ? 1 : 0);
      snap = await runSliced(buildSnapshotSteps(servers, generation, previous, options), {
        signal,
        ...sliceBudget(this.parts.sliceBudgetMs),
        onSlice: (ms) => {
          slices++;
          longest = Math.max(longest, ms);
        },
      });
    } catch (err) {
      if (!signal.aborted) log.error({ err: String(err) }, 'snapshot build failed; routing keeps the current snapshot');
      return;
    }
    if (this.parts.closed()) return;
    if (this.parts.beforePublish) {
      try {
        await this.parts.beforePublish(snap);
      } catch (err) {
        log.error({ err: String(err), generation: snap.generation }, 'before-publish step failed; publishing the snapshot anyway');
      }
      if (this.parts.closed()) return;
    }
    if (slices > 1)
      log.debug(
        { generation: snap.generation, ms: Math.round(performance.now() - t0), slices, longestSliceMs: Math.round(longest * 10) / 10 },
        'snapshot built in slices',
      );
    this.snapshot = snap;
    this.parts.publish(snap);
  }
}
