// `skewgate serve`: run until SIGTERM/SIGINT, then shut down gracefully and exit 0.
import { loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { createSkewgate, drainTime } from '../app.js';
import { EXIT_OK } from '../constants.js';
import { assertFrontProxySafe } from '../envoy/tls-check.js';

export async function runServe(configFile: string): Promise<number> {
  const config = loadConfig(configFile);
  // Refuse to state identities with a front-proxy certificate the apiservers would also take as a client's.
  await assertFrontProxySafe(config);
  const logger = createLogger(config.log.level);
  const app = createSkewgate(config, logger);
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals): void => {
      logger.info({ signal }, 'shutting down: no new streams, finishing open ones');
      void app.close({ drainMs: drainTime(config) }).then(resolve);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await app.start();
  await stopped;
  logger.info('stopped');
  logger.flush();
  return EXIT_OK;
}
