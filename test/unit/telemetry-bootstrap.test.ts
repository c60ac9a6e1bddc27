// Envoy's own OpenTelemetry tracer in the rendered bootstrap (present only when tracing is
// configured, over OTLP/gRPC or OTLP/HTTP), and the kube-apiserver tracing config the lab uses.
import t from 'tap';
import { parseConfig } from '../../src/config/load.js';
import { BootstrapError, OTEL_CLUSTER, renderBootstrap, type JsonObject } from '../../src/envoy/bootstrap.js';
import { apiserverTracingConfig } from '../../src/telemetry/kube-apiserver.js';

const base = {
  apiservers: [{ name: 'apiserver-a', url: 'https://127.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } }],
  envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' } },
};
const render = (telemetry?: unknown): JsonObject =>
  renderBootstrap(parseConfig({ ...base, ...(telemetry === undefined ? {} : { telemetry }) }, '/base/c.yaml', '/base'), {
    relativeTo: '/base',
  });

/** Walks a rendered JSON document; undefined when a step is missing. */
const get = (v: unknown, ...path: (string | number)[]): unknown =>
  path.reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string | number, unknown>)[k] : undefined), v);
const hcm = (b: JsonObject): unknown => get(b, 'static_resources', 'listeners', 0, 'filter_chains', 0, 'filters', 0, 'typed_config');
const cluster = (b: JsonObject, name: string): JsonObject | undefined =>
  (get(b, 'static_resources', 'clusters') as JsonObject[]).find((c) => c['name'] === name);
const PROTOCOL_OPTIONS = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

t.test('no tracing configured: no tracer, no collector cluster', async (t) => {
  for (const tel of [
    undefined,
    { tracing: { enabled: false } },
    { tracing: { enabled: true, envoy: false } },
    { metrics: { prometheus: { listen: '127.0.0.1:9464' } } },
  ]) {
    const b = render(tel);
    t.equal(get(hcm(b), 'tracing'), undefined, JSON.stringify(tel));
    t.equal(cluster(b, OTEL_CLUSTER), undefined);
  }
});

t.test('OTLP/gRPC: the OpenTelemetry tracer on an HTTP/2 cluster, upstream spans, sampling from the ratio', async (t) => {
  const b = render({
    serviceName: 'gw',
    tracing: { enabled: true, endpoint: 'http://127.0.0.1:4317', samplerRatio: 0.125, headers: { 'X-Tenant': 'a' } },
  });
  t.same(get(hcm(b), 'tracing'), {
    random_sampling: { value: 12.5 },
    spawn_upstream_span: true,
    provider: {
      name: 'envoy.tracers.opentelemetry',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
        grpc_service: {
          envoy_grpc: { cluster_name: OTEL_CLUSTER, authority: '127.0.0.1:4317' },
          timeout: '1s',
          initial_metadata: [{ key: 'x-tenant', value: 'a' }],
        },
        service_name: 'gw-envoy',
      },
    },
  });
  const c = cluster(b, OTEL_CLUSTER);
  t.match(c, {
    type: 'STATIC',
    load_assignment: {
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 4317 } } } }] }],
    },
  });
  t.same(get(c, 'typed_extension_protocol_options', PROTOCOL_OPTIONS, 'explicit_http_config'), { http2_protocol_options: {} });
  t.equal(get(c, 'transport_socket'), undefined, 'plaintext to an http:// collector');
  t.equal(
    get(hcm(render({ tracing: { envoy: true } })), 'tracing', 'random_sampling', 'value'),
    100,
    'envoy: true alone renders the tracer with defaults',
  );
});

t.test('OTLP/HTTP: http_service to /v1/traces on an HTTP/1.1 cluster; DNS names resolved', async (t) => {
  const b = render({ tracing: { enabled: true, protocol: 'http', endpoint: 'http://jaeger.observability:4318' } });
  t.same(get(hcm(b), 'tracing', 'provider', 'typed_config', 'http_service'), {
    http_uri: { uri: 'http://jaeger.observability:4318/v1/traces', cluster: OTEL_CLUSTER, timeout: '1s' },
  });
  const c = cluster(b, OTEL_CLUSTER);
  t.match(c, { type: 'STRICT_DNS' });
  t.same(get(c, 'typed_extension_protocol_options', PROTOCOL_OPTIONS, 'explicit_http_config'), { http_protocol_options: {} });
});

t.test('https collector: verified against caFile, refused without one', async (t) => {
  const b = render({ tracing: { enabled: true, endpoint: 'https://otel.example:4317', caFile: 'otel-ca.crt' } });
  t.match(get(cluster(b, OTEL_CLUSTER), 'transport_socket'), {
    typed_config: {
      sni: 'otel.example',
      common_tls_context: {
        alpn_protocols: ['h2'],
        validation_context: {
          trusted_ca: { filename: 'otel-ca.crt' },
          match_typed_subject_alt_names: [{ san_type: 'DNS', matcher: { exact: 'otel.example' } }],
        },
      },
    },
  });
  t.throws(() => render({ tracing: { enabled: true, endpoint: 'https://otel.example:4317' } }), BootstrapError);
});

t.test('kube-apiserver --tracing-config-file for the lab', async (t) => {
  t.equal(
    apiserverTracingConfig('127.0.0.1:4317'),
    'apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: 127.0.0.1:4317\nsamplingRatePerMillion: 1000000\n',
  );
  t.throws(() => apiserverTracingConfig('http://127.0.0.1:4317'), /without a scheme/);
});
