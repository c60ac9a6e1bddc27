// (f) child process: skewgate's discovery service, its skew tracking and its ext_proc server,
// alone in their process, so that a stall of its event loop shows in the parent's probe.
import { monitorEventLoopDelay } from 'node:perf_hooks';
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
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();

const ipc = serveParent(
  {
    async start(payload): Promise<{ port: number }> {
      const { apiservers, sliceBudgetMs } = payload as StallChildStart;
      const logger = createLogger(
        process.env.STALL_CHILD_LOG ? 'debug' : 'warn',
        pino.destination({ dest: process.env.STALL_CHILD_LOG ?? '/dev/null', sync: true }) as unknown as NodeJS.WritableStream,
      );
      const budget = sliceBudgetMs ?? Number.POSITIVE_INFINITY;
      discovery = new DiscoveryService(
        {
          apiservers: apiservers as ApiServerSettings[],
          discovery: { interval: 1000, timeout: 10_000, watch: false, staleAfter: 180_000, identityLeaseLiveness: 60_000 },
        },
        { logger, sliceBudgetMs: budget },
      );
      // What telemetry does on every round in `serve`: the skew diff, one round after the other.
      const skew = new SkewTracker();
      discovery.onRound((e) => {
        skewQueue = skewQueue.then(() => runSliced(skew.updateSteps(e.snapshot), { budgetMs: budget }));
      });
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
        rssBytes: process.memoryUsage().rss,
        loopDelayMaxMs: loopDelay.max / 1e6,
      };
    },
    resetLoopDelay(): null {
      loopDelay.reset();
      return null;
    },
  },
  async () => {
    await server?.close(1000);
    await discovery?.close();
  },
);
ipc.ready({});
