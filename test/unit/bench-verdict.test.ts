import t from 'tap';
import { expectedAnswer } from '../../bench/envoy-bench.js';
import {
  NO_FAILURES,
  addFailures,
  failureTotal,
  formatFailures,
  judgePaired,
  judgeRounds,
  judgeZero,
  median,
  pairedDifferences,
  summariseRounds,
  type Failures,
} from '../../bench/verdict.js';

t.test('median: odd, even, empty, a missing figure', async (t) => {
  const cases: [readonly number[], number][] = [
    [[3, 1, 2], 2],
    [[4, 1, 3, 2], 2.5],
    [[-1, -3], -2],
    [[7], 7],
  ];
  for (const [values, want] of cases) t.equal(median(values), want, `median of ${values.join(',')}`);
  t.ok(Number.isNaN(median([])), 'empty → NaN');
  t.ok(Number.isNaN(median([1, Number.NaN, 3])), 'a NaN round → NaN, never a median of the rest');
});

t.test('summariseRounds: worst round (1-based), rounds worse, missing rounds', async (t) => {
  const s = summariseRounds([0.5, -2, 12.1, Number.NaN, 3]);
  t.equal(s.rounds, 5);
  t.equal(s.worst, 12.1);
  t.equal(s.worstRound, 3);
  t.equal(s.positive, 3);
  t.equal(s.missing, 1);
  t.ok(Number.isNaN(s.median));
});

t.test('pairedDifferences: arm − baseline round by round; unequal rounds throw', async (t) => {
  t.same(pairedDifferences([5, 7, 9], [4, 8, 6]), [1, -1, 3]);
  t.throws(() => pairedDifferences([1, 2], [1]), /differ in number/);
});

// The issue's run: a few stalled rounds make both pooled p99s ≈ 151 ms, while the ext_proc arm's
// p99 was worse in 11 of 12 rounds by about 33.7 ms.
const BASE_P99 = [5.1, 4.8, 151, 5.3, 4.9, 150.2, 5.5, 5.0, 4.7, 5.2, 152, 5.4];
const ARM_P99 = BASE_P99.map((v, i) => (i === 5 ? v - 1.5 : v + 33.7));

t.test('judgePaired: verdicts table', async (t) => {
  const err: Failures = { ...NO_FAILURES, errors: 2 };
  const unanswered: Failures = { ...NO_FAILURES, unanswered: 1 };
  const rows: {
    name: string;
    arm: readonly number[];
    base: readonly number[];
    failures?: Failures;
    baselineFailures?: Failures;
    pooled?: { arm: number; baseline: number };
    met: boolean;
    measured: RegExp[];
  }[] = [
    {
      name: "the issue's example: the pooled p99 difference is +0.621 ms (it would meet ≤ 2 ms), the paired median +33.7 ms misses",
      arm: ARM_P99,
      base: BASE_P99,
      pooled: { arm: 151.621, baseline: 151 },
      met: false,
      measured: [
        /^\+33\.7 ms median of 12 rounds' paired differences/,
        /worst round \d+: \+33\.7 ms/,
        /arm worse in 11 of 12/,
        /pooled, not judged: \+0\.621 ms/,
      ],
    },
    {
      name: 'small paired differences, no failure: met, worst round reported',
      arm: [1.5, 1.6, 9.0, 1.4],
      base: [1.4, 1.5, 1.6, 1.45],
      met: true,
      measured: [/^\+0\.1 ms median of 4 rounds/, /worst round 3: \+7\.4 ms/, /arm worse in 3 of 4/, /arm: no failed requests/],
    },
    {
      name: 'the same latencies, but the arm had errors: missed',
      arm: [1.5, 1.6, 9.0, 1.4],
      base: [1.4, 1.5, 1.6, 1.45],
      failures: err,
      met: false,
      measured: [/arm: 2 failed: 2 errors/],
    },
    {
      name: 'the baseline had an unanswered request: no comparison, missed',
      arm: [1.5, 1.6],
      base: [1.4, 1.5],
      baselineFailures: unanswered,
      met: false,
      measured: [/baseline: 1 failed: 1 unanswered/],
    },
    {
      name: 'a round in which the arm answered nothing (no figure): missed',
      arm: [1.5, Number.NaN, 1.5],
      base: [1.4, 1.4, 1.4],
      met: false,
      measured: [/1 round\(s\) without a figure/],
    },
    {
      name: 'the arm faster than the baseline: negative median, met',
      arm: [1.0, 1.1, 0.9],
      base: [1.2, 1.2, 1.2],
      met: true,
      measured: [/^-0\.2 ms median/, /arm worse in 0 of 3/],
    },
    {
      name: 'exactly at the limit: met',
      arm: [3, 3, 3],
      base: [1, 1, 1],
      met: true,
      measured: [/^\+2 ms median/],
    },
  ];
  for (const r of rows) {
    const row = judgePaired({
      metric: 'p99 added',
      limit: 2,
      unit: 'ms',
      arm: r.arm,
      baseline: r.base,
      failures: r.failures ?? NO_FAILURES,
      baselineFailures: r.baselineFailures ?? NO_FAILURES,
      ...(r.pooled ? { pooled: r.pooled } : {}),
    });
    t.equal(row.met, r.met, `${r.name}: verdict`);
    for (const m of r.measured) t.match(row.measured, m, `${r.name}: ${m}`);
    t.match(row.target, /median of paired rounds, no failed request/);
  }
});

t.test('judgeRounds: an absolute target on the median round', async (t) => {
  const met = judgeRounds({ metric: 'cpu', limit: 100, unit: 'µs', values: [90, 95, 400, 92, 97], pooled: 150, failures: NO_FAILURES });
  t.equal(met.met, true, 'median 95 ≤ 100 although one round was 400');
  t.match(met.measured, /^95 µs median of 5 rounds; worst round 3: 400 µs; all rounds together: 150 µs; no failed requests$/);
  const missed = judgeRounds({ metric: 'cpu', limit: 100, unit: 'µs', values: [289, 290, 288], failures: NO_FAILURES });
  t.equal(missed.met, false);
  t.match(missed.measured, /^289 µs median of 3 rounds; worst round 2: 290 µs/);
  const failed = judgeRounds({ metric: 'cpu', limit: 100, unit: 'µs', values: [50, 50, 50], failures: { ...NO_FAILURES, errors: 1 } });
  t.equal(failed.met, false, 'a phase with an exchange without reply misses, whatever its CPU');
  t.match(failed.measured, /1 failed: 1 errors/);
});

t.test('judgeZero: zero false 404s is not met when the requests failed otherwise', async (t) => {
  const cases: { name: string; counted: number; failures: Failures; met: boolean }[] = [
    { name: 'nothing wrong', counted: 0, failures: NO_FAILURES, met: true },
    { name: 'every skewed request answered 503 (0 false 404s)', counted: 0, failures: { ...NO_FAILURES, unexpected: 2400 }, met: false },
    { name: 'timeouts only', counted: 0, failures: { ...NO_FAILURES, timeouts: 3 }, met: false },
    { name: 'a false 404', counted: 1, failures: NO_FAILURES, met: false },
  ];
  for (const c of cases) {
    const row = judgeZero('false 404s', c.counted, 'false 404s', c.failures);
    t.equal(row.met, c.met, c.name);
    t.match(row.measured, new RegExp(`^${c.counted} false 404s; ${formatFailures(c.failures)}$`), `${c.name}: counts in the text`);
  }
  t.match(judgeZero('x', 0, 'false 404s', { ...NO_FAILURES, unexpected: 2400 }).measured, /2,400 failed: 2,400 unexpected status/);
});

t.test('failure arithmetic and text', async (t) => {
  const a: Failures = { errors: 1, timeouts: 2, unexpected: 3, unanswered: 4 };
  t.same(addFailures(a, a), { errors: 2, timeouts: 4, unexpected: 6, unanswered: 8 });
  t.equal(failureTotal(a), 10);
  t.equal(formatFailures(NO_FAILURES), 'no failed requests');
  t.equal(formatFailures(a), '10 failed: 1 errors, 2 timeouts, 3 unexpected status, 4 unanswered');
  t.equal(formatFailures({ ...NO_FAILURES, unanswered: 5 }), '5 failed: 5 unanswered');
});

t.test('expectedAnswer: what counts as the expected answer per arm and path', async (t) => {
  const cases: [Parameters<typeof expectedAnswer>, boolean][] = [
    [['every', false, 200, 'apiserver-a'], true],
    [['every', false, 503, 'edge (no apiserver)'], false],
    [['baseline', false, 404, 'apiserver-b'], false],
    [['every', true, 200, 'apiserver-c'], true],
    [['fast', true, 200, 'apiserver-a'], false],
    [['fast', true, 404, 'apiserver-a'], false],
    [['every', true, 503, 'edge (no apiserver)'], false],
    [['baseline', true, 404, 'apiserver-a'], true],
    [['baseline', true, 200, 'apiserver-c'], true],
    [['baseline', true, 503, 'apiserver-c'], false],
    [['baseline', true, 404, 'apiserver-c'], false],
  ];
  for (const [args, want] of cases) t.equal(expectedAnswer(...args), want, args.join(' '));
});
