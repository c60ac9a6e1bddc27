// A long-running kubectl (logs -f, exec -i, attach -i, port-forward) as a test holds it: every line
// it prints, stamped when it arrived; a stdin to write to; its exit, stamped. Verdicts compare these
// stamps with other recorded events (a SIGTERM sent, an apiserver gone), never with a speed.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

export interface SessionLine {
  readonly at: number;
  readonly stream: 'stdout' | 'stderr';
  readonly text: string;
}

export interface SessionExit {
  readonly at: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class KubectlSession {
  readonly lines: SessionLine[] = [];
  readonly exited: Promise<SessionExit>;
  private exit: SessionExit | undefined;
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiters = new Set<() => void>();

  constructor(
    kubectl: string,
    readonly args: readonly string[],
    env: Readonly<Record<string, string>> = {},
  ) {
    this.child = spawn(kubectl, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    for (const stream of ['stdout', 'stderr'] as const) {
      let rest = '';
      this.child[stream].on('data', (chunk: Buffer) => {
        const parts = (rest + chunk.toString()).split('\n');
        rest = parts.pop() ?? '';
        const at = Date.now();
        for (const text of parts) this.lines.push({ at, stream, text });
        this.wake();
      });
    }
    this.exited = new Promise((resolve) => {
      this.child.once('close', (code, signal) => {
        this.exit = { at: Date.now(), code, signal };
        this.wake();
        resolve(this.exit);
      });
    });
  }

  get done(): SessionExit | undefined {
    return this.exit;
  }

  /** Writes a line to its stdin. */
  send(line: string): void {
    this.child.stdin.write(`${line}\n`);
  }

  /** The first line (after index `from`) matching `pattern`; rejects after `limitMs` or if kubectl ends first. */
  async waitFor(pattern: RegExp, limitMs: number, from = 0): Promise<SessionLine> {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const hit = this.lines.slice(from).find((l) => pattern.test(l.text));
      if (hit !== undefined) return hit;
      if (this.exit !== undefined)
        throw new Error(
          `kubectl ${this.args.join(' ')} ended (${this.exit.code ?? this.exit.signal}) before printing ${pattern}:\n${this.transcript()}`,
        );
      if (Date.now() > deadline)
        throw new Error(`kubectl ${this.args.join(' ')}: no ${pattern} within ${limitMs / 1000} s:\n${this.transcript()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Its exit, or a rejection after `limitMs`. */
  async ended(limitMs: number): Promise<SessionExit> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`kubectl ${this.args.join(' ')} still running after ${limitMs / 1000} s`)), limitMs);
    });
    try {
      return await Promise.race([this.exited, limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The last lines it printed, for a failure message. */
  transcript(last = 15): string {
    return this.lines
      .slice(-last)
      .map((l) => `  ${l.stream === 'stderr' ? '!' : '>'} ${l.text}`)
      .join('\n');
  }

  /** Ends it (SIGTERM) if it still runs; resolves on its exit. */
  async stop(): Promise<SessionExit> {
    if (this.exit === undefined) this.child.kill('SIGTERM');
    return this.exited;
  }

  private wake(): void {
    const all = [...this.waiters];
    this.waiters.clear();
    for (const w of all) w();
  }
}
