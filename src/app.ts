// Composition root: config → logger → telemetry → discovery → router → ext_proc server, with one
// lifecycle.
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { DiscoveryService } from './discovery/service.js';
import { combineObservers, createLogObserver } from './extproc/observer.js';
import { createExtProcServer } from './extproc/server.js';
import { ClientCaBundle } from './identity/client-ca.js';
import { stateClientIdentity } from './identity/client-identity.js';
import { createRouter, type RequestRouter } from './routing/router.js';
import type { SdkOptions } from './telemetry/sdk.js';
import { resolveTelemetrySettings, type Env } from './telemetry/settings.js';
import { createTelemetry, type Telemetry } from './telemetry/telemetry.js';
import { knownMemberSpec } from './discovery/members.js';
import { readKnownMembers, XdsWriter } from './envoy/xds-files.js';

export interface SkewgateOptions {
  /** OTEL_* variables are read from here; default process.env. */
  readonly env?: Env;
  /** Tests: in-memory span exporter and metric readers. */
  readonly telemetry?: SdkOptions;
}

export interface Skewgate {
  readonly discovery: DiscoveryService;
  readonly router: RequestRouter;
  /** null when telemetry is off: no OpenTelemetry SDK is loaded then. */
  readonly telemetry: Telemetry | null;
  /** Starts telemetry, discovery (first round awaited, failures included), then the gRPC listener. */
  start(): Promise<{ port?: number }>;
  /**
   * Graceful: report NOT_SERVING for drainMs (Envoy's health check then stops sending streams),
   * stop accepting, let open streams finish up to shutdownGrace, stop discovery, flush telemetry.
   * Idempotent.
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
  const xdsDir = config.envoy.xds?.directory;
  const xdsLogger = logger.child({ component: 'xds' });
  // The members a previous run wrote for Envoy: with the seed gone (every configured apiserver
  // replaced), they are how this run finds the control plane again.
  const lastKnown =
    xdsDir === undefined ? [] : readKnownMembers(xdsDir, xdsLogger).map((k) => knownMemberSpec(k, config.membership.template));
  const discovery = new DiscoveryService(config, { logger: logger.child({ component: 'discovery' }), lastKnown });
  const xds = xdsDir === undefined ? null : new XdsWriter(config, xdsLogger);
  const clientCa = new ClientCaBundle(config.envoy.tls.clientCaFile, { logger: logger.child({ component: 'identity' }) });
  const router = createRouter(discovery, {
    staleAfterMs: config.discovery.staleAfter,
    retryAfterSeconds: config.routing.retryAfterSeconds,
    // The bundle's current verifier: a rotated CA takes effect on the next request.
    clientIdentity: (xfcc, now) => clientCa.verifier()?.state(xfcc, now) ?? stateClientIdentity(xfcc, null, now),
  });
  const extprocLogger = logger.child({ component: 'extproc' });
  const logObserver = createLogObserver(extprocLogger);
  const server = createExtProcServer({
    router,
    logger: extprocLogger,
    observer: telemetry ? combineObservers(telemetry.observer, logObserver) : logObserver,
  });
  let closing: Promise<void> | undefined;
  return {
    discovery,
    router,
    telemetry,
    async start() {
      // Before discovery, so that its first rounds are traced and counted.
      await telemetry?.start(discovery);
      await clientCa.start();
      await discovery.start();
      // Envoy follows the members from here on (it started from the files as they were).
      if (xds) {
        discovery.onMembers((m) => void xds.update(m));
        await xds.update(discovery.members());
      }
      const bound = await server.start(config.extproc.listen);
      logger.info(
        { listen: config.extproc.listen, port: bound.port, apiservers: config.apiservers.map((s) => s.name) },
        'skewgate serving ext_proc',
      );
      return bound;
    },
    close(opts = {}) {
      closing ??= (async () => {
        await server.close(config.extproc.shutdownGrace, opts);
        await xds?.close();
        await discovery.close();
        clientCa.close();
        await telemetry?.shutdown();
      })();
      return closing;
    },
  };
}
