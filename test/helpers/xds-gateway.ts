// A gateway as `skewgate serve` runs it, in this process, for end-to-end tests of the fast path: a
// real Envoy on filesystem xDS (the seed files written first) and skewgate's parts told Envoy's
// admin address. Closed skewgate first — it withdraws its fast-path routes and asks this Envoy to
// confirm — then Envoy. Not started: a test may subscribe to skewgate before it starts.
import type { Test } from 'tap';
import { createSkewgate, type Skewgate, type SkewgateOptions } from '../../src/app/skewgate.js';
import type { Config } from '../../src/config/core/schema.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, type EnvoyHandle } from '../../src/envoy-runtime/process.js';
import { writeSeedXds } from '../../src/envoy-runtime/xds-disk.js';
import { createLogger } from '../../src/util/log.js';
import { onEphemeralPort } from './envoy-fixtures.js';

export async function xdsGateway(
  t: Test,
  config: Config,
  o: { readonly logFile?: string; readonly skewgate?: SkewgateOptions } = {},
): Promise<{ readonly envoy: EnvoyHandle; readonly skewgate: Skewgate }> {
  writeSeedXds(config);
  const envoy = await startEnvoy({
    bootstrap: onEphemeralPort(renderBootstrap(config)),
    ...(o.logFile === undefined ? {} : { logFile: o.logFile }),
  });
  const skewgate = createSkewgate(config, createLogger('warn'), { ...o.skewgate, envoyAdminUrl: envoy.adminUrl });
  t.teardown(async () => {
    await skewgate.close({ drainMs: 0 });
    await envoy.stop();
  });
  return { envoy, skewgate };
}
