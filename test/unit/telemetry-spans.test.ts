// Decision and discovery spans through the real SDK into an in-memory exporter: every outcome's
// attributes and status, parentage (gRPC metadata first, then the HTTP header, else a new trace),
// the context sent upstream, discovery rounds with their view and skew events, and the sampler.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SamplingDecision, type ReadableSpan } from '@opentelemetry/sdk-trace';
import type { DiscoveryRoundEvent } from '../../src/discovery/core/events.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import type { ResourceCapability, ServerState, ServerView } from '../../src/discovery/core/types.js';
import type { DecisionTrace } from '../../src/extproc/observer.js';
import type { NonResourceRequest, InvalidRequest } from '../../src/k8s/request-info.js';
import type { Decision } from '../../src/routing/decision.js';
import { createDecisionSpans, parentContext, serverAddresses } from '../../src/telemetry/decision-spans.js';
import { recordRoundSpan } from '../../src/telemetry/discovery-spans.js';
import { MembershipSpans } from '../../src/telemetry/membership-spans.js';
import { SkewgateSampler, startSdk, type TelemetrySdk } from '../../src/telemetry/sdk.js';
import { resolveTelemetrySettings } from '../../src/telemetry/core/settings.js';
import { SkewTracker } from '../../src/telemetry/core/skew-diff.js';
import { TRACEPARENT, resourceInfo, resultOf } from '../helpers/extproc-client.js';

const CLIENT_TRACEPARENT = '00-11111111111111111111111111111111-2222222222222222-01';
const TOKEN = 'Bearer sekret-token-value';
const APISERVERS = [
  { name: 'apiserver-a', url: 'https://10.0.0.1:6443' },
  { name: 'apiserver-c', url: 'https://[fd00::3]:7443' },
];

const exporter = new InMemorySpanExporter();
const off = resolveTelemetrySettings({ tracing: {}, metrics: {} }, {});
let sdk: TelemetrySdk;
t.before(async () => {
  sdk = await startSdk(off, { spanExporter: exporter });
});
t.teardown(() => sdk.shutdown());
t.beforeEach(() => exporter.reset());

const spans = (): ReturnType<typeof createDecisionSpans> => {
  if (!sdk.tracer) throw new Error('no tracer');
  return createDecisionSpans(sdk.tracer, serverAddresses(APISERVERS));
};

function metadata(entries: Record<string, string> = {}): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) md.set(k, v);
  return md;
}

function decide(
  decision: Decision,
  opts: { md?: Record<string, string>; headers?: Record<string, string>; info?: Parameters<typeof resultOf>[1] } = {},
): { span: ReadableSpan | undefined; trace: DecisionTrace | undefined } {
  const obs = spans();
  const ctx = {
    metadata: metadata(opts.md),
    headers: new Map(Object.entries({ ':method': 'GET', ':path': '/x?token=abc', authorization: TOKEN, ...opts.headers })),
  };
  const trace = obs.onRequest(ctx);
  obs.onDecision(resultOf(decision, opts.info), { ...ctx, durationNs: 42_000n, trace });
  return { span: exporter.getFinishedSpans().at(-1), trace };
}

t.test('routed: attributes of the request, the decision and the chosen apiserver', async (t) => {
  const { span } = decide(
    { outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-c', candidates: ['apiserver-c'] },
    { info: resourceInfo({ subresource: 'status', name: 'w1' }) },
  );
  t.ok(span);
  t.equal(span?.name, 'skewgate.decision');
  t.equal(span?.kind, SpanKind.SERVER);
  t.same(span?.attributes, {
    'rpc.system': 'grpc',
    'rpc.service': 'envoy.service.ext_proc.v3.ExternalProcessor',
    'rpc.method': 'Process',
    'skewgate.trace.parent': 'none',
    'http.request.method': 'GET',
    'url.path': '/apis/example.com/v1/namespaces/default/widgets',
    'k8s.api.request_kind': 'resource',
    'k8s.api.group': 'example.com',
    'k8s.api.version': 'v1',
    'k8s.api.resource': 'widgets',
    'k8s.api.subresource': 'status',
    'k8s.api.namespace': 'default',
    'k8s.api.verb': 'list',
    'skewgate.outcome': 'routed',
    'skewgate.reason': 'served_by_subset',
    'skewgate.candidates': ['apiserver-c'],
    'skewgate.snapshot.generation': 7,
    'skewgate.discovery.age_ms': 120,
    'skewgate.upstream': 'apiserver-c',
    'server.address': 'fd00::3',
    'server.port': 7443,
    'skewgate.client_identity': 'none',
  });
  t.equal(span?.status.code, SpanStatusCode.UNSET);
});

t.test("the Audit-ID the apiserver records the request under: the client's own, else Envoy's request id", async (t) => {
  const id = (headers: Record<string, string>): unknown => {
    const obs = spans();
    const ctx = { metadata: metadata(), headers: new Map(Object.entries({ ':method': 'GET', ...headers })) };
    const trace = obs.onRequest(ctx);
    obs.onDecision(resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }), { ...ctx, durationNs: 1n, trace });
    return exporter.getFinishedSpans().at(-1)?.attributes['skewgate.audit_id'];
  };
  t.equal(id({ 'x-request-id': '5b9c1e2a-0d1f-4c55-9a57-2f6d3c1b7e10' }), '5b9c1e2a-0d1f-4c55-9a57-2f6d3c1b7e10', "Envoy's request id");
  t.equal(
    id({ 'x-request-id': 'r-1', 'audit-id': 'client-chosen' }),
    'client-chosen',
    "the client's own Audit-ID wins, as in Envoy's route",
  );
  t.equal(id({ 'audit-id': 'with space' }), undefined, 'not a printable token: left out');
  t.equal(id({}), undefined, 'none: no attribute');
});

t.test('routed to an apiserver whose /version discovery read: its gitVersion on the span', async (t) => {
  const obs = spans();
  const ctx = { metadata: metadata(), headers: new Map([[':method', 'GET']]) };
  const trace = obs.onRequest(ctx);
  const routed = resultOf({ outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-c', candidates: ['apiserver-c'] });
  obs.onDecision({ ...routed, upstreamVersion: 'v1.36.3' }, { ...ctx, durationNs: 1n, trace });
  t.equal(exporter.getFinishedSpans().at(-1)?.attributes['skewgate.upstream.git_version'], 'v1.36.3');
});

t.test('client certificates: the outcome for the identity and the fingerprint, never the name', async (t) => {
  const obs = spans();
  const ctx = {
    metadata: metadata(),
    headers: new Map([
      [':method', 'GET'],
      [':path', '/api/v1/pods'],
    ]),
  };
  const stated = {
    kind: 'stated' as const,
    identity: { user: 'jane-doe', uid: 'uid-7', groups: ['team-zeta'], extra: [], fingerprint: 'ab12' },
  };
  obs.onDecision(resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }, undefined, stated), {
    ...ctx,
    durationNs: 1n,
    trace: obs.onRequest(ctx),
  });
  const a = exporter.getFinishedSpans().at(-1)?.attributes;
  t.match(a, { 'skewgate.client_identity': 'stated', 'skewgate.client_cert.sha256': 'ab12' });
  t.notMatch(JSON.stringify(a), /jane-doe|uid-7|team-zeta/, 'no user, UID or group in the span');
  const unstated = { kind: 'unstated' as const, problem: 'the client certificate has no common name (CN), so it names no user' };
  obs.onDecision(
    resultOf({ outcome: 'rejected', reason: 'client_identity_unstated', problem: unstated.problem, candidates: [] }, undefined, unstated),
    { ...ctx, durationNs: 1n, trace: obs.onRequest(ctx) },
  );
  const b = exporter.getFinishedSpans().at(-1);
  t.match(b?.attributes, {
    'skewgate.outcome': 'rejected',
    'skewgate.reason': 'client_identity_unstated',
    'skewgate.client_identity': 'unstated',
    'skewgate.problem': /no common name/,
  });
  t.notOk(b && 'skewgate.client_cert.sha256' in b.attributes);
  t.equal(b?.status.code, SpanStatusCode.UNSET, "a refused certificate is the client's problem");
});

t.test('every outcome: outcome and reason; ERROR only for unavailable; no upstream unless routed', async (t) => {
  const nonResource: NonResourceRequest = { kind: 'non-resource', method: 'GET', path: '/healthz', query: '', verb: 'get' };
  const invalid: InvalidRequest = { kind: 'invalid', method: 'GET', path: '/api/v1/%zz', problem: 'invalid percent-encoding' };
  const cases: { decision: Decision; info?: Parameters<typeof resultOf>[1]; status: SpanStatusCode; extra?: Record<string, unknown> }[] = [
    { decision: { outcome: 'default', reason: 'served_by_all', candidates: ['apiserver-a', 'apiserver-c'] }, status: SpanStatusCode.UNSET },
    { decision: { outcome: 'not_found', reason: 'resource_not_served', candidates: [] }, status: SpanStatusCode.UNSET },
    { decision: { outcome: 'not_found', reason: 'group_version_not_served', candidates: [] }, status: SpanStatusCode.UNSET },
    { decision: { outcome: 'not_found', reason: 'subresource_not_served', candidates: [] }, status: SpanStatusCode.UNSET },
    {
      decision: { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['apiserver-c'] },
      status: SpanStatusCode.ERROR,
    },
    {
      decision: { outcome: 'passthrough', reason: 'non_resource', candidates: [] },
      info: nonResource,
      status: SpanStatusCode.UNSET,
      extra: { 'k8s.api.request_kind': 'non-resource', 'url.path': '/healthz', 'k8s.api.verb': 'get' },
    },
    { decision: { outcome: 'passthrough', reason: 'not_synced', candidates: [] }, status: SpanStatusCode.UNSET },
    { decision: { outcome: 'passthrough', reason: 'view_incomplete', candidates: [] }, status: SpanStatusCode.UNSET },
    { decision: { outcome: 'passthrough', reason: 'verb_not_listed', candidates: [] }, status: SpanStatusCode.UNSET },
    { decision: { outcome: 'passthrough', reason: 'empty_path_segment', candidates: [] }, status: SpanStatusCode.UNSET },
    {
      decision: { outcome: 'rejected', reason: 'malformed_path', problem: 'invalid percent-encoding', candidates: [] },
      info: invalid,
      status: SpanStatusCode.UNSET,
      extra: { 'skewgate.problem': 'invalid percent-encoding', 'k8s.api.request_kind': 'invalid' },
    },
  ];
  for (const c of cases) {
    const { span } = decide(c.decision, c.info ? { info: c.info } : {});
    const label = `${c.decision.outcome}/${c.decision.reason}`;
    t.match(span?.attributes, { 'skewgate.outcome': c.decision.outcome, 'skewgate.reason': c.decision.reason, ...(c.extra ?? {}) }, label);
    t.equal(span?.status.code, c.status, `${label}: status`);
    if (c.decision.outcome === 'unavailable') t.equal(span?.status.message, 'no_healthy_capable_server');
    t.notOk(span && 'skewgate.upstream' in span.attributes, `${label}: no upstream`);
    t.notOk(span && 'server.address' in span.attributes, `${label}: no server.address`);
  }
});

t.test('no credential, header or query value in any attribute', async (t) => {
  const { span } = decide(
    { outcome: 'default', reason: 'served_by_all', candidates: [] },
    { headers: { cookie: 'session=abc', 'x-remote-user': 'admin' } },
  );
  const text = JSON.stringify(span?.attributes);
  t.notMatch(text, /sekret|session=abc|admin|token=abc|\?/);
});

t.test('parentage: the call metadata wins over the HTTP header', async (t) => {
  const { span, trace } = decide(
    { outcome: 'default', reason: 'served_by_all', candidates: [] },
    { md: { traceparent: TRACEPARENT }, headers: { traceparent: CLIENT_TRACEPARENT } },
  );
  t.equal(span?.spanContext().traceId, '0af7651916cd43dd8448eb211c80319c');
  t.equal(span?.parentSpanContext?.spanId, 'b7ad6b7169203331');
  t.equal(span?.attributes['skewgate.trace.parent'], 'envoy');
  t.same(
    trace?.upstreamHeaders,
    [['traceparent', `00-0af7651916cd43dd8448eb211c80319c-${span?.spanContext().spanId}-01`]],
    'the upstream continues from the decision span',
  );
  t.equal(trace?.traceId, span?.spanContext().traceId);
  t.equal(trace?.spanId, span?.spanContext().spanId);
});

t.test('parentage: the HTTP header when the metadata has none (or an invalid one)', async (t) => {
  const mds: Record<string, string>[] = [
    {},
    { traceparent: 'garbage' },
    { traceparent: '00-00000000000000000000000000000000-b7ad6b7169203331-01' },
  ];
  for (const md of mds) {
    const { span } = decide(
      { outcome: 'default', reason: 'served_by_all', candidates: [] },
      { md, headers: { traceparent: CLIENT_TRACEPARENT } },
    );
    t.equal(span?.spanContext().traceId, '11111111111111111111111111111111', JSON.stringify(md));
    t.equal(span?.parentSpanContext?.spanId, '2222222222222222');
    t.equal(span?.attributes['skewgate.trace.parent'], 'client');
  }
});

t.test('parentage: none → a root span of a new trace', async (t) => {
  const a = decide({ outcome: 'default', reason: 'served_by_all', candidates: [] });
  const b = decide({ outcome: 'default', reason: 'served_by_all', candidates: [] });
  t.equal(a.span?.parentSpanContext, undefined);
  t.not(a.span?.spanContext().traceId, b.span?.spanContext().traceId);
  t.equal(a.span?.attributes['skewgate.trace.parent'], 'none');
});

t.test('tracestate travels with the context', async (t) => {
  const { trace } = decide(
    { outcome: 'default', reason: 'served_by_all', candidates: [] },
    { md: { traceparent: TRACEPARENT, tracestate: 'vendor=abc' } },
  );
  t.same(
    trace?.upstreamHeaders.map(([k]) => k),
    ['traceparent', 'tracestate'],
  );
  t.equal(trace?.upstreamHeaders[1]?.[1], 'vendor=abc');
});

t.test('an unsampled parent: no span is recorded, the upstream still learns "not sampled"', async (t) => {
  const { span, trace } = decide(
    { outcome: 'default', reason: 'served_by_all', candidates: [] },
    { md: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' } },
  );
  t.equal(span, undefined);
  t.match(trace?.upstreamHeaders[0]?.[1], /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$/);
});

t.test('a routing error ends the span with ERROR and the error type only', async (t) => {
  const obs = spans();
  const ctx = { metadata: metadata(), headers: new Map<string, string>() };
  const trace = obs.onRequest(ctx);
  obs.onRouteError(new TypeError('boom at /secret/path'), { ...ctx, durationNs: 1n, trace });
  const span = exporter.getFinishedSpans().at(-1);
  t.equal(span?.status.code, SpanStatusCode.ERROR);
  t.equal(span?.attributes['error.type'], 'TypeError');
  t.notMatch(JSON.stringify({ attributes: span?.attributes, status: span?.status, events: span?.events }), /secret\/path/);
  obs.onDecision(resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }), { ...ctx, durationNs: 1n, trace });
  t.equal(exporter.getFinishedSpans().length, 1, 'a span is ended once');
});

t.test('parentContext reports its source', async (t) => {
  t.equal(parentContext({ metadata: metadata(), headers: new Map() }).context, ROOT_CONTEXT);
});

// ---- discovery rounds ----

const cap: ResourceCapability = { verbs: new Set(['get', 'list']), subresources: new Map(), namespaced: true };
function view(keys: readonly string[]): ServerView {
  return {
    source: 'aggregated',
    resources: new Map(keys.map((k) => [k, cap])),
    groupVersions: new Set(keys.map((k) => k.split('/').slice(0, 2).join('/'))),
  };
}
function state(name: string, v: ServerView | null, extra: Partial<ServerState> = {}): ServerState {
  return {
    name,
    url: `https://10.0.0.${name === 'apiserver-a' ? 1 : 3}:6443`,
    view: v,
    lastSuccessAt: v ? 1000 : null,
    consecutiveFailures: 0,
    lastError: null,
    ready: true,
    ...extra,
  };
}
const OLD = view(['/v1/pods', 'apps/v1/deployments']);
const NEW = view(['/v1/pods', 'apps/v1/deployments', 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies']);

function round(
  before: ServerState,
  after: ServerState,
  others: ServerState[],
  generation: number,
  requests: DiscoveryRoundEvent['requests'],
): DiscoveryRoundEvent {
  return {
    server: after.name,
    startedAt: 1_700_000_000_000,
    durationMs: 12.5,
    requests,
    before,
    after,
    snapshot: buildSnapshot([...others, after], generation),
  };
}

t.test('a discovery round: attributes, view and skew events, times', async (t) => {
  const skew = new SkewTracker();
  const a = state('apiserver-a', OLD);
  t.equal(skew.update(buildSnapshot([a, state('apiserver-c', null)], 1)), null, 'first sight: no change event');
  const e = round(state('apiserver-c', null), { ...state('apiserver-c', NEW), gitVersion: 'v1.36.3' }, [a], 2, [
    { path: '/api', status: 200, bytes: 300, durationMs: 5 },
    { path: '/apis', status: 200, bytes: 4000, durationMs: 6 },
    { path: '/readyz', status: 200, bytes: 2, durationMs: 1 },
    { path: '/version', status: 200, bytes: 260, durationMs: 1 },
  ]);
  const change = skew.update(e.snapshot);
  t.same(change, {
    before: 0,
    after: 1,
    newlySkewed: ['admissionregistration.k8s.io/v1/mutatingadmissionpolicies missing from apiserver-a'],
    noLongerSkewed: [],
    changed: [],
  });
  t.equal(skew.size, 1);
  t.same(
    [...skew.missingCounts()],
    [
      ['apiserver-a', 1],
      ['apiserver-c', 0],
    ],
  );
  if (!sdk.tracer) throw new Error('no tracer');
  recordRoundSpan(sdk.tracer, e, serverAddresses(APISERVERS).get('apiserver-c'), change);
  const span = exporter.getFinishedSpans().at(-1);
  t.equal(span?.name, 'skewgate.discovery');
  t.equal(span?.kind, SpanKind.CLIENT);
  t.equal(span?.parentSpanContext, undefined);
  t.match(span?.attributes, {
    'skewgate.apiserver': 'apiserver-c',
    'skewgate.discovery.requests': ['GET /api 200', 'GET /apis 200'],
    'skewgate.discovery.not_modified': false,
    'skewgate.discovery.bytes': 4300,
    'skewgate.discovery.view_changed': true,
    'skewgate.discovery.source': 'aggregated',
    'skewgate.discovery.resources': 3,
    'http.response.status_code': 200,
    'skewgate.apiserver.ready': true,
    'skewgate.apiserver.git_version': 'v1.36.3',
    'server.address': 'fd00::3',
  });
  t.same(span?.startTime, [1_700_000_000, 0]);
  t.same(span?.endTime, [1_700_000_000, 12_500_000]);
  t.same(
    span?.events.map((ev) => ev.name),
    ['skewgate.discovery.view_changed', 'skewgate.skew.changed'],
  );
  t.match(span?.events[0]?.attributes, {
    'skewgate.resources.gained': 3,
    'skewgate.resources.lost': 0,
    'skewgate.resources.gained_sample': ['v1/pods', 'apps/v1/deployments', 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies'],
  });
  t.match(span?.events[1]?.attributes, { 'skewgate.skew.before': 0, 'skewgate.skew.after': 1 });

  // apiserver-a is upgraded: the skew goes away.
  const up = round(a, state('apiserver-a', NEW), [state('apiserver-c', NEW)], 3, [
    { path: '/api', status: 304, bytes: 0, durationMs: 1 },
    { path: '/apis', status: 200, bytes: 4000, durationMs: 2 },
  ]);
  const gone = skew.update(up.snapshot);
  t.same(gone, {
    before: 1,
    after: 0,
    newlySkewed: [],
    noLongerSkewed: ['admissionregistration.k8s.io/v1/mutatingadmissionpolicies (was missing from apiserver-a)'],
    changed: [],
  });
  t.equal(skew.update(up.snapshot), null, 'same views: no recomputation, no event');
});

t.test('skew: a resource still skewed but missing from other apiservers is changed, not newly skewed (issue 30)', async (t) => {
  const skew = new SkewTracker();
  const a = state('apiserver-a', OLD);
  const c = state('apiserver-c', NEW);
  skew.update(buildSnapshot([a, state('apiserver-b', null), c], 1));
  // apiserver-b's first view (old) arrives: the policies are now missing from a and b.
  const change = skew.update(buildSnapshot([a, state('apiserver-b', OLD), c], 2));
  t.same(change, {
    before: 1,
    after: 1,
    newlySkewed: [],
    noLongerSkewed: [],
    changed: ['admissionregistration.k8s.io/v1/mutatingadmissionpolicies missing from apiserver-a,apiserver-b (was apiserver-a)'],
  });
});

t.test('a 304 round and a failed round', async (t) => {
  if (!sdk.tracer) throw new Error('no tracer');
  const c = state('apiserver-c', NEW);
  recordRoundSpan(
    sdk.tracer,
    round(c, c, [], 4, [
      { path: '/api', status: 304, bytes: 0, durationMs: 1 },
      { path: '/apis', status: 304, bytes: 0, durationMs: 1 },
    ]),
    undefined,
    null,
  );
  const quiet = exporter.getFinishedSpans().at(-1);
  t.match(quiet?.attributes, {
    'skewgate.discovery.not_modified': true,
    'skewgate.discovery.view_changed': false,
    'http.response.status_code': 304,
  });
  t.equal(quiet?.events.length, 0);
  const failed = state('apiserver-c', NEW, {
    consecutiveFailures: 1,
    lastError: 'GET https://10.0.0.3:6443/apis: HTTP 500 Internal Server Error',
    ready: false,
  });
  recordRoundSpan(
    sdk.tracer,
    round(c, failed, [], 5, [
      { path: '/apis', status: 500, bytes: 20, durationMs: 1 },
      { path: '/api', status: null, bytes: 0, durationMs: 1 },
    ]),
    undefined,
    null,
  );
  const bad = exporter.getFinishedSpans().at(-1);
  t.equal(bad?.status.code, SpanStatusCode.ERROR);
  t.match(bad?.status.message, /HTTP 500/);
  t.match(bad?.attributes, {
    'skewgate.discovery.requests': ['GET /apis 500', 'GET /api no response'],
    'skewgate.discovery.consecutive_failures': 1,
    'skewgate.apiserver.ready': false,
  });
});

t.test('the sampler: configured ratio, parent-based, and view changes always kept', async (t) => {
  const never = new SkewgateSampler({ parentBased: true, ratio: 0 });
  t.equal(never.shouldSample(ROOT_CONTEXT, '1'.repeat(32), 'x', SpanKind.CLIENT, {}, []).decision, SamplingDecision.NOT_RECORD);
  t.equal(
    never.shouldSample(ROOT_CONTEXT, '1'.repeat(32), 'x', SpanKind.CLIENT, { 'skewgate.discovery.view_changed': true }, []).decision,
    SamplingDecision.RECORD_AND_SAMPLED,
  );
  const always = new SkewgateSampler({ parentBased: false, ratio: 1 });
  t.equal(always.shouldSample(ROOT_CONTEXT, '1'.repeat(32), 'x', SpanKind.SERVER, {}, []).decision, SamplingDecision.RECORD_AND_SAMPLED);
  const half = new SkewgateSampler({ parentBased: true, ratio: 0.5 });
  t.match(half.toString(), /ParentBased/);
});

t.test('membership spans: one when the unseen live apiservers change, none per renewal', async (t) => {
  if (!sdk.tracer) throw new Error('no tracer');
  const rec = new MembershipSpans(sdk.tracer);
  const now = 1_700_000_100_000;
  const base = buildSnapshot([state('apiserver-a', null)], 1);
  const lease = { name: 'apiserver-xyz', hostname: 'cp-4', renewTime: now - 1000 };
  t.equal(
    rec.record({ ...base, membership: { synced: true, unmatched: [], livenessMs: 60_000, probing: [] } }, now),
    false,
    'first sight, nothing unmatched: no span',
  );
  t.equal(
    rec.record({ ...base, generation: 2, membership: { synced: true, unmatched: [lease], livenessMs: 60_000, probing: [] } }, now),
    true,
  );
  t.equal(
    rec.record(
      { ...base, generation: 3, membership: { synced: true, unmatched: [{ ...lease, renewTime: now }], livenessMs: 60_000, probing: [] } },
      now,
    ),
    false,
    'a renewal is no change',
  );
  t.equal(
    rec.record({ ...base, generation: 4, membership: { synced: true, unmatched: [], livenessMs: 60_000, probing: [] } }, now + 5),
    true,
    'gone again',
  );
  const got = exporter.getFinishedSpans().filter((s) => s.name === 'skewgate.membership');
  t.equal(got.length, 2);
  t.same(
    got[0]?.events.map((e) => [e.name, e.attributes]),
    [
      [
        'skewgate.membership.changed',
        {
          'skewgate.membership.unmatched_before': [],
          'skewgate.membership.unmatched': ['apiserver-xyz (cp-4)'],
          'skewgate.membership.members_before': ['apiserver-a'],
          'skewgate.membership.members': ['apiserver-a'],
          'skewgate.membership.probing': [],
        },
      ],
    ],
  );
  t.equal(got[0]?.attributes['skewgate.snapshot.generation'], 2);
  t.same(got[1]?.events[0]?.attributes, {
    'skewgate.membership.unmatched_before': ['apiserver-xyz (cp-4)'],
    'skewgate.membership.unmatched': [],
    'skewgate.membership.members_before': ['apiserver-a'],
    'skewgate.membership.members': ['apiserver-a'],
    'skewgate.membership.probing': [],
  });
});

t.test('membership spans: a member learnt, admitted, drained and removed is an event each time', async (t) => {
  if (!sdk.tracer) throw new Error('no tracer');
  exporter.reset();
  const rec = new MembershipSpans(sdk.tracer);
  const now = 1_700_000_200_000;
  const m = { synced: true, unmatched: [], livenessMs: 60_000 };
  const a = state('kas-1', null);
  const b = state('learnt-127-0-0-4-6443', null);
  t.equal(rec.record({ ...buildSnapshot([a], 1), membership: { ...m, probing: [] } }, now), false, 'the seed alone: no span');
  const probing = [{ name: b.name, url: 'https://127.0.0.4:6443', sources: ['nodes'], problem: null }];
  t.equal(rec.record({ ...buildSnapshot([a], 2), membership: { ...m, probing } }, now), true, 'learnt: probing');
  t.equal(rec.record({ ...buildSnapshot([a, b], 3), membership: { ...m, probing: [] } }, now), true, 'admitted');
  t.equal(rec.record({ ...buildSnapshot([{ ...a, draining: true }, b], 4), membership: { ...m, probing: [] } }, now), true, 'draining');
  t.equal(rec.record({ ...buildSnapshot([b], 5), membership: { ...m, probing: [] } }, now), true, 'removed');
  t.equal(rec.record({ ...buildSnapshot([b], 6), membership: { ...m, probing: [] } }, now), false, 'no change: no span');
  const got = exporter.getFinishedSpans().filter((s) => s.name === 'skewgate.membership');
  t.same(
    got.map((s) => [s.events[0]?.attributes?.['skewgate.membership.members'], s.events[0]?.attributes?.['skewgate.membership.probing']]),
    [
      [['kas-1'], ['learnt-127-0-0-4-6443']],
      [['kas-1', 'learnt-127-0-0-4-6443'], []],
      [['kas-1 (draining)', 'learnt-127-0-0-4-6443'], []],
      [['learnt-127-0-0-4-6443'], []],
    ],
  );
});
