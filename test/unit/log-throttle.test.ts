import t from 'tap';
import { createLogThrottle } from '../../src/util/core/log-throttle.js';

t.test('one line per key per interval, the next one counting what was held back', async (t) => {
  let now = 1000;
  const th = createLogThrottle({ intervalMs: 10_000, now: () => now });
  // [advance ms, key, expected]
  const steps: readonly (readonly [number, string, { suppressed: number } | null])[] = [
    [0, 'unknown_phase', { suppressed: 0 }],
    [1, 'unknown_phase', null],
    [5_000, 'unknown_phase', null],
    [0, 'stream_error', { suppressed: 0 }],
    [4_998, 'unknown_phase', null],
    [1, 'unknown_phase', { suppressed: 3 }],
    [0, 'unknown_phase', null],
    [10_000, 'unknown_phase', { suppressed: 1 }],
    [30_000, 'unknown_phase', { suppressed: 0 }],
    [0, 'stream_error', { suppressed: 0 }],
  ];
  for (const [i, [advance, key, want]] of steps.entries()) {
    now += advance;
    t.same(th.admit(key), want, `step ${i}: ${key} at +${now - 1000} ms`);
  }
});

t.test('keys are bounded: the oldest is forgotten, so its next line is written', async (t) => {
  const now = 0;
  const th = createLogThrottle({ intervalMs: 60_000, now: () => now, maxKeys: 2 });
  t.same(th.admit('a'), { suppressed: 0 });
  t.same(th.admit('b'), { suppressed: 0 });
  t.equal(th.admit('a'), null, 'a is still remembered');
  t.same(th.admit('c'), { suppressed: 0 }, 'a third key pushes out the oldest (a)');
  t.same(th.admit('a'), { suppressed: 0 }, 'a forgotten: written again, its count lost');
  t.equal(th.admit('c'), null, 'c remembered');
});

t.test('drain: what was held back, per key, and the counts start again', async (t) => {
  let now = 0;
  const th = createLogThrottle({ intervalMs: 10_000, now: () => now });
  th.admit('routed/served_by_subset');
  for (let i = 0; i < 4; i++) th.admit('routed/served_by_subset');
  th.admit('unavailable/no_healthy_capable_server');
  t.same(th.drain(), [{ key: 'routed/served_by_subset', suppressed: 4 }], 'only keys with lines held back');
  t.same(th.drain(), [], 'drained: nothing twice');
  th.admit('routed/served_by_subset');
  now += 10_000;
  t.same(th.admit('routed/served_by_subset'), { suppressed: 1 }, 'a line after a drain counts only what came since');
});
