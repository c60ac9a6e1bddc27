// Which config file a command reads when --config is not given: $SKEWGATE_CONFIG, else
// /etc/skewgate/skewgate.yaml — where the static pods and the image's users put it — so that
// `skewgate status` inside the gateway's container needs no flag (issue 30, item 2).
import { existsSync } from 'node:fs';

export const CONFIG_ENV = 'SKEWGATE_CONFIG';
export const DEFAULT_CONFIG_FILE = '/etc/skewgate/skewgate.yaml';

/** The help text of -c, --config. */
export const CONFIG_DEFAULT_HELP = `default: $${CONFIG_ENV}, else ${DEFAULT_CONFIG_FILE}`;

export class NoConfigError extends Error {}

/** A command that cannot run without a config: the flag, the variable, or the default file. */
export function requiredConfigFile(
  given: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  exists: (file: string) => boolean = existsSync,
): string {
  const file = optionalConfigFile(given, env, exists);
  if (file !== undefined) return file;
  throw new NoConfigError(`no config: give --config FILE, or set ${CONFIG_ENV} (${DEFAULT_CONFIG_FILE}, the default, does not exist)`);
}

/**
 * A command that can do without one (status and the others, given --admin): the flag, or the
 * variable (named: a missing file is then an error), or the default file only if it exists.
 */
export function optionalConfigFile(
  given: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  exists: (file: string) => boolean = existsSync,
): string | undefined {
  if (given !== undefined && given !== '') return given;
  const named = env[CONFIG_ENV];
  if (named !== undefined && named !== '') return named;
  return exists(DEFAULT_CONFIG_FILE) ? DEFAULT_CONFIG_FILE : undefined;
}
