import t from 'tap';
import { AskRounds, firstRound, transitions, type Round } from '../helpers/ask-rounds.js';

const r = (a: string, b: string): Round => ({ a, b });

t.test('firstRound: the first round from an index that satisfies the predicate', async (t) => {
  const rounds = [r('503', '503'), r('200', '503'), r('200', '200'), r('503', '200')];
  // [from, predicate, expected]
  const cases: readonly (readonly [number, (x: Round) => boolean, number])[] = [
    [0, (x) => x['a'] === '200', 1],
    [2, (x) => x['a'] === '200', 2],
    [3, (x) => x['a'] === '200', -1],
    [0, (x) => x['a'] === '200' && x['b'] === '200', 2],
    [0, (x) => x['b'] === '404', -1],
    [-5, (x) => x['a'] === '503', 0],
    [9, () => true, -1],
  ];
  for (const [i, [from, pred, want]] of cases.entries()) t.equal(firstRound(rounds, pred, from), want, `case ${i}`);
  t.equal(
    firstRound([], () => true),
    -1,
    'no rounds: none',
  );
});

t.test('transitions: each run of one answer once, in order', async (t) => {
  const rounds = [r('503', 'x'), r('503', 'x'), r('200', 'x'), r('503', 'y'), r('200', 'y')];
  t.same(transitions(rounds, 'a'), ['503', '200', '503', '200']);
  t.same(transitions(rounds, 'b'), ['x', 'y']);
  t.same(transitions(rounds, 'c'), [], 'never asked: nothing');
  t.same(transitions([], 'a'), []);
});

t.test('marks: rounds wholly before and wholly after the moment the test acted', async (t) => {
  const log = new AskRounds();
  log.mark('start');
  log.begin();
  log.push(r('503', '503'));
  log.begin();
  // Marked while a round is being asked: that round is neither wholly before nor wholly after.
  log.mark('slice posted');
  log.push(r('200', '503'));
  log.mark('between rounds');
  log.begin();
  log.push(r('200', '200'));
  // [mark, before, after]
  const cases: readonly (readonly [string, number, number])[] = [
    ['start', 0, 0],
    ['slice posted', 1, 2],
    ['between rounds', 2, 2],
  ];
  for (const [what, before, after] of cases) {
    t.equal(log.before(what), before, `${what}: rounds before`);
    t.equal(log.after(what), after, `${what}: first round after`);
  }
  t.equal(
    firstRound(log.rounds, (x) => x['b'] === '200', log.after('slice posted')),
    2,
  );
  t.throws(() => log.after('never'), /no mark "never"/);
  log.mark('end');
  t.equal(log.after('end'), 3, 'a mark after the last round: no round after it yet');
});
