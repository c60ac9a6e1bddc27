// (b) Where a decided request's server CPU goes, one part at a time: bare node:http2, then each
// part of skewgate's work added on top of it (extproc-ladder-child.ts), then skewgate's server as
// it ships. Each rung runs in a fresh child process; within a round every rung runs once,
// the order rotated round by round, so that each rung's figure is paired with the floor's of the
// same round on the same (noisy) machine.
import { createExtProcClient, type EnvoyRequest } from '../test/helpers/extproc-client.js';
import { forkChild } from './child-ipc.js';
import { drive, pace, phaseFailures } from './extproc-drive.js';
import type { CpuSample, ExtProcChildReady, LadderRung } from './protocol.js';
import { addFailures, NO_FAILURES, type Failures } from './verdict.js';

export type RungKey = 'floor' | LadderRung | 'shipped';

interface Rung {
  readonly key: RungKey;
  readonly label: string;
  readonly file: string;
}

export const RUNGS: readonly Rung[] = [
  { key: 'floor', label: 'bare node:http2: a fixed reply, no decoding (the transport floor)', file: './http2-floor-child.js' },
  { key: 'codec', label: "+ skewgate's gRPC call: the request decoded, a fixed reply", file: './extproc-ladder-child.js' },
  { key: 'headers', label: "+ Envoy's header list read into a map", file: './extproc-ladder-child.js' },
  { key: 'route', label: '+ classified and routed, a fixed reply', file: './extproc-ladder-child.js' },
  { key: 'routing', label: '+ the reply built from the decision', file: './extproc-ladder-child.js' },
  { key: 'shipped', label: "skewgate's server as it ships (+ the stream handler's limits and decision log)", file: './extproc-child.js' },
];

export interface LadderOptions {
  readonly rounds: number;
  /** Exchanges at concurrency 32 before each measurement (JIT, connection). */
  readonly warmup: number;
  /** Exchanges measured per rung and round, open-loop at pacedRate. */
  readonly paced: number;
  readonly pacedRate: number;
}

export interface LadderResult {
  /** Server CPU per exchange, µs, per rung and round (rounds in order). */
  readonly perRound: Readonly<Record<RungKey, readonly number[]>>;
  readonly failures: Failures;
}

/** One rung once: a fresh child, warmed up, then `paced` exchanges open-loop; its CPU per exchange. */
async function runRung(rung: Rung, reqs: readonly EnvoyRequest[], o: LadderOptions): Promise<{ us: number; failures: Failures }> {
  const env = rung.file === './extproc-ladder-child.js' ? { LADDER_RUNG: rung.key } : undefined;
  const child = await forkChild<ExtProcChildReady>(rung.file, { readyTimeoutMs: 30_000, ...(env ? { env } : {}) });
  const client = createExtProcClient(`127.0.0.1:${child.ready.port}`);
  try {
    await drive(client, reqs, o.warmup, 32, 0);
    const c0 = (await child.call<CpuSample>('cpu')).cpuUs;
    const r = await pace(client, reqs, o.paced, o.pacedRate);
    const us = ((await child.call<CpuSample>('cpu')).cpuUs - c0) / o.paced;
    return { us, failures: phaseFailures(r, o.paced) };
  } finally {
    client.close();
    await child.stop();
  }
}

export async function ladder(reqs: readonly EnvoyRequest[], o: LadderOptions, progress: (msg: string) => void): Promise<LadderResult> {
  const perRound = Object.fromEntries(RUNGS.map((r) => [r.key, [] as number[]])) as Record<RungKey, number[]>;
  let failures = NO_FAILURES;
  for (let round = 0; round < o.rounds; round++) {
    progress(`(b) where the CPU goes: round ${round + 1} of ${o.rounds}, ${RUNGS.length} rungs × ${o.paced} exchanges at ${o.pacedRate}/s`);
    const order = RUNGS.map((_, i) => RUNGS[(i + round) % RUNGS.length] as Rung);
    for (const rung of order) {
      const r = await runRung(rung, reqs, o);
      perRound[rung.key].push(r.us);
      failures = addFailures(failures, r.failures);
    }
  }
  return { perRound, failures };
}
