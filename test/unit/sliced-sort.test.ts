// sortSteps: the order Array.prototype.sort gives (stable, any comparator), in pieces.
import t from 'tap';
import { runToEnd, sortSteps, STEP_EVERY } from '../../src/util/core/sliced.js';

/** A small deterministic generator (mulberry32): the same cases on every run. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('the same order as Array.prototype.sort, equal items in their first order', async (t) => {
  const next = rng(31);
  const byKey = (a: { key: number }, b: { key: number }): number => a.key - b.key;
  for (const n of [0, 1, 2, 31, 32, 33, 64, 65, 100, 1000, 5000]) {
    // Few distinct keys: many ties, so that an unstable sort would show.
    const items = Array.from({ length: n }, (_, i) => ({ key: Math.floor(next() * 10), at: i }));
    const before = items.map((x) => x.at);
    const got = runToEnd(sortSteps(items, byKey));
    t.same(
      got.map((x) => x.at),
      [...items].sort(byKey).map((x) => x.at),
      `${n} items`,
    );
    t.same(
      items.map((x) => x.at),
      before,
      `${n} items: the input is left as it was`,
    );
  }
  const words = Array.from({ length: 3000 }, () => Math.floor(next() * 1e6).toString(36));
  const byUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  t.same(runToEnd(sortSteps(words, byUnits)), [...words].sort(), 'strings: the default sort order');
  t.same(runToEnd(sortSteps([3, 1, 2], (a, b) => b - a)), [3, 2, 1], 'any comparator');
});

t.test('pauses while it sorts: no stretch of more than a few STEP_EVERY comparisons', async (t) => {
  const next = rng(7);
  const items = Array.from({ length: 20_000 }, () => next());
  let compared = 0;
  let longest = 0;
  const work = sortSteps(items, (a, b) => {
    compared++;
    return a - b;
  });
  let pauses = 0;
  for (let step = work.next(); step.done !== true; step = work.next()) {
    pauses++;
    longest = Math.max(longest, compared);
    compared = 0;
  }
  t.ok(pauses > (20_000 * 14) / STEP_EVERY / 2, `paused ${pauses} times`);
  t.ok(longest <= 32 * 32, `at most ${longest} comparisons between two pauses`);
});
