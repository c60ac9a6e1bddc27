// End to end: spans leave skewgate and Envoy through their REAL OTLP exporters, over the network,
// to a REAL Jaeger v2 (built from the Go module proxy by lab/build-jaeger.sh), and are queried back
// over Jaeger's HTTP API. Jaeger or Envoy missing → the test fails (it never skips).
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import type { FakeApiServer } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { findJaegerBinary, startJaeger, type JaegerHandle, type JaegerSpan, type JaegerTrace } from '../../harness/jaeger.js';
import { parseTraceparent } from '../../src/extproc/core/traceparent.js';
import { createClient, eventually, type Client } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

/** Spans reach Jaeger in batches: skewgate's every 100 ms here (FAST_EXPORT), Envoy's every 5 s. */
const WAIT_MS = waitMs(5000);

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const NOWHERE = '/apis/nothing.example/v1/namespaces/x/widgets';
const SERVERS = [
  { name: 'apiserver-a', builtins: BUILTINS_OLD },
  { name: 'apiserver-b', builtins: BUILTINS_OLD },
  { name: 'apiserver-c', builtins: BUILTINS_NEW },
];
// Spans are exported every 100 ms rather than every 5 s.
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '100' };

const hex = (n: number): string => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
const clientTraceparent = (): { traceId: string; spanId: string; header: string } => {
  const traceId = hex(32);
  const spanId = hex(16);
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
};

/** The traceparent the apiserver received for the last request whose path starts with `path`. */
function receivedTraceparent(apiservers: readonly FakeApiServer[], path: string): { server: string; value: string | undefined } {
  for (const s of apiservers) {
    const r = [...s.requests].reverse().find((x) => x.path.startsWith(path));
    if (r) {
      const v = r.headers['traceparent'];
      return { server: s.name, value: Array.isArray(v) ? v[0] : v };
    }
  }
  throw new Error(`no apiserver received ${path}`);
}

async function waitForTrace(jaeger: JaegerHandle, traceId: string, done: (tr: JaegerTrace) => boolean): Promise<JaegerTrace> {
  let last = null as JaegerTrace | null;
  try {
    await eventually(
      `trace ${traceId} in Jaeger`,
      async () => {
        last = await jaeger.trace(traceId);
        return last !== null && done(last);
      },
      WAIT_MS,
      100,
    );
  } catch (err) {
    throw new Error(
      `${(err as Error).message}; last seen: ${JSON.stringify(last?.spans.map((s) => [s.serviceName, s.operationName, s.spanId, s.parentSpanId]))}`,
    );
  }
  if (last === null) throw new Error('unreachable: eventually() resolved without a trace');
  return last;
}

const decisionOf = (tr: JaegerTrace): JaegerSpan | undefined => tr.spans.find((s) => s.operationName === 'skewgate.decision');
const byId = (tr: JaegerTrace, id: string | null): JaegerSpan | undefined => tr.spans.find((s) => s.spanId === id);

/**
 * The trace as an indented tree, for the test log. Envoy 1.40 exports its ext_proc call span
 * twice (same id, once with grpc.status_code): listed once.
 */
function treeOf(tr: JaegerTrace): string {
  const lines: string[] = [];
  const unique = [...new Map(tr.spans.map((s) => [s.spanId, s])).values()];
  const walk = (parent: string | null, depth: number): void => {
    for (const s of unique
      .filter((x) => (parent === null ? !byId(tr, x.parentSpanId) : x.parentSpanId === parent))
      .sort((a, b) => a.startTime - b.startTime)) {
      lines.push(`${'  '.repeat(depth)}${s.serviceName}: ${s.operationName} (${s.spanId})`);
      walk(s.spanId, depth + 1);
    }
  };
  walk(null, 0);
  return lines.join('\n');
}

let jaeger: JaegerHandle;
const dir = mkdtempSync(join(tmpdir(), 'sg-tracing-'));

t.before(async () => {
  // Throws, failing the test, when lab/build-jaeger.sh has not been run.
  jaeger = await startJaeger({ dir });
});

t.test('a missing Jaeger names the build script', async (t) => {
  t.throws(() => findJaegerBinary(join(dir, 'no-such-jaeger')), /lab\/build-jaeger\.sh/);
});
t.teardown(async () => {
  await jaeger?.stop();
});

t.test('Envoy tracing on, OTLP/gRPC: client → Envoy → skewgate decision → apiserver is one trace', async (t) => {
  const stack: Stack = await startStack({
    dir: join(dir, 'envoy-traced'),
    servers: SERVERS,
    telemetry: {
      tracing: { enabled: true, endpoint: jaeger.otlpGrpcUrl, protocol: 'grpc' },
      metrics: { prometheus: { listen: '127.0.0.1:0' } },
    },
    skewgateOptions: { env: FAST_EXPORT },
  });
  const client: Client = createClient(stack.pki.caFile, stack.pki.token);
  t.teardown(async () => {
    await client.close();
    await stack.close();
  });

  await t.test('routed, with a client traceparent', async (t) => {
    const parent = clientTraceparent();
    const a = await client.send('GET', stack.gatewayUrl + SKEWED, { headers: { traceparent: parent.header } });
    t.equal(a.status, 200);
    t.equal(a.server, 'apiserver-c');
    const got = receivedTraceparent(stack.apiservers, SKEWED);
    const upstreamCtx = parseTraceparent(got.value);
    t.ok(upstreamCtx, `the apiserver received a traceparent (${got.value})`);
    t.equal(upstreamCtx?.traceId, parent.traceId, "the apiserver continues the client's trace");

    // Envoy exports in batches: wait for every span the assertions walk through.
    const tr = await waitForTrace(
      jaeger,
      parent.traceId,
      (x) =>
        byId(x, decisionOf(x)?.parentSpanId ?? null) !== undefined &&
        byId(x, upstreamCtx?.spanId ?? null) !== undefined &&
        x.spans.some((s) => s.parentSpanId === parent.spanId),
    );
    t.comment(`trace ${tr.traceId}:\n${treeOf(tr)}`);
    const services = new Set(tr.spans.map((s) => s.serviceName));
    t.ok(
      services.has('skewgate') && services.has('skewgate-envoy'),
      `skewgate's and Envoy's spans in one trace: ${[...services].join(', ')}`,
    );

    const decision = decisionOf(tr) as JaegerSpan;
    t.equal(decision.serviceName, 'skewgate');
    t.match(decision.tags, {
      'skewgate.outcome': 'routed',
      'skewgate.reason': 'served_by_subset',
      'skewgate.upstream': 'apiserver-c',
      'http.request.method': 'GET',
      'url.path': SKEWED,
      'k8s.api.group': 'admissionregistration.k8s.io',
      'k8s.api.version': 'v1',
      'k8s.api.resource': 'mutatingadmissionpolicies',
      'k8s.api.verb': 'list',
      'server.address': '127.0.0.1',
      'skewgate.trace.parent': 'envoy',
      'span.kind': 'server',
    });
    t.ok(typeof decision.tags['skewgate.discovery.age_ms'] === 'number', 'view age recorded');
    t.match(String(decision.tags['skewgate.candidates']), /apiserver-c/);
    t.notOk(JSON.stringify(tr).includes(stack.pki.token), 'the bearer token appears nowhere in the trace');

    // Parentage: the decision hangs below Envoy's ext_proc call, which hangs below Envoy's
    // request span, whose parent is the client's span.
    const extprocCall = byId(tr, decision.parentSpanId);
    t.ok(extprocCall, "the decision span's parent is in the trace");
    t.equal(extprocCall?.serviceName, 'skewgate-envoy');
    t.match(extprocCall?.operationName, /ext_proc|ExternalProcessor/, `Envoy's ext_proc span: ${extprocCall?.operationName}`);
    let root = extprocCall;
    while (root && byId(tr, root.parentSpanId)) root = byId(tr, root.parentSpanId);
    t.equal(root?.serviceName, 'skewgate-envoy');
    t.equal(root?.parentSpanId, parent.spanId, "Envoy's request span is the client span's child");

    // The apiserver hop: Envoy's router replaced skewgate's traceparent with its upstream span's.
    const upstreamSpan = byId(tr, upstreamCtx?.spanId ?? null) as JaegerSpan;
    t.equal(upstreamSpan.serviceName, 'skewgate-envoy', `apiserver's parent is Envoy's upstream span (${upstreamSpan.operationName})`);
    t.equal(upstreamSpan.tags['upstream_cluster'], 'apiserver-c', 'the upstream span went to the routed cluster');
    let up: JaegerSpan | undefined = upstreamSpan;
    while (up && byId(tr, up.parentSpanId)) up = byId(tr, up.parentSpanId);
    t.equal(up?.spanId, root?.spanId, 'the apiserver hop and the decision share the request span');

    // One id from the trace to the apiserver's audit log (kube-apiserver audits under the Audit-ID
    // it is sent; test/cluster/suites/identity.ts proves that part with real audit logs).
    const received = stack.apiservers.flatMap((x) => [...x.requests].filter((r) => r.path.startsWith(SKEWED))).at(-1);
    const sentId = received?.headers['audit-id'];
    t.match(sentId, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `the apiserver got an Audit-ID: ${String(sentId)}`);
    t.equal(decision.tags['skewgate.audit_id'], sentId, "skewgate's decision span names it (skewgate.audit_id)");
    t.equal(root?.tags['guid:x-request-id'], sentId, "Envoy's request span names it (guid:x-request-id)");
  });

  await t.test('not_found and unavailable spans: outcome, reason, status', async (t) => {
    const parent = clientTraceparent();
    const a = await client.send('GET', stack.gatewayUrl + NOWHERE, { headers: { traceparent: parent.header } });
    t.equal(a.status, 404);
    const tr = await waitForTrace(jaeger, parent.traceId, (x) => decisionOf(x) !== undefined);
    const d = decisionOf(tr) as JaegerSpan;
    t.match(d.tags, { 'skewgate.outcome': 'not_found', 'skewgate.reason': 'group_version_not_served', 'k8s.api.namespace': 'x' });
    t.notOk(d.tags['otel.status_code'] === 'ERROR', 'a true 404 is not an error of skewgate');

    stack.apiservers[2]?.setReady(false);
    await eventually('apiserver-c unready in skewgate', () => stack.skewgate()?.discovery.current().servers[2]?.ready === false);
    const p2 = clientTraceparent();
    const b = await client.send('GET', stack.gatewayUrl + SKEWED, { headers: { traceparent: p2.header } });
    stack.apiservers[2]?.setReady(true);
    t.equal(b.status, 503);
    await eventually('apiserver-c ready again in skewgate', () => stack.skewgate()?.discovery.current().servers[2]?.ready === true);
    const tr2 = await waitForTrace(jaeger, p2.traceId, (x) => decisionOf(x) !== undefined);
    t.match(decisionOf(tr2)?.tags, {
      'skewgate.outcome': 'unavailable',
      'skewgate.reason': 'no_healthy_capable_server',
      'otel.status_code': 'ERROR',
    });
  });

  await t.test('without a client traceparent, Envoy starts the trace and the apiserver joins it', async (t) => {
    for (const s of stack.apiservers) s.clearRequests();
    const a = await client.send('GET', stack.gatewayUrl + SKEWED);
    t.equal(a.status, 200);
    const ctx = parseTraceparent(receivedTraceparent(stack.apiservers, SKEWED).value);
    t.ok(ctx);
    const tr = await waitForTrace(
      jaeger,
      ctx?.traceId ?? '',
      (x) => decisionOf(x) !== undefined && byId(x, ctx?.spanId ?? null) !== undefined,
    );
    t.equal(decisionOf(tr)?.tags['skewgate.trace.parent'], 'envoy');
    t.ok(byId(tr, ctx?.spanId ?? null), "the apiserver's parent span is in the trace");
  });

  await t.test('discovery rounds are spans; the initial skew is an event', async (t) => {
    const FULL_SKEW = /admissionregistration\.k8s\.io\/v1\/mutatingadmissionpolicies missing from apiserver-a,apiserver-b/;
    let events: JaegerSpan['logs'] = [];
    const fullSkew = (l: JaegerSpan['logs'][number]): boolean =>
      FULL_SKEW.test(`${String(l.fields['skewgate.skew.newly_skewed'])} ${String(l.fields['skewgate.skew.missing_from_changed'])}`);
    await eventually(
      'a discovery span with a skew event',
      async () => {
        const traces = await jaeger.traces({ service: 'skewgate', operation: 'skewgate.discovery', limit: 200 });
        const spans = traces.flatMap((x) => x.spans);
        events = spans.flatMap((s) => s.logs).filter((l) => l.fields['event'] === 'skewgate.skew.changed');
        // The apiservers' first rounds end one by one, so the skew may be reported in steps: newly
        // skewed (missing from the first old one), then changed (missing from both).
        return spans.length > 0 && events.some(fullSkew);
      },
      WAIT_MS,
      200,
    );
    const e = events.find(fullSkew);
    t.ok(e, 'a skew event names the resource only the new apiserver serves, missing from both old ones');
    const rounds = (
      await jaeger.traces({ service: 'skewgate', operation: 'skewgate.discovery', tags: { 'skewgate.apiserver': 'apiserver-c' }, limit: 5 })
    ).flatMap((x) => x.spans);
    t.ok(rounds.length > 0);
    t.match(rounds[0]?.tags, {
      'skewgate.apiserver': 'apiserver-c',
      'skewgate.discovery.source': 'aggregated',
      'server.address': '127.0.0.1',
    });
    t.ok(typeof rounds[0]?.tags['skewgate.discovery.resources'] === 'number');
  });

  await t.test('metrics on the Prometheus endpoint', async (t) => {
    const port = stack.skewgate()?.telemetry?.prometheusPort();
    t.ok(port);
    const res = await request(`http://127.0.0.1:${port}/metrics`);
    const text = await res.body.text();
    t.equal(res.statusCode, 200);
    t.match(text, /skewgate_decisions_total\{[^}]*outcome="routed"[^}]*upstream="apiserver-c"[^}]*\} \d+/);
    t.match(text, /skewgate_skew_resources [1-9]/);
  });
});

t.test(
  'Envoy tracing off, OTLP/HTTP: skewgate parents on the client header and the apiserver continues from the decision span',
  async (t) => {
    const stack: Stack = await startStack({
      dir: join(dir, 'skewgate-only'),
      servers: SERVERS,
      telemetry: { tracing: { enabled: true, endpoint: jaeger.otlpHttpUrl, protocol: 'http', envoy: false } },
      skewgateOptions: { env: FAST_EXPORT },
    });
    const client: Client = createClient(stack.pki.caFile, stack.pki.token);
    t.teardown(async () => {
      await client.close();
      await stack.close();
    });
    const parent = clientTraceparent();
    const a = await client.send('GET', stack.gatewayUrl + SKEWED, { headers: { traceparent: parent.header } });
    t.equal(a.status, 200);
    const ctx = parseTraceparent(receivedTraceparent(stack.apiservers, SKEWED).value);
    t.equal(ctx?.traceId, parent.traceId, 'same trace at the apiserver');
    const tr = await waitForTrace(jaeger, parent.traceId, (x) => decisionOf(x) !== undefined);
    const d = decisionOf(tr) as JaegerSpan;
    t.equal(d.parentSpanId, parent.spanId, "the decision span is the client span's child");
    t.equal(d.tags['skewgate.trace.parent'], 'client');
    t.equal(ctx?.spanId, d.spanId, "the apiserver's parent is the decision span");
    t.notOk(
      tr.spans.some((s) => s.serviceName === 'skewgate-envoy'),
      'Envoy sent no spans',
    );

    // A default (balanced) request also carries the decision's context upstream.
    const common = '/api/v1/namespaces/default/configmaps';
    const p2 = clientTraceparent();
    await client.send('GET', stack.gatewayUrl + common, { headers: { traceparent: p2.header } });
    const ctx2 = parseTraceparent(receivedTraceparent(stack.apiservers, common).value);
    const tr2 = await waitForTrace(jaeger, p2.traceId, (x) => decisionOf(x) !== undefined);
    t.equal(decisionOf(tr2)?.tags['skewgate.outcome'], 'default');
    t.equal(ctx2?.spanId, decisionOf(tr2)?.spanId);
  },
);
