// Envoy's own tracer (OpenTelemetry): the connection manager's tracing section and the cluster of
// the OTLP collector it exports to, rendered from the config's telemetry.tracing. Pure.
import { isIP } from 'node:net';
import type { Config } from '../config/core/schema.js';
import { BootstrapError, type JsonObject, type PathFn } from './json.js';
import { ENVOY_TRACING_CA_REQUIRED, tracesEnvoy } from '../config/core/envoy-rules.js';

/** The OTLP collector Envoy's own tracer exports to (rendered only when tracing is configured). */
export const OTEL_CLUSTER = 'skewgate-otel';

type TracingConfig = Config['telemetry']['tracing'];

/** Defaults of the OTLP endpoint per protocol (the same as skewgate's, src/telemetry/core/settings.ts). */
const OTLP_DEFAULT_ENDPOINT = { grpc: 'http://localhost:4317', http: 'http://localhost:4318' } as const;

/**
 * Rendered from the config file alone (OTEL_* variables reach skewgate's process, not Envoy's):
 * on when telemetry.tracing.envoy is true, or unset with telemetry.tracing.enabled true.
 */
export function envoyTracing(config: Config): TracingConfig | null {
  const t = config.telemetry.tracing;
  return tracesEnvoy(t) ? t : null;
}

interface OtlpEndpoint {
  readonly protocol: 'grpc' | 'http';
  readonly url: URL;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
}

function otlpEndpoint(t: TracingConfig): OtlpEndpoint {
  const protocol = t.protocol ?? 'grpc';
  const url = new URL(t.endpoint ?? OTLP_DEFAULT_ENDPOINT[protocol]);
  const tls = url.protocol === 'https:';
  return { protocol, url, host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port === '' ? (tls ? 443 : 80) : Number(url.port), tls };
}

/**
 * The connection manager's tracer. The ext_proc call becomes a child span of the request's span
 * and carries its context to skewgate in the gRPC metadata; skewgate's decision span hangs below
 * it. spawn_upstream_span gives each upstream attempt its own span, whose context the router
 * injects into the request to the apiserver (replacing the traceparent skewgate set), so the
 * apiserver's spans join the same trace.
 */
export function tracingConfig(config: Config): JsonObject {
  const t = config.telemetry.tracing;
  const ep = otlpEndpoint(t);
  const headers = Object.entries(t.headers ?? {});
  const serviceName = `${config.telemetry.serviceName ?? 'skewgate'}-envoy`;
  const exporter: JsonObject =
    ep.protocol === 'grpc'
      ? {
          grpc_service: {
            envoy_grpc: { cluster_name: OTEL_CLUSTER, authority: ep.url.host },
            timeout: '1s',
            ...(headers.length > 0 ? { initial_metadata: headers.map(([key, value]) => ({ key: key.toLowerCase(), value })) } : {}),
          },
        }
      : {
          http_service: {
            http_uri: { uri: otlpTracesUrl(ep.url), cluster: OTEL_CLUSTER, timeout: '1s' },
            ...(headers.length > 0 ? { request_headers_to_add: headers.map(([key, value]) => ({ header: { key, value } })) } : {}),
          },
        };
  return {
    // Percent of requests without a sampled parent that are traced; a client's sampled
    // traceparent is followed either way.
    random_sampling: { value: Math.round((t.samplerRatio ?? 1) * 10000) / 100 },
    spawn_upstream_span: true,
    provider: {
      name: 'envoy.tracers.opentelemetry',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
        ...exporter,
        service_name: serviceName,
      },
    },
  };
}

function otlpTracesUrl(base: URL): string {
  const s = base.toString().replace(/\/+$/, '');
  return s.endsWith('/v1/traces') ? s : `${s}/v1/traces`;
}

export function otelCluster(config: Config, file: PathFn): JsonObject {
  const t = config.telemetry.tracing;
  const ep = otlpEndpoint(t);
  if (ep.tls && t.caFile === undefined) {
    throw new BootstrapError(`telemetry.tracing.caFile: ${ENVOY_TRACING_CA_REQUIRED} (endpoint ${ep.url.toString()})`);
  }
  const ip = isIP(ep.host) !== 0;
  return {
    name: OTEL_CLUSTER,
    ...(ip ? { type: 'STATIC' } : { type: 'STRICT_DNS', dns_lookup_family: 'V4_PREFERRED' }),
    connect_timeout: '1s',
    lb_policy: 'ROUND_ROBIN',
    load_assignment: { cluster_name: OTEL_CLUSTER, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: ep.host, port_value: ep.port } } } }] }] },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        // OTLP/gRPC needs HTTP/2; OTLP/HTTP works on HTTP/1.1 everywhere.
        explicit_http_config: ep.protocol === 'grpc' ? { http2_protocol_options: {} } : { http_protocol_options: {} },
      },
    },
    ...(ep.tls && t.caFile !== undefined
      ? {
          transport_socket: {
            name: 'envoy.transport_sockets.tls',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
              ...(ip ? {} : { sni: ep.host }),
              common_tls_context: {
                ...(ep.protocol === 'grpc' ? { alpn_protocols: ['h2'] } : {}),
                validation_context: {
                  trusted_ca: { filename: file(t.caFile) },
                  match_typed_subject_alt_names: [{ san_type: ip ? 'IP_ADDRESS' : 'DNS', matcher: { exact: ep.host } }],
                },
              },
            },
          },
        }
      : {}),
  };
}
