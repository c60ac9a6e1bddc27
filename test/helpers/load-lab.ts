// The preamble and the clean-up every load-running cluster test shares: the lab's parts (a missing
// one fails the test with the command that builds it), a fresh LabSession in
// .cache/lab-<name>, one LoadHttp straight to the apiservers with the admin token, etcd started,
// and whatever happens, every load run stopped and the lab taken down. How long the gateway takes
// to see an apiserver change is not guessed here: the tests read its own log lines
// (test/load/gateway-view.ts) and wait for them (test/load/wait.ts).
import { join } from 'node:path';
import { packageRoot } from '../../src/util/package-root.js';
import type { Lab } from '../../harness/lab/lab.js';
import { wallClockMs, type Clock } from '../load/clock.js';
import { LoadHttp } from '../load/http.js';
import type { LoadRun } from '../load/run.js';
import type { LabAddresses } from '../../harness/lab/addresses.js';
import { LabSession } from '../load/session.js';
import type { TimelineRecorder } from '../load/timeline.js';
import { requireLabParts, type LabParts } from './lab-parts.js';

export interface LoadLab {
  readonly parts: LabParts;
  /** The lab's run dir, .cache/lab-<name>: PKI, logs, and room for the test's own files. */
  readonly dir: string;
  readonly session: LabSession;
  readonly lab: Lab;
  readonly timeline: TimelineRecorder;
  /** To the gateways, admin token, 10 s per request (or the given timeoutMs). */
  readonly http: LoadHttp;
  readonly clock: Clock;
  /** clock() once etcd is ready: t = 0 of the timeline tables. */
  readonly origin: number;
  readonly progress: (line: string) => void;
  /** Seconds since the test began, for the results' "Run time". */
  runSeconds(): number;
  /** Registers a load run so that it is stopped even when the test throws. */
  track(run: LoadRun): LoadRun;
}

/** Progress lines on stderr, `[name +12.3s] …`, timed from the call. */
export function progressLine(name: string): { readonly progress: (line: string) => void; readonly startedAt: number } {
  const startedAt = Date.now();
  return {
    startedAt,
    progress: (line) => {
      process.stderr.write(`[${name} +${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${line}\n`);
    },
  };
}

export async function withLoadLab(
  name: string,
  o: {
    readonly connections: number;
    /** The addresses and etcd ports of the slot the test file claimed (claimLabSlot). */
    readonly addresses: LabAddresses;
    /** Per-request bound of `http` (default 10 s). */
    readonly timeoutMs?: number;
  },
  body: (l: LoadLab) => Promise<void>,
): Promise<void> {
  // Fail (never skip) without the binaries: they throw naming the command that builds them.
  const parts = requireLabParts();
  const { progress, startedAt } = progressLine(name);
  const clock = wallClockMs;
  const dir = join(packageRoot(), '.cache', `lab-${name}`);
  const session = await LabSession.open(dir, clock, progress, o.addresses);
  const { lab, timeline } = session;
  const http = new LoadHttp({
    caFile: lab.pki.caFile,
    token: lab.pki.adminToken,
    timeoutMs: o.timeoutMs ?? 10_000,
    connections: o.connections,
  });
  const runs: LoadRun[] = [];
  try {
    await lab.startEtcd();
    const origin = clock();
    await body({
      parts,
      dir,
      session,
      lab,
      timeline,
      http,
      clock,
      origin,
      progress,
      runSeconds: () => (Date.now() - startedAt) / 1000,
      track: (run) => {
        runs.push(run);
        return run;
      },
    });
  } finally {
    for (const run of runs) await run.stop().catch(() => undefined);
    await http.close().catch(() => undefined);
    progress('lab down');
    await session.down();
    progress('done');
  }
}
