// bench (i)'s replay of a real node's requests (bench/node-mix.ts): every recorded row but the
// watches becomes a request of its verb on its resource, drawn in proportion to its rate; and how
// the report reads skewgate's log per phase.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pick, requestOf, schedule, withNodeApis, type MixWindow } from '../../bench/node-mix.js';
import { fastPathLog } from '../../bench/node-phases.js';
import { BUILTINS_OLD } from '../../harness/fake/index.js';
import { packageRoot } from '../../src/util/package-root.js';

const mix = JSON.parse(readFileSync(join(packageRoot(), 'bench/node-traffic-mix.json'), 'utf8')) as { windows: MixWindow[] };
const steady = mix.windows[0] as MixWindow;

t.test('each row of the recorded steady window: its request, watches left out', async (t) => {
  const shapes = steady.rows.map((row) => {
    const r = requestOf(row);
    return `${row.verb} ${row.resource} → ${r === null ? 'not replayed' : `${r.method} ${r.path}`}`;
  });
  t.same(shapes.sort(), [
    'create authorization.k8s.io/v1/subjectaccessreviews → POST /apis/authorization.k8s.io/v1/subjectaccessreviews',
    'create core/v1/events → POST /api/v1/namespaces/default/events',
    'create core/v1/serviceaccounts/token → POST /api/v1/namespaces/default/serviceaccounts/default/token',
    'get core/v1/pods → GET /api/v1/namespaces/default/pods/bench-pod',
    'patch core/v1/events → PATCH /api/v1/namespaces/default/events/bench-event',
    'patch core/v1/nodes/status → PATCH /api/v1/nodes/bench-node/status',
    'patch core/v1/pods/status → PATCH /api/v1/namespaces/default/pods/bench-pod/status',
    'update coordination.k8s.io/v1/leases → PUT /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/bench-node',
    'watch core/v1/configmaps → not replayed',
  ]);
  const s = schedule(steady);
  t.same(s.left, ['kubelet watch core/v1/configmaps (1/min)'], 'what is left out is said');
  t.equal(Math.round(s.requests.reduce((n, r) => n + r.weight, 0) * 1000), 1000, 'the weights add up to one');
});

t.test('the sequence: each row in proportion to its rate, spread over the cycle', async (t) => {
  const s = schedule(steady);
  const next = pick(s.requests);
  const counts = new Map<string, number>();
  const N = 10_000;
  for (let i = 0; i < N; i++) counts.set(next(i).row, (counts.get(next(i).row) ?? 0) + 1);
  for (const r of s.requests) {
    const share = (counts.get(r.req.row) ?? 0) / N;
    t.ok(
      Math.abs(share - r.weight) < 0.02,
      `${r.req.row}: ${(share * 100).toFixed(1)} % of requests, ${(r.weight * 100).toFixed(1)} % of the rate`,
    );
  }
  let longest = 0;
  for (let i = 0, run = 0; i < 200; i++) {
    run = i > 0 && next(i).row === next(i - 1).row ? run + 1 : 1;
    longest = Math.max(longest, run);
  }
  t.ok(longest <= 3, `no row sent in a burst (longest run ${longest})`);
});

t.test('the fakes serve what a real apiserver serves a node: the token subresource, SubjectAccessReviews', async (t) => {
  const apis = withNodeApis(BUILTINS_OLD);
  t.match(apis.find((r) => r.resource === 'serviceaccounts')?.subresources, [{ name: 'token', verbs: ['create'] }]);
  t.match(
    apis.find((r) => r.resource === 'subjectaccessreviews'),
    { group: 'authorization.k8s.io', version: 'v1', namespaced: false, verbs: ['create'] },
  );
  t.equal(apis.length, BUILTINS_OLD.length + 1, 'nothing else changes');
});

t.test("(i) reads skewgate's log per phase: fast-path lines and warnings inside the span, counted", async (t) => {
  const line = (time: string, level: string, msg: string, why?: string): string =>
    JSON.stringify({ level, time, msg, ...(why === undefined ? {} : { why }) });
  const log = [
    line('2026-12-04T10:00:00.500Z', 'info', 'fast path: none; every request goes through ext_proc', 'the pool is changing'),
    line('2026-12-04T10:00:01.000Z', 'info', 'fast path: none; every request goes through ext_proc', 'the pool is changing'),
    line('2026-12-04T10:00:01.500Z', 'info', 'fast path: routes written; these group/versions go straight to the balanced pool'),
    line('2026-12-04T10:00:02.000Z', 'info', 'apiserver ready'),
    line('2026-12-04T10:00:02.500Z', 'warn', 'discovery failing'),
    line('2026-12-04T10:00:09.000Z', 'warn', 'after the span'),
    'not JSON at all',
  ].join('\n');
  const span = { from: Date.parse('2026-12-04T10:00:00.000Z'), to: Date.parse('2026-12-04T10:00:05.000Z') };
  t.equal(
    fastPathLog(log, span),
    'fast path: none; every request goes through ext_proc (the pool is changing) × 2, discovery failing × 1, fast path: routes written; these group/versions go straight to the balanced pool × 1',
  );
  t.equal(fastPathLog(log, { from: span.to, to: span.to + 1000 }), 'no fast-path change, no warning', 'an empty span says so');
});
