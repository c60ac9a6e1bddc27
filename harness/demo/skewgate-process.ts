// skewgate as its own process (`skewgate serve`), for a stack whose figures must say which process
// spent what: in a cluster skewgate never shares an event loop with the apiservers it fronts.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { packageRoot } from '../../src/util/package-root.js';
import { canConnect } from '../lab/net.js';
import { logTail } from '../lab/supervisor.js';

export interface SkewgateProcess {
  readonly pid: number;
  /** SIGTERM (skewgate's graceful stop), SIGKILL after `graceMs`. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/** Starts `skewgate serve --config <configFile>` and waits until its ext_proc port accepts connections. */
export async function startSkewgateProcess(
  configFile: string,
  listen: string,
  logFile: string,
  readyTimeoutMs = 30_000,
): Promise<SkewgateProcess> {
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [join(packageRoot(), 'dist/src/cli/main.js'), 'serve', '--config', configFile], {
      stdio: ['ignore', fd, fd],
    });
  } finally {
    closeSync(fd);
  }
  let exited: string | null = null;
  const gone = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = `exited (${signal ?? `code ${code}`})`;
      resolve();
    });
    // Not started at all (no node binary): no 'exit' follows.
    child.once('error', (err) => {
      exited ??= `could not start (${err.message})`;
      resolve();
    });
  });
  const stop = async (graceMs = 5000): Promise<void> => {
    if (exited !== null || child.pid === undefined) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await gone;
    clearTimeout(timer);
  };
  const deadline = Date.now() + readyTimeoutMs;
  while (!(await canConnect(listen))) {
    if (exited !== null || Date.now() > deadline) {
      await stop(1000);
      throw new Error(
        `skewgate serve ${exited ?? `did not listen on ${listen} within ${readyTimeoutMs} ms`}; its log:\n${await logTail(logFile)}`,
      );
    }
    await sleep(100);
  }
  return { pid: child.pid ?? -1, stop };
}
