// (i) A real node's traffic through each phase of an upgrade (issue 28, item 5): the requests the
// kubelet sent in test/cluster/node-upgrade.test.ts (bench/node-traffic-mix.json, steady window,
// watches left out) replayed open-loop at fixed rates against three fake apiservers, through bare
// Envoy and through Envoy + skewgate (fast path on; with the client certificate, stated by Envoy's
// Lua, and with the token alone), in four phases run in order: steady, one apiserver stopped (a restart), mixed versions (one
// restarted as the next version), a fourth apiserver joining at a new address. Each phase's rounds
// start right after its change, so the transition is measured, not only the state after it.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { forkChild, type ChildHandle } from './child-ipc.js';
import { pick, schedule, type MixWindow, type NodeRequest } from './node-mix.js';
import { openLoop } from './open-loop.js';
import type { Section, Table, TargetRow } from './report.js';
import { NODE_STACK_DIR, type NodeStackCpu, type NodeStackReady } from './protocol.js';
import { countInto, fmt, formatCounts, nowNs, summarise } from './stats.js';
import { NO_FAILURES, addFailures, judgePaired, judgeRounds, median, type Failures } from './verdict.js';
import { fastClusterName, FRONT_PROXY_SUFFIX } from '../src/envoy/clusters.js';
import { packageRoot } from '../src/util/package-root.js';
import { join } from 'node:path';

export interface NodePhasesOptions {
  readonly rates: readonly number[];
  /** Rounds per phase and rate; each runs every arm, the order turning. */
  readonly rounds: number;
  readonly windowMs: number;
  readonly warmupMs: number;
}

export const DEFAULT_NODE_PHASES: NodePhasesOptions = { rates: [500, 2000], rounds: 5, windowMs: 3000, warmupMs: 1000 };
export const QUICK_NODE_PHASES: NodePhasesOptions = { rates: [500], rounds: 2, windowMs: 1500, warmupMs: 500 };

const TARGET_SHARE_PERCENT = 5;
const TARGET_P50_MS = 0.05;
const TARGET_P99_MS = 0.2;

type ArmName = 'skewgate' | 'token' | 'baseline';
/**
 * skewgate's Envoy twice: the node as it is (its certificate, stated by Envoy's Lua, and the
 * token) and the same requests with the token alone, which tells what stating the certificate
 * adds from what the fast path itself adds.
 */
const ARMS: readonly ArmName[] = ['skewgate', 'token', 'baseline'];
const LABEL: Record<ArmName, string> = {
  skewgate: 'Envoy + skewgate (fast path), certificate',
  token: 'Envoy + skewgate (fast path), token alone',
  baseline: 'bare Envoy',
};
/** Which Envoy serves an arm. */
const ENVOY_OF: Record<ArmName, 'skewgate' | 'baseline'> = { skewgate: 'skewgate', token: 'skewgate', baseline: 'baseline' };
const envoyCpu = (c: NodeStackCpu, envoy: 'skewgate' | 'baseline'): number =>
  envoy === 'skewgate' ? c.skewgateEnvoyUs : c.baselineEnvoyUs;
const SEED = ['apiserver-a', 'apiserver-b', 'apiserver-c'];

interface Phase {
  readonly name: string;
  readonly what: string;
  /** Makes the change; resolves to the fast pool skewgate should settle on. */
  readonly change: (child: ChildHandle<NodeStackReady>) => Promise<readonly string[]>;
}

const PHASES: readonly Phase[] = [
  { name: 'steady', what: 'three apiservers of one version', change: () => Promise.resolve(SEED) },
  {
    name: 'restart',
    what: 'apiserver-b stopped, as in its restart',
    change: async (c) => {
      await c.call('stopServer', 'apiserver-b');
      return ['apiserver-a', 'apiserver-c'];
    },
  },
  {
    name: 'mixed',
    what: 'apiserver-b back; apiserver-c restarted as the next version (three more resources)',
    change: async (c) => {
      await c.call('startServer', 'apiserver-b');
      await c.call('upgrade', 'apiserver-c');
      return SEED;
    },
  },
  {
    name: 'join',
    what: 'a fourth apiserver joining at a new address (kubernetes EndpointSlice)',
    change: async (c) => [...SEED, await c.call<string>('join')],
  },
];

interface Figures {
  p50: number[];
  p99: number[];
  /** Per round, % of requests that opened an ext_proc stream (skewgate's arms). */
  share: number[];
  requests: number;
  failures: Failures;
  statuses: Map<string, number>;
  envoyUs: number;
  /** The arm's Envoy while another Envoy's arms ran (health checks, xDS, timers), and their wall time. */
  idleEnvoyUs: number;
  idleMs: number;
  /** skewgate's own process, over the arm's windows (what it spends in the background included). */
  skewgateUs: number;
  fakesUs: number;
}

const fresh = (): Figures => ({
  p50: [],
  p99: [],
  share: [],
  requests: 0,
  failures: NO_FAILURES,
  statuses: new Map(),
  envoyUs: 0,
  idleEnvoyUs: 0,
  idleMs: 0,
  skewgateUs: 0,
  fakesUs: 0,
});

/** Any answer a fake apiserver gave (it says so in a header) but 401/403/5xx (the fakes answer token, token and subresource writes 400 or 201). */
const fakeAnswered: Answered = (status, headers) =>
  typeof headers['x-fake-apiserver'] === 'string' && status < 500 && status !== 401 && status !== 403;

/** Whether an answer counts as an apiserver's (anything else is a failed request). */
export type Answered = (status: number, headers: Readonly<Record<string, string | string[] | undefined>>) => boolean;

/** What one arm's windows add up to. */
export interface WindowFigures {
  requests: number;
  failures: Failures;
  statuses: Map<string, number>;
}

/** One window of the node's requests open-loop at `rate`; latencies in ns from each request's due time. */
export async function window(
  pool: Pool,
  next: (i: number) => NodeRequest,
  rate: number,
  ms: number,
  headers: Record<string, string>,
  into: WindowFigures | null,
  answered: Answered = fakeAnswered,
): Promise<{ readonly lat: number[]; readonly sent: number }> {
  const lat: number[] = [];
  let failures: Failures = NO_FAILURES;
  let closed = false;
  let done = 0;
  const total = Math.round((rate * ms) / 1000);
  await openLoop(
    total,
    rate,
    async (i, due) => {
      const r = next(i);
      try {
        const res = await pool.request({
          method: r.method,
          path: r.path,
          headers: r.contentType === undefined ? headers : { ...headers, 'content-type': r.contentType },
          ...(r.body === undefined ? {} : { body: r.body(i) }),
        });
        await res.body.text();
        if (closed) return;
        done++;
        lat.push(nowNs() - due);
        if (into !== null) countInto(into.statuses, `${r.row} ${res.statusCode}`);
        if (!answered(res.statusCode, res.headers)) failures = addFailures(failures, { ...NO_FAILURES, unexpected: 1 });
      } catch (err) {
        if (closed) return;
        done++;
        const code = (err as NodeJS.ErrnoException).code ?? '';
        failures = addFailures(failures, /TIMEOUT/i.test(code) ? { ...NO_FAILURES, timeouts: 1 } : { ...NO_FAILURES, errors: 1 });
      }
    },
    10_000,
  );
  closed = true;
  if (into !== null) {
    into.requests += total;
    into.failures = addFailures(into.failures, addFailures(failures, { ...NO_FAILURES, unanswered: total - done }));
  }
  return { lat, sent: total };
}

export async function benchNodePhases(progress: (msg: string) => void, o: NodePhasesOptions = DEFAULT_NODE_PHASES): Promise<Section> {
  const mix = JSON.parse(readFileSync(join(packageRoot(), 'bench/node-traffic-mix.json'), 'utf8')) as { windows: MixWindow[] };
  const steadyWindow = mix.windows[0] as MixWindow;
  const plan = schedule(steadyWindow);
  const next = pick(plan.requests);
  progress(`(i) starting the stack in a child process (${NODE_STACK_DIR}: 3 fake apiservers, skewgate, 2 Envoys)`);
  let child: ChildHandle<NodeStackReady> | undefined;
  const pools: Pool[] = [];
  try {
    child = await forkChild<NodeStackReady>('./node-phases-child.js', { readyTimeoutMs: 90_000, alsoKill: (r) => Object.values(r.pids) });
    const r = child.ready;
    const connect = { ca: readFileSync(r.caFile, 'utf8'), cert: readFileSync(r.certFile, 'utf8'), key: readFileSync(r.keyFile, 'utf8') };
    const pool = (url: string, certificate = true): Pool => {
      const p = new Pool(url, {
        connect: certificate ? connect : { ca: connect.ca },
        connections: 64,
        keepAliveTimeout: 60_000,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      pools.push(p);
      return p;
    };
    const arms: Record<ArmName, Pool> = {
      skewgate: pool(r.urls.skewgate),
      token: pool(r.urls.skewgate, false),
      baseline: pool(r.urls.baseline),
    };
    // All carry the token; skewgate's Envoy also asks for the certificate (its Lua states it), the bare one does not.
    const headers = { authorization: `Bearer ${r.token}`, accept: 'application/json', 'user-agent': 'kubelet/v1.35.4 (skewgate-bench)' };
    const c = child;
    const cpu = (): Promise<NodeStackCpu> => c.call<NodeStackCpu>('cpu');
    const results: { phase: Phase; rate: number; settledS: number | null; figures: Record<ArmName, Figures> }[] = [];
    const spans: PhaseSpan[] = [];
    // The start is no phase: the members settle (the EndpointSlices arrive one by one) first.
    const seeded = `${fastClusterName(SEED)}${FRONT_PROXY_SUFFIX}`;
    for (const deadline = Date.now() + 60_000; (await c.call<string | null>('certRoute')) !== seeded; await sleep(200))
      if (Date.now() > deadline) throw new Error('(i) the fast path for certificates never covered the three apiservers');
    for (const phase of PHASES) {
      const pool4 = await phase.change(c);
      const changedAt = Date.now();
      spans.push({ name: phase.name, from: changedAt, to: Number.POSITIVE_INFINITY });
      if (spans.length > 1) (spans[spans.length - 2] as PhaseSpan).to = changedAt;
      const want = `${fastClusterName(pool4)}${FRONT_PROXY_SUFFIX}`;
      let settledS: number | null = null;
      // Watches the fast pool skewgate's Envoy runs for certificates while the phase's rounds go on.
      let watching = true;
      const watcher = (async () => {
        while (watching && settledS === null) {
          if ((await c.call<string | null>('certRoute')) === want) settledS = (Date.now() - changedAt) / 1000;
          else await sleep(200);
        }
      })();
      for (const rate of o.rates) {
        progress(`(i) ${phase.name} (${phase.what}) at ${rate} req/s: ${o.rounds} rounds`);
        const figures: Record<ArmName, Figures> = { skewgate: fresh(), token: fresh(), baseline: fresh() };
        for (let round = 0; round < o.rounds; round++) {
          // The order turns each round, so no arm always follows the same one.
          for (const name of [...ARMS.slice(round % ARMS.length), ...ARMS.slice(0, round % ARMS.length)]) {
            await window(arms[name], next, rate, o.warmupMs, headers, null);
            const [s0, c0] = [await c.call<number>('streams'), await cpu()];
            const t0 = Date.now();
            const { lat, sent } = await window(arms[name], next, rate, o.windowMs, headers, figures[name]);
            const [s1, c1] = [await c.call<number>('streams'), await cpu()];
            for (const other of ARMS.filter((a) => ENVOY_OF[a] !== ENVOY_OF[name])) {
              figures[other].idleEnvoyUs += envoyCpu(c1, ENVOY_OF[other]) - envoyCpu(c0, ENVOY_OF[other]);
              figures[other].idleMs += Date.now() - t0;
            }
            const f = figures[name];
            const sum = summarise(lat);
            f.p50.push(sum.p50 / 1e6);
            f.p99.push(sum.p99 / 1e6);
            if (name !== 'baseline') f.share.push(((s1 - s0) / sent) * 100);
            f.envoyUs += envoyCpu(c1, ENVOY_OF[name]) - envoyCpu(c0, ENVOY_OF[name]);
            f.skewgateUs += c1.skewgateUs - c0.skewgateUs;
            f.fakesUs += c1.fakesUs - c0.fakesUs;
            await c.call('clear');
          }
        }
        results.push({ phase, rate, settledS, figures });
      }
      watching = false;
      await watcher;
      results.filter((x) => x.phase === phase).forEach((x) => (x.settledS = settledS));
    }
    const log = readFileSync(join(packageRoot(), NODE_STACK_DIR, 'skewgate.log'), 'utf8');
    return report(
      results,
      plan.left,
      o,
      spans.map((sp) => `${sp.name}: ${fastPathLog(log, sp)}`),
    );
  } finally {
    for (const p of pools) await p.close().catch(() => undefined);
    await child?.stop();
  }
}

interface PhaseSpan {
  readonly name: string;
  readonly from: number;
  to: number;
}

/** What skewgate's log says happened to the fast path (and what it warned of) during a phase. */
export function fastPathLog(log: string, span: { readonly from: number; readonly to: number }): string {
  const counts = new Map<string, number>();
  for (const line of log.split('\n')) {
    let entry: { time?: string; level?: string; msg?: string; why?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    const at = Date.parse(entry.time ?? '');
    if (!(at >= span.from && at < span.to) || entry.msg === undefined) continue;
    if (!entry.msg.startsWith('fast path') && entry.level !== 'warn' && entry.level !== 'error') continue;
    countInto(counts, entry.why === undefined ? entry.msg : `${entry.msg} (${entry.why})`);
  }
  return counts.size === 0 ? 'no fast-path change, no warning' : formatCounts(counts);
}

/** Added p50 and p99 over the baseline arm, judged on the rounds' paired differences (issue 28's targets). */
export function latencyVerdicts(at: string, arm: LatencyRounds, baseline: LatencyRounds, over = ''): TargetRow[] {
  const judge = (metric: string, limit: number, pick: (r: LatencyRounds) => readonly number[]): TargetRow =>
    judgePaired({
      metric: `${at}: ${metric}${over}`,
      limit,
      unit: 'ms',
      arm: pick(arm),
      baseline: pick(baseline),
      failures: arm.failures,
      baselineFailures: baseline.failures,
    });
  return [judge('added p50', TARGET_P50_MS, (r) => r.p50), judge('added p99', TARGET_P99_MS, (r) => r.p99)];
}

/** An arm's per-round latencies (ms) and its failures. */
export interface LatencyRounds {
  readonly p50: readonly number[];
  readonly p99: readonly number[];
  readonly failures: Failures;
}

function report(
  results: readonly { phase: Phase; rate: number; settledS: number | null; figures: Record<ArmName, Figures> }[],
  left: readonly string[],
  o: NodePhasesOptions,
  logs: readonly string[],
): Section {
  const targets: TargetRow[] = [];
  const rows: string[][] = [];
  for (const { phase, rate, figures } of results) {
    const b = figures.baseline;
    for (const name of ['skewgate', 'token'] as const) {
      const s = figures[name];
      const at = `${phase.name}, ${rate} req/s${name === 'token' ? ', token alone' : ''}`;
      targets.push(
        judgeRounds({
          metric: `${at}: requests meeting ext_proc`,
          limit: TARGET_SHARE_PERCENT,
          unit: '%',
          values: s.share,
          failures: s.failures,
        }),
        ...latencyVerdicts(at, s, b),
      );
    }
    for (const name of ARMS) {
      const f = figures[name];
      rows.push([
        phase.name,
        String(rate),
        LABEL[name],
        f.requests.toLocaleString('en-US'),
        fmt(median(f.p50)),
        fmt(median(f.p99)),
        name === 'baseline' ? '—' : `${fmt(median(f.share), 2)} %`,
        fmt(f.envoyUs / Math.max(1, f.requests)),
        fmt(f.idleEnvoyUs / Math.max(1, f.idleMs)),
        fmt(f.envoyUs / Math.max(1, f.requests) - (f.idleEnvoyUs / Math.max(1, f.idleMs)) * (1000 / rate)),
        fmt(f.skewgateUs / Math.max(1, f.requests)),
        fmt(f.fakesUs / Math.max(1, f.requests)),
      ]);
    }
  }
  const table: Table = {
    caption:
      "Per phase and rate: medians over rounds; CPU per request by process over every measured window of the arm (skewgate's process runs its discovery in the bare arm's windows too); an Envoy's idle CPU is what it spent while the other Envoy's arms ran (health checks, timers), and beyond idle its CPU per request less the idle rate's share",
    headers: [
      'phase',
      'req/s',
      'arm',
      'requests',
      'p50 ms',
      'p99 ms',
      'ext_proc share',
      'Envoy CPU µs/req',
      'Envoy idle ms/s',
      'Envoy µs/req beyond idle',
      'skewgate CPU µs/req',
      'fake apiservers CPU µs/req',
    ],
    rows,
  };
  const byPhase = [...new Set(results.map((x) => x.phase))];
  return {
    id: 'i',
    title: "A real node's traffic through the phases of an upgrade",
    method: `The kubelet's requests of bench/node-traffic-mix.json's steady window (recorded from a real kubelet in test/cluster/node-upgrade.test.ts), replayed in proportion to their rates on objects that exist, open-loop at fixed rates, through bare Envoy (no ext_proc filter, no client certificate asked for) and Envoy + skewgate (envoy.xds, fast path on) twice: with the client certificate, stated by Envoy's Lua, and with the token alone (what stating the certificate adds, told from what the fast path adds); three fake apiservers behind both Envoys (in one process; skewgate in its own, skewgate serve, as in a cluster where it never shares an event loop with the apiservers); every arm sends the stack's bearer token. Phases in order, each measured from the moment of its change: ${byPhase.map((p) => `${p.name} (${p.what})`).join('; ')}. Per phase and rate ${o.rounds} rounds of the three arms (${o.windowMs / 1000} s windows after ${o.warmupMs / 1000} s of warm-up, the order turning each round); verdicts on the median of per-round paired differences, a request failing when it got no apiserver's answer, a 401/403 or a 5xx.`,
    targets,
    tables: [table],
    notes: [
      `Not replayed (long-running, no latency to measure): ${left.join(', ') || 'none'}.`,
      `The fast pool for certificates settled after the change: ${byPhase.map((p) => `${p.name} ${results.find((x) => x.phase === p)?.settledS?.toFixed(1) ?? 'never'} s`).join(', ')}.`,
      'The built-in Mixed Version Proxy needs real apiservers: the same requests and phases are measured beside it in (k); skewed requests in (h) and test/cluster/mvp-compare.test.ts.',
      `skewgate's log by phase (fast-path lines and warnings, counted): ${logs.join('; ')}.`,
      ...results
        .filter((x) => x.phase.name === 'steady')
        .map(
          (x) =>
            `Answers through skewgate, steady at ${x.rate} req/s, by request and status: ${formatCounts(x.figures.skewgate.statuses)}.`,
        ),
    ],
  };
}
