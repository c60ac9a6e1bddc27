// The messages between the main process and its ext_proc worker processes (workers/pool.ts and
// workers/worker-process.ts). Plain data only: everything crosses the IPC channel by structured
// clone (Node's 'advanced' serialization).
import type { Config } from '../config/core/schema.js';
import type { DecisionTally } from '../telemetry/metrics.js';
import type { TelemetrySettings } from '../telemetry/core/settings.js';
import type { SnapshotMessage } from './core/snapshot-transfer.js';

/** The environment variable that carries a worker's WorkerData, as JSON (a config is plain data). */
export const WORKER_DATA_ENV = 'SKEWGATE_WORKER_DATA';

/** What a worker is started with. */
export interface WorkerData {
  /** 1 … extproc.workers − 1 (0 is the main process). */
  readonly index: number;
  readonly listen: string;
  readonly config: Config;
  /** The stream limit of this endpoint (its share of extproc.limits.maxStreams). */
  readonly maxStreams: number;
  /** Tracing only (metrics are the main process's, fed by the tallies); null: no spans. */
  readonly telemetry: TelemetrySettings | null;
  readonly apiservers: readonly { readonly name: string; readonly url: string }[];
}

export type ToWorker =
  | { readonly type: 'snapshot'; readonly snapshot: SnapshotMessage }
  /** A reload swapped the config in: the routing options and the log level follow. */
  | { readonly type: 'config'; readonly config: Config }
  /** The apiservers decision spans name (learnt members included). */
  | { readonly type: 'apiservers'; readonly apiservers: readonly { readonly name: string; readonly url: string }[] }
  | { readonly type: 'close'; readonly graceMs: number; readonly drainMs: number };

export type FromWorker =
  | { readonly type: 'listening'; readonly port?: number }
  | { readonly type: 'start_failed'; readonly error: string }
  | { readonly type: 'tallies'; readonly tallies: readonly DecisionTally[]; readonly routeErrors: number }
  /** A snapshot could not be read (a part it names was never received): send everything again. */
  | { readonly type: 'resync' }
  | { readonly type: 'closed' };

/** How often a worker hands its decision counts to the main process's metrics. */
export const TALLY_FLUSH_MS = 250;
/** A batch is sent early once it holds this many decisions. */
export const TALLY_BATCH = 512;
