// Metrics read back through an in-memory reader: decisions by outcome/reason/upstream, latency,
// discovery rounds, view age, readiness, skew; labels stay bounded.
import t from 'tap';
import type { FastResource, FastTable } from '../../src/routing/fast-path.js';
import { DataPointType, MetricReader, type DataPoint, type Histogram, type MetricData } from '@opentelemetry/sdk-metrics';
import type { DiscoveryRoundEvent } from '../../src/discovery/core/events.js';
import { DiscoveryDocumentError } from '../../src/discovery/core/parse.js';
import { failureOf } from '../../src/errors/catalog.js';
import { CredentialsError } from '../../src/kube/credentials.js';
import { DiscoveryFetchError } from '../../src/kube/transport.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import type { ResourceCapability, ServerState, ServerView, Snapshot } from '../../src/discovery/core/types.js';
import { FETCH_ERROR_REASONS, SkewgateMetrics, fetchErrorReason, fetchResult, type FetchErrorReason } from '../../src/telemetry/metrics.js';
import { startSdk, type TelemetrySdk } from '../../src/telemetry/sdk.js';
import { resolveTelemetrySettings } from '../../src/telemetry/core/settings.js';
import { SkewTracker } from '../../src/telemetry/core/skew-diff.js';
import { resourceInfo, resultOf } from '../helpers/extproc-client.js';

/** Collected on demand; what a test needs instead of a periodic exporter. */
class TestReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
  async metrics(): Promise<MetricData[]> {
    const { resourceMetrics } = await this.collect();
    return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
  }
}

const cap: ResourceCapability = { verbs: new Set(['get']), subresources: new Map(), namespaced: true };
const view = (keys: string[]): ServerView => ({
  source: 'aggregated',
  resources: new Map(keys.map((k) => [k, cap])),
  groupVersions: new Set(),
});
const NOW = 1_700_000_010_000;
const states: ServerState[] = [
  {
    name: 'apiserver-a',
    url: 'https://a:6443',
    view: view(['/v1/pods']),
    lastSuccessAt: NOW - 1500,
    consecutiveFailures: 0,
    lastError: null,
    ready: true,
    gitVersion: 'v1.36.3',
    versionReadAt: NOW - 1500,
  },
  {
    name: 'apiserver-c',
    url: 'https://c:6443',
    view: view(['/v1/pods', 'x.io/v1/widgets']),
    lastSuccessAt: NOW - 250,
    consecutiveFailures: 0,
    lastError: null,
    ready: false,
    cordon: 'drain',
  },
  { name: 'apiserver-d', url: 'https://d:6443', view: null, lastSuccessAt: null, consecutiveFailures: 3, lastError: 'boom', ready: null },
];
let snap: Snapshot = buildSnapshot(states, 1);

const reader = new TestReader();
let fastTable: FastTable | null = null;
let sdk: TelemetrySdk;
let metrics: SkewgateMetrics;
const skew = new SkewTracker();
t.before(async () => {
  sdk = await startSdk(resolveTelemetrySettings({ tracing: {}, metrics: {} }, {}), { metricReaders: [reader] });
  if (!sdk.meter) throw new Error('no meter');
  skew.update(snap);
  metrics = new SkewgateMetrics(
    sdk.meter,
    { current: () => snap },
    skew,
    () => NOW,
    () => fastTable,
  );
});
t.teardown(() => sdk.shutdown());

const find = (ms: MetricData[], name: string): MetricData | undefined => ms.find((m) => m.descriptor.name === name);
const points = (m: MetricData | undefined): DataPoint<unknown>[] => (m?.dataPoints ?? []) as DataPoint<unknown>[];

t.test('decisions: counted by outcome, reason and (routed only) upstream; latency histogram by outcome', async (t) => {
  metrics.recordDecision(
    resultOf({ outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-c', candidates: ['apiserver-c'] }),
    40_000n,
  );
  metrics.recordDecision(
    resultOf(
      { outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-c', candidates: ['apiserver-c'] },
      resourceInfo({ path: '/apis/example.com/v1/namespaces/other/widgets', namespace: 'other' }),
    ),
    60_000n,
  );
  metrics.recordDecision(resultOf({ outcome: 'not_found', reason: 'resource_not_served', candidates: [] }), 30_000n);
  metrics.recordRouteError();
  const ms = await reader.metrics();
  const decisions = points(find(ms, 'skewgate.decisions'));
  t.same(
    decisions.map((p) => [p.attributes, p.value]).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    [
      [{ outcome: 'not_found', reason: 'resource_not_served' }, 1],
      [{ outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-c' }, 2],
    ],
    'two paths, one series: no per-path or per-namespace label',
  );
  const latency = find(ms, 'skewgate.decision.duration_seconds');
  t.equal(latency?.descriptor.unit, 's');
  t.equal(latency?.dataPointType, DataPointType.HISTOGRAM);
  const routed = points(latency).find((p) => p.attributes['outcome'] === 'routed') as DataPoint<Histogram> | undefined;
  t.equal(routed?.value.count, 2);
  t.ok(Math.abs((routed?.value.sum ?? 0) - 0.0001) < 1e-9, 'seconds');
  t.ok((routed?.value.buckets.boundaries.length ?? 0) > 5 && routed?.value.buckets.boundaries[0] === 0.00001, 'microsecond buckets');
  t.equal(points(find(ms, 'skewgate.decision.errors'))[0]?.value, 1);
});

t.test('discovery rounds: duration by apiserver and result, errors counted', async (t) => {
  const round = (server: string, requests: DiscoveryRoundEvent['requests'], failures = 0, err: unknown = null): DiscoveryRoundEvent => {
    const s = states.find((x) => x.name === server) as ServerState;
    // The state a failed round leaves, as the poller writes it (src/discovery/poller.ts).
    const f = err === null ? null : failureOf(err);
    return {
      server,
      startedAt: NOW,
      durationMs: 20,
      requests,
      before: s,
      after: {
        ...s,
        consecutiveFailures: failures,
        lastError: f?.message ?? null,
        ...(f === null ? {} : { lastErrorCode: f.code, lastErrorKind: f.kind }),
      },
      snapshot: snap,
    };
  };
  const notModified = round('apiserver-a', [
    { path: '/api', status: 304, bytes: 0, durationMs: 1 },
    { path: '/apis', status: 304, bytes: 0, durationMs: 1 },
    { path: '/readyz', status: 200, bytes: 2, durationMs: 1 },
  ]);
  const ok = round('apiserver-a', [
    { path: '/api', status: 304, bytes: 0, durationMs: 1 },
    { path: '/apis', status: 200, bytes: 900, durationMs: 1 },
  ]);
  const failed = round(
    'apiserver-d',
    [{ path: '/apis', status: null, bytes: 0, durationMs: 1 }],
    4,
    new DiscoveryFetchError('GET https://10.0.0.4:6443/apis: timed out after 3000ms', 'https://10.0.0.4:6443/apis', { timeout: true }),
  );
  t.equal(fetchResult(notModified), 'not_modified');
  t.equal(fetchResult(ok), 'ok');
  t.equal(fetchResult(failed), 'error');
  for (const e of [notModified, ok, failed]) metrics.recordRound(e);
  const ms = await reader.metrics();
  const fetches = points(find(ms, 'skewgate.discovery.fetch.duration_seconds')) as DataPoint<Histogram>[];
  t.same(
    fetches.map((p) => [p.attributes, p.value.count]).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    [
      [{ apiserver: 'apiserver-a', result: 'not_modified' }, 1],
      [{ apiserver: 'apiserver-a', result: 'ok' }, 1],
      [{ apiserver: 'apiserver-d', result: 'error' }, 1],
    ],
  );
  t.same(
    points(find(ms, 'skewgate.discovery.fetch.errors')).map((p) => [p.attributes, p.value]),
    [[{ apiserver: 'apiserver-d', reason: 'timeout' }, 1]],
  );

  // The reason label: a bounded set, from the statuses and the kind of the error discovery
  // recorded (the errors as src/kube/ and src/discovery/ throw them; never their text).
  const status = (code: number): DiscoveryRoundEvent['requests'] => [{ path: '/apis', status: code, bytes: 0, durationMs: 1 }];
  const none: DiscoveryRoundEvent['requests'] = [{ path: '/api', status: null, bytes: 0, durationMs: 1 }];
  const fetchError = (details: ConstructorParameters<typeof DiscoveryFetchError>[2]): DiscoveryFetchError =>
    new DiscoveryFetchError('GET https://x/apis: …', 'https://x/apis', details);
  const cases: [string, DiscoveryRoundEvent['requests'], unknown, FetchErrorReason][] = [
    ['401', status(401), fetchError({ status: 401 }), 'unauthorized'],
    ['403', status(403), fetchError({ status: 403 }), 'unauthorized'],
    ['429', status(429), fetchError({ status: 429 }), 'http_4xx'],
    ['503', status(503), fetchError({ status: 503 }), 'http_5xx'],
    ['refused or reset', none, fetchError({ connection: true }), 'connection'],
    ['tls', none, fetchError({ tls: true }), 'tls'],
    ['timeout', none, fetchError({ timeout: true }), 'timeout'],
    ['too large', status(200), fetchError({ status: 200, tooLarge: { limit: 65536, seen: { read: 70000 }, etag: null } }), 'too_large'],
    ['malformed', status(200), new DiscoveryDocumentError('/apis', 'items[0]', 'not an object'), 'malformed'],
    ['credentials', none, new CredentialsError('apiserver-d', 'cannot read the token file /x: ENOENT'), 'credentials'],
    ['a legacy round whose first failure timed out', none, fetchError({ kind: 'timeout' }), 'timeout'],
    ['no code of ours', none, new Error('something else'), 'other'],
  ];
  for (const [what, requests, err, want] of cases) {
    const reason = fetchErrorReason(round('apiserver-d', requests, 1, err));
    t.equal(reason, want, what);
    t.ok(FETCH_ERROR_REASONS.includes(reason), `${what}: one of the bounded values`);
  }
});

t.test('document sizes: a gauge in bytes per apiserver and document, from the last round, members only', async (t) => {
  const base = states[0] as ServerState;
  const sized = (server: string, sizes: [string, number][]): DiscoveryRoundEvent => ({
    server,
    startedAt: NOW,
    durationMs: 1,
    requests: [],
    before: base,
    after: base,
    snapshot: snap,
    documentBytes: new Map(sizes),
  });
  metrics.recordRound(
    sized('apiserver-a', [
      ['/api', 900],
      ['/apis', 20_000_000],
    ]),
  );
  metrics.recordRound(
    sized('apiserver-a', [
      ['/api', 900],
      ['/apis', 14_000_000],
      ['/openapi/v3', 3000],
    ]),
  );
  metrics.recordRound(sized('apiserver-c', [['/apis', 52_428_800]]));
  metrics.recordRound(sized('gone', [['/apis', 1]]));
  const gauge = find(await reader.metrics(), 'skewgate.discovery.document.bytes');
  t.equal(gauge?.descriptor.unit, 'By');
  t.equal(gauge?.dataPointType, DataPointType.GAUGE);
  t.same(
    points(gauge)
      .map((p) => [p.attributes, p.value])
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    [
      [{ apiserver: 'apiserver-a', document: '/api' }, 900],
      [{ apiserver: 'apiserver-a', document: '/apis' }, 14_000_000],
      [{ apiserver: 'apiserver-a', document: '/openapi/v3' }, 3000],
      [{ apiserver: 'apiserver-c', document: '/apis' }, 52_428_800],
    ],
    'the last size of each; an apiserver not in the snapshot is not shown',
  );
});

t.test('gauges: view age, readiness, skewed resources and what each apiserver lacks', async (t) => {
  const ms = await reader.metrics();
  t.same(
    points(find(ms, 'skewgate.discovery.view.age_seconds')).map((p) => [p.attributes['apiserver'], p.value]),
    [
      ['apiserver-a', 1.5],
      ['apiserver-c', 0.25],
    ],
    'no series for a server never synced',
  );
  t.same(
    points(find(ms, 'skewgate.apiserver.ready')).map((p) => [p.attributes['apiserver'], p.value]),
    [
      ['apiserver-a', 1],
      ['apiserver-c', 0],
    ],
  );
  t.same(
    points(find(ms, 'skewgate.apiserver.info')).map((p) => [p.attributes, p.value]),
    [[{ apiserver: 'apiserver-a', git_version: 'v1.36.3' }, 1]],
    'one series per apiserver whose /version was read, its gitVersion a label',
  );
  t.same(
    points(find(ms, 'skewgate.apiserver.cordoned')).map((p) => [p.attributes, p.value]),
    [[{ apiserver: 'apiserver-c', mode: 'drain' }, 1]],
    'one series per apiserver an operator cordoned or drained, the mode a label',
  );
  t.same(
    points(find(ms, 'skewgate.skew.resources')).map((p) => p.value),
    [1],
  );
  t.same(
    points(find(ms, 'skewgate.skew.missing')).map((p) => [p.attributes['apiserver'], p.value]),
    [
      ['apiserver-a', 1],
      ['apiserver-c', 0],
      ['apiserver-d', 0],
    ],
  );

  // apiserver-a learns the resource: the gauges follow the next snapshot.
  snap = buildSnapshot(
    [{ ...states[0], view: view(['/v1/pods', 'x.io/v1/widgets']) } as ServerState, states[1] as ServerState, states[2] as ServerState],
    2,
  );
  skew.update(snap);
  const after = await reader.metrics();
  t.same(
    points(find(after, 'skewgate.skew.resources')).map((p) => p.value),
    [0],
  );
});

t.test('every label is bounded: only outcome, reason, upstream, apiserver, result, role, document, git_version, mode', async (t) => {
  const ms = await reader.metrics();
  const keys = new Set(ms.flatMap((m) => points(m).flatMap((p) => Object.keys(p.attributes))));
  t.same([...keys].sort(), ['apiserver', 'document', 'git_version', 'mode', 'outcome', 'reason', 'result', 'role', 'upstream']);
  const versions = points(find(ms, 'skewgate.apiserver.info')).map((p) => p.attributes['apiserver']);
  t.equal(new Set(versions).size, versions.length, 'git_version: one series per apiserver (its version now), never a history');
  const documents = new Set(
    ms.flatMap((m) => points(m).flatMap((p) => (p.attributes['document'] === undefined ? [] : [p.attributes['document']]))),
  );
  t.same([...documents].sort(), ['/api', '/apis', '/openapi/v3'], 'document: the three root paths, never a group/version');
});

t.test('the fast path: resources and group/versions in the routes last written', async (t) => {
  const read = async (): Promise<[unknown, unknown]> => {
    const ms = await reader.metrics();
    return [points(find(ms, 'skewgate.fast_path.resources'))[0]?.value, points(find(ms, 'skewgate.fast_path.group_versions'))[0]?.value];
  };
  fastTable = null;
  t.same(await read(), [0, 0], 'none written: 0');
  const resource = (name: string): FastResource => ({ resource: name, namespaced: true, verbs: ['get', 'list'], subresources: [] });
  fastTable = {
    generation: 3,
    members: ['apiserver-a'],
    servesAll: true,
    groupVersions: [
      { group: 'apps', version: 'v1', resources: [resource('deployments'), resource('replicasets')] },
      { group: 'batch', version: 'v1', resources: [resource('jobs')] },
    ],
    validUntil: Number.POSITIVE_INFINITY,
    why: '',
  };
  t.same(await read(), [3, 2], '3 resources in 2 group/versions');
});
