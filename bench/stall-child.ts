// (f) child process: skewgate's discovery service, its skew tracking and its ext_proc server,
// alone in their process, so that a stall of its event loop shows in the parent's probe.
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { pino } from 'pino';
import type { ApiServerSettings } from '../src/kube/credentials.js';
import { DiscoveryService } from '../src/discovery/service.js';
import { runSliced } from '../src/util/slice-runner.js';
import { createExtProcServer, type ExtProcServer } from '../src/extproc/server.js';
import { createLogger } from '../src/util/log.js';
import { createRouter } from '../src/routing/router.js';
import { SkewTracker } from '../src/telemetry/core/skew-diff.js';
import { serveParent } from './child-ipc.js';
import type { StallChildStart, StallChildStatus } from './protocol.js';

let discovery: DiscoveryService | null = null;
let server: ExtProcServer | null = null;
let skewQueue: Promise<unknown> = Promise.resolve();
let stopReclaimer = (): void => undefined;
const RECLAIMER: string = '../src/memory/reclaimer.js';
/** src/memory/reclaimer.ts as this child uses it (no type import: the code before has no such file). */
interface ReclaimerModule {
  reclaimOnChange: (source: DiscoveryService, opts: { logger: ReturnType<typeof createLogger> }) => { close(): void };
}
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();

const GC_KINDS: Readonly<Record<number, string>> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};
let gc = { maxMs: 0, kind: 'none' };
new PerformanceObserver((entries) => {
  for (const e of entries.getEntries()) {
    if (e.duration <= gc.maxMs) continue;
    const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    gc = { maxMs: e.duration, kind: (kind !== undefined && GC_KINDS[kind]) || String(kind) };
  }
}).observe({ entryTypes: ['gc'] });

// STALL_CHILD_STALLS=<file>: every event-loop turn later than 40 ms, as [from, to] in µs of
// process.hrtime (the clock of --cpu-prof's samples), written at exit: a profile's stalls are found by time.
const stallFile = process.env.STALL_CHILD_STALLS;
const stalls: [number, number][] = [];
if (stallFile) {
  let last = process.hrtime.bigint();
  setInterval(() => {
    const now = process.hrtime.bigint();
    if (now - last > 40_000_000n) stalls.push([Number(last / 1000n), Number(now / 1000n)]);
    last = now;
  }, 2).unref();
  process.on('exit', () => writeFileSync(stallFile, JSON.stringify(stalls)));
}

function memory(): Pick<StallChildStatus, 'rssBytes' | 'heapUsedBytes' | 'heapTotalBytes' | 'externalBytes'> {
  const m = process.memoryUsage();
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, heapTotalBytes: m.heapTotal, externalBytes: m.external };
}

const ipc = serveParent(
  {
    async start(payload): Promise<{ port: number }> {
      const { apiservers, sliceBudgetMs, maxDocumentBytes } = payload as StallChildStart;
      const logger = createLogger(
        process.env.STALL_CHILD_LOG ? 'debug' : 'warn',
        pino.destination({ dest: process.env.STALL_CHILD_LOG ?? '/dev/null', sync: true }) as unknown as NodeJS.WritableStream,
      );
      const budget = sliceBudgetMs ?? Number.POSITIVE_INFINITY;
      discovery = new DiscoveryService(
        {
          apiservers: apiservers as ApiServerSettings[],
          discovery: {
            interval: 1000,
            timeout: 10_000,
            watch: false,
            staleAfter: 180_000,
            identityLeaseLiveness: 60_000,
            ...(maxDocumentBytes === undefined ? {} : { maxDocumentBytes }),
          },
        },
        { logger, sliceBudgetMs: budget },
      );
      // What telemetry does on every round in `serve`: the skew diff, one round after the other.
      const skew = new SkewTracker();
      discovery.onRound((e) => {
        skewQueue = skewQueue.then(() => runSliced(skew.updateSteps(e.snapshot), { budgetMs: budget }));
      });
      // What serve does with a published snapshot's size (src/memory/). By name at run time: the
      // code before (bench/stall-baseline.sh builds it with this child) may have no src/memory.
      const memory = (await import(RECLAIMER).catch(() => null)) as ReclaimerModule | null;
      if (memory !== null) {
        const reclaim = memory.reclaimOnChange(discovery, { logger: logger.child({ component: 'memory' }) });
        stopReclaimer = () => reclaim.close();
      }
      await discovery.start();
      const router = createRouter(discovery, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
      server = createExtProcServer({ router, logger });
      const { port } = await server.start('127.0.0.1:0');
      return { port: port ?? 0 };
    },
    async status(): Promise<StallChildStatus> {
      await skewQueue;
      const snap = discovery?.current();
      return {
        generation: snap?.generation ?? 0,
        perServer: snap?.servers.map((s) => s.view?.resources.size ?? 0) ?? [],
        failures: snap?.servers.map((s) => ({ consecutive: s.consecutiveFailures, code: s.lastErrorCode ?? null })) ?? [],
        ...memory(),
        loopDelayMaxMs: loopDelay.max / 1e6,
        gcMaxMs: gc.maxMs,
        gcMaxKind: gc.kind,
      };
    },
    liveHeap(): number | null {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (gc === undefined) return null;
      gc();
      return process.memoryUsage().heapUsed;
    },
    resetLoopDelay(): null {
      loopDelay.reset();
      gc = { maxMs: 0, kind: 'none' };
      return null;
    },
  },
  async () => {
    stopReclaimer();
    await server?.close(1000);
    await discovery?.close();
  },
);
ipc.ready({});
