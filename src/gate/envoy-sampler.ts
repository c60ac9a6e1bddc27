// Reads the local Envoy's counters for the gate (core/envoy-counters.ts): now, when asked, and
// every SAMPLE_MS in the background, so that "in the last window" compares with a reading about a
// window old. Without an admin address (envoy.admin on port 0) or an Envoy that does not answer,
// the gate says it could not read them; it never guesses.
import { request } from 'undici';
import { EXTPROC_CLUSTER } from '../envoy/clusters.js';
import { countersSince, parseEnvoyCounters, STATS_FILTER, type EnvoyCounters } from './core/envoy-counters.js';
import type { EnvoyReading } from './core/verdict.js';

/** A reading every quarter window (so one about a window old is at hand), within these bounds. */
const SAMPLE_MIN_MS = 500;
const SAMPLE_MAX_MS = 10_000;
const READ_TIMEOUT_MS = 2_000;

export class EnvoySampler {
  private samples: EnvoyCounters[] = [];
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly adminUrl: () => string | null,
    /** The gate's window now (gate.window: a reload may change it). */
    private readonly windowMs: () => number,
    /** The longest window kept. */
    private readonly keepMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    if (this.timer !== null || this.closed) return;
    const next = (): void => {
      const every = Math.min(SAMPLE_MAX_MS, Math.max(SAMPLE_MIN_MS, this.windowMs() / 4));
      this.timer = setTimeout(() => {
        void this.sample().finally(() => {
          if (!this.closed) next();
        });
      }, every);
      this.timer.unref();
    };
    void this.sample();
    next();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** A reading now, against the oldest kept within the window (the span it covers is said). */
  async reading(windowMs: number): Promise<EnvoyReading> {
    const now = await this.read();
    if (typeof now === 'string') return { ok: false, why: now };
    const from = now.at - windowMs;
    const base = this.samples.find((s) => s.at >= from && s.at < now.at);
    this.keep(now);
    if (base === undefined) return { ok: false, why: 'no earlier reading of Envoy within the window yet' };
    return { ok: true, since: countersSince(base, now), spanMs: now.at - base.at };
  }

  private async sample(): Promise<void> {
    const r = await this.read();
    if (typeof r !== 'string') this.keep(r);
  }

  private keep(c: EnvoyCounters): void {
    this.samples.push(c);
    const oldest = c.at - this.keepMs;
    while ((this.samples[0]?.at ?? Infinity) < oldest) this.samples.shift();
  }

  private async read(): Promise<EnvoyCounters | string> {
    const base = this.adminUrl();
    if (base === null) return "Envoy's admin address is not known (envoy.admin.port 0)";
    try {
      const signal = AbortSignal.timeout(READ_TIMEOUT_MS);
      const [stats, clusters] = await Promise.all([
        getJson(`${base}/stats?format=json&filter=${encodeURIComponent(STATS_FILTER)}`, signal),
        getJson(`${base}/clusters?format=json`, signal),
      ]);
      return parseEnvoyCounters(this.now(), stats, clusters, EXTPROC_CLUSTER);
    } catch (err) {
      return `Envoy's admin at ${base} did not answer: ${(err as Error).message}`;
    }
  }
}

async function getJson(url: string, signal: AbortSignal): Promise<unknown> {
  const res = await request(url, { signal });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`${url} answered ${res.statusCode}`);
  }
  return res.body.json();
}
