// What the gateway decided lately, in time buckets: how many decisions, how many answered a client
// with an error of skewgate's own (503 unavailable, 400/401 rejected) or failed to route, how long
// deciding took, and where routed requests went. The gate (./verdict.ts) reads the last few
// minutes of it. Bounded: a bucket per BUCKET_MS over the longest window asked, then dropped.
// The clock comes in.

/** One decision, as the main process makes it or a worker process reports it (its tally). */
export interface DecisionSample {
  readonly outcome: string;
  readonly seconds: number;
  /** A routed decision's upstream (null otherwise). */
  readonly upstream: string | null;
}

export const BUCKET_MS = 5_000;
/** Decision-time histogram bounds (ms): p99 read off them, an upper bound (a decision past the last counts as the last). */
export const LATENCY_BOUNDS_MS: readonly number[] = Object.freeze([1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 60_000]);

interface Bucket {
  readonly start: number;
  decisions: number;
  errors: number;
  routeErrors: number;
  /** Counts per LATENCY_BOUNDS_MS bound. */
  readonly latency: number[];
  readonly routedTo: Map<string, number>;
}

export interface WindowSummary {
  readonly windowMs: number;
  /** How much of the window the gateway has been recording (a young gateway has seen less). */
  readonly coveredMs: number;
  readonly decisions: number;
  /** Decisions answered unavailable or rejected. */
  readonly errors: number;
  /** Requests routing threw on (the stream ended with gRPC INTERNAL: Envoy fails open or closed). */
  readonly routeErrors: number;
  /** The decision time under which 99 % fell (an upper bound, from LATENCY_BOUNDS_MS); null with no decision. */
  readonly p99Ms: number | null;
  /** Upstream → routed decisions that named it. */
  readonly routedTo: ReadonlyMap<string, number>;
}

const ERROR_OUTCOMES: ReadonlySet<string> = new Set(['unavailable', 'rejected']);

export class DecisionWindow {
  private readonly buckets: Bucket[] = [];

  constructor(
    private readonly startedAt: number,
    /** The longest window kept. */
    private readonly keepMs: number,
  ) {}

  add(now: number, d: DecisionSample): void {
    const b = this.bucket(now);
    b.decisions++;
    if (ERROR_OUTCOMES.has(d.outcome)) b.errors++;
    const ms = d.seconds * 1000;
    let i = LATENCY_BOUNDS_MS.findIndex((bound) => ms <= bound);
    if (i < 0) i = LATENCY_BOUNDS_MS.length - 1;
    b.latency[i] = (b.latency[i] ?? 0) + 1;
    if (d.upstream !== null) b.routedTo.set(d.upstream, (b.routedTo.get(d.upstream) ?? 0) + 1);
  }

  addRouteErrors(now: number, n: number): void {
    if (n > 0) this.bucket(now).routeErrors += n;
  }

  summary(now: number, windowMs: number): WindowSummary {
    const from = now - windowMs;
    let decisions = 0;
    let errors = 0;
    let routeErrors = 0;
    const latency: number[] = [];
    const routedTo = new Map<string, number>();
    for (const b of this.buckets) {
      if (b.start + BUCKET_MS <= from || b.start > now) continue;
      decisions += b.decisions;
      errors += b.errors;
      routeErrors += b.routeErrors;
      b.latency.forEach((n, i) => (latency[i] = (latency[i] ?? 0) + (n ?? 0)));
      for (const [u, n] of b.routedTo) routedTo.set(u, (routedTo.get(u) ?? 0) + n);
    }
    return {
      windowMs,
      coveredMs: Math.max(0, Math.min(windowMs, now - this.startedAt)),
      decisions,
      errors,
      routeErrors,
      p99Ms: p99(latency, decisions),
      routedTo,
    };
  }

  private bucket(now: number): Bucket {
    const start = now - (now % BUCKET_MS);
    const last = this.buckets.at(-1);
    if (last !== undefined && last.start === start) return last;
    // A clock that stepped back lands in the newest bucket.
    if (last !== undefined && last.start > start) return last;
    const b: Bucket = { start, decisions: 0, errors: 0, routeErrors: 0, latency: [], routedTo: new Map() };
    this.buckets.push(b);
    while ((this.buckets[0]?.start ?? Infinity) + BUCKET_MS + this.keepMs <= now) this.buckets.shift();
    return b;
  }
}

function p99(latency: readonly number[], total: number): number | null {
  if (total === 0) return null;
  const want = Math.ceil(total * 0.99);
  let seen = 0;
  for (let i = 0; i < LATENCY_BOUNDS_MS.length; i++) {
    seen += latency[i] ?? 0;
    if (seen >= want) return LATENCY_BOUNDS_MS[i] as number;
  }
  return LATENCY_BOUNDS_MS.at(-1) as number;
}
