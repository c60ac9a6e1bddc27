import t from 'tap';
import { WAIT_FACTOR, WAIT_FLOOR_MS, waitMs } from '../helpers/waits.js';

t.test('waitMs: the configured times summed, times the factor, never under the floor', async (t) => {
  const cases: readonly (readonly [readonly number[], number])[] = [
    [[], WAIT_FLOOR_MS],
    [[500], WAIT_FLOOR_MS],
    [[2000, 1000], Math.max(WAIT_FLOOR_MS, 3000 * WAIT_FACTOR)],
    [[30_000], 30_000 * WAIT_FACTOR],
  ];
  for (const [given, want] of cases) t.equal(waitMs(...given), want, `${given.join(' + ') || 'nothing'}`);
});
