// `skewgate cordon|uncordon <apiserver>`: an operator's cordon through the running gateway's admin
// endpoint (POST /v1/cordon, /v1/uncordon). Exit 0 when the gateway holds it; 1 when the gateway
// did not answer or could not keep it; 2 bad usage, an unknown apiserver, or a gateway without envoy.xds.
import { hostname, userInfo } from 'node:os';
import { EXIT_BAD_CONFIG, EXIT_OK } from '../constants.js';
import type { CordonMode } from '../cordon/core/cordons.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import type { CordonAnswer } from '../app/cordon-control.js';
import { fromGatewayOrDiscovery, structured, type GatewaySource } from './one-shot.js';

export interface CordonArgs {
  readonly apiserver: string;
  /** null: uncordon. */
  readonly mode: CordonMode | null;
  readonly reason: string;
  /** Who asks, as logged and traced by the gateway; default user@host. */
  readonly by?: string | undefined;
  readonly output: 'table' | 'json' | 'yaml';
}

/** user@host of whoever runs the command ('?' for what the system will not say). */
export function defaultAsker(): string {
  let user = '?';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the host still says something.
  }
  return `${user}@${hostname()}`;
}

export async function runCordon(source: GatewaySource, a: CordonArgs): Promise<number> {
  const command = a.mode === null ? 'uncordon' : 'cordon';
  if (source.discover) {
    process.stderr.write(`skewgate ${command}: --discover does not apply: a cordon is held by the running gateway\n`);
    return EXIT_BAD_CONFIG;
  }
  const body = {
    apiserver: a.apiserver,
    ...(a.mode === null ? {} : { mode: a.mode }),
    by: a.by ?? defaultAsker(),
    ...(a.reason === '' ? {} : { reason: a.reason }),
  };
  const got = await fromGatewayOrDiscovery<CordonAnswer>(command, source, {
    ask: (gateway) => gateway(a.mode === null ? ADMIN_PATHS.uncordon : ADMIN_PATHS.cordon, body),
    discover: () => {
      throw new Error('unreachable: cordon never discovers');
    },
  });
  if (typeof got === 'number') return got;
  const r = got.answer;
  const data = structured(a.output, r);
  if (data !== null) {
    process.stdout.write(data);
    return EXIT_OK;
  }
  const now = r.mode === null ? 'not cordoned' : r.mode === 'drain' ? 'drained' : 'cordoned';
  const effect =
    r.mode === null
      ? 'it is balanced to again'
      : r.mode === 'drain'
        ? 'nothing new goes to it'
        : 'it gets only what no other member serves';
  process.stdout.write(
    r.changed
      ? `${r.apiserver} ${now} (was ${r.before === null ? 'not cordoned' : r.before === 'drain' ? 'drained' : 'cordoned'}): ${effect}\n`
      : `${r.apiserver} was already ${now}: nothing changed\n`,
  );
  if (r.cordons.length > 0 && (r.changed || r.mode !== null))
    process.stderr.write(`cordons kept in ${r.file}: ${r.cordons.map((c) => `${c.apiserver} (${c.mode})`).join(', ')}\n`);
  return EXIT_OK;
}
