// The apiservers as the rendered bootstrap addresses them (host, port, the name their serving
// certificate must carry), and whether client identity is re-stated, which doubles the ways of
// connecting to them (clusters.ts) and the routes choosing between them (routes.ts). Pure.
import { isIP } from 'node:net';
import type { Config } from '../config/core/schema.js';

type ApiServerConfig = Config['apiservers'][number];

export interface Upstream {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly ip: boolean;
  /** Name the serving certificate must carry: serverName, else the URL host (DNS or IP SAN). */
  readonly verifyName: string;
  readonly verifyIsIp: boolean;
  readonly caFile: string | undefined;
}

export function upstreamOf(s: ApiServerConfig): Upstream {
  const url = new URL(s.url);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const ip = isIP(host) !== 0;
  const verifyName = s.serverName ?? host;
  return {
    name: s.name,
    host,
    port: url.port === '' ? 443 : Number(url.port),
    ip,
    verifyName,
    verifyIsIp: isIP(verifyName) !== 0,
    caFile: s.caFile,
  };
}

/** True when Envoy verifies client certificates and skewgate re-states them as front-proxy identity. */
export function statesIdentity(config: Config): boolean {
  return config.envoy.tls.clientCaFile !== undefined;
}
