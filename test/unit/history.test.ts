// The history of the admin endpoint (src/history/): the transitions between two snapshots' servers
// (table), and the recorder's bounded list with the skew's transitions in order.
import t from 'tap';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import type { ResourceCapability, ServerState, ServerView } from '../../src/discovery/core/types.js';
import { serverTransitions, type HistoryEvent } from '../../src/history/core/transitions.js';
import { HistoryRecorder } from '../../src/history/recorder.js';

const cap: ResourceCapability = { verbs: new Set(['get']), subresources: new Map(), namespaced: true };
const view = (keys: string[]): ServerView => ({
  source: 'aggregated',
  resources: new Map(keys.map((k) => [k, cap])),
  groupVersions: new Set(),
});
const V1 = view(['/v1/pods']);
const V2 = view(['/v1/pods', 'x.io/v1/widgets']);
const AT = Date.parse('2026-12-05T03:00:00.000Z');

function state(name: string, o: Partial<ServerState> = {}): ServerState {
  return { name, url: `https://${name}:6443`, view: V1, lastSuccessAt: AT, consecutiveFailures: 0, lastError: null, ready: true, ...o };
}

/** kind/apiserver of each event, and the detail that matters. */
const brief = (events: readonly HistoryEvent[]): string[] =>
  events.map((e) =>
    e.kind === 'version'
      ? `${e.apiserver} version ${e.from ?? '-'}→${e.to}`
      : e.kind === 'not_ready'
        ? `${e.apiserver} not_ready ${e.error ?? ''}`.trim()
        : 'apiserver' in e
          ? `${e.apiserver} ${e.kind}`
          : e.kind,
  );

t.test('serverTransitions: one event per change, none while nothing changes', async (t) => {
  const a = state('a', { gitVersion: 'v1.35.4' });
  const rows: [string, ServerState[] | null, ServerState[], string[]][] = [
    [
      'the first look: members added, what is known of them',
      null,
      [a, state('b', { ready: null })],
      ['a member_added', 'a version -→v1.35.4', 'a ready', 'b member_added'],
    ],
    ['nothing changed', [a], [{ ...a, lastSuccessAt: AT + 1000 }], []],
    ['probed for the first time', [state('b', { ready: null })], [state('b')], ['b ready']],
    [
      'stops answering',
      [a],
      [{ ...a, ready: false, consecutiveFailures: 1, lastError: 'connect ECONNREFUSED' }],
      ['a not_ready connect ECONNREFUSED'],
    ],
    [
      'still failing: no second event',
      [{ ...a, consecutiveFailures: 1, ready: false }],
      [{ ...a, consecutiveFailures: 2, ready: false }],
      [],
    ],
    [
      'back as another version, with another view',
      [{ ...a, ready: false, consecutiveFailures: 1 }],
      [{ ...a, gitVersion: 'v1.36.3', view: V2 }],
      ['a version v1.35.4→v1.36.3', 'a ready', 'a view_changed'],
    ],
    ['draining, then gone', [a, state('b')], [a, state('b', { draining: true })], ['b draining']],
    ['removed', [a, state('b')], [a], ['b member_removed']],
    ['a version read that failed keeps the last: no event', [a], [{ ...a, gitVersion: 'v1.35.4' }], []],
  ];
  for (const [what, prev, next, want] of rows) t.same(brief(serverTransitions(prev, next, AT)), want, what);
  t.equal(serverTransitions(null, [a], AT)[0]?.at, '2026-12-05T03:00:00.000Z', 'the time as ISO 8601');
});

t.test('the recorder: oldest first, the latest kept, the skew once computed', async (t) => {
  let now = AT;
  const h = new HistoryRecorder(() => now, 4);
  h.observe(buildSnapshot([state('a'), state('b')], 1));
  await h.settled();
  t.same(brief(h.answer().events), ['a member_added', 'a ready', 'b member_added', 'b ready'], 'no skew: none recorded');
  now += 1000;
  h.observe(buildSnapshot([state('a', { view: V2 }), state('b')], 2));
  await h.settled();
  const { events, dropped, capacity } = h.answer();
  t.same(brief(events), ['a ready', 'b member_added', 'b ready', 'a view_changed', 'skew'].slice(-4), 'the oldest dropped at the capacity');
  t.equal(dropped, 2);
  t.equal(capacity, 4);
  const skew = events.at(-1);
  t.match(skew, { kind: 'skew', before: 0, after: 1, at: '2026-12-05T03:00:01.000Z' });
  t.match(skew?.kind === 'skew' ? skew.newlySkewed : [], [/widgets missing from b/]);
});
