import t from 'tap';
import { account, judge404, total, type AccountingRules } from '../load/accounting.js';
import { summariseLatency } from '../load/latency.js';
import { answerDetail } from '../load/http.js';
import { sumCounter } from '../load/metrics.js';
import { collectAuditIds } from '../load/audit.js';
import { TimelineRecorder, capableReadyForMs, phaseAt, readySpans } from '../load/timeline.js';
import type { FinalObject, RequestRecord } from '../load/types.js';
import {
  objectManifest,
  opAt,
  configMaps,
  mutatingAdmissionPolicies,
  collectionPath,
  objectPath,
  ARM_LABEL,
  TOKEN_LABEL,
} from '../load/workload.js';
import {
  extractClusterSection,
  false404Table,
  phaseTable,
  problemsTable,
  spliceClusterPart,
  CLUSTER_END,
  CLUSTER_START,
} from '../../bench/cluster-results.js';

const OLD = '1.35.4';
const NEW = '1.36.3';
const rules: AccountingRules = {
  serves: { skewed: (_s, v) => v === NEW, common: () => true },
  graceMs: 1000,
};

/** P0: three old servers ready at 0; P1 at 10 s: kas-1 stopped, new kas-1 ready at 20 s. */
function rolling(): ReturnType<TimelineRecorder['snapshot']> {
  let now = 0;
  const tl = new TimelineRecorder(() => now);
  tl.phase('P0');
  for (const s of ['kas-1', 'kas-2', 'kas-3']) tl.server(s, OLD, 'ready', 0);
  now = 10_000;
  tl.phase('P1');
  tl.server('kas-1', OLD, 'stop');
  tl.server('kas-1', OLD, 'stopped', 12_000);
  tl.server('kas-1', NEW, 'start', 12_100);
  tl.server('kas-1', NEW, 'ready', 20_000);
  now = 40_000;
  tl.phase('P2');
  return tl.snapshot();
}

const req = (o: Partial<RequestRecord> & Pick<RequestRecord, 'startMs'>): RequestRecord => ({
  arm: 'skewgate',
  kind: 'skewed',
  op: 'list',
  endMs: o.startMs + 5,
  status: 200,
  ...o,
});

t.test('timeline: phases and ready spans', async (t) => {
  const tl = rolling();
  t.equal(phaseAt(tl, -5), 'P0', 'before the first mark: first phase');
  t.equal(phaseAt(tl, 9_999), 'P0');
  t.equal(phaseAt(tl, 10_000), 'P1', 'a mark belongs to the phase it begins');
  t.equal(phaseAt(tl, 50_000), 'P2');
  const spans = readySpans(tl);
  t.equal(spans.length, 4);
  t.same(
    spans.find((s) => s.server === 'kas-1' && s.version === OLD),
    { server: 'kas-1', version: OLD, readyAtMs: 0, downAtMs: 10_000 },
  );
  t.same(
    spans.find((s) => s.version === NEW),
    { server: 'kas-1', version: NEW, readyAtMs: 20_000, downAtMs: null },
  );
  const serves = rules.serves.skewed;
  t.equal(capableReadyForMs(spans, 19_999, serves), Number.NEGATIVE_INFINITY, 'nothing serves it before the new server is ready');
  t.equal(capableReadyForMs(spans, 20_500, serves), 500);
  t.equal(capableReadyForMs(spans, 25_000, serves), 5000);
  t.equal(capableReadyForMs(spans, 5000, rules.serves.common), 5000, 'common: every server');
  t.equal(capableReadyForMs(spans, 11_000, rules.serves.common), 11_000, 'kas-2/3 still up while kas-1 is stopped');
});

t.test('judge404: ground truth from the timeline, and acknowledged objects', async (t) => {
  const tl = rolling();
  const spans = readySpans(tl);
  const acked = new Map<string, { atMs: number; auditId?: string }>([
    ['skewgate\u0000common\u0000cm-1', { atMs: 3000, auditId: 'aud-1' }],
    ['skewgate\u0000skewed\u0000map-1', { atMs: 21_000 }],
  ]);
  t.equal(judge404(req({ startMs: 5000, status: 404 }), tl, spans, rules, acked), null, 'P0: nothing serves it: a true 404');
  t.equal(judge404(req({ startMs: 20_800, status: 404 }), tl, spans, rules, acked), null, 'within the 1 s grace after ready');
  const f = judge404(req({ startMs: 21_200, status: 404, reason: 'not_found/resource_not_served' }), tl, spans, rules, acked);
  t.equal(f?.why, 'capable_server_ready');
  t.equal(f?.phase, 'P1');
  t.equal(f?.reason, 'not_found/resource_not_served');
  t.ok((f?.capableReadyForMs ?? 0) > 1000);
  t.equal(judge404(req({ startMs: 21_200, status: 200 }), tl, spans, rules, acked), null, 'only 404s are judged');
  const ackd = judge404(
    req({ startMs: 4000, kind: 'common', op: 'get', name: 'cm-1', status: 404, auditId: 'aud-2' }),
    tl,
    spans,
    rules,
    acked,
  );
  t.equal(ackd?.why, 'acknowledged_object');
  t.equal(ackd?.createdAuditId, 'aud-1', 'which create acknowledged it');
  t.equal(ackd?.auditId, 'aud-2');
  t.equal(
    judge404(req({ startMs: 2000, kind: 'common', op: 'get', name: 'cm-1', status: 404 }), tl, spans, rules, acked)?.why,
    'capable_server_ready',
    'before the ack: judged by the server rule only',
  );
  t.equal(
    judge404(
      req({ startMs: 500, kind: 'common', op: 'get', name: 'other', status: 404 }),
      tl,
      spans,
      { ...rules, serves: { ...rules.serves, common: () => false } },
      acked,
    ),
    null,
  );
  t.equal(
    judge404(req({ startMs: 22_000, op: 'get', name: 'map-1', status: 404 }), tl, spans, rules, acked)?.why,
    'acknowledged_object',
    'an acknowledged object wins over the server rule',
  );
});

t.test('account: per phase and arm, writes and watches', async (t) => {
  const tl = rolling();
  const requests: RequestRecord[] = [
    // P0, skewgate
    req({ startMs: 1000, kind: 'common', op: 'create', token: 'sg-c-1', name: 'cm-a', status: 201 }),
    req({ startMs: 2000, kind: 'skewed', op: 'create', token: 'sg-s-1', status: 404 }),
    req({ startMs: 3000, kind: 'common', op: 'get', name: 'cm-a', status: 200 }),
    // P0, baseline
    req({ arm: 'baseline', startMs: 1500, kind: 'common', op: 'create', token: 'b-c-1', name: 'cm-b', status: 201 }),
    req({ arm: 'baseline', startMs: 2500, kind: 'common', op: 'create', token: 'b-c-2', status: null, error: 'ECONNRESET' }),
    // P1, skewgate: lost write (acknowledged, absent at the end)
    req({ startMs: 25_000, kind: 'skewed', op: 'create', token: 'sg-s-2', name: 'map-x', status: 201 }),
    req({ startMs: 26_000, kind: 'skewed', op: 'list', status: 200 }),
    req({ startMs: 11_000, kind: 'common', op: 'list', status: 503 }),
    // P1, baseline: two false 404s and a duplicated write
    req({ arm: 'baseline', startMs: 22_000, kind: 'skewed', op: 'list', status: 404 }),
    req({ arm: 'baseline', startMs: 23_000, kind: 'skewed', op: 'watch', status: 404 }),
    req({ arm: 'baseline', startMs: 24_000, kind: 'skewed', op: 'create', token: 'b-s-1', name: 'map-b', status: 201 }),
    req({ arm: 'baseline', startMs: 20_100, kind: 'skewed', op: 'list', status: 404 }),
  ];
  const final: FinalObject[] = [
    { kind: 'common', arm: 'skewgate', name: 'cm-a', token: 'sg-c-1' },
    { kind: 'common', arm: 'baseline', name: 'cm-b', token: 'b-c-1' },
    { kind: 'common', arm: 'baseline', name: 'cm-b2', token: 'b-c-2' },
    { kind: 'skewed', arm: 'baseline', name: 'map-b', token: 'b-s-1' },
    { kind: 'skewed', arm: 'baseline', name: 'map-b-again', token: 'b-s-1' },
    { kind: 'skewed', arm: 'baseline', name: 'foreign', token: undefined },
  ];
  const a = account({
    timeline: tl,
    requests,
    watch: [
      { arm: 'skewgate', kind: 'common', atMs: 1100, type: 'ADDED', name: 'cm-a' },
      { arm: 'skewgate', kind: 'common', atMs: 10_500, type: 'END', detail: 'ECONNRESET' },
      { arm: 'skewgate', kind: 'skewed', atMs: 26_000, type: 'BOOKMARK' },
      { arm: 'baseline', kind: 'common', atMs: 1600, type: 'ADDED', name: 'cm-b' },
    ],
    final,
    rules,
  });
  t.same(a.phases, ['P0', 'P1', 'P2']);
  t.same(a.arms, ['baseline', 'skewgate']);
  t.equal(a.rows.length, 6, 'every phase × arm, empty ones included');
  const row = (phase: string, arm: string) => a.rows.find((r) => r.phase === phase && r.arm === arm);
  t.match(row('P0', 'skewgate'), {
    requests: 3,
    false404s: 0,
    true404s: 1,
    createsAcked: 1,
    lostWrites: 0,
    watchEvents: 1,
    watchInterruptions: 0,
  });
  t.match(row('P0', 'baseline'), { requests: 2, noAnswer: 1, createsAcked: 1, unackedPersisted: 1, lostWrites: 0, duplicatedWrites: 0 });
  t.equal(row('P0', 'baseline')?.statuses.get('no answer'), 1);
  t.match(row('P1', 'skewgate'), {
    requests: 3,
    lostWrites: 1,
    server5xx: 1,
    watchEvents: 0,
    watchInterruptions: 1,
    skewedOk: 2,
    skewedRequests: 2,
    commonRequests: 1,
    commonOk: 0,
  });
  t.match(row('P1', 'baseline'), { requests: 4, false404s: 2, true404s: 1, duplicatedWrites: 1 });
  t.match(row('P2', 'skewgate'), { requests: 0 });
  t.equal(a.false404s.length, 2);
  t.same(
    a.false404s.map((f) => f.op),
    ['list', 'watch'],
  );
  t.same(
    a.writeProblems.map((p) => [p.arm, p.problem, p.token, p.copies]),
    [
      ['skewgate', 'lost', 'sg-s-2', 0],
      ['baseline', 'duplicated', 'b-s-1', 2],
    ],
  );
  t.equal(a.watchMissed.get('baseline/common'), undefined, 'baseline saw its configmap');
  t.equal(a.watchMissed.get('skewgate/skewed'), 1, 'map-x never reached the skewed watch');
  t.equal(a.watchMissed.get('baseline/skewed'), undefined, 'no skewed watch on the baseline arm: not counted');
  t.equal(total(a, 'false404s', 'baseline'), 2);
  t.equal(total(a, 'false404s', 'skewgate'), 0);
  t.equal(total(a, 'lostWrites'), 1);
  t.equal(total(a, 'requests', undefined, ['P1']), 7);
  t.same([...(row('P1', 'skewgate')?.problems ?? [])], [['503', 1]]);
  t.same([...(row('P0', 'baseline')?.problems ?? [])], [['no answer: ECONNRESET', 1]]);
  t.equal(problemsTable(a).rows.length, 2);
  const f404 = false404Table(a, 0, 10, new Map([['x', new Set(['kas-2'])]]));
  t.equal(f404.rows.length, 2);
  t.equal(f404.rows[0]?.[8], 'skewgate or Envoy', 'no Audit-ID: not an apiserver');
  const table = phaseTable(a);
  t.equal(table.rows.length, 6);
  t.match(table.rows[2]?.join(' '), /P1 baseline 4 201×1 404×3/);
});

t.test('workload: paths, manifests and the cycle', async (t) => {
  t.equal(
    collectionPath(mutatingAdmissionPolicies, 'ns'),
    '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies',
    'cluster-scoped',
  );
  t.equal(collectionPath(configMaps, 'lab-a'), '/api/v1/namespaces/lab-a/configmaps');
  t.equal(objectPath(configMaps, 'lab-a', 'x y'), '/api/v1/namespaces/lab-a/configmaps/x%20y');
  const m = objectManifest(configMaps, { arm: 'a', token: 'a-common-1', namespace: 'lab-a' }) as {
    metadata: { generateName: string; namespace: string; labels: Record<string, string> };
    data: unknown;
  };
  t.equal(m.metadata.generateName, 'lab-a-');
  t.equal(m.metadata.namespace, 'lab-a');
  t.same(m.metadata.labels, { [ARM_LABEL]: 'a', [TOKEN_LABEL]: 'a-common-1' });
  t.ok(m.data);
  const p = objectManifest(mutatingAdmissionPolicies, { arm: 'a', token: 't', namespace: 'lab-a' }) as {
    metadata: Record<string, unknown>;
  };
  t.notOk('namespace' in p.metadata, 'no namespace on a cluster-scoped object');
  const kinds = Array.from({ length: 12 }, (_, i) => `${opAt(i).kind}:${opAt(i).op}`);
  t.equal(new Set(kinds).size, 6, 'every kind × op in a cycle of six');
  t.equal(kinds[0], kinds[6]);
});

t.test('answerDetail: who said what', async (t) => {
  t.equal(
    answerDetail('{"kind":"Status","reason":"ServiceUnavailable","message":"no"}', 'unavailable/no_healthy_capable_server'),
    'skewgate: unavailable/no_healthy_capable_server',
  );
  t.equal(
    answerDetail('{"kind":"Status","apiVersion":"v1","reason":"Conflict","message":"already exists"}', undefined),
    'apiserver: Conflict already exists',
  );
  t.equal(
    answerDetail('upstream connect error or disconnect/reset before headers. reset reason: connection termination', undefined),
    'envoy: upstream connect error or disconnect/reset before headers',
  );
  t.equal(answerDetail('no healthy upstream', undefined), 'envoy: no healthy upstream');
  t.equal(answerDetail('', undefined), '(empty body)');
});

t.test('metrics and audit logs: the MVP evidence', async (t) => {
  const text = [
    '# HELP apiserver_rerouted_request_total [ALPHA] Total number of requests that were proxied',
    '# TYPE apiserver_rerouted_request_total counter',
    'apiserver_rerouted_request_total{code="200"} 11',
    'apiserver_rerouted_request_total{code="503",group="x"} 2',
    'apiserver_rerouted_request_total_other 100',
    'apiserver_rerouted_request_total 1',
  ].join('\n');
  t.equal(sumCounter(text, 'apiserver_rerouted_request_total'), 14, 'every label set, not a longer name');
  t.equal(sumCounter(text, 'missing_total'), 0);
  const ids = new Map<string, Set<string>>();
  collectAuditIds('{"auditID":"a","stage":"ResponseComplete"}\n{"auditID":"b"}\nnot json\n\n', 'kas-1', ids);
  collectAuditIds('{"auditID":"a","stage":"ResponseComplete"}\n{"auditID":"a","stage":"ResponseStarted"}\n{"no":"id"}', 'kas-3', ids);
  t.same([...(ids.get('a') ?? [])].sort(), ['kas-1', 'kas-3'], 'proxied: two servers logged it');
  t.same([...(ids.get('b') ?? [])], ['kas-1']);
  t.equal(ids.size, 2);
});

t.test('latency summary', async (t) => {
  const s = summariseLatency([5, 1, 4, 2, 3, 10, 6, 7, 8, 9]);
  t.same(s, { count: 10, p50: 5, p90: 9, p99: 10, max: 10 });
  t.ok(Number.isNaN(summariseLatency([]).p50));
});

t.test('RESULTS.md: the cluster section and its parts', async (t) => {
  const doc = '# skewgate benchmark results\n\n## (a) thing\n\ntext\n';
  const one = spliceClusterPart(doc, 'rolling-upgrade', '### Rolling upgrade\n\n| a |\n');
  t.ok(one.startsWith(doc.trimEnd()), 'the rest of the file is untouched');
  t.match(one, /<!-- cluster:start -->\n## Real control plane/);
  t.match(
    one,
    /<!-- cluster:rolling-upgrade:start -->\n### Rolling upgrade\n\n\| a \|\n<!-- cluster:rolling-upgrade:end -->\n<!-- cluster:end -->\n$/,
  );
  const two = spliceClusterPart(one, 'mvp', 'MVP v1');
  const three = spliceClusterPart(two, 'rolling-upgrade', 'replaced');
  t.notMatch(three, /### Rolling upgrade/, 'a part is replaced');
  t.match(three, /cluster:rolling-upgrade:start -->\nreplaced\n<!-- cluster:rolling-upgrade:end/);
  t.match(three, /MVP v1/, 'other parts are kept');
  t.ok(three.indexOf('replaced') < three.indexOf('MVP v1'), 'in place, order kept');
  const section = extractClusterSection(three);
  t.ok(section?.startsWith(CLUSTER_START) && section.endsWith(CLUSTER_END));
  // What bench/run.ts does: regenerate everything else, append the section.
  const regenerated = `# skewgate benchmark results\n\nnew numbers\n\n${section ?? ''}\n`;
  t.equal(extractClusterSection(regenerated), section);
  t.equal(extractClusterSection(doc), null);
  t.throws(() => spliceClusterPart(doc, 'Bad Id', 'x'));
});
