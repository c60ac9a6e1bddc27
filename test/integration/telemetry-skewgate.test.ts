// The whole skewgate (createSkewgate) with telemetry on, over a real gRPC stream and real fake
// apiservers: the decision span and the traceparent it sends upstream, discovery spans, the
// Prometheus endpoint over HTTP, flush on shutdown through the real OTLP/HTTP exporter; and with
// telemetry off, nothing.
import t from 'tap';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { request } from 'undici';
import { createSkewgate, type Skewgate, type SkewgateOptions } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import { createLogger } from '../../src/util/log.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { FakeCluster, startFake, testPki, tokenServer, type FakeApiServer, type Pki } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';
import { TRACEPARENT, createExtProcClient, replyHeader, type ExtProcTestClient } from '../helpers/extproc-client.js';

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

let pki: Pki;
let servers: FakeApiServer[];
t.before(async () => {
  pki = await testPki();
  const cluster = new FakeCluster();
  servers = [
    await startFake(t, { name: 'apiserver-a', pki, cluster, builtins: BUILTINS_OLD }),
    await startFake(t, { name: 'apiserver-c', pki, cluster, builtins: BUILTINS_NEW }),
  ];
});

function config(telemetry?: unknown): Config {
  return parseConfig(
    {
      apiservers: servers.map((s) => tokenServer(s, pki)),
      discovery: { interval: '60s', watch: false },
      extproc: { listen: '127.0.0.1:0', shutdownGrace: '1s' },
      envoy: { tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile } },
      ...(telemetry === undefined ? {} : { telemetry }),
    },
    join(pki.dir, 'skewgate.yaml'),
    pki.dir,
  );
}

async function started(
  t: Tap,
  telemetry: unknown,
  opts: SkewgateOptions = { env: {} },
): Promise<{ app: Skewgate; client: ExtProcTestClient }> {
  const app = createSkewgate(config(telemetry), createLogger('silent'), opts);
  const { port } = await app.start();
  const client = createExtProcClient(`127.0.0.1:${port}`);
  t.teardown(async () => {
    client.close();
    await app.close();
  });
  return { app, client };
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

t.test('tracing on: the decision span, its parent, and the traceparent sent upstream', async (t) => {
  const exporter = new InMemorySpanExporter();
  const { app, client } = await started(
    t,
    { metrics: { prometheus: { listen: '127.0.0.1:0' } } },
    { env: {}, telemetry: { spanExporter: exporter } },
  );
  t.ok(app.telemetry);
  const { response } = await client.process(
    { path: SKEWED, headers: { authorization: `Bearer ${pki.token}` } },
    { traceparent: TRACEPARENT },
  );
  t.equal(replyHeader(response, 'x-skewgate-upstream')?.raw, 'apiserver-c');
  const sent = replyHeader(response, 'traceparent');
  t.equal(sent?.value, '', 'raw_value only');
  const decision = exporter.getFinishedSpans().find((s) => s.name === 'skewgate.decision');
  t.ok(decision);
  t.equal(decision?.spanContext().traceId, '0af7651916cd43dd8448eb211c80319c', "Envoy's trace (call metadata)");
  t.equal(decision?.parentSpanContext?.spanId, 'b7ad6b7169203331');
  t.equal(
    sent?.raw,
    `00-0af7651916cd43dd8448eb211c80319c-${decision?.spanContext().spanId}-01`,
    'the upstream continues from the decision span',
  );
  t.match(decision?.attributes, {
    'skewgate.outcome': 'routed',
    'skewgate.upstream': 'apiserver-c',
    'server.address': '127.0.0.1',
    'server.port': Number(new URL(servers[1]?.url ?? '').port),
  });
  t.notMatch(
    JSON.stringify(exporter.getFinishedSpans().map((s) => [s.attributes, s.events])),
    new RegExp(pki.token),
    'no token in any span',
  );

  const rounds = exporter.getFinishedSpans().filter((s) => s.name === 'skewgate.discovery');
  t.same(
    rounds.map((s) => s.attributes['skewgate.apiserver']).sort(),
    ['apiserver-a', 'apiserver-c'],
    "one span per apiserver's first round",
  );
  const skewEvent = rounds.flatMap((s) => s.events).find((e) => e.name === 'skewgate.skew.changed');
  t.ok(skewEvent, 'the skew seen at start is an event');

  // Discovery again: unchanged documents → 304s.
  app.discovery.refresh();
  // The round span is ended after the round's skew diff, itself computed in slices after the round.
  await eventually(
    'a second discovery round',
    () => exporter.getFinishedSpans().filter((s) => s.name === 'skewgate.discovery').length >= 4,
    waitMs(),
  );
  const later = exporter
    .getFinishedSpans()
    .filter((s) => s.name === 'skewgate.discovery')
    .slice(2);
  t.ok(
    later.every(
      (s) => s.attributes['skewgate.discovery.not_modified'] === true && s.attributes['skewgate.discovery.view_changed'] === false,
    ),
    'second rounds: 304, no change',
  );
});

t.test('the Prometheus endpoint over HTTP', async (t) => {
  const { app, client } = await started(t, { metrics: { prometheus: { listen: '127.0.0.1:0' } } });
  await client.process({ path: SKEWED });
  await client.process({ path: '/apis/nothing.example/v1/widgets' });
  const port = app.telemetry?.prometheusPort();
  t.ok(port && port > 0);
  const res = await request(`http://127.0.0.1:${port}/metrics`);
  const text = await res.body.text();
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /text\/plain/);
  t.match(text, /# TYPE skewgate_decisions_total counter/);
  t.match(text, /skewgate_decisions_total\{[^}]*outcome="routed",reason="served_by_subset",upstream="apiserver-c"[^}]*\} 1/);
  t.match(text, /skewgate_decisions_total\{[^}]*outcome="not_found",reason="group_version_not_served"[^}]*\} 1/);
  t.match(text, /skewgate_decision_duration_seconds_bucket\{[^}]*outcome="routed"[^}]*le="0\.0001"/);
  t.match(text, /skewgate_discovery_fetch_duration_seconds_count\{[^}]*apiserver="apiserver-a"[^}]*result="ok"[^}]*\} 1/);
  t.match(text, /skewgate_discovery_view_age_seconds\{[^}]*apiserver="apiserver-c"/);
  t.match(text, /# UNIT skewgate_discovery_document_bytes By/);
  t.match(text, /skewgate_discovery_document_bytes\{[^}]*apiserver="apiserver-a",document="\/apis"[^}]*\} [1-9]\d*/);
  t.match(text, /skewgate_apiserver_ready\{[^}]*apiserver="apiserver-a"[^}]*\} 1/);
  t.match(text, /^skewgate_skew_resources [1-9]/m, 'a gauge without labels has none: no per-series scope labels');
  t.notMatch(text, /otel_scope_/, 'no otel_scope_* labels on any series');
  // Prometheus naming: units as suffixes, _total on counters, and the process and runtime metrics.
  for (const name of ['skewgate_decision_duration_seconds_bucket', 'skewgate_discovery_view_age_seconds', 'skewgate_decisions_total'])
    t.match(text, new RegExp(`^${name}\\{`, 'm'), name);
  for (const name of [
    'process_cpu_seconds_total',
    'process_resident_memory_bytes',
    'process_start_time_seconds',
    'process_open_fds',
    'nodejs_heap_used_bytes',
    'nodejs_heap_total_bytes',
    'nodejs_external_memory_bytes',
  ])
    t.match(text, new RegExp(`^${name} \\d`, 'm'), `${name} is exported`);
  const cpu = Number(/^process_cpu_seconds_total (\S+)/m.exec(text)?.[1]);
  t.ok(cpu > 0 && cpu < 3600, `process_cpu_seconds_total is seconds (${cpu})`);
  const start = Number(/^process_start_time_seconds (\S+)/m.exec(text)?.[1]);
  t.ok(Math.abs(start - Date.now() / 1000) < 3600, `process_start_time_seconds is epoch seconds (${start})`);
  t.match(text, /skewgate_skew_missing\{[^}]*apiserver="apiserver-a"[^}]*\} [1-9]/);
  t.notMatch(text, /mutatingadmissionpolicies|nothing\.example/, 'no per-path or per-resource label');
  t.equal(app.telemetry?.prometheusPort(), port);
  const other = await request(`http://127.0.0.1:${port}/`);
  await other.body.text();
  t.equal(other.statusCode, 404);
});

t.test('spans are flushed on shutdown through the real OTLP/HTTP exporter', async (t) => {
  const received: { path: string; type: string | undefined; apiKey: unknown; body: Buffer; duringClose: boolean }[] = [];
  let closeCalled = false;
  const receiver = createServer((req: IncomingMessage, res) => {
    // When the export began: before app.close() was called, or after.
    const duringClose = closeCalled;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        path: req.url ?? '',
        type: req.headers['content-type'],
        apiKey: req.headers['x-api-key'],
        body: Buffer.concat(chunks),
        duringClose,
      });
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));
  const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  // A 10-minute batch delay: only the shutdown flush can deliver the spans in time.
  const app = createSkewgate(
    config({ tracing: { enabled: true, protocol: 'http', endpoint, headers: { 'x-api-key': 'k1' } } }),
    createLogger('silent'),
    { env: { OTEL_BSP_SCHEDULE_DELAY: '600000' } },
  );
  const { port } = await app.start();
  const client = createExtProcClient(`127.0.0.1:${port}`);
  await client.process({ path: SKEWED });
  client.close();
  t.equal(received.length, 0, 'nothing exported before shutdown');
  closeCalled = true;
  await app.close();
  t.ok(received.length >= 1, 'exported on shutdown');
  // Every export arrived once close() had begun: none came from the (10-minute) schedule.
  t.same(
    received.map((r) => r.duringClose),
    received.map(() => true),
    'every export was the shutdown flush',
  );
  t.equal(received[0]?.path, '/v1/traces');
  t.equal(received[0]?.type, 'application/x-protobuf');
  t.equal(received[0]?.apiKey, 'k1', 'configured exporter headers are sent');
  const all = Buffer.concat(received.map((r) => r.body)).toString('latin1');
  t.match(all, /skewgate\.decision/);
  t.match(all, /skewgate\.discovery/);
});

t.test('telemetry off (the default): no SDK, no traceparent set, nothing listening', async (t) => {
  const { app, client } = await started(t, undefined, { env: {} });
  t.equal(app.telemetry, null);
  const { response } = await client.process({ path: SKEWED }, { traceparent: TRACEPARENT });
  t.equal(replyHeader(response, 'x-skewgate-upstream')?.raw, 'apiserver-c');
  t.equal(replyHeader(response, 'traceparent'), undefined);
  const common = await client.process({ path: '/api/v1/namespaces/default/configmaps' }, { traceparent: TRACEPARENT });
  t.same(
    common.response?.request_headers?.response?.header_mutation?.set_headers?.map((o) => o.header?.key),
    ['x-skewgate-bounded'],
    'CONTINUE with the bounded mark only: no traceparent',
  );
});

t.test('a Prometheus address in use fails start with a clear error', async (t) => {
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())));
  const busy = (blocker.address() as AddressInfo).port;
  const app = createSkewgate(config({ metrics: { prometheus: { listen: `127.0.0.1:${busy}` } } }), createLogger('silent'), { env: {} });
  await t.rejects(app.start(), { code: 'SKEWGATE_ERR_TELEMETRY', message: new RegExp(`127\\.0\\.0\\.1:${busy}`) });
  await app.close();
});
