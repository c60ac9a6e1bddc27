// (g) decided requests per second against extproc.workers (1, 2): one skewgate's endpoints in a
// child process tree (bench/workers-child.ts), driven closed-loop from this process over raw
// HTTP/2 with pre-encoded ext_proc messages (cheaper than a gRPC client, so the generator takes
// as little of the two cores as it can), streams spread over the endpoints round robin as Envoy's
// ext_proc cluster does. The two arms alternate in rounds; the verdict is the median of the
// per-round ratios, with the worst round beside it.
import { readFileSync } from 'node:fs';
import { connect, constants as h2, type ClientHttp2Session } from 'node:http2';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadProtos } from '../src/extproc/proto.js';
import { freeConsecutivePorts } from '../harness/lab/net.js';
import { requestHeadersMessage } from '../test/helpers/extproc-client.js';
import { forkChild, type ChildHandle } from './child-ipc.js';
import { envoyRequests } from './extproc-bench.js';
import type { Section } from './report.js';
import { countInto, fmt, formatCounts } from './stats.js';
import { median } from './verdict.js';
import type { WorkersChildReady } from './workers-child.js';

export interface WorkersBenchOptions {
  readonly arms: readonly number[];
  readonly rounds: number;
  readonly windowMs: number;
  readonly warmupMs: number;
  readonly concurrency: number;
  /** HTTP/2 connections per endpoint (Envoy opens one per worker thread). */
  readonly sessionsPerEndpoint: number;
}

export const QUICK_WORKERS_OPTIONS: WorkersBenchOptions = {
  arms: [1, 2],
  rounds: 2,
  windowMs: 1500,
  warmupMs: 1000,
  concurrency: 64,
  sessionsPerEndpoint: 2,
};

export const DEFAULT_WORKERS_OPTIONS: WorkersBenchOptions = {
  arms: [1, 2],
  rounds: 6,
  windowMs: 4000,
  warmupMs: 3000,
  concurrency: 64,
  sessionsPerEndpoint: 2,
};

const PROCESS_PATH = '/envoy.service.ext_proc.v3.ExternalProcessor/Process';

/** gRPC length-prefixed frames of the ProcessingRequests Envoy sends for the bench's request mix. */
function frames(): Buffer[] {
  const serialize = loadProtos().extProc['Process']?.requestSerialize;
  if (!serialize) throw new Error('ext_proc Process has no serializer');
  return envoyRequests().map((r) => {
    const msg = serialize(requestHeadersMessage(r));
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(msg.length, 1);
    return Buffer.concat([prefix, msg]);
  });
}

/** One exchange: the stream, the message (half-closed), the first reply. */
function exchange(session: ClientHttp2Session, frame: Buffer): Promise<'decided' | string> {
  return new Promise((resolve) => {
    let done = false;
    const end = (r: string): void => {
      if (done) return;
      done = true;
      resolve(r);
    };
    const st = session.request({
      [h2.HTTP2_HEADER_METHOD]: 'POST',
      [h2.HTTP2_HEADER_PATH]: PROCESS_PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    // Half-closed with the message, as Envoy's gRPC client does; no reset of every stream (a
    // client that resets each one trips Node's HTTP/2 rapid-reset protection, which ends the session).
    st.on('data', () => end('decided'));
    st.on('trailers', (t) => end(`grpc-status ${String(t['grpc-status'])}`));
    st.on('error', (err) => end(`error ${err.message}`));
    st.on('close', () => end('closed without a reply'));
    st.end(frame);
  });
}

interface Arm {
  readonly workers: number;
  readonly child: ChildHandle<WorkersChildReady>;
  readonly sessions: ClientHttp2Session[][];
  readonly rates: number[];
  readonly cpuPerDecision: number[];
  readonly perEndpoint: number[];
  readonly failures: Map<string, number>;
}

/** CPU seconds of a process and all its descendants (/proc), or NaN where /proc says nothing. */
function treeCpuSeconds(pid: number): number {
  const tick = 100; // USER_HZ on Linux
  const one = (p: number): number => {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(f[11]) + Number(f[12])) / tick;
    } catch {
      return 0;
    }
  };
  const children = (p: number): number[] => {
    try {
      return readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  let total = 0;
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop() as number;
    total += one(p);
    stack.push(...children(p));
  }
  return total;
}

/** Closed loop for `ms`: `concurrency` exchanges in flight, round robin over the endpoints. */
async function load(arm: Arm, fs: readonly Buffer[], ms: number, concurrency: number, record: boolean): Promise<number> {
  let decided = 0;
  let next = 0;
  const until = performance.now() + ms;
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      const i = next++;
      const e = i % arm.sessions.length;
      const ep = arm.sessions[e] as ClientHttp2Session[];
      const r = await exchange(ep[Math.floor(i / arm.sessions.length) % ep.length] as ClientHttp2Session, fs[i % fs.length] as Buffer);
      if (r === 'decided') {
        decided++;
        if (record) arm.perEndpoint[e] = (arm.perEndpoint[e] ?? 0) + 1;
      } else if (record) countInto(arm.failures, r);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return decided;
}

export async function benchWorkers(progress: (msg: string) => void, o: WorkersBenchOptions = DEFAULT_WORKERS_OPTIONS): Promise<Section> {
  const fs = frames();
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
      const sessions = child.ready.ports.map((port) =>
        Array.from({ length: o.sessionsPerEndpoint }, () => {
          const s = connect(`http://127.0.0.1:${port}`);
          s.on('error', () => undefined);
          return s;
        }),
      );
      arms.push({ workers, child, sessions, rates: [], cpuPerDecision: [], perEndpoint: [], failures: new Map() });
    }
    for (const arm of arms) {
      progress(`(g) warm-up, workers ${arm.workers}: ${o.warmupMs / 1000} s`);
      await load(arm, fs, o.warmupMs, o.concurrency, false);
    }
    for (let round = 0; round < o.rounds; round++) {
      // Order rotated every round: neither arm always runs first after the other.
      const order = round % 2 === 0 ? arms : [...arms].reverse();
      for (const arm of order) {
        const cpu0 = treeCpuSeconds(arm.child.pid);
        const t0 = performance.now();
        const decided = await load(arm, fs, o.windowMs, o.concurrency, true);
        const secs = (performance.now() - t0) / 1000;
        arm.rates.push(decided / secs);
        arm.cpuPerDecision.push(((treeCpuSeconds(arm.child.pid) - cpu0) * 1e6) / Math.max(1, decided));
        await sleep(200);
      }
      progress(
        `(g) round ${round + 1}/${o.rounds}: ${arms.map((a) => `workers ${a.workers} ${Math.round(a.rates.at(-1) ?? 0).toLocaleString('en-US')}/s`).join(', ')}`,
      );
    }
  } finally {
    for (const a of arms) for (const ep of a.sessions) for (const s of ep) s.destroy();
    await Promise.all(arms.map((a) => a.child.stop(15_000)));
  }
  return report(arms, o);
}

function report(arms: readonly Arm[], o: WorkersBenchOptions): Section {
  const one = arms[0] as Arm;
  const failed = arms.reduce((n, a) => n + [...a.failures.values()].reduce((x, y) => x + y, 0), 0);
  const targets = arms.slice(1).map((a) => {
    const ratios = a.rates.map((r, i) => r / (one.rates[i] ?? NaN));
    const med = median(ratios);
    const worst = Math.min(...ratios);
    return {
      metric: `decided requests per second, ${a.workers} workers over 1 (median of the ${ratios.length} per-round ratios; worst round)`,
      target: '> 1 (grows), and no failed exchange',
      measured: `×${fmt(med, 2)} (${Math.round(median(a.rates)).toLocaleString('en-US')} vs ${Math.round(median(one.rates)).toLocaleString('en-US')} /s); worst round ×${fmt(worst, 2)}; failed exchanges: ${failed}`,
      met: med > 1 && failed === 0,
    };
  });
  return {
    id: 'g',
    title: 'decided requests per second against extproc.workers',
    method:
      `Per arm, \`bench/workers-child.ts\` runs one skewgate's ext_proc endpoints as \`serve\` does with \`extproc.workers\` = ${o.arms.join(' or ')}: the main process's server and the worker processes of \`src/workers/pool.ts\`, deciding on the synthetic 5,000-resource snapshot (sent to the workers as every published snapshot is), log level info to /dev/null. ` +
      `This process drives them closed-loop, ${o.concurrency} exchanges in flight over raw HTTP/2 (${o.sessionsPerEndpoint} connections per endpoint, pre-encoded ProcessingRequests of the (b) mix: open, request_headers and half-close, the reply), streams spread round robin over the endpoints as Envoy's ext_proc cluster does. ` +
      `${o.rounds} rounds × ${o.arms.length} arms × ${o.windowMs / 1000} s, order rotated every round, after ${o.warmupMs / 1000} s of warm-up each.`,
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
          ...arms.slice(1).map((a) => `×${fmt((a.rates[i] ?? NaN) / (one.rates[i] ?? NaN), 2)}`),
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
      'The load generator shares the 2 cores with the endpoints, so the gain is bounded by what it leaves: with one endpoint, skewgate holds one core and the generator part of the other; a second endpoint can only take what the generator does not use.',
      "CPU per decided request is the whole skewgate process tree's (main process plus workers) over the window, divided by the decided requests: what a decision costs with that many endpoints, including the snapshot copies and the tallies sent to the main process.",
    ],
  };
}
