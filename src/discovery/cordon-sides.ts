// The operator's cordons (src/cordon/) as the two sides that act on them have them: routing (the
// snapshots) and Envoy (the members' listeners, which write its pools and routes). A change
// reaches them in the order cordonOrder() asks — routing first when an apiserver loses its
// routes, Envoy first (by the join delay, the time a joining apiserver is given) when it gets them
// back; until its turn, each side keeps the table it had.
import { cordonOrder, NO_CORDONS, type CordonTable } from '../cordon/core/cordons.js';

export interface CordonSideHooks {
  /** A new snapshot with the routing side's table; resolves once published. */
  readonly publish: () => Promise<void>;
  /** The members' listeners, with the Envoy side's table. */
  readonly emitMembers: () => void;
  readonly closed: () => boolean;
}

export class CordonSides {
  private routingTable: CordonTable;
  private envoyTable: CordonTable;
  private timer: NodeJS.Timeout | null = null;
  /** The caller waiting on the change the timer holds. */
  private pending: (() => void) | null = null;

  constructor(
    initial: CordonTable | undefined,
    private readonly joinDelayMs: number,
    private readonly hooks: CordonSideHooks,
  ) {
    this.routingTable = initial ?? NO_CORDONS;
    this.envoyTable = this.routingTable;
  }

  /** What the snapshots are built with. */
  routing(): CordonTable {
    return this.routingTable;
  }

  /** What the members' entries carry (Envoy's pools and routes). */
  envoy(): CordonTable {
    return this.envoyTable;
  }

  /** Resolves once both sides have the table (routing's snapshot published), or the change was dropped. */
  set(table: CordonTable): Promise<void> {
    if (this.hooks.closed() || (table === this.routingTable && table === this.envoyTable && this.timer === null)) return Promise.resolve();
    let order: ReturnType<typeof cordonOrder> = 'together';
    for (const name of new Set([...this.routingTable.keys(), ...this.envoyTable.keys(), ...table.keys()])) {
      const o = cordonOrder(this.routingTable.get(name)?.mode, table.get(name)?.mode);
      if (o === 'routing first' || (o === 'envoy first' && order === 'together')) order = o;
    }
    this.cancel();
    const toEnvoy = (): void => {
      this.envoyTable = table;
      this.hooks.emitMembers();
    };
    const toRouting = (): Promise<void> => {
      this.routingTable = table;
      return this.hooks.publish();
    };
    if (order === 'routing first')
      return toRouting().then(() => {
        if (!this.hooks.closed()) toEnvoy();
      });
    toEnvoy();
    if (order === 'together' || this.joinDelayMs === 0) return toRouting();
    return new Promise<void>((resolve) => {
      this.pending = resolve;
      this.timer = setTimeout(() => {
        this.timer = null;
        this.pending = null;
        if (this.hooks.closed()) resolve();
        else void toRouting().then(resolve, resolve);
      }, this.joinDelayMs);
      this.timer.unref();
    });
  }

  /** Drops a change still waiting for its turn (a newer one, or the service closes). Idempotent. */
  cancel(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.pending?.();
    this.pending = null;
  }
}
