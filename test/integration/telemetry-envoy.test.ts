// Bootstraps with Envoy's OpenTelemetry tracer pass the REAL Envoy's `--mode validate`.
import t from 'tap';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load.js';
import { renderBootstrapYaml } from '../../src/envoy/render.js';
import { validateBootstrap } from '../../src/envoy-runtime/process.js';
import { sharedPki } from '../helpers/envoy-fixtures.js';

const pki = await sharedPki();

const variants = [
  {
    name: 'OTLP/gRPC to an IP',
    tracing: { enabled: true, endpoint: 'http://127.0.0.1:4317', samplerRatio: 0.5, headers: { 'x-tenant': 'a' } },
  },
  { name: 'OTLP/HTTP to a DNS name', tracing: { enabled: true, protocol: 'http', endpoint: 'http://localhost:4318' } },
  { name: 'OTLP/gRPC over TLS', tracing: { enabled: true, endpoint: 'https://localhost:4317', caFile: pki.caFile } },
  { name: 'OTLP/HTTP over TLS', tracing: { enabled: true, protocol: 'http', endpoint: 'https://127.0.0.1:4318', caFile: pki.caFile } },
];

for (const v of variants) {
  t.test(`envoy --mode validate: ${v.name}`, async (t) => {
    const cfg = parseConfig(
      {
        apiservers: [{ name: 'apiserver-a', url: 'https://127.0.0.1:16441', caFile: pki.caFile, credentials: { tokenFile: 'token' } }],
        extproc: { listen: '127.0.0.1:9002' },
        envoy: { listen: { address: '127.0.0.1', port: 6443 }, tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile } },
        telemetry: { tracing: v.tracing },
      },
      join(pki.dir, 'skewgate.yaml'),
      pki.dir,
    );
    const yaml = renderBootstrapYaml(cfg);
    t.match(yaml, /envoy\.tracers\.opentelemetry/);
    const res = await validateBootstrap(yaml);
    t.ok(res.ok, `valid:\n${res.output}`);
  });
}
