// Composition root: config → logger → telemetry → discovery → router → ext_proc server, with one
// lifecycle. Discovery and the router are rebuilt from a reloaded config (src/app/reload.ts).
import type { Config } from '../config/core/schema.js';
import type { Logger } from '../util/log.js';
import { DiscoveryService } from '../discovery/service.js';
import { combineObservers, createLogObserver, type DecisionObserver } from '../extproc/observer.js';
import { createExtProcServer, extprocLimits } from '../extproc/server.js';
import { ClientCaBundle } from '../identity/client-ca.js';
import { stateClientIdentity } from '../identity/core/client-identity.js';
import { LiveConfig, type LiveParts, type ReloadInput, type ReloadOptions, type ReloadResult } from './reload.js';
import { adminHandlers } from './admin-handlers.js';
import { MembersFollower } from './members-follower.js';
import { HistoryRecorder } from '../history/recorder.js';
import { createRouter, type ClientIdentityOf, type RequestRouter } from '../routing/router.js';
import type { SdkOptions } from '../telemetry/sdk.js';
import { resolveTelemetrySettings, type Env } from '../telemetry/core/settings.js';
import { createTelemetry, type Telemetry } from '../telemetry/telemetry.js';
import { knownMemberSpec } from '../membership/members.js';
import { readKnownMembers } from '../envoy-runtime/xds-disk.js';
import { XDS_JOIN_DELAY_MS, XdsWriter } from '../envoy-runtime/xds-files.js';
import { adminClustersConfirm, adminRoutesConfirm, adminUrlOf } from '../envoy-runtime/admin-routes.js';
import { FastPathSync } from '../envoy-runtime/fast-path-sync.js';
import { KubernetesServicePublisher } from '../kubernetes-service/publisher.js';
import { SecretRotator } from '../envoy-runtime/secret-rotation.js';
import { ExtProcWorkers } from '../workers/pool.js';
import { AdminServer } from './admin-server.js';
import { CordonControl } from './cordon-control.js';
import { CordonStore } from '../cordon/store.js';
import { GATE_KEEP_MS, GateRecorder } from '../gate/recorder.js';
import { EnvoySampler } from '../gate/envoy-sampler.js';
import { RuntimeExtension } from '../gate/runtime-extension.js';
import { skewgateVersion } from '../util/version.js';
import { reclaimOnChange } from '../memory/reclaimer.js';

export interface SkewgateOptions {
  /** OTEL_* variables are read from here; default process.env. */
  readonly env?: Env;
  /** Tests: in-memory span exporter and metric readers. */
  readonly telemetry?: SdkOptions;
  /**
   * Envoy's admin URL, where skewgate confirms that withdrawn fast-path routes are gone; default
   * from envoy.admin (none with port 0: a settle period instead). Tests with an ephemeral admin.
   */
  readonly envoyAdminUrl?: string | null;
}

export interface Skewgate {
  /** The discovery service running now: a reload replaces it. */
  readonly discovery: DiscoveryService;
  readonly router: RequestRouter;
  /** null when telemetry is off: no OpenTelemetry SDK is loaded then. */
  readonly telemetry: Telemetry | null;
  /** The ext_proc worker processes (extproc.workers > 1), else null. */
  readonly workers: ExtProcWorkers | null;
  /** The admin endpoint's address once started (admin.listen, a port 0 resolved), else null. */
  adminAddress(): string | null;
  /** The Cluster API Runtime Extension's port once started (gate.runtimeExtension), else null. */
  runtimeExtensionPort(): number | null;
  /** Starts telemetry, discovery (first round awaited, failures included), then the gRPC listener. */
  start(): Promise<{ port?: number; peerPort?: number; healthPort?: number; workerPorts?: readonly (number | undefined)[] }>;
  /**
   * Swaps in a new config (or reads one when it runs) if every change can be made at run time;
   * otherwise the running config stays. Reloads asked for during one run once more after it.
   * Never rejects.
   */
  reload(next: ReloadInput, opts?: ReloadOptions): Promise<ReloadResult>;
  /**
   * Graceful: report NOT_SERVING for drainMs (Envoy's health check then stops sending streams),
   * stop accepting, let open streams finish up to shutdownGrace, stop discovery, flush telemetry.
   * A reload in progress is abandoned first. Idempotent.
   */
  close(opts?: { drainMs?: number }): Promise<void>;
}

/** Long enough for Envoy's health checker to see NOT_SERVING before the listener goes away. */
export function drainTime(config: Config): number {
  const hc = config.envoy.healthCheck;
  return Math.min(config.extproc.shutdownGrace, hc.interval * hc.unhealthyThreshold + hc.timeout);
}

export function createSkewgate(config: Config, logger: Logger, opts: SkewgateOptions = {}): Skewgate {
  // Envoy's filesystem xDS (envoy.xds): the members' clusters and routes, the fast-path routes.
  const xdsDir = config.envoy.xds?.directory;
  const xdsLogger = logger.child({ component: 'xds' });
  const adminUrl = opts.envoyAdminUrl !== undefined ? opts.envoyAdminUrl : adminUrlOf(config);
  // Envoy's Lua states certificates of the bundle loaded now: a new bundle rewrites the routes.
  const clientCa = new ClientCaBundle(config.envoy.tls.clientCaFile, { logger: logger.child({ component: 'identity' }) });
  const xds =
    xdsDir === undefined
      ? null
      : new XdsWriter(config, xdsLogger, {
          confirm: adminUrl === null ? null : adminRoutesConfirm(adminUrl),
          clustersConfirm: adminUrl === null ? null : adminClustersConfirm(adminUrl),
          clientTrust: () => clientCa.verifier()?.trust ?? null,
        });
  if (xds !== null) clientCa.onLoaded(() => void xds.trustChanged());
  const telemetrySettings = resolveTelemetrySettings(config.telemetry, opts.env ?? process.env);
  const telemetry = createTelemetry({
    settings: telemetrySettings,
    apiservers: config.apiservers,
    logger: logger.child({ component: 'telemetry' }),
    ...(opts.telemetry ? { sdk: opts.telemetry } : {}),
    fastPath: () => xds?.fastPathWritten() ?? null,
  });
  // The bundle's current verifier: a rotated CA takes effect on the next request (and explain).
  const clientIdentity: ClientIdentityOf = (xfcc, now) => clientCa.verifier()?.state(xfcc, now) ?? stateClientIdentity(xfcc, null, now);
  // The operator's cordons, kept beside the xDS files across restarts; every discovery service starts with them.
  const cordonStore = new CordonStore(xdsDir ?? null, logger.child({ component: 'cordon' }));
  // The parts running now (after a reload, the new ones): none while the first are being built.
  let runningParts: () => LiveParts<DiscoveryService> | null = () => null;
  // Envoy's fast-path routes follow the running service's published snapshots (with envoy.xds only).
  let sync: FastPathSync | null = null;
  const build = (c: Config): LiveParts<DiscoveryService> => {
    const running = runningParts()?.discovery ?? null;
    // The members known beyond the seed: at start those a previous run wrote for Envoy (with
    // every configured apiserver replaced, they are how skewgate finds the control plane
    // again); on a reload, the running service's.
    const known =
      running !== null
        ? running
            .members()
            .filter((m) => !m.seed && (m.role === 'member' || m.role === 'draining'))
            .map((m) => m.spec)
        : xdsDir === undefined
          ? []
          : readKnownMembers(xdsDir, xdsLogger);
    const discovery: DiscoveryService = new DiscoveryService(c, {
      logger: logger.child({ component: 'discovery' }),
      lastKnown: known.map((k) => knownMemberSpec(k, c.membership.template)),
      cordons: cordonStore.current(),
      // With the xDS files, a verified apiserver joins Envoy (its cluster, then its routes) before skewgate routes to it.
      joinDelayMs: c.envoy.xds === undefined ? 0 : XDS_JOIN_DELAY_MS,
      // Only the running service's snapshots reach Envoy; a reload's candidate waits for beforeSwap.
      beforePublish: (snap) => {
        const now = runningParts();
        return sync !== null && (now === null || now.discovery === discovery) ? sync.beforePublish(snap) : Promise.resolve();
      },
    });
    const router = createRouter(discovery, {
      staleAfterMs: c.discovery.staleAfter,
      retryAfterSeconds: c.routing.retryAfterSeconds,
      clientIdentity,
    });
    return { config: c, discovery, router };
  };
  const live = new LiveConfig(config, {
    build,
    logger: logger.child({ component: 'config' }),
    onResult: (r) => telemetry?.recordReload(r.result, r.generation),
    beforeSwap: (snap) => sync?.beforePublish(snap) ?? Promise.resolve(),
  });
  runningParts = () => live.parts;
  if (xds !== null)
    sync = new FastPathSync({
      writer: xds,
      current: () => live.parts.discovery.current(),
      staleAfterMs: () => live.parts.config.discovery.staleAfter,
      enabled: () => live.parts.config.routing.fastPath,
      logger: logger.child({ component: 'fast-path' }),
    });
  const offFastPath = live.discovery.onChange((snap) => sync?.published(snap));
  // The xDS files and the apiservers' addresses (decision spans, workers) follow the running service's members.
  const members = new MembersFollower(xds, config.apiservers);
  members.onApiservers((list) => telemetry?.setApiservers(list));
  // The gate's memory of recent decisions and of Envoy's counters: kept only where it can be asked (admin.listen).
  // … and by the Cluster API hooks (gate.runtimeExtension).
  const asked = config.admin !== undefined || config.gate.runtimeExtension !== undefined;
  const gate = asked ? new GateRecorder() : null;
  const envoyCounters =
    gate === null
      ? null
      : new EnvoySampler(
          () => adminUrl,
          () => live.parts.config.gate.window,
          GATE_KEEP_MS,
        );
  // extproc.workers − 1 more ext_proc endpoints, on copies of the snapshots published here.
  const workers =
    config.extproc.workers > 1
      ? new ExtProcWorkers({
          config,
          logger: logger.child({ component: 'workers' }),
          current: () => live.discovery.current(),
          telemetry: telemetrySettings.tracing ? telemetrySettings : null,
          apiservers: () => members.apiservers(),
          onTallies: (t, errors) => {
            telemetry?.recordTallies(t, errors);
            gate?.tallies(t, errors);
          },
        })
      : null;
  const offWorkers = workers ? live.discovery.onChange((snap) => workers.publish(snap)) : () => undefined;
  if (workers !== null) members.onApiservers((list) => workers.setApiservers(list));
  live.onApplied((c, changed) => {
    if (changed.includes('log.level')) logger.level = c.log.level;
    // A cordon changed while the new service was being built reaches it now.
    void live.parts.discovery.setCordons(cordonStore.current());
    void members.follow(c, live.parts.discovery);
    if (changed.includes('apiservers')) members.setApiservers(c.apiservers);
    workers?.reconfigure(c);
  });
  // Always the running router: the ext_proc server never sees a reload.
  const router = live.router;
  const extprocLogger = logger.child({ component: 'extproc' });
  const logObserver = createLogObserver(extprocLogger, { intervalMs: config.log.decisions.interval });
  const server = createExtProcServer({
    router,
    logger: extprocLogger,
    observer: combineObservers(...[telemetry?.observer, logObserver, gate].filter((x): x is DecisionObserver => x != null)),
    limits: extprocLimits(config),
  });
  // The gateways as the kubernetes Service's endpoints (off unless kubernetesService.publish).
  const publisher = config.kubernetesService.publish
    ? new KubernetesServicePublisher(
        config,
        { current: () => live.parts.discovery.current(), targets: () => live.parts.discovery.targets() },
        logger.child({ component: 'kubernetes-service' }),
      )
    : null;
  // Envoy's certificates as SDS files, rewritten when the files behind them change (with envoy.xds).
  const secrets = config.envoy.xds ? new SecretRotator(config, logger.child({ component: 'envoy-secrets' })) : null;
  // What the running gateway believes, on loopback or a unix socket (admin.listen).
  const version = skewgateVersion();
  // What changed lately (GET /v1/history): kept only where an admin endpoint can be asked for it.
  const history = asked ? new HistoryRecorder() : null;
  const offHistory = history === null ? () => undefined : live.discovery.onChange((snap) => history.observe(snap));
  // A large view dropped: its memory given back, as V8 alone would not under load (src/memory/).
  const reclaim = reclaimOnChange(live.discovery, { logger: logger.child({ component: 'memory' }) });
  const handlers =
    history === null || gate === null || envoyCounters === null
      ? null
      : adminHandlers({
          live,
          clientIdentity,
          version,
          startedAt: Date.now(),
          history,
          gate,
          envoy: envoyCounters,
          log: logger.child({ component: 'gate' }),
          serving: () => server.servingStatus() === 'SERVING',
          cordonStore,
          cordons: new CordonControl({
            store: cordonStore,
            members: () => live.parts.discovery.members().map((m) => m.spec.name),
            // Answered once routing publishes by it and Envoy's files are written.
            apply: async (table) => {
              await live.parts.discovery.setCordons(table);
              await xds?.idle();
            },
            log: logger.child({ component: 'cordon' }),
            changed: (c) => {
              telemetry?.recordCordon(c);
              history.cordonChanged(c);
            },
          }),
        });
  const admin =
    config.admin === undefined || handlers === null
      ? null
      : new AdminServer({ listen: config.admin.listen, logger: logger.child({ component: 'admin' }), version, handlers });
  // The gate as a Cluster API Runtime Extension (gate.runtimeExtension), answering with the admin endpoint's gate.
  const rx = config.gate.runtimeExtension;
  const runtimeExtension =
    rx === undefined || handlers === null
      ? null
      : new RuntimeExtension({
          listen: rx.listen,
          certFile: rx.certFile,
          keyFile: rx.keyFile,
          hooks: { handlerName: rx.handlerName, timeoutSeconds: rx.timeoutSeconds, failurePolicy: rx.failurePolicy },
          gate: (q) => handlers.gate(q),
          log: logger.child({ component: 'capi-hooks' }),
        });
  let adminAddress: string | null = null;
  let hooksPort: number | null = null;
  let closing: Promise<void> | undefined;
  return {
    get discovery() {
      return live.parts.discovery;
    },
    router,
    telemetry,
    workers,
    adminAddress: () => adminAddress,
    runtimeExtensionPort: () => hooksPort,
    async start() {
      // Before discovery, so that its first rounds are traced and counted.
      await telemetry?.start(live.discovery);
      await clientCa.start();
      await live.start();
      // Envoy follows the members from here on (it started from the files as they were).
      await members.follow(config, live.parts.discovery);
      await secrets?.start();
      const bound = await server.start(config.extproc.listen, config.extproc.peer, config.extproc.healthListen);
      const workerPorts = (await workers?.start()) ?? [];
      publisher?.start();
      if (admin !== null) adminAddress = await admin.start();
      envoyCounters?.start();
      hooksPort = (await runtimeExtension?.start()) ?? null;
      logger.info(
        {
          listen: config.extproc.listen,
          port: bound.port,
          ...(config.extproc.peer ? { peerListen: config.extproc.peer.listen, peerPort: bound.peerPort } : {}),
          ...(config.extproc.healthListen ? { healthListen: config.extproc.healthListen, healthPort: bound.healthPort } : {}),
          ...(workers ? { workers: config.extproc.workers, workerPorts } : {}),
          ...(adminAddress === null ? {} : { admin: adminAddress }),
          ...(hooksPort === null ? {} : { runtimeExtensionPort: hooksPort }),
          apiservers: config.apiservers.map((s) => s.name),
        },
        'skewgate serving ext_proc',
      );
      return workers ? { ...bound, workerPorts } : bound;
    },
    reload: (next, opts) => live.reload(next, opts),
    close(opts = {}) {
      closing ??= (async () => {
        await live.endReloads();
        await admin?.close();
        await runtimeExtension?.close();
        envoyCounters?.close();
        // Out of the kubernetes Service first, so that pods stop being sent here while it drains.
        await publisher?.close();
        // Nobody keeps Envoy's fast-path routes current once this process is gone: every request
        // is asked about again (by a peer skewgate, or failing open as without one).
        offFastPath();
        await sync?.close().catch((err: unknown) => logger.error({ err: String(err) }, 'fast path: cannot withdraw the routes'));
        offWorkers();
        offHistory();
        reclaim.close();
        await Promise.all([
          server.close(config.extproc.shutdownGrace, opts),
          workers?.close(config.extproc.shutdownGrace, opts.drainMs ?? 0),
        ]);
        // The counts of decisions held back since the last interval's summary.
        logObserver.close();
        await xds?.close();
        await secrets?.close();
        members.close();
        await live.close();
        clientCa.close();
        await telemetry?.shutdown();
      })();
      return closing;
    },
  };
}
