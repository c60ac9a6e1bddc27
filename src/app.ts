// Composition root: config → logger → telemetry → discovery → router → ext_proc server, with one
// lifecycle. Discovery and the router are rebuilt from a reloaded config (src/reload.ts).
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { DiscoveryService } from './discovery/service.js';
import { combineObservers, createLogObserver } from './extproc/observer.js';
import { createExtProcServer } from './extproc/server.js';
import { ClientCaBundle } from './identity/client-ca.js';
import { stateClientIdentity } from './identity/client-identity.js';
import { LiveConfig, type ReloadInput, type ReloadOptions, type ReloadResult } from './reload.js';
import { createRouter, type RequestRouter } from './routing/router.js';
import type { SdkOptions } from './telemetry/sdk.js';
import { resolveTelemetrySettings, type Env } from './telemetry/settings.js';
import { createTelemetry, type Telemetry } from './telemetry/telemetry.js';

export interface SkewgateOptions {
  /** OTEL_* variables are read from here; default process.env. */
  readonly env?: Env;
  /** Tests: in-memory span exporter and metric readers. */
  readonly telemetry?: SdkOptions;
}

export interface Skewgate {
  /** The discovery service running now: a reload replaces it. */
  readonly discovery: DiscoveryService;
  readonly router: RequestRouter;
  /** null when telemetry is off: no OpenTelemetry SDK is loaded then. */
  readonly telemetry: Telemetry | null;
  /** Starts telemetry, discovery (first round awaited, failures included), then the gRPC listener. */
  start(): Promise<{ port?: number }>;
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
  const telemetry = createTelemetry({
    settings: resolveTelemetrySettings(config.telemetry, opts.env ?? process.env),
    apiservers: config.apiservers,
    logger: logger.child({ component: 'telemetry' }),
    ...(opts.telemetry ? { sdk: opts.telemetry } : {}),
  });
  const clientCa = new ClientCaBundle(config.envoy.tls.clientCaFile, { logger: logger.child({ component: 'identity' }) });
  const live = new LiveConfig(config, {
    build(c) {
      const discovery = new DiscoveryService(c, { logger: logger.child({ component: 'discovery' }) });
      const router = createRouter(discovery, {
        staleAfterMs: c.discovery.staleAfter,
        retryAfterSeconds: c.routing.retryAfterSeconds,
        // The bundle's current verifier: a rotated CA takes effect on the next request.
        clientIdentity: (xfcc, now) => clientCa.verifier()?.state(xfcc, now) ?? stateClientIdentity(xfcc, null, now),
      });
      return { config: c, discovery, router };
    },
    logger: logger.child({ component: 'config' }),
    applied(c, changed) {
      if (changed.includes('log.level')) logger.level = c.log.level;
      if (changed.includes('apiservers')) telemetry?.setApiservers(c.apiservers);
    },
    onResult: (r) => telemetry?.recordReload(r.result, r.generation),
  });
  // Always the running router: the ext_proc server never sees a reload.
  const router = live.router;
  const extprocLogger = logger.child({ component: 'extproc' });
  const logObserver = createLogObserver(extprocLogger);
  const server = createExtProcServer({
    router,
    logger: extprocLogger,
    observer: telemetry ? combineObservers(telemetry.observer, logObserver) : logObserver,
  });
  let closing: Promise<void> | undefined;
  return {
    get discovery() {
      return live.parts.discovery;
    },
    router,
    telemetry,
    async start() {
      // Before discovery, so that its first rounds are traced and counted.
      await telemetry?.start(live.discovery);
      await clientCa.start();
      await live.start();
      const bound = await server.start(config.extproc.listen);
      logger.info(
        { listen: config.extproc.listen, port: bound.port, apiservers: config.apiservers.map((s) => s.name) },
        'skewgate serving ext_proc',
      );
      return bound;
    },
    reload: (next, opts) => live.reload(next, opts),
    close(opts = {}) {
      closing ??= (async () => {
        await live.endReloads();
        await server.close(config.extproc.shutdownGrace, opts);
        await live.close();
        clientCa.close();
        await telemetry?.shutdown();
      })();
      return closing;
    },
  };
}
