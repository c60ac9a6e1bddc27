// The gateway's health listener for the load balancer in front of the gateways: plain HTTP on its
// own port, answered by Envoy itself (the health_check filter), so it tells the truth about this
// Envoy's clusters even while skewgate is down. Pure.
import type { Config } from '../config/core/schema.js';
import { HEALTH_PATH } from '../constants.js';
import { DEFAULT_CLUSTER, EXTPROC_CLUSTER } from './clusters.js';
import type { JsonObject } from './json.js';

export const HEALTH_LISTENER = 'skewgate-health';

/**
 * Whether this gateway needs a skewgate to serve: with client certificates, a request whose
 * certificate no skewgate can state is refused (401); with failureMode closed, every request is.
 * With tokens only and failing open, Envoy balances on without one.
 */
export function needsSkewgate(config: Config): boolean {
  return config.envoy.tls.clientCaFile !== undefined || config.extproc.failureMode === 'closed';
}

/**
 * GET /ready → 200 while at least one apiserver of the balanced pool passes Envoy's /readyz check
 * and, when needsSkewgate(), at least one skewgate (this node's or a peer's) passes its gRPC
 * health check; 503 otherwise, and while Envoy drains. Any other path: 404.
 */
export function healthListener(config: Config): JsonObject | null {
  const health = config.envoy.health;
  if (health === undefined) return null;
  // "At least 1 %" of a cluster's hosts: any healthy host passes, none fails.
  const required: Record<string, JsonObject> = { [DEFAULT_CLUSTER]: { value: 1 } };
  if (needsSkewgate(config)) required[EXTPROC_CLUSTER] = { value: 1 };
  return {
    name: HEALTH_LISTENER,
    address: { socket_address: { address: health.address, port_value: health.port } },
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
              stat_prefix: 'skewgate_health',
              codec_type: 'AUTO',
              route_config: { name: HEALTH_LISTENER, virtual_hosts: [{ name: HEALTH_LISTENER, domains: ['*'], routes: [] }] },
              http_filters: [
                {
                  name: 'envoy.filters.http.health_check',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck',
                    pass_through_mode: false,
                    headers: [{ name: ':path', string_match: { exact: HEALTH_PATH } }],
                    cluster_min_healthy_percentages: required,
                  },
                },
                { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
              ],
            },
          },
        ],
      },
    ],
  };
}
