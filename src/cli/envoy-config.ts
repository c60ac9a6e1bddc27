// `skewgate envoy-config`: the Envoy bootstrap for a config, on stdout; with envoy.xds, also the
// seed cluster and route files Envoy starts from, where none are yet.
import { checkConfig } from '../config/check.js';
import { renderBootstrapYaml } from '../envoy/render.js';
import { writeSeedXds } from '../envoy-runtime/xds-disk.js';
import { EXIT_OK } from '../constants.js';

export async function runEnvoyConfig(configFile: string, relativeTo?: string): Promise<number> {
  const config = await checkConfig(configFile, 'envoy-config');
  const yaml = renderBootstrapYaml(config, relativeTo === undefined ? {} : { relativeTo });
  const seed = writeSeedXds(config, relativeTo);
  for (const f of seed.written)
    process.stderr.write(`envoy-config: wrote the seed ${f} (the configured apiservers) in ${config.envoy.xds?.directory}\n`);
  for (const f of seed.kept)
    process.stderr.write(`envoy-config: kept ${f} in ${config.envoy.xds?.directory} (the members skewgate last wrote)\n`);
  process.stdout.write(yaml);
  return EXIT_OK;
}
