// (c) one apiserver restarting (issue 28): at the first rate, rounds of every arm with all three
// apiservers up, then with apiserver-b stopped — measured once the fast arm's Envoy runs its routes
// on the pool of the two others — after which it starts again and is back in the pool before the
// next round. What it shows: the share of common-path requests that meet ext_proc while an
// apiserver is away (the fast path holding, or not), and what each arm adds over bare Envoy then.
import { setTimeout as sleep } from 'node:timers/promises';
import { fastClusterName } from '../src/envoy/clusters.js';
import { ARMS, ARM_LABEL, armFailures, commonStreams, newArm, type ArmStats, type RoundFigures } from './envoy-arms.js';
import type { FastPathState, EnvoyArm } from './protocol.js';
import type { Table, TargetRow } from './report.js';
import { fmt, summarise } from './stats.js';
import { failureTotal, formatFailures, pairedDifferences, summariseRounds } from './verdict.js';

/** The apiserver stopped and started again (BUILTINS_OLD, like apiserver-a: core v1 stays fast). */
export const RESTARTED = 'apiserver-b';
const ALL = ['apiserver-a', 'apiserver-b', 'apiserver-c'];
const TARGET_SHARE = 0.05;
const POOL_WAIT_MS = 30_000;

export interface RestartResult {
  readonly rate: number;
  readonly rounds: number;
  readonly up: Record<EnvoyArm, ArmStats>;
  readonly down: Record<EnvoyArm, ArmStats>;
}

export interface RestartPhaseOptions {
  readonly rounds: number;
  readonly rate: number;
  /** One measured window of an arm at the rate, into these stats. */
  readonly measure: (arm: EnvoyArm, into: ArmStats) => Promise<RoundFigures>;
  readonly fastPath: () => Promise<FastPathState>;
  readonly stop: () => Promise<unknown>;
  readonly start: () => Promise<unknown>;
  readonly progress: (msg: string) => void;
}

/** Until the fast arm's Envoy runs fast-path routes on the pool of these apiservers. */
async function poolRuns(names: readonly string[], fastPath: () => Promise<FastPathState>): Promise<void> {
  const want = fastClusterName(names);
  const deadline = Date.now() + POOL_WAIT_MS;
  for (;;) {
    const f = await fastPath();
    if (f.written && f.fileVersion !== null && f.fileVersion === f.runningVersion && f.cluster === want) return;
    if (Date.now() > deadline)
      throw new Error(`the fast arm did not run its routes on ${names.join(', ')} within ${POOL_WAIT_MS / 1000} s (cluster ${f.cluster})`);
    await sleep(100);
  }
}

export async function restartPhase(p: RestartPhaseOptions): Promise<RestartResult> {
  const arms = (): Record<EnvoyArm, ArmStats> => Object.fromEntries(ARMS.map((a) => [a, newArm()])) as Record<EnvoyArm, ArmStats>;
  const up = arms();
  const down = arms();
  const rest = ALL.filter((n) => n !== RESTARTED);
  for (let round = 0; round < p.rounds; round++) {
    const order = ARMS.map((_, i) => ARMS[(i + round) % ARMS.length] as EnvoyArm);
    await poolRuns(ALL, p.fastPath);
    for (const a of order) await p.measure(a, up[a]);
    await p.stop();
    await poolRuns(rest, p.fastPath);
    for (const a of order) await p.measure(a, down[a]);
    await p.start();
    const share = (s: ArmStats): string => `${fmt((100 * commonStreams(s)) / Math.max(1, s.common.sent))} %`;
    p.progress(
      `(c) ${p.rate} req/s, ${RESTARTED} stopped, round ${round + 1}/${p.rounds}: common requests meeting ext_proc, fast arm ${share(down.fast)}`,
    );
  }
  await poolRuns(ALL, p.fastPath);
  return { rate: p.rate, rounds: p.rounds, up, down };
}

/** The restart phase's verdict rows and table. */
export function restartReport(r: RestartResult): { readonly targets: TargetRow[]; readonly tables: Table[] } {
  const share = (s: ArmStats): number => commonStreams(s) / Math.max(1, s.common.sent);
  const pct = (s: ArmStats): string =>
    `${fmt(100 * share(s))} % (${commonStreams(s).toLocaleString('en-US')} of ${s.common.sent.toLocaleString('en-US')})`;
  const fastDown = r.down.fast;
  const targets: TargetRow[] = [
    {
      metric: `common-path requests meeting ext_proc on the fast path, ${RESTARTED} stopped, ${r.rate} req/s`,
      target: `≤ ${TARGET_SHARE * 100} %, no failed request`,
      measured: `${pct(fastDown)}; ${formatFailures(armFailures(fastDown))}`,
      met: share(fastDown) <= TARGET_SHARE && failureTotal(armFailures(fastDown)) === 0,
    },
  ];
  const added = (s: ArmStats, base: ArmStats, k: 'commonP50Ms' | 'commonP99Ms'): string => {
    const d = summariseRounds(
      pairedDifferences(
        s.rounds.map((x) => x[k]),
        base.rounds.map((x) => x[k]),
      ),
    );
    return Number.isFinite(d.median) ? `${d.median >= 0 ? '+' : ''}${fmt(d.median)}` : 'n/a';
  };
  const rows: string[][] = [];
  for (const [state, stats] of [
    ['all three up', r.up],
    [`${RESTARTED} stopped`, r.down],
  ] as const) {
    for (const a of ARMS) {
      const s = stats[a];
      const l = summarise(s.common.latNs);
      rows.push([
        ARM_LABEL[a],
        state,
        s.common.sent.toLocaleString('en-US'),
        fmt(l.p50 / 1e6),
        fmt(l.p99 / 1e6),
        a === 'baseline' ? '—' : `${added(s, stats.baseline, 'commonP50Ms')} / ${added(s, stats.baseline, 'commonP99Ms')}`,
        a === 'baseline' ? '—' : pct(s),
        formatFailures(armFailures(s)),
      ]);
    }
  }
  return {
    targets,
    tables: [
      {
        caption: `One apiserver restarting (${r.rounds} rounds at ${r.rate} req/s; each round every arm with all three up, then with ${RESTARTED} stopped once the fast arm runs its routes on the two others; the common path, ms):`,
        headers: [
          'Arm',
          'apiservers',
          'common requests',
          'p50',
          'p99',
          'added p50 / p99 (median of paired rounds)',
          'meeting ext_proc',
          'failed',
        ],
        rows,
      },
    ],
  };
}
