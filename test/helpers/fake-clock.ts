// A make-believe clock for claims about time (backoff schedules, follow-up refreshes): while it is
// installed, the global setTimeout, clearTimeout, setInterval and clearInterval are its own, and
// time moves only when the test says so (advance). setImmediate, promises and I/O stay real, so
// the work a timer starts still runs to its end (flush) before time moves on. Only for code that
// takes its timers from the globals and does no real network I/O while it is installed.
import { setImmediate as realSetImmediate } from 'node:timers';

interface Timer {
  readonly id: number;
  at: number;
  readonly every: number | null;
  readonly fn: (...args: unknown[]) => void;
  readonly args: unknown[];
}

export interface FakeClock {
  /** The fake time, ms; starts at 0. */
  now(): number;
  /** Runs every timer due within `ms`, in order, each at its own time, letting its work settle. */
  advance(ms: number): Promise<void>;
  /** Lets promise chains and setImmediate callbacks run, without moving time. */
  flush(): Promise<void>;
  /** The due times of the timers still pending. */
  pending(): number[];
  uninstall(): void;
}

/** A handle that behaves like Node's Timeout where callers touch it (unref, ref, hasRef, refresh). */
function handle(clock: { timers: Map<number, Timer>; now: number }, timer: Timer, ms: number): NodeJS.Timeout {
  let ref = true;
  const h = {
    ref() {
      ref = true;
      return h;
    },
    unref() {
      ref = false;
      return h;
    },
    hasRef: () => ref,
    refresh() {
      timer.at = clock.now + ms;
      return h;
    },
    close() {
      clock.timers.delete(timer.id);
      return h;
    },
    [Symbol.toPrimitive]: () => timer.id,
  };
  return h as unknown as NodeJS.Timeout;
}

export function installFakeClock(t?: { teardown(fn: () => void): void }): FakeClock {
  const real = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
    setInterval: globalThis.setInterval,
    clearInterval: globalThis.clearInterval,
  };
  const state = { timers: new Map<number, Timer>(), now: 0 };
  let seq = 0;
  const add = (fn: (...args: unknown[]) => void, ms: number | undefined, args: unknown[], every: boolean): NodeJS.Timeout => {
    const delay = Math.max(1, Math.floor(Number(ms) || 0));
    const timer: Timer = { id: ++seq, at: state.now + delay, every: every ? delay : null, fn, args };
    state.timers.set(timer.id, timer);
    return handle(state, timer, delay);
  };
  const clear = (h: unknown): void => {
    if (h === undefined || h === null) return;
    state.timers.delete(Number(h as number));
  };
  globalThis.setTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
    add(fn, ms, args, false)) as unknown as typeof globalThis.setTimeout;
  globalThis.setInterval = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
    add(fn, ms, args, true)) as unknown as typeof globalThis.setInterval;
  globalThis.clearTimeout = clear as typeof globalThis.clearTimeout;
  globalThis.clearInterval = clear as typeof globalThis.clearInterval;

  const flush = async (): Promise<void> => {
    // Enough turns for a chain of awaits and the setImmediate hops in between.
    for (let i = 0; i < 20; i++) await new Promise<void>((r) => realSetImmediate(r));
  };
  let installed = true;
  const clock: FakeClock = {
    now: () => state.now,
    flush,
    pending: () => [...state.timers.values()].map((x) => x.at).sort((a, b) => a - b),
    async advance(ms) {
      const target = state.now + ms;
      for (;;) {
        await flush();
        let next: Timer | undefined;
        for (const x of state.timers.values())
          if (x.at <= target && (next === undefined || x.at < next.at || (x.at === next.at && x.id < next.id))) next = x;
        if (next === undefined) break;
        state.now = next.at;
        if (next.every === null) state.timers.delete(next.id);
        else next.at += next.every;
        next.fn(...next.args);
      }
      state.now = target;
      await flush();
    },
    uninstall() {
      if (!installed) return;
      installed = false;
      Object.assign(globalThis, real);
    },
  };
  t?.teardown(() => clock.uninstall());
  return clock;
}
