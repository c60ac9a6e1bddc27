// Renders Envoy's v3 bootstrap from the skewgate config. Pure: no I/O, paths are only rewritten.
// This module composes the sections and is the renderer's entry point (its names are re-exported
// here); each section has its own module: listener.ts (TLS listener, connection manager, filter
// chain), routes.ts, clusters.ts, tracing.ts (Envoy's own tracer); json.ts and upstreams.ts hold
// what they share.
import { FAST_PATH_RE2_PROGRAM_LIMIT } from './fast-routes.js';
import type { Config } from '../config/core/schema.js';
import { apiserverClusters, extprocCluster, HIGH_LIMIT } from './clusters.js';
import { renderPath, type JsonObject } from './json.js';
import { healthListener } from './health-listener.js';
import { listener } from './listener.js';
import { envoyTracing, otelCluster } from './tracing.js';
import { upstreamOf } from './upstreams.js';
import { cdsConfig } from './xds.js';

export { DEFAULT_CLUSTER, EXTPROC_CLUSTER, FRONT_PROXY_SUFFIX } from './clusters.js';
export { BootstrapError, duration, renderPath, type Json, type JsonObject } from './json.js';
export {
  ENVOY_SANITIZED_REQUEST_HEADER_PREFIXES,
  ENVOY_SANITIZED_REQUEST_HEADERS,
  EXTPROC_FILTER,
  LISTENER_NAME,
  MAX_REQUEST_HEADERS_COUNT,
  MAX_REQUEST_HEADERS_KB,
} from './listener.js';
export { IDENTITY_BACKSTOP_ROUTE, READ_NUM_RETRIES, READ_RETRY_ON, WRITE_NUM_RETRIES, WRITE_RETRY_ON } from './routes.js';
export { envoyTracing, OTEL_CLUSTER } from './tracing.js';
export { HEALTH_LISTENER } from './health-listener.js';

/** Runtime guard (off by default in Envoy 1.34–1.40) for half-closing, not resetting, ext_proc streams. */
export const EXTPROC_GRACEFUL_CLOSE = 'envoy.reloadable_features.ext_proc_graceful_grpc_close';

export interface RenderOptions {
  /**
   * Render every file path inside this folder relative to it (Envoy resolves relative paths
   * against its working directory), so a committed bootstrap holds no machine-specific path.
   */
  readonly relativeTo?: string;
}

export function renderBootstrap(config: Config, options: RenderOptions = {}): JsonObject {
  const file = (p: string): string => renderPath(p, options.relativeTo);
  const upstreams = config.apiservers.map(upstreamOf);
  return {
    node: { id: 'skewgate-envoy', cluster: 'skewgate' },
    admin: {
      address: { socket_address: { address: config.envoy.admin.address, port_value: config.envoy.admin.port } },
    },
    static_resources: {
      listeners: [listener(config, upstreams, file), ...[healthListener(config)].filter((l) => l !== null)],
      clusters: [
        // With filesystem xDS the apiserver clusters live in cds.json (xds.ts), so members can change.
        ...(config.envoy.xds ? [] : apiserverClusters(config, upstreams, file)),
        extprocCluster(config, file),
        ...(envoyTracing(config) ? [otelCluster(config, file)] : []),
      ],
    },
    ...(config.envoy.xds ? { dynamic_resources: cdsConfig(config.envoy.xds.directory, file) } : {}),
    // Envoy (>= 1.37) ends each ext_proc stream right after the last reply it needs. By default it
    // resets the stream (RST_STREAM); Node's HTTP/2 server counts a stream of resets as a
    // rapid-reset attack and closes the connection about every 1,000 requests, failing the
    // streams in flight. A graceful half-close ends the stream cleanly instead.
    layered_runtime: {
      layers: [
        {
          name: 'skewgate',
          static_layer: {
            [EXTPROC_GRACEFUL_CLOSE]: true,
            // The fast path's routes match with one large expression each (fast-routes.ts); set
            // with filesystem xDS whatever routing.fastPath says, since a reload may turn it on.
            ...(config.envoy.xds ? { 're2.max_program_size.error_level': FAST_PATH_RE2_PROGRAM_LIMIT, 're2.max_program_size.warn_level': FAST_PATH_RE2_PROGRAM_LIMIT } : {}),
          },
        },
      ],
    },
    overload_manager: {
      resource_monitors: [
        {
          name: 'envoy.resource_monitors.global_downstream_max_connections',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
            max_active_downstream_connections: HIGH_LIMIT,
          },
        },
      ],
    },
  };
}
