// (g) child process: one skewgate's ext_proc endpoints as `serve` runs them with extproc.workers:
// the main process's server and the worker processes (src/workers/pool.ts), all deciding on the
// synthetic snapshot, which reaches the workers the way every published snapshot does.
import { pino } from 'pino';
import { parseConfig } from '../src/config/load.js';
import { createExtProcServer, extprocLimits } from '../src/extproc/server.js';
import { createLogger } from '../src/util/log.js';
import { createRouter } from '../src/routing/router.js';
import { ExtProcWorkers } from '../src/workers/pool.js';
import { serveParent } from './child-ipc.js';
import { syntheticPlane } from './synthetic.js';

export interface WorkersChildReady {
  readonly ports: readonly number[];
}

async function main(): Promise<void> {
  const workers = Number(process.env['BENCH_WORKERS'] ?? '1');
  const base = Number(process.env['BENCH_PORT'] ?? '0');
  const snap = syntheticPlane().snapshot;
  const config = parseConfig(
    {
      apiservers: snap.servers.map((s) => ({ name: s.name, url: s.url })),
      // The synthetic views are never refreshed: stale only after the run.
      discovery: { interval: '60s' },
      extproc: { listen: `127.0.0.1:${base}`, workers },
      envoy: { tls: { certFile: '/dev/null', keyFile: '/dev/null' } },
      log: { level: 'info' },
    },
    '/dev/null/skewgate.yaml',
    '/tmp',
  );
  const router = createRouter({ current: () => snap }, { staleAfterMs: config.discovery.staleAfter, retryAfterSeconds: 1 });
  // Log lines formatted as in production, to /dev/null; the workers write theirs to this stderr,
  // which the parent sends to /dev/null too.
  const logger = createLogger('info', pino.destination({ dest: '/dev/null', sync: true }));
  const server = createExtProcServer({ router, logger, limits: extprocLimits(config) });
  const pool = new ExtProcWorkers({
    config,
    logger,
    current: () => snap,
    telemetry: null,
    apiservers: () => config.apiservers,
    onTallies: () => undefined,
  });
  const ipc = serveParent({}, async () => {
    await Promise.all([server.close(1000), pool.close(1000, 0)]);
  });
  try {
    const { port } = await server.start(config.extproc.listen);
    const more = await pool.start();
    ipc.ready({ ports: [port ?? 0, ...more.map((p) => p ?? 0)] } satisfies WorkersChildReady);
  } catch (err) {
    ipc.failed(err);
  }
}

void main();
