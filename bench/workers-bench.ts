// (g) decided requests per second against extproc.workers (1, 2): one skewgate's endpoints in a
// child process tree (bench/workers-child.ts), driven by h2load (nghttp2's HTTP/2 load generator,
// written in C, so that the generator takes as little of the two cores as it can) with a
// pre-encoded ext_proc message, one h2load per endpoint with the connections split between them,
// as Envoy's ext_proc cluster spreads its streams. The two arms alternate in rounds; the verdict
// is the median of the per-round ratios, with the worst round beside it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadProtos } from '../src/extproc/proto.js';
import { freeConsecutivePorts } from '../harness/lab/net.js';
import { requestHeadersMessage } from '../test/helpers/extproc-client.js';
import { forkChild, type ChildHandle } from './child-ipc.js';
import { procTreeCpuUs } from './proc-cpu.js';
import { envoyRequests } from './extproc-drive.js';
import type { Section } from './report.js';
import { countInto, fmt, formatCounts } from './stats.js';
import { median } from './verdict.js';
import type { WorkersChildReady } from './workers-child.js';

const run = promisify(execFile);
const H2LOAD = process.env['H2LOAD'] ?? 'h2load';
/** A ProcessingResponse with its gRPC frame is tens of bytes; an answer without one is none. */
const MIN_REPLY_BYTES = 10;
/** A decided request per second more than round-to-round noise: what "grows" must beat. */
const GROWTH = 1.1;

export interface WorkersBenchOptions {
  readonly arms: readonly number[];
  readonly rounds: number;
  readonly windowS: number;
  readonly warmupS: number;
  /** HTTP/2 connections in all (Envoy opens one per worker thread and endpoint), split over the endpoints. */
  readonly connections: number;
  readonly streamsPerConnection: number;
}

export const QUICK_WORKERS_OPTIONS: WorkersBenchOptions = {
  arms: [1, 2],
  rounds: 2,
  windowS: 2,
  warmupS: 1,
  connections: 4,
  streamsPerConnection: 16,
};

export const DEFAULT_WORKERS_OPTIONS: WorkersBenchOptions = {
  arms: [1, 2],
  rounds: 6,
  windowS: 4,
  warmupS: 3,
  connections: 4,
  streamsPerConnection: 16,
};

const PROCESS_PATH = '/envoy.service.ext_proc.v3.ExternalProcessor/Process';

/**
 * The gRPC length-prefixed ProcessingRequest Envoy sends for one kubectl request of the (b) mix:
 * a GET of a resource every apiserver serves (a `default` decision, the common case), in a file
 * for h2load.
 */
function frameFile(dir: string): { file: string; path: string } {
  const serialize = loadProtos().extProc['Process']?.requestSerialize;
  if (!serialize) throw new Error('ext_proc Process has no serializer');
  const req = envoyRequests().find((r) => (r.method ?? 'GET') === 'GET' && r.path.startsWith('/api/v1/'));
  if (!req) throw new Error('the (b) mix has no core GET');
  const msg = serialize(requestHeadersMessage(req));
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(msg.length, 1);
  const file = join(dir, 'process-request.bin');
  writeFileSync(file, Buffer.concat([prefix, msg]));
  return { file, path: req.path };
}

interface H2loadResult {
  readonly succeeded: number;
  readonly failed: number;
  readonly dataBytes: number;
  readonly seconds: number;
}

/** One h2load run against one endpoint for `seconds`: `conns` connections × `streams` streams in flight. */
async function h2load(port: number, file: string, seconds: number, conns: number, streams: number): Promise<H2loadResult> {
  const args = [
    '-D',
    String(seconds),
    '-c',
    String(conns),
    '-m',
    String(streams),
    '-d',
    file,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
    `http://127.0.0.1:${port}${PROCESS_PATH}`,
  ];
  const { stdout } = await run(H2LOAD, args, { maxBuffer: 1 << 20 }).catch((err: unknown) => {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT')
      throw new Error(`${H2LOAD} not found: bench (g) drives the endpoints with h2load (Debian: apt-get install nghttp2-client)`);
    throw err;
  });
  const req = /requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(stdout);
  const data = /traffic: .*?, ([\d.]+\w*) \((\d+)\) data/.exec(stdout);
  const fin = /finished in ([\d.]+)(ms|s),/.exec(stdout);
  if (!req || !data || !fin) throw new Error(`h2load's output not understood:\n${stdout.slice(-800)}`);
  return {
    succeeded: Number(req[1]),
    failed: Number(req[2]) + Number(req[3]) + Number(req[4]),
    dataBytes: Number(data[2]),
    seconds: Number(fin[1]) / (fin[2] === 'ms' ? 1000 : 1),
  };
}

interface Arm {
  readonly workers: number;
  readonly child: ChildHandle<WorkersChildReady>;
  readonly ports: readonly number[];
  readonly rates: number[];
  readonly cpuPerDecision: number[];
  readonly perEndpoint: number[];
  readonly failures: Map<string, number>;
}

/** One measured window: one h2load per endpoint at once, the connections split between them. */
async function window(arm: Arm, file: string, seconds: number, o: WorkersBenchOptions): Promise<{ decided: number; seconds: number }> {
  const n = arm.ports.length;
  const results = await Promise.all(
    arm.ports.map((p) => h2load(p, file, seconds, Math.max(1, Math.round(o.connections / n)), o.streamsPerConnection)),
  );
  const decided = results.reduce((x, r) => x + r.succeeded, 0);
  results.forEach((r, i) => {
    arm.perEndpoint[i] = (arm.perEndpoint[i] ?? 0) + r.succeeded;
    if (r.failed > 0) countInto(arm.failures, 'h2load: failed, errored or timed out', r.failed);
    // A 200 without the reply message would be no decision: each one carries a ProcessingResponse.
    if (r.succeeded > 0 && r.dataBytes / r.succeeded < MIN_REPLY_BYTES)
      countInto(arm.failures, 'answered without a reply message', r.succeeded);
  });
  return { decided, seconds: Math.max(...results.map((r) => r.seconds)) };
}

export async function benchWorkers(progress: (msg: string) => void, o: WorkersBenchOptions = DEFAULT_WORKERS_OPTIONS): Promise<Section> {
  const dir = mkdtempSync(join(tmpdir(), 'skewgate-bench-g-'));
  const { file, path } = frameFile(dir);
  const arms: Arm[] = [];
  try {
    for (const workers of o.arms) {
      progress(`(g) starting a skewgate with extproc.workers ${workers}`);
      const base = workers > 1 ? await freeConsecutivePorts(workers) : 0;
      const child = await forkChild<WorkersChildReady>('./workers-child.js', {
        readyTimeoutMs: 60_000,
        env: { BENCH_WORKERS: String(workers), BENCH_PORT: String(base) },
        quiet: true,
      });
      arms.push({ workers, child, ports: child.ready.ports, rates: [], cpuPerDecision: [], perEndpoint: [], failures: new Map() });
    }
    for (const arm of arms) {
      progress(`(g) warm-up, workers ${arm.workers}: ${o.warmupS} s`);
      await window({ ...arm, perEndpoint: [], failures: new Map() }, file, o.warmupS, o);
    }
    for (let round = 0; round < o.rounds; round++) {
      // Order rotated every round: neither arm always runs first after the other.
      const order = round % 2 === 0 ? arms : [...arms].reverse();
      for (const arm of order) {
        const cpu0 = procTreeCpuUs(arm.child.pid);
        const w = await window(arm, file, o.windowS, o);
        arm.rates.push(w.decided / w.seconds);
        arm.cpuPerDecision.push((procTreeCpuUs(arm.child.pid) - cpu0) / Math.max(1, w.decided));
        await sleep(200);
      }
      progress(
        `(g) round ${round + 1}/${o.rounds}: ${arms.map((a) => `workers ${a.workers} ${Math.round(a.rates.at(-1) ?? 0).toLocaleString('en-US')}/s`).join(', ')}`,
      );
    }
  } finally {
    await Promise.all(arms.map((a) => a.child.stop(15_000)));
    rmSync(dir, { recursive: true, force: true });
  }
  return report(arms, o, path);
}

function report(arms: readonly Arm[], o: WorkersBenchOptions, path: string): Section {
  const one = arms[0] as Arm;
  const failed = arms.reduce((n, a) => n + [...a.failures.values()].reduce((x, y) => x + y, 0), 0);
  const targets = arms.slice(1).map((a) => {
    const ratios = a.rates.map((r, i) => r / (one.rates[i] ?? NaN));
    const med = median(ratios);
    const worst = Math.min(...ratios);
    return {
      metric: `decided requests per second, ${a.workers} workers over 1 (median of the ${ratios.length} per-round ratios; worst round)`,
      target: `≥ ×${GROWTH} (grows beyond round-to-round noise), no failed exchange`,
      measured: `×${fmt(med)} (${Math.round(median(a.rates)).toLocaleString('en-US')} vs ${Math.round(median(one.rates)).toLocaleString('en-US')} /s); worst round ×${fmt(worst)}; failed exchanges: ${failed}`,
      met: med >= GROWTH && failed === 0,
    };
  });
  return {
    id: 'g',
    title: 'decided requests per second against extproc.workers',
    method:
      `Per arm, \`bench/workers-child.ts\` runs one skewgate's ext_proc endpoints as \`serve\` does with \`extproc.workers\` = ${o.arms.join(' or ')}: the main process's server and the worker processes of \`src/workers/pool.ts\`, deciding on the synthetic 5,000-resource snapshot (sent to the workers as every published snapshot is), log level info to /dev/null. ` +
      `h2load (nghttp2) drives them closed-loop with one pre-encoded ProcessingRequest (Envoy's request_headers for a kubectl \`GET ${path}\`, a \`default\` decision; sent half-closed, as Envoy's gRPC client does): ${o.connections} HTTP/2 connections × ${o.streamsPerConnection} streams in flight in all, one h2load per endpoint with the connections split between them, as Envoy's ext_proc cluster spreads its streams; an answer counts as decided when it is a 200 carrying a reply message. ` +
      `${o.rounds} rounds × ${o.arms.length} arms × ${o.windowS} s, order rotated every round, after ${o.warmupS} s of warm-up each.`,
    targets,
    tables: [
      {
        caption: 'Decided requests per second per round, and CPU of the skewgate process tree per decided request (µs, /proc):',
        headers: [
          'Round',
          ...arms.map((a) => `workers ${a.workers}: /s`),
          ...arms.map((a) => `workers ${a.workers}: CPU µs`),
          ...arms.slice(1).map((a) => `ratio ${a.workers}/1`),
        ],
        rows: one.rates.map((_, i) => [
          String(i + 1),
          ...arms.map((a) => Math.round(a.rates[i] ?? NaN).toLocaleString('en-US')),
          ...arms.map((a) => Math.round(a.cpuPerDecision[i] ?? NaN).toLocaleString('en-US')),
          ...arms.slice(1).map((a) => `×${fmt((a.rates[i] ?? NaN) / (one.rates[i] ?? NaN))}`),
        ]),
      },
      {
        caption: 'Per arm, over the measured windows:',
        headers: ['Arm', 'median /s', 'decided per endpoint (main first)', 'failed exchanges'],
        rows: arms.map((a) => [
          `workers ${a.workers}`,
          Math.round(median(a.rates)).toLocaleString('en-US'),
          a.perEndpoint.map((n) => n.toLocaleString('en-US')).join(' / '),
          formatCounts(a.failures) || '0',
        ]),
      },
    ],
    notes: [
      'The load generator shares the 2 cores with the endpoints, so the gain is bounded by what it leaves: with one endpoint, skewgate holds one core and h2load part of the other; a second endpoint can only take what h2load does not use. A generator in Node (a first version of this bench) needed about a core itself and showed no gain (×1.0): the machine was saturated either way.',
      'Decisions are logged as in production at level info (to /dev/null); a `default` decision is routine and not logged, so this is the cheapest decision, the one most requests get.',
      "CPU per decided request is the whole skewgate process tree's (main process plus workers) over the window, divided by the decided requests: what a decision costs with that many endpoints, including the snapshot copies and the tallies sent to the main process.",
    ],
  };
}
