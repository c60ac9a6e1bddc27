// (b) child process: skewgate's real ext_proc gRPC server over the synthetic snapshot, alone in
// its process so that its CPU time (process.cpuUsage) is skewgate's and nothing else's.
import { pino } from 'pino';
import { createExtProcServer } from '../src/extproc/server.js';
import { createLogObserver } from '../src/extproc/observer.js';
import { DECISION_LOG_INTERVAL_MS } from '../src/config/core/schema.js';
import { createLogger } from '../src/util/log.js';
import { createRouter } from '../src/routing/router.js';
import { serveParent } from './child-ipc.js';
import type { CpuSample, ExtProcChildReady } from './protocol.js';
import { syntheticPlane } from './synthetic.js';

const LOG_LEVEL = 'info'; // the config default: routed and not_found decisions are logged (log.decisions.interval: the default's)

async function main(): Promise<void> {
  const snap = syntheticPlane().snapshot;
  const router = createRouter({ current: () => snap }, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
  // Log lines are formatted and written as in production, to /dev/null instead of a terminal.
  const logger = createLogger(LOG_LEVEL, pino.destination({ dest: '/dev/null', sync: true }) as unknown as NodeJS.WritableStream);
  const server = createExtProcServer({ router, logger, observer: createLogObserver(logger, { intervalMs: DECISION_LOG_INTERVAL_MS }) });
  const ipc = serveParent(
    {
      cpu: (): CpuSample => {
        const u = process.cpuUsage();
        return { cpuUs: u.user + u.system, rssBytes: process.memoryUsage().rss };
      },
    },
    () => server.close(1000),
  );
  try {
    const { port } = await server.start('127.0.0.1:0');
    ipc.ready({ port: port ?? 0, logLevel: LOG_LEVEL } satisfies ExtProcChildReady);
  } catch (err) {
    ipc.failed(err);
  }
}

void main();
