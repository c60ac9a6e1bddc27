// The one validation of a config for a command, in stages: the fields and the command's needs
// (src/config/load.ts), then what the files they name hold: the CA bundles, and the TLS material the
// command acts on (src/config/tls.ts). Every problem of every stage is listed at once: the
// files are checked even when the fields have problems (those that name a file). `validate` runs
// every check of `serve` and of `envoy-config`, so that nothing it passes is refused by them later;
// `serve` runs it at start and again on every reload (src/cli/serve.ts), so that a reload is never
// taken that the start would refuse.
import { ConfigError } from './core/problems.js';
import { configFileProblems, readConfig } from './load.js';
import { type Config } from './core/schema.js';
import { type ConfigUse } from './core/checks.js';
import { tlsProblems } from './tls.js';

export async function checkConfig(file: string, use: ConfigUse, now: number = Date.now()): Promise<Config> {
  const read = readConfig(file, use);
  const problems = [...read.problems, ...configFileProblems(read.files), ...(await tlsProblems(read.files, use, now))];
  if (read.config === null || problems.length > 0) throw new ConfigError(read.source, problems);
  return read.config;
}
