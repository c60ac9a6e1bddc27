// Reproducer for the hostile-input findings on the ext_proc listener (issue 14, item 6): partial
// oversize messages and thousands of idle streams, against skewgate's ext_proc server in its own
// process, with the listener's bounds (`bounded`) and with grpc-js's defaults as before them
// (`unbounded`). Run by hand: `node dist/bench/extproc-abuse.js [bounded|unbounded]`; the numbers
// go to the report, not RESULTS.md (not part of `npm run bench`).
import { fork } from 'node:child_process';
import type { ClientHttp2Session } from 'node:http2';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { createExtProcServer, type ExtProcLimits } from '../src/extproc/server.js';
import { createRouter } from '../src/routing/router.js';
import { createExtProcClient, rawProcess, rawSession } from '../test/helpers/extproc-client.js';
import { syntheticPlane } from './synthetic.js';

const UNBOUNDED: Partial<ExtProcLimits> = {
  maxStreams: 1_000_000,
  maxStreamsPerConnection: 4_294_967_295,
  maxMessageBytes: 4 * 1024 * 1024, // grpc-js's default
  firstMessageTimeoutMs: 3_600_000,
};

async function serve(mode: string): Promise<void> {
  const snap = syntheticPlane().snapshot;
  const router = createRouter({ current: () => snap }, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
  const logger = pino({ level: 'warn' }, pino.destination({ dest: '/dev/null', sync: true }));
  const server = createExtProcServer({ router, logger, ...(mode === 'unbounded' ? { limits: UNBOUNDED } : {}) });
  const { port } = await server.start('127.0.0.1:0');
  process.on('message', (m: string) => {
    if (m === 'rss') {
      // Twice, apart: V8 frees Buffers' memory on a background sweeper after a collection.
      globalThis.gc?.();
      setTimeout(() => {
        globalThis.gc?.();
        const mem = process.memoryUsage();
        process.send?.({ rss: mem.rss, held: mem.heapUsed + mem.external });
      }, 300);
    }
  });
  process.send?.({ port });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const mode = process.argv[2] ?? 'bounded';
  const child = fork(fileURLToPath(import.meta.url), ['serve', mode], { execArgv: ['--expose-gc'] });
  const next = (): Promise<Record<string, number>> => new Promise((r) => child.once('message', (m) => r(m as Record<string, number>)));
  const port = (await next()).port ?? 0;
  /** RSS and what the heap and Buffers hold (MB): RSS is not always given back, the rest is. */
  const rss = async (): Promise<string> => {
    child.send('rss');
    const m = await next();
    return `rss ${Math.round((m.rss ?? 0) / 1e6)} MB, held ${Math.round((m.held ?? 0) / 1e6)} MB`;
  };
  const out: Record<string, unknown> = { mode, rssStartMB: await rss() };

  // 1. 100 streams on one connection, each a 3.9 MB message announced and sent but its last byte.
  const session = rawSession(port);
  const size = 3_900_000;
  const partial = Buffer.alloc(5 + size - 1);
  partial.writeUInt32BE(size, 1);
  for (let i = 0; i < 100; i++) rawProcess(session).write(partial);
  await sleep(3000);
  out.rssPartial39MB = await rss();
  session.destroy();
  await sleep(1000);
  out.rssAfterClose = await rss();

  // 1b. the largest the bound admits: 100 partial 1.9 MB messages, then the first-message timeout.
  const s2 = rawSession(port);
  const size2 = 1_900_000;
  const partial2 = Buffer.alloc(5 + size2 - 1);
  partial2.writeUInt32BE(size2, 1);
  const resets: Record<string, number> = {};
  for (let i = 0; i < 100; i++) {
    const st = rawProcess(s2);
    st.write(partial2);
    st.on('close', () => (resets[String(st.rstCode)] = (resets[String(st.rstCode)] ?? 0) + 1));
  }
  await sleep(3000);
  out.rssPartial19MB = await rss();
  await sleep(7000);
  out.rssPartial19MBAfter10s = await rss();
  out.partial19Closed = resets;
  s2.destroy();

  // 2. 5,000 idle streams over 50 connections, then a probe: 500 requests one after the other.
  const idle: ClientHttp2Session[] = [];
  for (let c = 0; c < 50; c++) {
    const s = rawSession(port);
    idle.push(s);
    for (let i = 0; i < 100; i++) rawProcess(s);
  }
  await sleep(2000);
  const client = createExtProcClient(`127.0.0.1:${port}`);
  const probe = async (): Promise<{ p50: number; p99: number; codes: Record<string, number> }> => {
    const ms: number[] = [];
    const codes: Record<string, number> = {};
    for (let i = 0; i < 500; i++) {
      const t0 = process.hrtime.bigint();
      const r = await client.process({ path: '/api/v1/namespaces/default/pods' });
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
      const code = String(r.response?.immediate_response?.status?.code ?? r.response?.response ?? r.status.code);
      codes[code] = (codes[code] ?? 0) + 1;
    }
    ms.sort((a, b) => a - b);
    return { p50: Number(ms[250]?.toFixed(2)), p99: Number(ms[495]?.toFixed(2)), codes };
  };
  out.probeWithIdle = await probe();
  out.rssIdle = await rss();
  await sleep(5000);
  out.probeAfter7s = await probe();
  for (const s of idle) s.destroy();
  client.close();
  child.kill();
  console.log(JSON.stringify(out, null, 1));
}

if (process.argv[2] === 'serve') void serve(process.argv[3] ?? 'bounded');
else void main();
