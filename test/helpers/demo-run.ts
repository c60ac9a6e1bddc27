// `skewgate-lab demo` run as a newcomer runs it, in a child process whose stdin the test types
// into: its terminal output, awaited line by line, and the folder it works in.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot } from '../../src/util/package-root.js';

export interface DemoRun {
  readonly dir: string;
  readonly child: ChildProcess;
  /** Everything it printed on stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Until stdout holds a match after `from` (an offset into stdout); the offset past the match. */
  until(pattern: RegExp, from?: number, timeoutMs?: number): Promise<number>;
  /** A key press. */
  press(key: string): void;
  /** q, then its exit code. */
  stop(): Promise<number | null>;
}

export async function startDemo(dir: string): Promise<DemoRun> {
  const child = spawn(
    process.execPath,
    [join(packageRoot(), 'dist/harness/cli/main.js'), 'demo', '--dir', dir, '--port', '0', '--exit-after', '600'],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const run: DemoRun = {
    dir,
    child,
    stdout: () => out,
    stderr: () => err,
    async until(pattern, from = 0, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = pattern.exec(out.slice(from));
        if (m) return from + m.index + m[0].length;
        if (child.exitCode !== null) throw new Error(`the demo exited (${child.exitCode}) before ${pattern}:\n${out}\n${err}`);
        if (Date.now() > deadline) throw new Error(`no ${pattern} in the demo's output:\n${out}\n${err}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    press(key) {
      child.stdin?.write(key);
    },
    async stop() {
      child.stdin?.write('q');
      return exited;
    },
  };
  return run;
}
