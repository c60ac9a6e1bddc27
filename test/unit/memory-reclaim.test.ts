// src/memory/: when a dropped view's memory is asked back (the pure decision, a table), the
// reclaimer's timing on a fake clock with a recording collector, and V8's own collection for real.
import t from 'tap';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import {
  INITIAL_RECLAIM,
  RECLAIM_MAX_HELD,
  RECLAIM_MIN_DROP,
  collected,
  heldEntries,
  reclaimDecision,
  type ReclaimState,
} from '../../src/memory/core/reclaim.js';
import { MemoryReclaimer, RECLAIM_DELAY_MS, v8FullCollector } from '../../src/memory/reclaimer.js';
import { installFakeClock } from '../helpers/fake-clock.js';

t.test('reclaimDecision: a large drop to at most half, and not too much still held', async (t) => {
  const rows: [string, number, number, string][] = [
    // [case, high point, size now, reason]
    ['nothing yet', 0, 0, 'no-drop'],
    ['growing', 1000, 60_000, 'no-drop'],
    ['a large drop to a typical view', 50_000, 2_000, 'shrank'],
    ['exactly the minimum drop, exactly half', 2 * RECLAIM_MIN_DROP, RECLAIM_MIN_DROP, 'shrank'],
    ['one short of the minimum drop', 2 * RECLAIM_MIN_DROP - 1, RECLAIM_MIN_DROP, 'no-drop'],
    ['a large drop, but more than half still held', 30_000, 15_001, 'no-drop'],
    ['a small view gone entirely: below the minimum', 9_999, 0, 'no-drop'],
    ['a large drop, too much still held for a bounded pause', 3 * RECLAIM_MAX_HELD, RECLAIM_MAX_HELD + 1, 'held-too-large'],
    ['a large drop, exactly the most that may be held', 3 * RECLAIM_MAX_HELD, RECLAIM_MAX_HELD, 'shrank'],
  ];
  for (const [name, high, size, reason] of rows) {
    const { state, decision } = reclaimDecision({ highWater: high }, size);
    t.equal(decision.reason, reason, name);
    t.same([decision.from, decision.to], [Math.max(high, size), size], `${name}: from the high point to now`);
    t.equal(state.highWater, Math.max(high, size), `${name}: the high point kept`);
  }
  // The high point is kept across sizes until a collection resets it.
  let s: ReclaimState = INITIAL_RECLAIM;
  const reasons: string[] = [];
  for (const size of [700, 50_000, 49_000, 30_000, 800]) {
    const r = reclaimDecision(s, size);
    s = r.state;
    reasons.push(r.decision.reason);
  }
  t.same(reasons, ['no-drop', 'no-drop', 'no-drop', 'no-drop', 'shrank'], 'measured from the high point, not the last size');
  t.equal(reclaimDecision(collected(800), 700).decision.reason, 'no-drop', 'after a collection: from what was held then');
});

t.test('heldEntries: every apiserver view counted, none for a server without one', async (t) => {
  const view = (n: number) => ({ resources: { size: n } });
  t.equal(heldEntries([{ view: view(3) }, { view: null }, { view: view(40) }]), 43);
  t.equal(heldEntries([]), 0);
});

function recordingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: pino({ level: 'debug' }, stream) };
}

t.test('reclaimer: two collections, RECLAIM_DELAY_MS after a large drop and apart; armed once; logged', async (t) => {
  const clock = installFakeClock();
  t.teardown(() => clock.uninstall());
  const { lines, logger } = recordingLogger();
  const at: number[] = [];
  let rss = 900;
  const r = new MemoryReclaimer({
    logger,
    collect: () => {
      at.push(clock.now());
      rss -= 300;
    },
    memory: () => ({ rss, heapUsed: rss / 2 }),
    now: () => clock.now(),
  });
  r.observe(700);
  r.observe(50_000);
  await clock.advance(3 * RECLAIM_DELAY_MS);
  t.same(at, [], 'growth: nothing collected');
  r.observe(800);
  await clock.advance(1000);
  r.observe(900); // another change in a row: the collection is not put off
  await clock.advance(RECLAIM_DELAY_MS - 1000);
  t.same(at, [3 * RECLAIM_DELAY_MS + RECLAIM_DELAY_MS], 'the first: RECLAIM_DELAY_MS after the drop');
  await clock.advance(RECLAIM_DELAY_MS);
  t.equal(at.length, 2, 'the second, RECLAIM_DELAY_MS later');
  t.equal(at[1]! - at[0]!, RECLAIM_DELAY_MS);
  const line = lines.find((l) => l.msg === 'memory given back: the views shrank');
  t.ok(line, 'logged');
  t.match(
    line,
    { reason: 'shrank', from: 50_000, to: 900, rssBefore: 900, rssAfter: 300, pausesMs: [0, 0] },
    'what, from where, what it gave',
  );
  await clock.advance(5 * RECLAIM_DELAY_MS);
  r.observe(800);
  await clock.advance(5 * RECLAIM_DELAY_MS);
  t.equal(at.length, 2, 'after a collection the high point starts again: no more collections');
  t.same(clock.pending(), [], 'no timer left');
  r.close();
  r.close();
});

t.test('reclaimer: a drop undone before the delay is not collected; close cancels; too much held is only logged', async (t) => {
  const clock = installFakeClock();
  t.teardown(() => clock.uninstall());
  const { lines, logger } = recordingLogger();
  let n = 0;
  const r = new MemoryReclaimer({ logger, collect: () => void n++, now: () => clock.now() });
  r.observe(50_000);
  r.observe(1000);
  r.observe(50_000);
  await clock.advance(2 * RECLAIM_DELAY_MS);
  t.equal(n, 0, 'the view came back before the delay: nothing to give back');
  r.observe(RECLAIM_MAX_HELD + 1);
  r.observe(3 * RECLAIM_MAX_HELD);
  r.observe(RECLAIM_MAX_HELD + 1);
  await clock.advance(2 * RECLAIM_DELAY_MS);
  t.equal(n, 0, 'too much still held: no collection');
  t.ok(
    lines.some((l) => l.msg === 'memory not collected: too much still held' && l.reason === 'held-too-large'),
    'said at debug',
  );
  r.observe(500);
  r.close();
  await clock.advance(2 * RECLAIM_DELAY_MS);
  t.equal(n, 0, 'closed before the delay: nothing collected');
  r.observe(50_000);
  r.observe(500);
  t.same(clock.pending(), [], 'closed: nothing armed again');
});

t.test('reclaimer: a collector that throws is logged once and never asked again', async (t) => {
  const clock = installFakeClock();
  t.teardown(() => clock.uninstall());
  const { lines, logger } = recordingLogger();
  let n = 0;
  const r = new MemoryReclaimer({
    logger,
    collect: () => {
      n++;
      throw new Error('no gc here');
    },
  });
  for (const size of [50_000, 500, 50_000, 500]) {
    r.observe(size);
    await clock.advance(3 * RECLAIM_DELAY_MS);
  }
  t.equal(n, 1, 'asked once');
  const warns = lines.filter((l) => l.level === 40);
  t.equal(warns.length, 1, 'one warning');
  t.match(warns[0], { err: /no gc here/ });
});

t.test("v8FullCollector: V8's full collection, for real, without a gc on this process's global", async (t) => {
  const gc = v8FullCollector();
  t.type(gc, 'function');
  t.equal((globalThis as { gc?: unknown }).gc, undefined, 'the global is left as it was');
  gc();
  const before = process.memoryUsage().heapUsed;
  let garbage: { i: number; s: string }[] | null = Array.from({ length: 500_000 }, (_, i) => ({ i, s: `entry ${i}` }));
  const held = process.memoryUsage().heapUsed;
  t.ok(held - before > 20 * 2 ** 20, `the garbage took ${((held - before) / 2 ** 20).toFixed(1)} MiB`);
  t.equal(garbage.length, 500_000);
  garbage = null;
  gc();
  const after = process.memoryUsage().heapUsed;
  t.ok(after < before + 5 * 2 ** 20, `collected: ${((after - before) / 2 ** 20).toFixed(1)} MiB over the start`);
  const again = v8FullCollector();
  again();
  t.type(again, 'function', 'asked again: a collector again, that runs');
});
