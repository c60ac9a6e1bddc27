// `skewgate envoy-config`: the Envoy bootstrap for a config, on stdout.
import { loadConfig } from '../config.js';
import { renderBootstrapYaml } from '../envoy/render.js';
import { EXIT_OK } from '../constants.js';

export async function runEnvoyConfig(configFile: string, relativeTo?: string): Promise<number> {
  const config = loadConfig(configFile);
  process.stdout.write(renderBootstrapYaml(config, relativeTo === undefined ? {} : { relativeTo }));
  return EXIT_OK;
}
