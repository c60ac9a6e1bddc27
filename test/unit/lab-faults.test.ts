import t from 'tap';
import { faultRows } from '../load/faults.js';
import { TimelineRecorder, allUnreadySpans, capableReadyForMs, readyForGoodAt, readySpans } from '../load/timeline.js';
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
