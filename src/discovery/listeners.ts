// A set of listeners called in turn: one that throws is logged and the others still hear.
import type { Logger } from 'pino';

export class Listeners<T> {
  private readonly set = new Set<(value: T) => void>();

  constructor(
    private readonly log: Logger,
    /** Names the listener in the log line of one that threw. */
    private readonly what: string,
  ) {}

  /** Adds one; returns the unsubscribe function. */
  add(listener: (value: T) => void): () => void {
    this.set.add(listener);
    return () => {
      this.set.delete(listener);
    };
  }

  get size(): number {
    return this.set.size;
  }

  emit(value: T): void {
    for (const l of this.set) {
      try {
        l(value);
      } catch (err) {
        this.log.error({ err: String(err) }, `${this.what} listener threw`);
      }
    }
  }

  clear(): void {
    this.set.clear();
  }
}
