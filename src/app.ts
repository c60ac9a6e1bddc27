// Composition root: config → logger → discovery → router → ext_proc server, with one lifecycle.
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { DiscoveryService } from './discovery/service.js';
import { createExtProcServer } from './extproc/server.js';
import { createRouter, type RequestRouter } from './routing/router.js';

export interface Skewgate {
  readonly discovery: DiscoveryService;
  readonly router: RequestRouter;
  /** Starts discovery (first round awaited, failures included) and then the gRPC listener. */
  start(): Promise<{ port?: number }>;
  /**
   * Graceful: report NOT_SERVING for drainMs (Envoy's health check then stops sending streams),
   * stop accepting, let open streams finish up to shutdownGrace, stop discovery. Idempotent.
   */
  close(opts?: { drainMs?: number }): Promise<void>;
}

/** Long enough for Envoy's health checker to see NOT_SERVING before the listener goes away. */
export function drainTime(config: Config): number {
  const hc = config.envoy.healthCheck;
  return Math.min(config.extproc.shutdownGrace, hc.interval * hc.unhealthyThreshold + hc.timeout);
}

export function createSkewgate(config: Config, logger: Logger): Skewgate {
  const discovery = new DiscoveryService(config, { logger: logger.child({ component: 'discovery' }) });
  const router = createRouter(discovery, {
    staleAfterMs: config.discovery.staleAfter,
    retryAfterSeconds: config.routing.retryAfterSeconds,
  });
  const server = createExtProcServer({ router, logger: logger.child({ component: 'extproc' }) });
  let closing: Promise<void> | undefined;
  return {
    discovery,
    router,
    async start() {
      await discovery.start();
      const bound = await server.start(config.extproc.listen);
      logger.info({ listen: config.extproc.listen, port: bound.port, apiservers: config.apiservers.map((s) => s.name) }, 'skewgate serving ext_proc');
      return bound;
    },
    close(opts = {}) {
      closing ??= (async () => {
        await server.close(config.extproc.shutdownGrace, opts);
        await discovery.close();
      })();
      return closing;
    },
  };
}
