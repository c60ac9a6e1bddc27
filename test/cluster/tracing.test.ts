// One trace across the real parts: a real Jaeger v2, etcd, kube-apiserver KUBE_OLD and KUBE_NEW
// with --tracing-config-file, and the lab gateway (Envoy + skewgate) with tracing on. A client
// request for a resource only the new apiserver serves must show, under the client's trace id,
// skewgate's `routed` decision span AND the kube-apiserver's own spans — once with Envoy's tracer
// on (the apiserver hangs below Envoy's router span) and once with it off (below the decision
// span). Fails, never skips, when a binary is missing. Uses one address of its lab slot
// (both apiservers, two ports) and free gateway ports, so that it can run next to the other lab tests.
import t, { type Test } from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort, Lab } from '../../harness/lab/lab.js';
import { labBinary, labVersions } from '../../harness/lab/versions.js';
import { findEnvoyBinary } from '../../src/envoy-runtime/process.js';
import { findJaegerBinary, startJaeger, type JaegerHandle, type JaegerSpan, type JaegerTrace } from '../../harness/jaeger.js';
import { APISERVER_SERVICE_NAME, apiserverTracingConfig } from '../../src/telemetry/kube-apiserver.js';

const MAP = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const ENVOY_SERVICE = 'skewgate-envoy';

const versions = labVersions();
// Missing parts fail here, with the command that provides them.
labBinary('kube-apiserver', versions.kubeOld);
labBinary('kube-apiserver', versions.kubeNew);
labBinary('etcd', versions.etcd);
findJaegerBinary();
findEnvoyBinary();

// Inherited by every process the lab starts: kube-apiserver's Go SDK and skewgate's JS SDK both
// read it, so spans reach Jaeger within a fraction of a second instead of after 5 s.
process.env['OTEL_BSP_SCHEDULE_DELAY'] = '200';

const slot = claimLabSlot();
const OLD = { name: 'kas-old', version: versions.kubeOld, ip: slot.loopback(1), port: 6463 };
const NEW = { name: 'kas-new', version: versions.kubeNew, ip: slot.loopback(1), port: 6464 };

const started = Date.now();
const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const dir = await mkdtemp(join(tmpdir(), 'skewgate-lab-tracing-'));
const lab = await Lab.open({
  dir: join(dir, 'lab'),
  killOnExit: true,
  addresses: slot,
  log: (l) => t.comment(`[${elapsed()}] ${l}`),
});
const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
let jaeger: JaegerHandle | undefined;
/** The gateways' ports (free ones, found at start): traced has Envoy's tracer on, plain off. */
let tracedPort = 0;
let plainPort = 0;
t.teardown(async () => {
  await agent.close();
  await lab.down({ kill: true }).catch((err: unknown) => t.fail(`lab down: ${(err as Error).message}`));
  await jaeger?.stop();
  await rm(dir, { recursive: true, force: true });
  t.comment(`all down at ${elapsed()}`);
});

const hex = (n: number): string => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');

async function get(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const res = await request(url, { dispatcher: agent, headers, signal: AbortSignal.timeout(10_000) });
  return { status: res.statusCode, body: await res.body.text() };
}

const byId = (tr: JaegerTrace, id: string | null): JaegerSpan | undefined =>
  id === null ? undefined : tr.spans.find((s) => s.spanId === id);
const decisionOf = (tr: JaegerTrace): JaegerSpan | undefined => tr.spans.find((s) => s.operationName === 'skewgate.decision');
const apiserverSpans = (tr: JaegerTrace): JaegerSpan[] => tr.spans.filter((s) => s.serviceName === APISERVER_SERVICE_NAME);
/** The apiserver's first span: its parent is not one of the apiserver's own spans. */
const apiserverEntry = (tr: JaegerTrace): JaegerSpan | undefined =>
  apiserverSpans(tr).find((s) => byId(tr, s.parentSpanId)?.serviceName !== APISERVER_SERVICE_NAME);
const label = (s: JaegerSpan): string => `${s.serviceName}: ${s.operationName}`;

/** The span and its ancestors up to the trace's root, innermost first. */
function ancestry(tr: JaegerTrace, span: JaegerSpan | undefined): JaegerSpan[] {
  const out: JaegerSpan[] = [];
  for (let s = span; s !== undefined && out.length < 50; s = byId(tr, s.parentSpanId)) out.push(s);
  return out;
}

/** The trace as an indented tree (Envoy 1.40 exports its ext_proc span twice: listed once). */
function treeOf(tr: JaegerTrace): string {
  const unique = [...new Map(tr.spans.map((s) => [s.spanId, s])).values()];
  const lines: string[] = [];
  const walk = (parent: string | null, depth: number): void => {
    const children = unique.filter((x) => (parent === null ? byId(tr, x.parentSpanId) === undefined : x.parentSpanId === parent));
    for (const s of children.sort((a, b) => a.startTime - b.startTime)) {
      const extra =
        s.operationName === 'skewgate.decision'
          ? `  outcome=${String(s.tags['skewgate.outcome'])} upstream=${String(s.tags['skewgate.upstream'])}`
          : '';
      lines.push(`${'  '.repeat(depth)}${label(s)} (${s.spanId}${depth === 0 ? ` ← parent ${s.parentSpanId ?? 'none'}` : ''})${extra}`);
      walk(s.spanId, depth + 1);
    }
  };
  walk(null, 0);
  return lines.join('\n');
}

/**
 * Polls Jaeger until the trace holds the decision span and the apiserver's spans, and every
 * parent it names is in it (but the client's own span, which nobody exports).
 */
async function completeTrace(traceId: string, clientSpanId: string, timeoutMs = 20_000): Promise<JaegerTrace> {
  const deadline = Date.now() + timeoutMs;
  let last: JaegerTrace | null = null;
  for (;;) {
    last = (await jaeger?.trace(traceId)) ?? null;
    const complete =
      last !== null &&
      decisionOf(last) !== undefined &&
      apiserverEntry(last) !== undefined &&
      last.spans.every(
        (s) => s.parentSpanId === null || s.parentSpanId === clientSpanId || byId(last as JaegerTrace, s.parentSpanId) !== undefined,
      );
    if (complete && last !== null) return last;
    if (Date.now() > deadline) {
      throw new Error(`trace ${traceId} incomplete after ${timeoutMs} ms; seen:\n${last === null ? '(nothing)' : treeOf(last)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** GET the skewed resource through a gateway, as the admin (system:masters), with a sampled client traceparent. */
async function tracedGet(gatewayUrl: string): Promise<{ traceId: string; clientSpanId: string; tr: JaegerTrace; ms: number }> {
  const traceId = hex(32);
  const clientSpanId = hex(16);
  const res = await get(`${gatewayUrl}${MAP}`, {
    authorization: `Bearer ${lab.pki.adminToken}`,
    traceparent: `00-${traceId}-${clientSpanId}-01`,
  });
  if (res.status !== 200) throw new Error(`GET ${MAP} through ${gatewayUrl}: ${res.status} ${res.body.slice(0, 300)}`);
  const kind = (JSON.parse(res.body) as { kind?: string }).kind;
  if (kind !== 'MutatingAdmissionPolicyList') throw new Error(`unexpected body kind ${String(kind)}`);
  const before = Date.now();
  const tr = await completeTrace(traceId, clientSpanId);
  return { traceId, clientSpanId, tr, ms: Date.now() - before };
}

function checkDecisionAndApiserver(t: Test, tr: JaegerTrace, traceId: string): { decision: JaegerSpan; entry: JaegerSpan } {
  const decision = decisionOf(tr) as JaegerSpan;
  t.equal(decision.serviceName, 'skewgate');
  t.match(
    decision.tags,
    {
      'skewgate.outcome': 'routed',
      'skewgate.reason': 'served_by_subset',
      'skewgate.upstream': NEW.name,
      'server.address': NEW.ip,
      'server.port': NEW.port,
      'url.path': MAP,
      'k8s.api.verb': 'list',
    },
    `decision: routed to ${NEW.name} (v${NEW.version})`,
  );
  const kas = apiserverSpans(tr);
  t.ok(
    kas.length > 0,
    `${kas.length} span(s) of service "${APISERVER_SERVICE_NAME}": ${[...new Set(kas.map((s) => s.operationName))].join(', ')}`,
  );
  t.same([...new Set(kas.map((s) => s.traceId))], [traceId], "every kube-apiserver span has the client's trace id");
  t.equal(decision.traceId, traceId, 'and so has the decision span');
  const entry = apiserverEntry(tr) as JaegerSpan;
  t.equal(entry.tags['span.kind'], 'server', `the apiserver's entry span (${entry.operationName}) is a server span`);
  t.notOk(JSON.stringify(tr).includes(lab.pki.adminToken), 'the bearer token appears nowhere in the trace');
  const etcd = kas.filter((s) => /etcd|KV\/|Range|Txn/i.test(s.operationName));
  t.comment(
    etcd.length > 0
      ? `etcd calls in the trace (apiserver's client spans): ${[...new Set(etcd.map((s) => s.operationName))].join(', ')}`
      : 'no etcd spans in this trace (served from the watch cache, or not exported)',
  );
  return { decision, entry };
}

await t.test('lab up: Jaeger, etcd, two kube-apiservers exporting to it, two gateways with tracing', async (t) => {
  await mkdir(join(dir, 'jaeger'), { recursive: true });
  jaeger = await startJaeger({ dir: join(dir, 'jaeger') });
  t.comment(`[${elapsed()}] Jaeger: OTLP/gRPC ${jaeger.otlpGrpcUrl}, query ${jaeger.queryUrl}`);
  const tracingConfigFile = join(dir, 'apiserver-tracing.yaml');
  // Every trace the apiservers start is kept too (health checks, discovery: some noise), so that
  // the new, linked trace of a non-privileged caller can be found; a sampled parent is followed
  // whatever the rate (parent-based sampler).
  await writeFile(tracingConfigFile, apiserverTracingConfig(new URL(jaeger.otlpGrpcUrl).host, 1_000_000));
  await lab.startEtcd();
  await Promise.all([lab.startApiServer({ ...OLD, tracingConfigFile }), lab.startApiServer({ ...NEW, tracingConfigFile })]);
  const telemetry = (envoy: boolean): Record<string, unknown> => ({
    tracing: { enabled: true, endpoint: jaeger?.otlpGrpcUrl, protocol: 'grpc', envoy },
  });
  [tracedPort, plainPort] = [await freePort(), await freePort()];
  const [traced, plain] = await Promise.all([
    lab.startGateway({ name: 'traced', withSkewgate: true, port: tracedPort, telemetry: telemetry(true) }),
    lab.startGateway({ name: 'untraced', withSkewgate: true, port: plainPort, telemetry: telemetry(false) }),
  ]);
  t.match(
    await readFile(traced.configFile, 'utf8'),
    /telemetry:\n\s+tracing:\n\s+enabled: true/,
    'the gateway config carries the telemetry section',
  );
  t.equal(traced.url, `https://127.0.0.1:${tracedPort}`);
  t.equal(plain.url, `https://127.0.0.1:${plainPort}`);
  t.comment(`[${elapsed()}] lab up`);
});

await t.test("Envoy tracer on: kube-apiserver spans hang below Envoy's router span, in the decision's trace", async (t) => {
  const { traceId, clientSpanId, tr, ms } = await tracedGet(`https://127.0.0.1:${tracedPort}`);
  t.comment(`[${elapsed()}] trace ${traceId} complete in Jaeger ${ms} ms after the response:\n${treeOf(tr)}`);
  const { decision, entry } = checkDecisionAndApiserver(t, tr, traceId);
  t.equal(decision.tags['skewgate.trace.parent'], 'envoy', "skewgate parented on Envoy's ext_proc span (gRPC metadata)");

  const upChain = ancestry(tr, entry);
  const decisionChain = ancestry(tr, decision);
  t.comment(`apiserver chain: ${upChain.map(label).join('  ←  ')}  ←  client ${clientSpanId}`);
  t.comment(`decision chain:  ${decisionChain.map(label).join('  ←  ')}  ←  client ${clientSpanId}`);
  const router = byId(tr, entry.parentSpanId);
  t.equal(router?.serviceName, ENVOY_SERVICE, `the apiserver's parent is Envoy's span: ${router?.operationName ?? '-'}`);
  t.match(router?.operationName, /router .*egress/, "Envoy's router egress span");
  t.equal(router?.tags['upstream_cluster'], NEW.name, "which went to the routed apiserver's cluster");
  const extproc = byId(tr, decision.parentSpanId);
  t.equal(extproc?.serviceName, ENVOY_SERVICE);
  t.match(
    extproc?.operationName,
    /ext_proc|ExternalProcessor/,
    `the decision's parent is Envoy's ext_proc call: ${extproc?.operationName ?? '-'}`,
  );
  const root = upChain[upChain.length - 1];
  t.equal(decisionChain[decisionChain.length - 1]?.spanId, root?.spanId, "apiserver and decision share Envoy's request span");
  t.equal(root?.serviceName, ENVOY_SERVICE);
  t.equal(root?.parentSpanId, clientSpanId, "whose parent is the client's span");
});

await t.test("Envoy tracer off: kube-apiserver spans hang directly below skewgate's decision span", async (t) => {
  const { traceId, clientSpanId, tr, ms } = await tracedGet(`https://127.0.0.1:${plainPort}`);
  t.comment(`[${elapsed()}] trace ${traceId} complete in Jaeger ${ms} ms after the response:\n${treeOf(tr)}`);
  const { decision, entry } = checkDecisionAndApiserver(t, tr, traceId);
  const chain = ancestry(tr, entry);
  t.comment(`apiserver chain: ${chain.map(label).join('  ←  ')}  ←  client ${clientSpanId}`);
  t.equal(decision.tags['skewgate.trace.parent'], 'client', "skewgate parented on the client's traceparent");
  t.equal(decision.parentSpanId, clientSpanId, "the decision span is the client span's child");
  t.equal(entry.parentSpanId, decision.spanId, "the apiserver's entry span is the decision span's child");
  t.notOk(
    tr.spans.some((s) => s.serviceName === ENVOY_SERVICE),
    'Envoy exported nothing',
  );
});

/** Traces of the apiserver's GET of the skewed resource that LINK to (not descend from) `spanId`. */
async function tracesLinkingTo(spanId: string): Promise<{ traceId: string; operationName: string; refType: string }[]> {
  const q = new URLSearchParams({ service: APISERVER_SERVICE_NAME, operation: `GET ${MAP}`, lookback: '1h', limit: '50' });
  const res = await request(`${jaeger?.queryUrl ?? ''}/api/traces?${q.toString()}`, { signal: AbortSignal.timeout(5000) });
  const doc = (await res.body.json()) as {
    data?:
      { spans: { traceID: string; operationName: string; references?: { refType: string; traceID: string; spanID: string }[] }[] }[] | null;
  };
  return (doc.data ?? []).flatMap((tr) =>
    tr.spans.flatMap((s) =>
      (s.references ?? [])
        .filter((r) => r.spanID === spanId && r.refType !== 'CHILD_OF')
        .map((r) => ({ traceId: s.traceID, operationName: s.operationName, refType: r.refType })),
    ),
  );
}

await t.test('a caller outside system:masters: kube-apiserver starts its own trace, linked to the decision span', async (t) => {
  const traceId = hex(32);
  const clientSpanId = hex(16);
  const res = await get(`https://127.0.0.1:${plainPort}${MAP}`, {
    authorization: `Bearer ${lab.pki.skewgateToken}`,
    traceparent: `00-${traceId}-${clientSpanId}-01`,
  });
  // skewgate's discovery identity may not list the resource: the routed apiserver says 403 itself.
  t.equal(res.status, 403, 'kas-new answered (403 for this identity)');
  let links: Awaited<ReturnType<typeof tracesLinkingTo>> = [];
  let decision: JaegerSpan | undefined;
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const tr = await jaeger?.trace(traceId);
    decision = tr ? decisionOf(tr) : undefined;
    if (decision !== undefined) links = await tracesLinkingTo(decision.spanId);
    if (links.length > 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  t.ok(decision, "the decision span is in the client's trace");
  t.match(decision?.tags, { 'skewgate.outcome': 'routed', 'skewgate.upstream': NEW.name });
  t.equal(links.length, 1, `one apiserver trace links to the decision span: ${JSON.stringify(links)}`);
  t.not(links[0]?.traceId, traceId, 'under a trace id of its own');
  t.equal(links[0]?.refType, 'FOLLOWS_FROM', 'as a link (Jaeger: FOLLOWS_FROM), not a parent');
  const own = await jaeger?.trace(traceId);
  t.same(own ? apiserverSpans(own) : [], [], "and no kube-apiserver span in the client's trace");
  t.comment(
    `[${elapsed()}] client trace ${traceId}: ${own ? own.spans.map(label).join(', ') : '-'}; apiserver trace ${links[0]?.traceId ?? '-'} (${links[0]?.operationName ?? '-'}) links to the decision span`,
  );
});
