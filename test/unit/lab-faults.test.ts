import t from 'tap';
import { faultRows } from '../load/faults.js';
import { TimelineRecorder, allUnreadySpans, capableReadyForMs, readyForGoodAt, readySpans, type PhaseMark } from '../load/timeline.js';
import { UNAVAILABLE_REASON } from '../load/accounting.js';
import { GIVE_UP_AFTER, untilAnswered } from '../load/wait.js';
import {
  capableGaps,
  certainlyInGap,
  describe503,
  downSpans,
  gatewayViewFromLog,
  unexplained503s,
  usableFrom,
  usableSpans,
  versionAt,
  type GatewayViewEvent,
  type GatewayViewWhat,
  type UsableSpan,
} from '../load/gateway-view.js';
import type { RequestRecord } from '../load/types.js';
import { faultTable } from '../../bench/cluster-results.js';
import { account } from '../load/accounting.js';
import { ReadinessWatch, servingForGoodAt } from '../load/readiness-watch.js';
import type { LoadHttp } from '../load/http.js';

const NEW = '1.36.3';

const req = (o: Partial<RequestRecord> & Pick<RequestRecord, 'startMs'>): RequestRecord => ({
  arm: 'cert',
  kind: 'common',
  op: 'get',
  endMs: o.startMs + 10,
  status: 200,
  ...o,
});

/** steady from 0; the fault phase from 10 s, the fault at 11 s (done at 11.1 s), repaired at 15 s. */
function timeline(): ReturnType<TimelineRecorder['snapshot']> {
  let now = 0;
  const tl = new TimelineRecorder(() => now);
  tl.phase('steady');
  tl.server('kas-1', NEW, 'ready', 0);
  now = 10_000;
  tl.phase('fault');
  tl.server('kas-1', NEW, 'unready', 11_200);
  tl.server('kas-1', NEW, 'ready', 15_100);
  return tl.snapshot();
}

t.test("readySpans: an apiserver's own unready ends its span, ready opens the next", async (t) => {
  const spans = readySpans(timeline());
  t.same(spans, [
    { server: 'kas-1', version: NEW, readyAtMs: 0, downAtMs: 11_200 },
    { server: 'kas-1', version: NEW, readyAtMs: 15_100, downAtMs: null },
  ]);
  const serves = (): boolean => true;
  t.equal(capableReadyForMs(spans, 12_000, serves), Number.NEGATIVE_INFINITY, 'unready: nothing capable is ready');
  t.equal(capableReadyForMs(spans, 16_100, serves), 1000, 'ready again: counted from its return');
});

t.test('etcd outage: every apiserver unready, a flap splits the span, and who is ready for good', async (t) => {
  const tl = new TimelineRecorder(() => 0);
  for (const s of ['a', 'b']) tl.server(s, NEW, 'ready', 1_000);
  tl.server('a', NEW, 'unready', 10_000);
  tl.server('b', NEW, 'unready', 11_000);
  tl.server('b', NEW, 'ready', 12_000); // flaps ready for one probe mid-outage
  tl.server('b', NEW, 'unready', 12_500);
  tl.server('a', NEW, 'ready', 20_000); // before the harness saw etcd healthy
  tl.server('b', NEW, 'ready', 21_000);
  const snap = tl.snapshot();
  t.same(allUnreadySpans(snap, ['a', 'b'], 9_000, 30_000), [
    { startMs: 11_000, endMs: 12_000 },
    { startMs: 12_500, endMs: 20_000 },
  ]);
  t.same(allUnreadySpans(snap, ['a', 'b'], 15_000, 30_000), [{ startMs: 15_000, endMs: 20_000 }], 'already all unready at the start');
  t.same(allUnreadySpans(snap, ['a', 'b'], 9_000, 19_000).at(-1), { startMs: 12_500, endMs: null }, 'still unready at the end');
  t.same(allUnreadySpans(snap, ['a', 'b', 'c'], 9_000, 30_000), [], 'a server with no events counts as ready');
  t.same(allUnreadySpans(snap, [], 9_000, 30_000), [], 'no servers: no span');
  t.equal(readyForGoodAt(snap, 'b', 9_000, 30_000), 21_000);
  t.equal(readyForGoodAt(snap, 'b', 9_000, 12_700), null, 'flapped ready but unready at the end of the range');
  t.equal(readyForGoodAt(snap, 'a', 9_000, 30_000), 20_000, 'ready before the repair counts');
  t.equal(readyForGoodAt(snap, 'a', 21_000, 30_000), null, 'no readiness event in the range');
});

t.test('servingForGoodAt: reads answered straight for the rest of a range', async (t) => {
  const log = [
    { server: 'a', atMs: 1_000, serving: true },
    { server: 'a', atMs: 10_000, serving: false },
    { server: 'a', atMs: 20_000, serving: true },
    { server: 'a', atMs: 20_500, serving: false }, // /readyz passed, the read hung
    { server: 'a', atMs: 23_000, serving: true },
    { server: 'b', atMs: 1_000, serving: true },
  ];
  t.equal(servingForGoodAt(log, 'a', 9_000, 30_000), 23_000, 'a relapse after the first answer moves it on');
  t.equal(servingForGoodAt(log, 'a', 9_000, 22_000), null, 'not serving at the end of the range');
  t.equal(servingForGoodAt(log, 'b', 9_000, 30_000), 9_000, 'no change in the range: served all through it');
  t.equal(servingForGoodAt(log, 'c', 9_000, 30_000), null, 'never probed');
});

t.test('ReadinessWatch: the read is sent only after /readyz passes, and its answer is kept apart', async (t) => {
  const sent: string[] = [];
  let readRefused = true;
  const http = {
    send: async (_m: string, url: string) => {
      sent.push(url);
      if (url.endsWith('/readyz')) return { status: url.startsWith('https://down') ? 500 : 200, headers: {}, text: '' };
      if (readRefused) throw new Error('UND_ERR_HEADERS_TIMEOUT');
      return { status: 200, headers: {}, text: '' };
    },
  } as unknown as LoadHttp;
  let now = 0;
  const timeline = new TimelineRecorder(() => now);
  const watch = new ReadinessWatch({
    http,
    servers: [
      { name: 'up', version: NEW, url: 'https://up' },
      { name: 'down', version: NEW, url: 'https://down' },
    ],
    timeline,
    clock: () => now,
    stepMs: 5,
    servingPath: '/api/v1/configmaps?limit=1',
  });
  watch.start();
  await new Promise((r) => setTimeout(r, 30));
  t.notOk(watch.allServing(), 'a read that hangs is not serving');
  readRefused = false;
  now = 1_000;
  await new Promise((r) => setTimeout(r, 30));
  await watch.stop();
  t.notOk(sent.includes('https://down/api/v1/configmaps?limit=1'), 'no read sent to a server failing /readyz');
  t.same(
    watch
      .servingChanges()
      .filter((c) => c.server === 'up')
      .map((c) => [c.atMs, c.serving]),
    [
      [0, false],
      [1_000, true],
    ],
  );
  t.notOk(watch.allServing(), 'one server never served');
  t.same(timeline.snapshot().servers, [], 'serving is not written into the timeline');
});

t.test('faultRows: in flight at the fault, failures after it, the longest request, recovery', async (t) => {
  const tl = timeline();
  const mark = { phase: 'fault', faultAtMs: 11_000, faultDoneMs: 11_100, repairAtMs: 15_000 };
  const requests: RequestRecord[] = [
    req({ startMs: 5000, status: 503 }), // steady: not this phase's
    req({ startMs: 10_990, endMs: 11_050, status: null, error: 'ECONNRESET' }), // in flight, failed
    req({ startMs: 11_050, endMs: 11_060 }), // in flight (sent before the process was gone), fine
    req({ startMs: 12_000, status: 503, reason: 'no_healthy_capable_server', detail: 'skewgate: no_healthy_capable_server' }),
    req({ startMs: 13_000, endMs: 18_000, status: 504, detail: 'apiserver: Timeout' }),
    req({ startMs: 14_000, status: 404, kind: 'skewed', name: 'gone' }), // a false 404, by the predicate
    req({ startMs: 14_500, status: 404, kind: 'skewed', name: 'true' }),
    req({ startMs: 15_500, status: 503, detail: 'envoy: x' }), // after the repair
    req({ startMs: 16_000, endMs: 60_000, op: 'watch' }), // watches stream: not the longest request
    req({ startMs: 17_000, arm: 'token' }),
  ];
  const rows = faultRows({ timeline: tl, requests, marks: [mark], false404: (r) => r.name === 'gone' });
  t.same(
    rows.map((r) => r.arm),
    ['cert', 'token'],
    'one row per arm',
  );
  const cert = rows[0];
  t.equal(cert?.requests, 8, 'this phase, this arm, the watch connect included');
  t.equal(cert?.failed, 5, 'reset, two 503s, a 504 and the false 404 (not the true one)');
  t.same([...(cert?.failedBy ?? [])].sort(), [
    ['404 (false)', 1],
    ['503 envoy: x', 1],
    ['503 skewgate: no_healthy_capable_server', 1],
    ['504 apiserver: Timeout', 1],
    ['no answer: ECONNRESET', 1],
  ]);
  t.equal(cert?.inFlightAtFault, 2);
  t.equal(cert?.failedInFlight, 1);
  t.equal(cert?.failedAfterFault, 4);
  t.equal(cert?.failedAfterRepair, 1);
  t.equal(cert?.maxMs, 5000, 'the 504, not the watch');
  t.equal(cert?.maxWhat, 'common get 504');
  t.equal(cert?.recoverMs, 4500, 'the last failure sent after the fault: 15.5 s');
  t.equal(cert?.recoverAfterRepairMs, 500);
  const token = rows[1];
  t.equal(token?.failed, 0);
  t.equal(token?.recoverMs, 0, 'nothing failed: recovered at once');
  t.equal(token?.recoverAfterRepairMs, 0);
  const none = faultRows({ timeline: tl, requests, marks: [{ phase: 'fault', faultAtMs: 11_000 }], false404: () => false });
  t.equal(none[0]?.recoverAfterRepairMs, null, 'no repair: no recovery after one');

  const a = account({
    timeline: tl,
    requests,
    watch: [],
    final: [],
    rules: { serves: { skewed: () => true, common: () => true }, graceMs: 1000 },
  });
  const table = faultTable(rows, a);
  t.equal(table.rows.length, 2);
  t.equal(table.rows[0]?.[10], '5.0 s (common get 504)', 'max request in seconds above one');
  t.equal(table.rows[1]?.[11], '0 ms', 'recovery in milliseconds below one');
});

// ---- the gateway's own view (test/load/gateway-view.ts) ----

const OLD = '1.35.4';
const line = (atMs: number, msg: string, server: string): string =>
  JSON.stringify({ level: 30, time: new Date(atMs).toISOString(), msg, server });

t.test('gatewayViewFromLog: the transition lines, the run header, nothing else', async (t) => {
  const text = [
    `==== ${new Date(1_000).toISOString()} node dist/src/cli/main.js run`,
    line(1_500, 'apiserver ready', 'kas-1'),
    line(1_600, 'discovery synced', 'kas-1'),
    'not json',
    '{"broken',
    line(2_000, 'apiserver not ready (/readyz)', 'kas-1'),
    line(2_500, 'apiserver admitted as a member', '127-0-0-4-6443'),
    line(3_000, 'apiserver left every source: draining', 'kas-2'),
    line(3_500, 'drained apiserver removed', 'kas-2'),
    JSON.stringify({ time: new Date(4_000).toISOString(), msg: 'apiserver ready' }), // no server: not a transition
  ].join('\n');
  t.same(gatewayViewFromLog(text), [
    { atMs: 1_000, server: '', what: 'restart' },
    { atMs: 1_500, server: 'kas-1', what: 'ready' },
    { atMs: 2_000, server: 'kas-1', what: 'unready' },
    { atMs: 2_500, server: '127-0-0-4-6443', what: 'member' },
    { atMs: 3_000, server: 'kas-2', what: 'draining' },
    { atMs: 3_500, server: 'kas-2', what: 'gone' },
  ]);
  t.equal(gatewayViewFromLog(text, 2_000).length, 4, 'an earlier run of the same log file is left out');
});

t.test('usableSpans: ready, a member and not draining; a restart forgets', async (t) => {
  const ev = (atMs: number, server: string, what: GatewayViewWhat): GatewayViewEvent => ({ atMs, server, what });
  const seeds = ['kas-1', 'kas-2'];
  const spans = usableSpans(
    [
      ev(100, 'kas-1', 'ready'),
      ev(100, 'kas-2', 'ready'),
      ev(200, 'learnt', 'ready'), // probing: not a member yet
      ev(300, 'learnt', 'member'),
      ev(400, 'kas-2', 'draining'),
      ev(500, 'kas-2', 'gone'),
      ev(600, 'kas-1', 'unready'),
      ev(700, 'kas-1', 'ready'),
      ev(800, '', 'restart'),
      ev(900, 'kas-1', 'ready'),
      ev(950, 'learnt', 'ready'), // learnt again after the restart: not a member until admitted
    ],
    seeds,
  );
  t.same(spans, [
    { server: 'kas-1', fromMs: 100, toMs: 600 },
    { server: 'kas-2', fromMs: 100, toMs: 400 },
    { server: 'learnt', fromMs: 300, toMs: 800 },
    { server: 'kas-1', fromMs: 700, toMs: 800 },
    { server: 'kas-1', fromMs: 900, toMs: null },
  ]);
  t.equal(usableFrom(spans, 'kas-1', 650), 700, 'the next span');
  t.equal(usableFrom(spans, 'kas-1', 750), 750, 'inside a span: at once');
  t.equal(usableFrom(spans, 'kas-2', 450), null, 'drained and gone');
});

/**
 * An in-place upgrade through one gateway: kas-1 (old) stops at 10 s and is seen unready at
 * 10.5 s; it is back new (ready by the harness at 20 s, by the gateway's log at 21 s); the first
 * skewed 2xx sent after that line ends at 21.4 s. The harness saw kas-1 stopped at 12 s.
 */
function upgrade(): { tl: ReturnType<TimelineRecorder['snapshot']>; spans: UsableSpan[] } {
  const tl = new TimelineRecorder(() => 0);
  tl.phase('P0');
  for (const s of ['kas-1', 'kas-2']) {
    tl.server(s, OLD, 'start', 0);
    tl.server(s, OLD, 'ready', 500);
  }
  tl.phase('P1');
  tl.server('kas-1', OLD, 'stop', 10_000);
  tl.server('kas-1', OLD, 'stopped', 12_000);
  tl.server('kas-1', NEW, 'start', 12_100);
  tl.server('kas-1', NEW, 'ready', 20_000);
  const spans = usableSpans(
    [
      { atMs: 600, server: 'kas-1', what: 'ready' },
      { atMs: 600, server: 'kas-2', what: 'ready' },
      { atMs: 10_500, server: 'kas-1', what: 'unready' },
      { atMs: 21_000, server: 'kas-1', what: 'ready' },
    ],
    ['kas-1', 'kas-2'],
  );
  // The phase marks are at 0 (P0) and 0 (P1) by the recorder's clock: move P1 to 10 s.
  const snap = tl.snapshot();
  return { tl: { ...snap, phases: [snap.phases[0] as PhaseMark, { atMs: 10_000, phase: 'P1' }] }, spans };
}

t.test(
  'capableGaps: from the line that took the last capable server away to the first answer after the line that brought one back',
  async (t) => {
    const { tl, spans } = upgrade();
    const capable = (server: string, atMs: number): boolean => versionAt(tl, server, atMs) === NEW;
    const ok = (startMs: number, endMs: number, kind: 'skewed' | 'common' = 'skewed'): RequestRecord =>
      req({ arm: 'a', kind, startMs, endMs, status: 200 });
    const requests = [ok(700, 710, 'common'), ok(20_900, 21_100), ok(21_200, 21_400), ok(21_300, 21_350, 'common'), ok(21_500, 21_600)];
    t.same(capableGaps(spans, capable, requests, 'skewed'), [{ fromMs: Number.NEGATIVE_INFINITY, loggedEndMs: 21_000, endMs: 21_400 }]);
    t.same(
      capableGaps(spans, capable, [], 'skewed'),
      [{ fromMs: Number.NEGATIVE_INFINITY, loggedEndMs: 21_000, endMs: Number.POSITIVE_INFINITY }],
      'no answer after the line: the gap never closes (a claim on successes must catch that)',
    );
    t.same(
      capableGaps(spans, () => true, requests, 'common'),
      [{ fromMs: Number.NEGATIVE_INFINITY, loggedEndMs: 600, endMs: 710 }],
      'common: served from the first line on by kas-2; the one gap is before it',
    );
    const after = usableSpans(
      [
        { atMs: 600, server: 'x', what: 'ready' },
        { atMs: 900, server: 'x', what: 'unready' },
      ],
      ['x'],
    );
    t.same(
      capableGaps(after, () => true, [], 'common').at(-1),
      { fromMs: 900, loggedEndMs: null, endMs: Number.POSITIVE_INFINITY },
      'gone for good',
    );
  },
);

t.test(
  "unexplained503s: skewgate's own only in a gap of the gateway's view; Envoy's also while a server of the kind was down",
  async (t) => {
    const { tl, spans } = upgrade();
    const serves = { skewed: (_s: string, v: string) => v === NEW, common: () => true };
    const capable = (server: string, atMs: number): boolean => versionAt(tl, server, atMs) === NEW;
    const proof = req({ arm: 'a', kind: 'skewed', startMs: 21_200, endMs: 21_400, status: 201 });
    const early = req({ arm: 'a', kind: 'common', startMs: 700, endMs: 710, status: 200 });
    const gaps = { skewed: capableGaps(spans, capable, [proof], 'skewed'), common: capableGaps(spans, () => true, [early], 'common') };
    const sg = (startMs: number, o: Partial<RequestRecord> = {}): RequestRecord =>
      req({ arm: 'a', kind: 'skewed', startMs, endMs: startMs + 5, status: 503, reason: UNAVAILABLE_REASON, ...o });
    const envoy = (startMs: number, o: Partial<RequestRecord> = {}): RequestRecord =>
      req({ arm: 'a', kind: 'common', startMs, endMs: startMs + 5, status: 503, detail: 'envoy: upstream connect error', ...o });
    const cases: [string, RequestRecord, boolean][] = [
      ['skewgate, skewed, nobody new yet', sg(15_000), true],
      ['skewgate, skewed, after the harness saw the new server ready, before the gateway logged it', sg(20_500), true],
      ['skewgate, skewed, after the line, before the first answer that proves it in effect', sg(21_300), true],
      ['skewgate, skewed, after that answer: it should have routed', sg(21_500), false],
      ['skewgate, common, kas-2 usable all along', sg(15_000, { kind: 'common' }), false],
      ['skewgate with a reason not allowed here', sg(15_000, { reason: 'not_synced' }), false],
      ['envoy, common, in flight while kas-1 was down', envoy(11_000), true],
      ['envoy, common, in flight as the stop began', envoy(9_990, { endMs: 10_050 }), true],
      ['envoy, common, before anything stopped', envoy(5_000), false],
      ['envoy, common, after kas-1 was back', envoy(20_100), false],
      ['envoy, skewed, in a gap', envoy(15_000, { kind: 'skewed' }), true],
      ['envoy, skewed, after the proof, nothing new down', envoy(30_000, { kind: 'skewed' }), false],
    ];
    for (const [what, r, explained] of cases)
      t.equal(
        unexplained503s({ timeline: tl, requests: [r], gaps, serves }).length,
        explained ? 0 : 1,
        `${what}: ${explained ? 'explained' : 'not explained'}`,
      );
    const all = unexplained503s({
      timeline: tl,
      requests: [...cases.map((c) => c[1]), proof, req({ startMs: 30_000, status: 404 })],
      gaps,
      serves,
    });
    t.equal(all.length, cases.filter((c) => !c[2]).length, 'only 503s are judged, each once');
    t.same(all.map(describe503(0))[0], 'P1 a skewed get at 21.5 s (no_healthy_capable_server)', 'says when, what and who answered');
    t.same(downSpans(tl, serves.skewed), [], 'skewed: the server that stopped never served it');
    t.same(downSpans(tl, serves.common), [{ server: 'kas-1', fromMs: 10_000, toMs: 20_000 }]);
  },
);

t.test('certainlyInGap: after the first own 503 in the gap was answered, ended before the line that closed it', async (t) => {
  const gap = { fromMs: 10_000, loggedEndMs: 20_000, endMs: 20_300 };
  const sg = (startMs: number, endMs = startMs + 5): RequestRecord =>
    req({ startMs, endMs, status: 503, reason: UNAVAILABLE_REASON, retryAfter: '1' });
  const rs = [
    req({ startMs: 9_000, endMs: 15_000, status: 504 }), // sent before the gap: may have gone anywhere
    req({ startMs: 10_100, endMs: 10_120, status: 200 }), // before the gap was in effect
    sg(10_200), // the first own 503: the gap in effect from its end
    sg(10_300),
    req({ startMs: 10_400, endMs: 15_400, status: 504 }), // decided in the gap and held: caught
    sg(19_990, 20_010), // ended after the closing line: may have been decided after it
    req({ startMs: 20_100, endMs: 20_120, status: 200 }),
  ];
  t.same(
    certainlyInGap(rs, gap).map((r) => r.startMs),
    [10_300, 10_400],
  );
  t.same(certainlyInGap([req({ startMs: 12_000, status: 504 })], gap), [], 'no own 503 in the gap: nothing is certain');
  t.same(
    certainlyInGap([sg(10_200), sg(30_000)], { fromMs: 10_000, loggedEndMs: null, endMs: Infinity }).map((r) => r.startMs),
    [30_000],
    'a gap still open: to the end',
  );
});

t.test('untilAnswered: resolves on the count, gives up on a count of requests, never on a clock', async (t) => {
  const rs: RequestRecord[] = [];
  const o = { requests: () => rs, clock: () => 0, progress: () => undefined };
  for (let i = 0; i < 3; i++) rs.push(req({ startMs: i, endMs: 100 + i }));
  t.equal(await untilAnswered('three', o, () => true, 3), 102, 'when the last of them ended');
  const waiting = untilAnswered('a 404', o, (r) => r.status === 404, 1);
  for (let i = 0; i < GIVE_UP_AFTER; i++) rs.push(req({ startMs: 1000 + i }));
  await t.rejects(waiting, /gave up waiting after 1000 answered requests: 1 a 404/);
});
