// The main process's side of extproc.workers: K − 1 worker processes (workers/worker-process.ts),
// each an ext_proc endpoint of its own that Envoy balances streams over. They decide on copies of
// the snapshots this process publishes (snapshot-transfer.ts), so the apiservers see one
// discovery, not K. A worker that dies is started again (with backoff) while the others keep
// serving; Envoy retries a stream that could not open on another endpoint.
//
// Processes, not worker threads: a thread that ends while HTTP/2 reads on a stream aborts the
// whole process in Node 20 (nodejs/node#38418, #64850; grpc/grpc-node#1799; seen here), so a
// worker's crash would take discovery and every endpoint with it.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import type { Snapshot } from '../discovery/core/types.js';
import { extprocLimits } from '../extproc/server.js';
import { extprocListenAddress } from '../config/core/extproc-listen.js';
import type { TelemetrySettings } from '../telemetry/core/settings.js';
import type { DecisionTally } from '../telemetry/metrics.js';
import { WORKER_DATA_ENV, type FromWorker, type ToWorker, type WorkerData } from './protocol.js';
import { SnapshotEncoder } from './core/snapshot-transfer.js';

export interface WorkerPoolDeps {
  readonly config: Config;
  readonly logger: Logger;
  /** The snapshot routing uses now: sent to a worker as it starts. */
  readonly current: () => Snapshot;
  /** Tracing settings for the workers' decision spans (null: none). */
  readonly telemetry: TelemetrySettings | null;
  readonly apiservers: () => readonly { readonly name: string; readonly url: string }[];
  /** The workers' decisions, for the main process's metrics. */
  readonly onTallies: (tallies: readonly DecisionTally[], routeErrors: number) => void;
  /** Restart backoff; tests shorten it. */
  readonly restartMs?: { readonly first: number; readonly max: number };
}

interface Slot {
  readonly index: number;
  readonly listen: string;
  worker: ChildProcess | null;
  encoder: SnapshotEncoder;
  /** The bound TCP port once listening (port 0 picks one per start). */
  port: number | undefined;
  restarts: number;
  /** When it last started listening (performance.now()); a long life resets the restart backoff. */
  listeningSince: number;
  timer: NodeJS.Timeout | null;
}

const WORKER_FILE = fileURLToPath(new URL('./worker-process.js', import.meta.url));
/** A worker that does not listen by then is a failed start. */
const START_TIMEOUT_MS = 30_000;
/** A worker that served this long before it died starts again at the first backoff step. */
const STABLE_MS = 60_000;

export class ExtProcWorkers {
  private readonly slots: Slot[];
  private config: Config;
  private closing: Promise<void> | null = null;
  private readonly restartMs: { readonly first: number; readonly max: number };

  constructor(private readonly deps: WorkerPoolDeps) {
    this.config = deps.config;
    this.restartMs = deps.restartMs ?? { first: 1000, max: 30_000 };
    const n = deps.config.extproc.workers;
    this.slots = Array.from({ length: Math.max(0, n - 1) }, (_, i) => ({
      index: i + 1,
      listen: extprocListenAddress(deps.config.extproc.listen, i + 1),
      worker: null,
      encoder: new SnapshotEncoder(),
      port: undefined,
      restarts: 0,
      listeningSince: 0,
      timer: null,
    }));
  }

  /** Starts every worker; resolves with their ports (TCP) once all listen, rejects if one cannot. */
  async start(): Promise<readonly (number | undefined)[]> {
    await Promise.all(this.slots.map((s) => this.spawn(s)));
    return this.slots.map((s) => s.port);
  }

  /** A published snapshot, to every worker running. */
  publish(snap: Snapshot): void {
    for (const s of this.slots) if (s.worker) this.post(s, { type: 'snapshot', snapshot: s.encoder.encode(snap) });
  }

  /** A reload swapped a new config in. */
  reconfigure(config: Config): void {
    this.config = config;
    for (const s of this.slots) if (s.worker) this.post(s, { type: 'config', config });
  }

  setApiservers(apiservers: readonly { readonly name: string; readonly url: string }[]): void {
    for (const s of this.slots) if (s.worker) this.post(s, { type: 'apiservers', apiservers: [...apiservers] });
  }

  /** Health NOT_SERVING for drainMs, open streams finish up to graceMs, then the processes end. Idempotent. */
  close(graceMs: number, drainMs: number): Promise<void> {
    this.closing ??= Promise.all(
      this.slots.map(async (s) => {
        if (s.timer) clearTimeout(s.timer);
        const w = s.worker;
        if (!w) return;
        const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
        this.post(s, { type: 'close', graceMs, drainMs });
        // A worker that does not end by itself after its grace is killed.
        const kill = setTimeout(() => w.kill('SIGKILL'), drainMs + graceMs + 2000);
        kill.unref();
        await exited;
        clearTimeout(kill);
      }),
    ).then(() => undefined);
    return this.closing;
  }

  /** Tests: worker `index` is SIGKILLed, as by the OOM killer; it is started again as after any crash. Resolves once it exited. */
  async killWorker(index: number): Promise<void> {
    const w = this.slots.find((x) => x.index === index)?.worker;
    if (!w || w.exitCode !== null || w.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    w.kill('SIGKILL');
    await exited;
  }

  /** The workers' bound ports now (undefined for a socket, or while one is down or starting). */
  ports(): readonly (number | undefined)[] {
    return this.slots.map((s) => s.port);
  }

  private post(s: Slot, m: ToWorker): void {
    try {
      if (s.worker?.connected) s.worker.send(m);
    } catch (err) {
      this.deps.logger.error({ worker: s.index, err: String(err), message: m.type }, 'cannot post to an ext_proc worker');
    }
  }

  /** Starts the slot's process; resolves once it listens, rejects when it cannot (a restart that fails is retried). */
  private spawn(s: Slot): Promise<void> {
    const log = this.deps.logger;
    const data: WorkerData = {
      index: s.index,
      listen: s.listen,
      config: this.config,
      maxStreams: extprocLimits(this.config).maxStreams,
      telemetry: this.deps.telemetry,
      apiservers: [...this.deps.apiservers()],
    };
    // The same Node and flags; stdout and stderr shared (JSON log lines, one per write).
    const w = fork(WORKER_FILE, [], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, [WORKER_DATA_ENV]: JSON.stringify(data) },
    });
    s.worker = w;
    s.port = undefined;
    s.encoder = new SnapshotEncoder();
    this.post(s, { type: 'snapshot', snapshot: s.encoder.encode(this.deps.current()) });
    return new Promise<void>((resolve, reject) => {
      let listening = false;
      let served = false;
      const timer = setTimeout(
        () => fail(new Error(`ext_proc worker ${s.index} did not listen on ${s.listen} within ${START_TIMEOUT_MS / 1000} s`)),
        START_TIMEOUT_MS,
      );
      timer.unref();
      const fail = (err: Error): void => {
        clearTimeout(timer);
        if (listening) return;
        listening = true; // settled
        w.kill('SIGKILL');
        reject(err);
      };
      w.on('message', (m: FromWorker) => {
        switch (m.type) {
          case 'listening':
            clearTimeout(timer);
            listening = true;
            s.port = m.port;
            s.listeningSince = performance.now();
            served = true;
            if (s.restarts > 0) log.info({ worker: s.index, listen: s.listen, restarts: s.restarts }, 'ext_proc worker serving again');
            resolve();
            return;
          case 'start_failed':
            fail(new Error(`ext_proc worker ${s.index}: ${m.error}`));
            return;
          case 'tallies':
            this.deps.onTallies(m.tallies, m.routeErrors);
            return;
          case 'resync':
            s.encoder = new SnapshotEncoder();
            this.post(s, { type: 'snapshot', snapshot: s.encoder.encode(this.deps.current()) });
            return;
          case 'closed':
            return;
          default: {
            const unknown: never = m;
            log.error({ worker: s.index, message: String(unknown) }, 'unknown message from an ext_proc worker');
          }
        }
      });
      w.on('error', (err) => {
        log.error({ worker: s.index, err: err.message, stack: err.stack }, 'ext_proc worker failed');
        fail(err);
      });
      w.on('exit', (code, signal) => {
        if (s.worker === w) {
          s.worker = null;
          s.port = undefined;
        }
        if (!listening) fail(new Error(`ext_proc worker ${s.index} exited (${signal ?? `code ${code}`}) before it listened`));
        if (this.closing) return;
        // Not asked to stop: started again, later each time it keeps failing.
        if (served && performance.now() - s.listeningSince >= STABLE_MS) s.restarts = 0;
        const delay = Math.min(this.restartMs.max, this.restartMs.first * 2 ** Math.min(s.restarts, 10));
        s.restarts++;
        log.error({ worker: s.index, code, signal, restartInMs: delay, restarts: s.restarts }, 'ext_proc worker exited; starting it again');
        s.timer = setTimeout(() => {
          s.timer = null;
          if (!this.closing)
            this.spawn(s).catch((err: unknown) => log.error({ worker: s.index, err: String(err) }, 'ext_proc worker did not start again'));
        }, delay);
        s.timer.unref();
      });
    });
  }
}
