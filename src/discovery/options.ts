// What the discovery service is built from: the parts of the config it reads, and the options its
// owner (src/app/skewgate.ts, the one-shot commands, the tests) may give it.
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import type { FetchLike } from '../kube/transport.js';
import type { MemberSpec } from '../membership/members.js';
import type { Snapshot } from './core/types.js';
import type { CordonTable } from '../cordon/core/cordons.js';

export type DocumentBoundKeys = 'maxDocumentBytes' | 'maxResources' | 'maxDownloadBackoff';

/**
 * The parts of the config discovery reads (the rest of Config is not needed, handy in tests); the
 * document bounds and the membership default as in the config.
 */
export type DiscoveryConfig = Pick<Config, 'apiservers'> & {
  readonly discovery: Omit<Config['discovery'], DocumentBoundKeys> & Partial<Pick<Config['discovery'], DocumentBoundKeys>>;
} & Partial<Pick<Config, 'membership'>>;

export interface DiscoveryServiceOptions {
  /** Epoch ms clock for lastSuccessAt. */
  readonly now?: () => number;
  readonly logger?: Logger;
  /** Replaces undici's fetch (tests). */
  readonly fetchImpl?: FetchLike;
  /** First retry delay after a failure; doubles per failure, capped at discovery.interval. */
  readonly minRetryMs?: number;
  /**
   * How long a verified apiserver is `joining` before it is a member: Envoy is given its cluster
   * and routes first (envoy.xds), so that nothing is routed to it before Envoy can. Default 0.
   */
  readonly joinDelayMs?: number;
  /**
   * The members a previous run knew beyond the seed (envoy.xds's members.json): members from the
   * start, as the seed is, and drained like any member once the sources are listed without them.
   */
  readonly lastKnown?: readonly MemberSpec[];
  /** Longest piece of parsing or snapshot building between two turns of the event loop (slice-runner.ts). */
  readonly sliceBudgetMs?: number;
  /**
   * Awaited with each new snapshot before routing sees it (Envoy's fast-path routes withdrawn
   * where the new snapshot no longer allows them: envoy-runtime/fast-path-sync.ts). Bounded by its owner;
   * a failure is logged and the snapshot published anyway.
   */
  readonly beforePublish?: (next: Snapshot) => Promise<void>;
  /** The operator's cordons from the start (src/cordon/); changed with setCordons(). */
  readonly cordons?: CordonTable;
}
