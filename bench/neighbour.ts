// A CPU-bound neighbour, as on a busy control-plane node next to its apiserver: a `node -e` busy
// loop pinned to one core with `taskset` (unpinned where taskset is missing). Started once and
// stopped (SIGSTOP) at once; `run()` / `pause()` (SIGCONT / SIGSTOP) switch it on for exactly the
// windows that are to be contended, so that every arm meets it alike.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { procCpuUs } from './proc-cpu.js';

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
