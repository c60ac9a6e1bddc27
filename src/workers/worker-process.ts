// An ext_proc worker process: its own gRPC endpoint, deciding on the main process's snapshots
// (copied in over IPC, never fetched: one discovery per skewgate). Started by workers/pool.ts; it
// logs on the stderr it shares, exports its own decision spans, and hands its decision counts to
// the main process's metrics. It ends when told to, or when the main process is gone.
import { usageSampleOf } from '../gate/core/usage.js';
import type { Config } from '../config/core/schema.js';
import type { Snapshot } from '../discovery/core/types.js';
import { combineObservers, createLogObserver, type DecisionObserver } from '../extproc/observer.js';
import { createExtProcServer, extprocLimits } from '../extproc/server.js';
import { ClientCaBundle } from '../identity/client-ca.js';
import { stateClientIdentity } from '../identity/core/client-identity.js';
import { createLogger } from '../util/log.js';
import { createRouter, type RequestRouter } from '../routing/router.js';
import { createDecisionSpans, serverAddresses } from '../telemetry/decision-spans.js';
import type { DecisionTally } from '../telemetry/metrics.js';
import type { TelemetrySdk } from '../telemetry/sdk.js';
import { TALLY_BATCH, TALLY_FLUSH_MS, WORKER_DATA_ENV, type FromWorker, type ToWorker, type WorkerData } from './protocol.js';
import { SnapshotDecoder } from './core/snapshot-transfer.js';
import { MemoryReclaimer } from '../memory/reclaimer.js';
import { heldEntries } from '../memory/core/reclaim.js';

if (process.send === undefined) throw new Error('skewgate: workers/worker-process.js runs as a forked worker only');
const send = (m: FromWorker): void => {
  // The channel is gone when the main process is: nothing left to tell.
  if (process.connected) process.send?.(m);
};

// What a thread would get as workerData, in the environment: there from the first line, so the
// message listener below is in place before the IPC channel is read at all.
function workerData(): WorkerData {
  const raw = process.env[WORKER_DATA_ENV];
  if (raw === undefined) throw new Error(`skewgate: ${WORKER_DATA_ENV} is not set`);
  return JSON.parse(raw) as WorkerData;
}
const data = workerData();
const root = createLogger(data.config.log.level, process.stderr, data.config.log.format);
const logger = root.child({ component: 'extproc', worker: data.index });

let config: Config = data.config;
let snapshot: Snapshot | null = null;
let decoder = new SnapshotDecoder();
// This process holds a copy of every view: a large one dropped is given back here too.
const reclaimer = new MemoryReclaimer({ logger: root.child({ component: 'memory', worker: data.index }) });
const clientCa = new ClientCaBundle(config.envoy.tls.clientCaFile, { logger: root.child({ component: 'identity', worker: data.index }) });

const routerFor = (c: Config): RequestRouter =>
  createRouter(
    {
      current: () => {
        if (snapshot === null) throw new Error('no snapshot yet');
        return snapshot;
      },
    },
    {
      staleAfterMs: c.discovery.staleAfter,
      retryAfterSeconds: c.routing.retryAfterSeconds,
      clientIdentity: (xfcc, now) => clientCa.verifier()?.state(xfcc, now) ?? stateClientIdentity(xfcc, null, now),
    },
  );
let router = routerFor(config);
// The server holds this facade: a reload's router takes over from the next request.
const facade: RequestRouter = {
  get retryAfterSeconds() {
    return router.retryAfterSeconds;
  },
  route: (method, path, headers) => router.route(method, path, headers),
};

let tallies: DecisionTally[] = [];
let routeErrors = 0;
const flush = (): void => {
  if (tallies.length === 0 && routeErrors === 0) return;
  send({ type: 'tallies', tallies, routeErrors });
  tallies = [];
  routeErrors = 0;
};
const flushTimer = setInterval(flush, TALLY_FLUSH_MS);
flushTimer.unref();
const tallyObserver: DecisionObserver = {
  onDecision(result, ctx) {
    const d = result.decision;
    const usage = usageSampleOf(result, ctx.headers);
    tallies.push({
      outcome: d.outcome,
      reason: d.reason,
      upstream: d.outcome === 'routed' ? d.upstream : null,
      seconds: Number(ctx.durationNs) / 1e9,
      ...(usage === null ? {} : { usage }),
    });
    if (tallies.length >= TALLY_BATCH) flush();
  },
  onRouteError() {
    routeErrors++;
  },
};

const servers = serverAddresses(data.apiservers);
let sdk: TelemetrySdk | null = null;
let spans: DecisionObserver | null = null;
// A no-op until the SDK is loaded (before the first stream: start() awaits it).
const spanObserver: DecisionObserver = {
  onRequest: (ctx) => spans?.onRequest?.(ctx),
  onDecision: (r, ctx) => spans?.onDecision(r, ctx),
  onRouteError: (e, ctx) => spans?.onRouteError?.(e, ctx),
};

const logObserver = createLogObserver(logger, { intervalMs: config.log.decisions.interval });
const server = createExtProcServer({
  router: facade,
  logger,
  observer: combineObservers(spanObserver, tallyObserver, logObserver),
  limits: { ...extprocLimits(config) },
});

async function start(): Promise<void> {
  try {
    if (data.telemetry?.tracing) {
      const { startSdk } = await import('../telemetry/sdk.js');
      sdk = await startSdk({ ...data.telemetry, metrics: null });
      if (sdk.tracer) spans = createDecisionSpans(sdk.tracer, servers);
    }
    await clientCa.start();
    const bound = await server.start(data.listen);
    logger.info({ listen: data.listen, port: bound.port }, 'ext_proc worker serving');
    send({ type: 'listening', ...(bound.port === undefined ? {} : { port: bound.port }) });
  } catch (err) {
    send({ type: 'start_failed', error: err instanceof Error ? err.message : String(err) });
    await close(0, 0);
  }
}

let closing: Promise<void> | null = null;
function close(graceMs: number, drainMs: number): Promise<void> {
  closing ??= (async () => {
    await server.close(graceMs, { drainMs });
    clearInterval(flushTimer);
    reclaimer.close();
    flush();
    logObserver.close();
    clientCa.close();
    await sdk?.shutdown().catch(() => undefined);
    root.flush();
    send({ type: 'closed' });
    process.disconnect();
  })();
  return closing;
}

// Stop signals are the main process's to handle (it drains every endpoint); a terminal's Ctrl-C
// reaches the whole process group, so they are ignored here. Without the main process, end.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
process.on('disconnect', () => void close(0, 0).then(() => process.exit(0)));

process.on('message', (m: ToWorker) => {
  switch (m.type) {
    case 'snapshot': {
      const first = snapshot === null;
      try {
        snapshot = decoder.decode(m.snapshot);
      } catch (err) {
        // Never half a snapshot: the previous one keeps deciding, and the main process is told.
        logger.error(
          { err: err instanceof Error ? err.message : String(err) },
          'snapshot transfer failed; keeping the previous snapshot, asking for all of it',
        );
        decoder = new SnapshotDecoder();
        send({ type: 'resync' });
        return;
      }
      reclaimer.observe(heldEntries(snapshot.servers));
      if (first) void start();
      return;
    }
    case 'config':
      config = m.config;
      root.level = config.log.level;
      router = routerFor(config);
      return;
    case 'apiservers':
      // The decision spans hold this map: refilled in place.
      servers.clear();
      for (const [name, address] of serverAddresses(m.apiservers)) servers.set(name, address);
      return;
    case 'close':
      void close(m.graceMs, m.drainMs);
      return;
    default: {
      const unknown: never = m;
      logger.error({ message: String(unknown) }, 'unknown message from the main process');
    }
  }
});
