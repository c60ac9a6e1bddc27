// `-w` for status and skew: the running gateway asked again and again, an answer printed only when
// what the command shows changed (ages, uptime and generations move on their own and are left out
// of the comparison). Ends with the exit code of the last answer on SIGINT or SIGTERM, or with 1
// when the gateway stops answering.
import { setTimeout as sleep } from 'node:timers/promises';
import type { AnswerOrigin } from './one-shot.js';

export interface WatchOptions<T> {
  /** One answer from the gateway, or the exit code of a failure already reported on stderr. */
  readonly ask: () => Promise<{ readonly answer: T; readonly origin: AnswerOrigin } | number>;
  /** What counts as a change: two answers with the same key are the same to the reader. */
  readonly key: (answer: T) => string;
  /** Prints one answer (after the first, below a line with the time); its exit code. */
  readonly print: (answer: T, origin: AnswerOrigin, changedAt: Date | null) => number;
  readonly intervalMs: number;
  /** Aborted by the caller (tests); SIGINT and SIGTERM end the watch too. */
  readonly signal?: AbortSignal;
}

export async function watchAnswers<T>(o: WatchOptions<T>): Promise<number> {
  const stop = new AbortController();
  const end = (): void => stop.abort();
  process.once('SIGINT', end);
  process.once('SIGTERM', end);
  o.signal?.addEventListener('abort', end, { once: true });
  let last: string | null = null;
  let exitCode = 0;
  try {
    while (!stop.signal.aborted) {
      const got = await o.ask();
      if (typeof got === 'number') return got;
      const key = o.key(got.answer);
      if (key !== last) {
        exitCode = o.print(got.answer, got.origin, last === null ? null : new Date());
        last = key;
      }
      await sleep(o.intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
    }
    return exitCode;
  } finally {
    process.off('SIGINT', end);
    process.off('SIGTERM', end);
  }
}

/** The line above every answer after the first, in a table. */
export function changedLine(at: Date): string {
  return `\n--- changed at ${at.toISOString()}\n`;
}
