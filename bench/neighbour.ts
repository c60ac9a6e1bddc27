// A CPU-bound neighbour, as on a busy control-plane node next to its apiserver: a `node -e` busy
// loop pinned to one core with `taskset` (unpinned where taskset is missing). Started once and
// stopped (SIGSTOP) at once; `run()` / `pause()` (SIGCONT / SIGSTOP) switch it on for exactly the
// windows that are to be contended, so that every arm meets it alike.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

export interface Neighbour {
  readonly pid: number;
  /** The core it is pinned to, or null when unpinned (no taskset). */
  readonly core: number | null;
  run(): void;
  pause(): void;
  /** Its CPU time so far (utime + stime from /proc), µs. */
  cpuUs(): number;
  stop(): Promise<void>;
}

const clockTicks = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

function procCpuUs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks;
  } catch {
    return Number.NaN;
  }
}

/** The last core (core 1 on a 2-core machine). */
export function startNeighbour(): Neighbour {
  const core = availableParallelism() - 1;
  const pinned = spawnSync('taskset', ['-c', String(core), 'true']).status === 0;
  const loop = ['-e', 'for (;;) {}'];
  // taskset execs the command, so the pid is the busy loop's own.
  const child: ChildProcess = pinned
    ? spawn('taskset', ['-c', String(core), process.execPath, ...loop], { stdio: 'ignore' })
    : spawn(process.execPath, loop, { stdio: 'ignore' });
  const pid = child.pid;
  if (pid === undefined) throw new Error('the CPU-bound neighbour did not start');
  const signal = (s: NodeJS.Signals): void => {
    if (child.exitCode === null && child.signalCode === null) process.kill(pid, s);
  };
  signal('SIGSTOP');
  // A parent that exits must not leave it spinning.
  const onExit = (): void => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  };
  process.once('exit', onExit);
  return {
    pid,
    core: pinned ? core : null,
    run: () => signal('SIGCONT'),
    pause: () => signal('SIGSTOP'),
    cpuUs: () => procCpuUs(pid),
    stop: () =>
      new Promise<void>((resolve) => {
        process.off('exit', onExit);
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        process.kill(pid, 'SIGKILL');
      }),
  };
}
