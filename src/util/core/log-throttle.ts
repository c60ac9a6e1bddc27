// Rate-limited log lines: the same key at most once per interval, the next line carrying how many
// were held back meanwhile. Pure: the clock is injected, nothing is written here.

export interface LogThrottle {
  /**
   * Whether a line for `key` may be written now; when it may, how many lines for that key were
   * held back since the last one written (0 for the first). null: hold this one back.
   */
  admit(key: string): { readonly suppressed: number } | null;
  /**
   * The keys with lines held back since their last line (or drain), with how many; their counts
   * start again from 0. For a summary at the end of an interval, so that nothing held back is lost
   * when no later line for the key comes.
   */
  drain(): { readonly key: string; readonly suppressed: number }[];
}

export interface LogThrottleOptions {
  readonly intervalMs: number;
  /** Milliseconds, monotonic or not; only differences are used. */
  readonly now: () => number;
  /** Distinct keys remembered; the oldest is forgotten beyond it (its next line is written). Default 1000. */
  readonly maxKeys?: number;
}

export function createLogThrottle(opts: LogThrottleOptions): LogThrottle {
  const maxKeys = opts.maxKeys ?? 1000;
  // Insertion order is the order keys were last written: the first entry is the oldest.
  const last = new Map<string, { at: number; suppressed: number }>();
  return {
    admit(key) {
      const now = opts.now();
      const seen = last.get(key);
      if (seen !== undefined && now - seen.at < opts.intervalMs) {
        seen.suppressed++;
        return null;
      }
      const suppressed = seen?.suppressed ?? 0;
      last.delete(key);
      last.set(key, { at: now, suppressed: 0 });
      if (last.size > maxKeys) {
        const oldest = last.keys().next().value;
        if (oldest !== undefined) last.delete(oldest);
      }
      return { suppressed };
    },
    drain() {
      const out: { key: string; suppressed: number }[] = [];
      for (const [key, seen] of last) {
        if (seen.suppressed === 0) continue;
        out.push({ key, suppressed: seen.suppressed });
        seen.suppressed = 0;
      }
      return out;
    },
  };
}
