// `skewgate serve`: run until SIGTERM, SIGINT or SIGQUIT, then shut down gracefully and exit 0.
// SIGHUP, or a change of the config file, reloads the config without a restart (src/reload.ts).
import { resolve } from 'node:path';
import { loadConfig } from '../config.js';
import { watchConfigFile } from '../config-watch.js';
import { createLogger } from '../log.js';
import { createSkewgate, drainTime } from '../app.js';
import { EXIT_OK } from '../constants.js';
import { assertFrontProxySafe } from '../envoy/tls-check.js';
import { fileStamp } from '../file-stamp.js';

/** Each of these drains (never an immediate exit); a second one during the drain is only logged. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGQUIT'];

export async function runServe(configFile: string): Promise<number> {
  // Stamped before it is read: a write in between is then seen as a change, not missed.
  const stamp = await fileStamp(resolve(configFile));
  const config = loadConfig(configFile);
  // Refuse to state identities with a front-proxy certificate the apiservers would also take as a client's.
  await assertFrontProxySafe(config);
  const logger = createLogger(config.log.level);
  const app = createSkewgate(config, logger);
  // The file is read again when the reload runs: reloads asked for meanwhile merge into one.
  const reload = (trigger: string): void => void app.reload(() => loadConfig(config.source), { trigger });
  const watch = watchConfigFile(config.source, { stamp, logger, onChange: () => reload('file changed') });
  process.on('SIGHUP', () => void watch.markSeen().then(() => reload('SIGHUP')));
  let stopping = false;
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        logger.warn({ signal }, 'already shutting down: the drain goes on');
        return;
      }
      stopping = true;
      logger.info({ signal }, 'shutting down: no new streams, finishing open ones');
      watch.close();
      void app.close({ drainMs: drainTime(config) }).then(resolve);
    };
    for (const signal of STOP_SIGNALS) process.on(signal, stop);
  });
  try {
    await app.start();
  } catch (err) {
    watch.close();
    throw err;
  }
  await stopped;
  logger.info('stopped');
  logger.flush();
  return EXIT_OK;
}
