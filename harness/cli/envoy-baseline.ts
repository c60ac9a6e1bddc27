// `skewgate-lab envoy-baseline --config F [--service-name N]`: the baseline Envoy's bootstrap on stdout.
import { loadConfig } from '../../src/config/load.js';
import { EXIT_OK } from '../../src/constants.js';
import { renderBaselineYaml } from '../compose/baseline.js';

export async function runEnvoyBaseline(configFile: string, serviceName?: string): Promise<number> {
  process.stdout.write(renderBaselineYaml(loadConfig(configFile), serviceName));
  return EXIT_OK;
}
