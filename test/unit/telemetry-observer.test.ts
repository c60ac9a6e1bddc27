// The observer seam as telemetry uses it: trace ids in log lines, combineObservers handing one
// trace to the stream, the decision's context on the request that goes upstream, traceparent parsing.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { combineObservers, createLogObserver, type DecisionObserver, type DecisionTrace } from '../../src/extproc/observer.js';
import type { ProcessingResponseOut } from '../../src/extproc/core/messages.js';
import { responseFor } from '../../src/extproc/core/responses.js';
import { formatTraceparent, parseTraceparent } from '../../src/extproc/core/traceparent.js';
import { TRACEPARENT, captureLogs, resultOf } from '../helpers/extproc-client.js';

const TRACE: DecisionTrace = {
  traceId: 'a'.repeat(32),
  spanId: 'b'.repeat(16),
  upstreamHeaders: [['traceparent', `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`]],
};
const headers = new Map([
  [':path', '/apis/example.com/v1/widgets?labelSelector=secret%3Dx'],
  ['authorization', 'Bearer tok-123'],
  ['traceparent', '00-11111111111111111111111111111111-2222222222222222-01'],
]);
const routed = resultOf({ outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-c', candidates: ['apiserver-c'] });

function md(traceparent?: string): grpc.Metadata {
  const m = new grpc.Metadata();
  if (traceparent) m.set('traceparent', traceparent);
  return m;
}

t.test("log lines carry the decision span's trace_id and span_id", async (t) => {
  const logs = captureLogs('info');
  createLogObserver(logs.logger).onDecision(routed, { metadata: md(TRACEPARENT), headers, durationNs: 5000n, trace: TRACE });
  t.match(logs.lines[0], { msg: 'decision', level: 30, outcome: 'routed', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
  t.equal(logs.lines[0]?.['traceparent'], TRACEPARENT, "Envoy's incoming context is kept as it was");
});

t.test("a decision line carries Envoy's request id (its access log's request_id, the apiserver's Audit-Id)", async (t) => {
  const logs = captureLogs('info');
  const obs = createLogObserver(logs.logger);
  obs.onDecision(routed, { metadata: md(), headers: new Map([...headers, ['x-request-id', 'req-42']]), durationNs: 1n });
  obs.onDecision(routed, { metadata: md(), headers, durationNs: 1n });
  t.equal(logs.lines[0]?.['requestId'], 'req-42');
  t.notOk('requestId' in (logs.lines[1] ?? {}), 'none when Envoy sent none');
});

t.test("without a span (tracing off): the caller's trace id, Envoy's first, then the client's", async (t) => {
  const logs = captureLogs('info');
  const obs = createLogObserver(logs.logger);
  obs.onDecision(routed, { metadata: md(TRACEPARENT), headers, durationNs: 1n });
  obs.onDecision(routed, { metadata: md('junk'), headers, durationNs: 1n });
  obs.onDecision(routed, { metadata: md(), headers: new Map(), durationNs: 1n });
  t.match(logs.lines[0], { trace_id: '0af7651916cd43dd8448eb211c80319c', parent_span_id: 'b7ad6b7169203331' });
  t.match(logs.lines[1], { trace_id: '11111111111111111111111111111111', parent_span_id: '2222222222222222' });
  t.notOk('trace_id' in (logs.lines[2] ?? {}));
});

t.test('info for non-default decisions, debug for every decision; credentials and query values never logged', async (t) => {
  const info = captureLogs('info');
  const obsInfo = createLogObserver(info.logger);
  const routine = resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] });
  obsInfo.onDecision(routine, { metadata: md(), headers, durationNs: 1n, trace: TRACE });
  obsInfo.onDecision(routed, { metadata: md(), headers, durationNs: 1n, trace: TRACE });
  t.equal(info.lines.length, 1, 'the default decision is not logged at info');
  const debug = captureLogs('debug');
  const obsDebug = createLogObserver(debug.logger);
  obsDebug.onDecision(routine, { metadata: md(), headers, durationNs: 1n, trace: TRACE });
  obsDebug.onDecision(routed, { metadata: md(), headers, durationNs: 1n, trace: TRACE });
  t.equal(debug.lines.length, 2);
  t.match(debug.lines[0], { level: 20, trace_id: 'a'.repeat(32) });
  t.notMatch(debug.text(), /tok-123/);
  t.notMatch(JSON.stringify(debug.lines.map((l) => l['path'])), /secret/);
});

t.test('combineObservers: the first trace wins, every observer sees it, a throwing one is skipped', async (t) => {
  const seen: (DecisionTrace | undefined)[] = [];
  const tracer: DecisionObserver = { onRequest: () => TRACE, onDecision: (_r, ctx) => seen.push(ctx.trace) };
  const second: DecisionObserver = {
    onRequest: () => ({ ...TRACE, spanId: 'c'.repeat(16) }),
    onDecision: (_r, ctx) => seen.push(ctx.trace),
  };
  const broken: DecisionObserver = {
    onRequest: () => {
      throw new Error('x');
    },
    onDecision: () => {
      throw new Error('y');
    },
  };
  const all = combineObservers(broken, tracer, second);
  const ctx = { metadata: md(), headers };
  const trace = all.onRequest?.(ctx);
  t.equal(trace, TRACE);
  all.onDecision(routed, { ...ctx, durationNs: 1n, trace });
  t.same(seen, [TRACE, TRACE]);
  t.equal(combineObservers(createLogObserver(captureLogs().logger)).onRequest?.(ctx), undefined, 'no tracer, no trace');
});

const common = (r: ProcessingResponseOut) => ('request_headers' in r ? r.request_headers.response : undefined);

t.test("responses carry the decision's context upstream; skewgate's own answers do not", async (t) => {
  const up = TRACE.upstreamHeaders;
  const r = responseFor(routed, 1, up);
  const set = common(r)?.header_mutation?.set_headers?.map((h) => [h.header.key, Buffer.from(h.header.raw_value).toString()]);
  t.same(set, [
    ['x-skewgate-upstream', 'apiserver-c'],
    ['traceparent', up[0]?.[1]],
  ]);
  t.equal(common(r)?.clear_route_cache, true);
  const d = responseFor(resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }), 1, up);
  t.same(
    common(d)?.header_mutation?.set_headers?.map((h) => h.header.key),
    ['traceparent'],
  );
  t.same(
    common(d)?.header_mutation?.set_headers?.[0]?.header,
    { key: 'traceparent', raw_value: Buffer.from(up[0]?.[1] ?? '') },
    'raw_value only',
  );
  t.same(
    responseFor(resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }), 1),
    { request_headers: { response: {} } },
    'tracing off: unchanged CONTINUE',
  );
  const nf = responseFor(resultOf({ outcome: 'not_found', reason: 'resource_not_served', candidates: [] }), 1, up);
  t.ok('immediate_response' in nf);
  t.notMatch(JSON.stringify(nf), /traceparent/);
});

t.test('traceparent parsing', async (t) => {
  t.same(parseTraceparent(TRACEPARENT), { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', sampled: true });
  t.same(parseTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00')?.sampled, false);
  t.ok(parseTraceparent('01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra'), 'a later version may append fields');
  for (const bad of [
    undefined,
    '',
    'x',
    'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra',
    '00-00000000000000000000000000000000-b7ad6b7169203331-01',
    '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01',
    '00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01',
  ]) {
    t.equal(parseTraceparent(bad), null, String(bad));
  }
  t.equal(
    formatTraceparent({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), sampled: false }),
    `00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`,
  );
});

t.test(
  'log.decisions.interval: an apiserver restarting under 2,000 decisions/s writes lines per reason, not per request, and loses no count',
  async (t) => {
    const logs = captureLogs('info');
    let now = 0;
    const obs = createLogObserver(logs.logger, { intervalMs: 1000, now: () => now });
    t.teardown(() => obs.close());
    const kinds = [
      resultOf({ outcome: 'routed', reason: 'served_by_subset', upstream: 'apiserver-a', candidates: ['apiserver-a'] }),
      resultOf({ outcome: 'routed', reason: 'unverified_candidate', upstream: 'apiserver-b', candidates: ['apiserver-b'] }),
      resultOf({ outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['apiserver-c'] }),
      resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }),
    ];
    const seconds = 3;
    const perSecond = 2000;
    let followed = 0;
    for (let i = 0; i < seconds * perSecond; i++) {
      now = Math.floor(i / perSecond) * 1000 + (i % perSecond) / 2;
      const r = kinds[i % kinds.length] as (typeof kinds)[number];
      if (r.decision.outcome !== 'default') followed++;
      obs.onDecision(r, { metadata: md(), headers, durationNs: 1n });
    }
    obs.close();
    obs.close();
    const full = logs.lines.filter((l) => l['msg'] === 'decision');
    const summaries = logs.lines.filter((l) => String(l['msg']).startsWith('decisions held back'));
    t.equal(full.length, 3 * seconds, 'one full line per reason per interval (3 reasons, 3 intervals)');
    t.equal(summaries.length, 3, "at close, one count per reason for the last interval's rest");
    const counted =
      full.length + full.reduce((n, l) => n + Number(l['heldBack'] ?? 0), 0) + summaries.reduce((n, l) => n + Number(l['count']), 0);
    t.equal(counted, followed, `every one of the ${followed} decisions an operator follows is a line or counted in one`);
    t.match(summaries[0], { level: 30, outcome: 'routed', reason: 'served_by_subset', intervalMs: 1000 });

    const debug = captureLogs('debug');
    const dbg = createLogObserver(debug.logger, { intervalMs: 1000, now: () => now });
    t.teardown(() => dbg.close());
    for (let i = 0; i < 10; i++) dbg.onDecision(kinds[0] as (typeof kinds)[number], { metadata: md(), headers, durationNs: 1n });
    t.equal(debug.lines.length, 10, 'at level debug, every decision has its line');
    const each = captureLogs('info');
    const every = createLogObserver(each.logger, { intervalMs: 0 });
    for (let i = 0; i < 10; i++) every.onDecision(kinds[0] as (typeof kinds)[number], { metadata: md(), headers, durationNs: 1n });
    t.equal(each.lines.length, 10, 'interval 0: a line for each');
  },
);
