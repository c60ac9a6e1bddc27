// What POST /v1/cordon and /v1/uncordon do: check the request against the members, keep the new
// table (src/cordon/store.ts) and only then hand it to the running discovery service, which tells
// routing and Envoy in turn; then a log line, a span and a history entry naming who asked.
import type { Logger } from 'pino';
import {
  withCordon,
  withoutCordon,
  type Cordon,
  type CordonChange,
  type CordonMode,
  type CordonRequest,
  type CordonTable,
} from '../cordon/core/cordons.js';
import type { CordonStore } from '../cordon/store.js';
import type { ErrorCode } from '../errors/catalog.js';

export interface CordonAnswer {
  readonly apiserver: string;
  /** The mode now (null: not cordoned). */
  readonly mode: CordonMode | null;
  readonly before: CordonMode | null;
  readonly changed: boolean;
  /** Every cordon now. */
  readonly cordons: readonly Cordon[];
  /** Where they are kept. */
  readonly file: string;
}

/** A refusal, with the HTTP status the admin endpoint answers it with. */
export class CordonRefused extends Error {
  readonly code: ErrorCode = 'SKEWGATE_ERR_CORDON';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface CordonControlDeps {
  readonly store: CordonStore;
  /** Every apiserver the running gateway polls (members, learnt ones being probed or joining, draining ones). */
  readonly members: () => readonly string[];
  /** The running discovery service takes the new table; resolves once routing and Envoy run by it. */
  readonly apply: (table: CordonTable) => Promise<void>;
  readonly log: Logger;
  /** Traced and kept in the history. */
  readonly changed: (c: CordonChange) => void;
  readonly now?: () => number;
}

export class CordonControl {
  private readonly now: () => number;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: CordonControlDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** One change at a time: each reads the table the previous one left. */
  change(req: CordonRequest, peer: string): Promise<CordonAnswer> {
    const run = this.queue.then(() => this.apply(req, peer));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async apply(req: CordonRequest, peer: string): Promise<CordonAnswer> {
    const { store, log } = this.deps;
    const file = store.file();
    if (file === null)
      throw new CordonRefused(
        409,
        'cordons need envoy.xds: without it Envoy balances over a fixed list that a cordon cannot take an apiserver out of, and there is nowhere to keep it across restarts',
      );
    const table = store.current();
    const before = table.get(req.apiserver)?.mode ?? null;
    const members = this.deps.members();
    if (req.mode !== undefined && !members.includes(req.apiserver))
      throw new CordonRefused(404, `${req.apiserver} is not an apiserver of this gateway; they are: ${members.join(', ') || 'none'}`);
    const next =
      req.mode === undefined
        ? withoutCordon(table, req.apiserver)
        : before === req.mode
          ? table
          : withCordon(table, {
              apiserver: req.apiserver,
              mode: req.mode,
              by: req.by,
              reason: req.reason,
              at: new Date(this.now()).toISOString(),
            });
    const after = req.mode ?? null;
    const answer = (t: CordonTable): CordonAnswer => ({
      apiserver: req.apiserver,
      mode: after,
      before,
      changed: t !== table,
      cordons: [...t.values()],
      file,
    });
    if (next === table) return answer(table);
    try {
      await store.set(next);
    } catch (err) {
      log.error({ file, err: (err as Error).message }, 'cordons: cannot write the file; nothing changed');
      throw new CordonRefused(500, `cannot keep the cordon in ${file}: ${(err as Error).message}; nothing changed`);
    }
    await this.deps.apply(next);
    const change: CordonChange = { apiserver: req.apiserver, before, after, by: req.by, reason: req.reason, peer };
    log.warn(
      { apiserver: req.apiserver, mode: after ?? 'none', before: before ?? 'none', by: req.by || '?', reason: req.reason, peer },
      after === null
        ? 'apiserver uncordoned'
        : after === 'drain'
          ? 'apiserver drained by an operator: nothing new goes to it'
          : 'apiserver cordoned: it gets only what no other member serves',
    );
    this.deps.changed(change);
    return answer(next);
  }
}
