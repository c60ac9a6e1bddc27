// Benchmark child processes: fork, a tiny request/reply protocol over the IPC channel, and a
// cleanup that always runs (normal end, error, Ctrl-C, or the parent simply exiting).
import { fork, type ChildProcess } from 'node:child_process';
import type { Http2Server } from 'node:http2';
import { fileURLToPath } from 'node:url';
import type { CpuSample, ExtProcChildReady } from './protocol.js';

interface Request {
  readonly id: number;
  readonly type: string;
  readonly payload?: unknown;
}
type Reply =
  | { readonly id: number; readonly ok: true; readonly result: unknown }
  | { readonly id: number; readonly ok: false; readonly error: string };
type Hello = { readonly type: 'ready'; readonly info: unknown } | { readonly type: 'failed'; readonly error: string };

export interface ChildHandle<Ready> {
  readonly pid: number;
  readonly ready: Ready;
  call<T>(type: string, payload?: unknown): Promise<T>;
  /** Asks the child to clean up and exit; SIGKILLs it (and `alsoKill`) when it does not. Idempotent. */
  stop(timeoutMs?: number): Promise<void>;
}

/** Everything still running, so that any way out of the parent can end it. */
const live = new Set<{ child: ChildProcess; alsoKill: () => readonly number[] }>();

function killNow(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

// Last resort, synchronous: a parent that exits must not leave children (or their Envoys) behind.
process.on('exit', () => {
  for (const l of live) {
    for (const pid of l.alsoKill()) killNow(pid);
    if (l.child.pid !== undefined && l.child.exitCode === null) killNow(l.child.pid);
  }
});

/** Stops every child still running; for signal handlers and error paths. */
export async function stopAllChildren(): Promise<void> {
  await Promise.all(
    [...live].map(async (l) => {
      l.child.send?.({ id: -1, type: 'stop' }, () => undefined);
      await exitOrKill(l.child, 8000, l.alsoKill);
    }),
  );
}

function exitOrKill(child: ChildProcess, timeoutMs: number, alsoKill: () => readonly number[]): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      for (const pid of alsoKill()) killNow(pid);
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Forks a compiled bench module (a sibling of this file in dist/bench) and waits for its 'ready'.
 * `alsoKill` names extra processes (the child's own children) to SIGKILL if it must be killed.
 */
export async function forkChild<Ready>(
  moduleFile: string,
  opts: {
    readyTimeoutMs: number;
    execArgv?: string[];
    alsoKill?: (ready: Ready) => readonly number[];
    /** More environment variables for the child. */
    env?: Readonly<Record<string, string>>;
    /** The child's stderr (and its own children's) to /dev/null: their log lines are part of the load, not the report. */
    quiet?: boolean;
  },
): Promise<ChildHandle<Ready>> {
  const child = fork(fileURLToPath(new URL(moduleFile, import.meta.url)), [], {
    stdio: ['ignore', 'inherit', opts.quiet === true ? 'ignore' : 'inherit', 'ipc'],
    execArgv: opts.execArgv ?? [],
    ...(opts.env ? { env: { ...process.env, ...opts.env } } : {}),
  });
  // Set once the child says hello; alsoKill may run before that (a child killed while starting).
  const started: { ready?: Ready } = {};
  const entry = {
    child,
    alsoKill: (): readonly number[] => (started.ready !== undefined && opts.alsoKill ? opts.alsoKill(started.ready) : []),
  };
  live.add(entry);
  child.once('exit', () => live.delete(entry));

  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  child.on('message', (m: Reply | Hello) => {
    if ('id' in m) {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (p === undefined) return;
      if (m.ok) p.resolve(m.result);
      else p.reject(new Error(m.error));
    }
  });
  child.once('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`bench child exited (${signal ?? code})`));
    pending.clear();
  });

  const ready = await new Promise<Ready>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`bench child ${moduleFile} not ready within ${opts.readyTimeoutMs} ms`)),
      opts.readyTimeoutMs,
    );
    const onMessage = (m: Reply | Hello): void => {
      if ('id' in m) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      if (m.type === 'ready') resolve(m.info as Ready);
      else reject(new Error(`bench child ${moduleFile} failed to start: ${m.error}`));
    };
    child.on('message', onMessage);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`bench child ${moduleFile} exited before it was ready (${signal ?? code})`));
    });
  }).catch(async (err: unknown) => {
    await exitOrKill(child, 0, () => []);
    throw err;
  });
  started.ready = ready;

  let stopping: Promise<void> | undefined;
  return {
    pid: child.pid ?? -1,
    ready,
    call<T>(type: string, payload?: unknown): Promise<T> {
      if (child.exitCode !== null || !child.connected) return Promise.reject(new Error('bench child is gone'));
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        child.send({ id, type, payload } satisfies Request);
      });
    },
    stop(timeoutMs = 10_000) {
      stopping ??= (async () => {
        if (child.connected) child.send({ id: 0, type: 'stop' } satisfies Request, () => undefined);
        await exitOrKill(child, timeoutMs, entry.alsoKill);
        live.delete(entry);
      })();
      return stopping;
    },
  };
}

// ---- The child's side ----

export type Handlers = Readonly<Record<string, (payload: unknown) => unknown>>;

/**
 * Answers the parent's requests with `handlers`; 'stop' (or the parent going away) runs `onStop`
 * and exits. Call `ready(info)` once set up, or `failed(err)`.
 */
export function serveParent(handlers: Handlers, onStop: () => Promise<void>): { ready(info: unknown): void; failed(err: unknown): void } {
  if (process.send === undefined) {
    process.stderr.write('this is a benchmark child process: run `node dist/bench/run.js` instead\n');
    process.exit(2);
  }
  const send = (m: Reply | Hello): void => {
    if (process.connected) process.send?.(m);
  };
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await onStop().catch((err: unknown) => process.stderr.write(`bench child cleanup failed: ${String(err)}\n`));
    process.exit(0);
  };
  process.on('message', (m: Request) => {
    if (m.type === 'stop') {
      void stop();
      return;
    }
    const handler = handlers[m.type];
    void (async () => {
      try {
        if (!handler) throw new Error(`unknown request ${m.type}`);
        send({ id: m.id, ok: true, result: await handler(m.payload) });
      } catch (err) {
        send({ id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) });
      }
    })();
  });
  process.on('disconnect', () => void stop());
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void stop());
  return {
    ready: (info) => send({ type: 'ready', info }),
    failed: (err) => {
      send({ type: 'failed', error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      void stop();
    },
  };
}

/** (b) A child serving node:http2 on an ephemeral loopback port: ready with its port, CPU samples on request. */
export function serveHttp2Child(server: Http2Server, logLevel: string): void {
  const ipc = serveParent(
    {
      cpu: (): CpuSample => {
        const u = process.cpuUsage();
        return { cpuUs: u.user + u.system, rssBytes: process.memoryUsage().rss };
      },
    },
    () => new Promise<void>((resolve) => server.close(() => resolve())),
  );
  server.once('error', (err) => ipc.failed(err));
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    ipc.ready({ port: typeof addr === 'object' && addr ? addr.port : 0, logLevel } satisfies ExtProcChildReady);
  });
}
