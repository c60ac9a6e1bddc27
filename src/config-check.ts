// The one validation of a config for a command, in stages: the fields and the command's needs
// (src/config.ts), then what the files they name hold: the CA bundles, and the TLS material the
// command acts on (src/envoy/tls-check.ts). Every problem of every stage is listed at once: the
// files are checked even when the fields have problems (those that name a file). `validate` runs
// every check of `serve` and of `envoy-config`, so that nothing it passes is refused by them later.
import { ConfigError, configFileProblems, readConfig, type Config, type ConfigUse } from './config.js';
import { tlsProblems } from './envoy/tls-check.js';

export async function checkConfig(file: string, use: ConfigUse, now: number = Date.now()): Promise<Config> {
  const read = readConfig(file, use);
  const problems = [...read.problems, ...configFileProblems(read.files), ...(await tlsProblems(read.files, use, now))];
  if (read.config === null || problems.length > 0) throw new ConfigError(read.source, problems);
  return read.config;
}
