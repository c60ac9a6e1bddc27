// Telemetry settings: the config file's telemetry section, the OTEL_* variables, precedence, and
// "off unless asked for".
import t from 'tap';
import { ConfigError } from '../../src/config/core/problems.js';
import { parseConfig } from '../../src/config/load.js';
import { describeTelemetry, parseKeyValueList, resolveTelemetrySettings, telemetryDisabled } from '../../src/telemetry/core/settings.js';

const minimal = {
  apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } }],
  envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' } },
};
const cfg = (telemetry?: unknown): ReturnType<typeof parseConfig> =>
  parseConfig({ ...minimal, ...(telemetry === undefined ? {} : { telemetry }) }, 'test.yaml', '/base');
const settings = (telemetry: unknown, env: Record<string, string> = {}): ReturnType<typeof resolveTelemetrySettings> =>
  resolveTelemetrySettings(cfg(telemetry).telemetry, env);

t.test('off by default: no tracing, no metrics, nothing to load', async (t) => {
  const s = resolveTelemetrySettings(cfg().telemetry, {});
  t.equal(s.tracing, null);
  t.equal(s.metrics, null);
  t.ok(telemetryDisabled(s));
  t.equal(s.serviceName, 'skewgate');
});

t.test('config file: tracing over gRPC and HTTP, sampler ratio, headers, CA resolved against the file', async (t) => {
  const g = settings({
    tracing: {
      enabled: true,
      endpoint: 'http://collector:4317',
      samplerRatio: 0.25,
      headers: { 'x-api-key': 's3cret' },
      caFile: 'otel-ca.crt',
    },
  });
  t.same(g.tracing?.otlp, {
    protocol: 'grpc',
    url: 'http://collector:4317',
    headers: { 'x-api-key': 's3cret' },
    caFile: '/base/otel-ca.crt',
  });
  t.same(g.tracing?.sampler, { parentBased: true, ratio: 0.25 });
  t.equal(g.tracing?.batchDelayMs, 5000);
  const h = settings({ tracing: { enabled: true, protocol: 'http', endpoint: 'https://collector:4318/' } });
  t.equal(h.tracing?.otlp.url, 'https://collector:4318/v1/traces', 'OTLP/HTTP: the signal path is appended to the base URL');
  t.equal(settings({ tracing: { enabled: true, protocol: 'http' } }).tracing?.otlp.url, 'http://localhost:4318/v1/traces');
  t.equal(settings({ tracing: { enabled: true } }).tracing?.otlp.url, 'http://localhost:4317');
});

t.test('metrics: Prometheus listen address, OTLP push following the tracing collector', async (t) => {
  const s = settings({
    tracing: { enabled: true, endpoint: 'http://c:4317', headers: { a: 'b' } },
    metrics: { prometheus: { listen: '0.0.0.0:9464' }, otlp: { interval: '15s' } },
  });
  t.same(s.metrics?.prometheus, { host: '0.0.0.0', port: 9464 });
  t.match(s.metrics?.otlp, { protocol: 'grpc', url: 'http://c:4317', headers: { a: 'b' }, intervalMs: 15_000 });
  const only = settings({ metrics: { prometheus: { listen: '127.0.0.1:0' } } });
  t.equal(only.tracing, null, 'metrics alone do not turn tracing on');
  t.same(only.metrics, { prometheus: { host: '127.0.0.1', port: 0 }, otlp: null });
  t.equal(settings({ metrics: { otlp: { enabled: false } } }).metrics, null);
});

t.test('environment: OTEL_* variables fill what the file leaves unset', async (t) => {
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env-collector:4318',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_SERVICE_NAME: 'gateway-1',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.1',
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc,x-tenant=t1',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,k8s.cluster.name=c1',
    OTEL_BSP_SCHEDULE_DELAY: '250',
  };
  const s = settings(undefined, env);
  t.ok(s.tracing, 'a collector endpoint in the environment turns tracing on');
  t.same(s.tracing?.otlp, {
    protocol: 'http',
    url: 'http://env-collector:4318/v1/traces',
    headers: { authorization: 'Bearer abc', 'x-tenant': 't1' },
    caFile: undefined,
  });
  t.same(s.tracing?.sampler, { parentBased: true, ratio: 0.1 });
  t.equal(s.tracing?.batchDelayMs, 250);
  t.equal(s.serviceName, 'gateway-1');
  t.same(s.resourceAttributes, { 'deployment.environment': 'prod', 'k8s.cluster.name': 'c1' });
  t.equal(
    settings(undefined, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://x:4318/custom', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' })
      .tracing?.otlp.url,
    'http://x:4318/custom',
    'the signal-specific URL is used as it is',
  );
  t.equal(settings(undefined, { OTEL_TRACES_EXPORTER: 'otlp' }).tracing?.otlp.url, 'http://localhost:4317');
});

t.test('the file wins over the environment; explicit false wins; OTEL_SDK_DISABLED turns everything off', async (t) => {
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4317',
    OTEL_SERVICE_NAME: 'env-name',
    OTEL_TRACES_SAMPLER: 'always_off',
    OTEL_EXPORTER_OTLP_HEADERS: 'k=env,j=env',
  };
  const s = settings(
    { serviceName: 'file-name', tracing: { enabled: true, endpoint: 'http://file:4317', samplerRatio: 1, headers: { k: 'file' } } },
    env,
  );
  t.equal(s.serviceName, 'file-name');
  t.equal(s.tracing?.otlp.url, 'http://file:4317');
  t.same(s.tracing?.otlp.headers, { k: 'file', j: 'env' }, "headers merge, the file's win");
  t.same(s.tracing?.sampler, { parentBased: true, ratio: 1 });
  t.equal(settings({ tracing: { enabled: false } }, env).tracing, null);
  t.equal(settings(undefined, { ...env, OTEL_TRACES_EXPORTER: 'none' }).tracing, null);
  const off = settings(
    { tracing: { enabled: true }, metrics: { prometheus: { listen: '127.0.0.1:9464' } } },
    { OTEL_SDK_DISABLED: 'true' },
  );
  t.ok(telemetryDisabled(off));
});

t.test('OTEL_TRACES_SAMPLER values', async (t) => {
  const sampler = (name: string, arg?: string): unknown =>
    settings({ tracing: { enabled: true } }, { OTEL_TRACES_SAMPLER: name, ...(arg ? { OTEL_TRACES_SAMPLER_ARG: arg } : {}) }).tracing
      ?.sampler;
  t.same(sampler('always_on'), { parentBased: false, ratio: 1 });
  t.same(sampler('always_off'), { parentBased: false, ratio: 0 });
  t.same(sampler('traceidratio', '0.5'), { parentBased: false, ratio: 0.5 });
  t.same(sampler('parentbased_always_off'), { parentBased: true, ratio: 0 });
  t.same(sampler('parentbased_always_on'), { parentBased: true, ratio: 1 });
  const bad = settings({ tracing: { enabled: true } }, { OTEL_TRACES_SAMPLER: 'jaeger_remote', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
  t.same(bad.tracing?.sampler, { parentBased: true, ratio: 1 });
  t.equal(bad.warnings.length, 2, 'unsupported values are reported, not fatal');
});

t.test('Prometheus from the environment', async (t) => {
  const s = settings(undefined, { OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_PORT: '9999' });
  t.same(s.metrics?.prometheus, { host: '127.0.0.1', port: 9999 });
});

t.test('describeTelemetry names headers but never their values', async (t) => {
  const s = settings({ tracing: { enabled: true, headers: { authorization: 'Bearer top-secret' } }, metrics: { otlp: {} } });
  const text = JSON.stringify(describeTelemetry(s));
  t.notMatch(text, /top-secret/);
  t.match(text, /authorization/);
});

t.test('parseKeyValueList', async (t) => {
  t.same(parseKeyValueList('a=1, b = two%2Cthree ,=x,novalue,c=%ZZ'), { a: '1', b: 'two,three', c: '%ZZ' });
  t.same(parseKeyValueList(undefined), {});
});

t.test('config validation of the telemetry section', async (t) => {
  const problems = (telemetry: unknown): string[] => {
    try {
      cfg(telemetry);
      return [];
    } catch (err) {
      if (err instanceof ConfigError) return err.problems.map((p) => p.path);
      throw err;
    }
  };
  t.same(problems({ tracing: { endpoint: 'grpc://x:4317', protocol: 'udp', samplerRatio: 2 } }), [
    'telemetry.tracing.endpoint',
    'telemetry.tracing.protocol',
    'telemetry.tracing.samplerRatio',
  ]);
  t.same(problems({ metrics: { prometheus: { listen: 'nope' } } }), ['telemetry.metrics.prometheus.listen']);
  t.same(problems({ tracing: { headers: { 'bad header': 'v' } } }), ['telemetry.tracing.headers.bad header']);
  t.same(problems({ traces: {} }), ['telemetry'], 'unknown keys are refused');
  try {
    parseConfig(
      { ...minimal, apiservers: [{ name: 'skewgate-otel', url: 'https://127.0.0.1:6443', credentials: { tokenFile: 'token' } }] },
      't',
      '/b',
    );
    t.fail('reserved name accepted');
  } catch (err) {
    t.match((err as ConfigError).problems, [{ path: 'apiservers[0].name', message: /reserved/ }]);
  }
});
