// `skewgate serve`: run until SIGTERM, SIGINT or SIGQUIT, then shut down gracefully and exit 0.
// SIGHUP, or a change of the config file, reloads the config without a restart (src/app/reload.ts).
import { resolve } from 'node:path';
import { checkConfig } from '../config/check.js';
import { watchConfigFile } from '../app/config-watch.js';
import { createLogger } from '../util/log.js';
import { createSkewgate, drainTime } from '../app/skewgate.js';
import { EXIT_OK } from '../constants.js';
import { fileStamp } from '../util/file-stamp.js';
import type { Config } from '../config/core/schema.js';
import type { LogFormat } from '../util/log.js';
import { skewgateVersion } from '../util/version.js';

/** Each of these drains (never an immediate exit); a second one during the drain is only logged. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGQUIT'];

/** The config with `--log-format` in place of the file's (on every reload too: no restart asked for). */
function withLogFormat(config: Config, format: LogFormat | undefined): Config {
  return format === undefined || config.log.format === format
    ? config
    : Object.freeze({ ...config, log: Object.freeze({ ...config.log, format }) });
}

export async function runServe(configFile: string, logFormat?: LogFormat): Promise<number> {
  // Stamped before it is read: a write in between is then seen as a change, not missed.
  const stamp = await fileStamp(resolve(configFile));
  // Among the checks: no identities stated with a front-proxy certificate the apiservers would also take as a client's.
  const config = withLogFormat(await checkConfig(configFile, 'serve'), logFormat);
  const logger = createLogger(config.log.level, process.stderr, config.log.format);
  logger.info({ version: skewgateVersion(), node: process.version, pid: process.pid, config: config.source }, 'skewgate starting');
  const app = createSkewgate(config, logger);
  // The file is read again when the reload runs: reloads asked for meanwhile merge into one.
  const reload = (trigger: string): void =>
    void app.reload(async () => withLogFormat(await checkConfig(config.source, 'serve'), logFormat), { trigger });
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
