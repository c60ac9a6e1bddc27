// The one validation of a config for a command, in stages: the fields and the command's needs
// (src/config.ts), then what the files they name hold: the CA bundles, and the TLS material the
// command acts on (src/envoy/tls-check.ts). Each stage lists every problem it finds at once; the
// files are read only once the fields are valid. `validate` runs every check of `serve` and of
// `envoy-config`, so that nothing it passes is refused by them later.
import { ConfigError, configFileProblems, parseConfigFile, type Config, type ConfigUse } from './config.js';
import { tlsProblems } from './envoy/tls-check.js';

export async function checkConfig(file: string, use: ConfigUse, now: number = Date.now()): Promise<Config> {
  const config = parseConfigFile(file, use);
  const problems = [...configFileProblems(config), ...(await tlsProblems(config, use, now))];
  if (problems.length > 0) throw new ConfigError(config.source, problems);
  return config;
}
