// (c) latency added through the REAL Envoy: the same fake control plane and one skewgate behind
// three Envoys — bare (no ext_proc filter, the baseline), ext_proc on every request (no xDS), and
// the fast path (filesystem xDS, skewgate's fast-path routes) — driven by an open-loop generator
// at fixed rates in short interleaved rounds, so that every arm sees the same machine at the same
// times.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { forkChild, type ChildHandle } from './child-ipc.js';
import { openLoop } from './open-loop.js';
import type { Section, Table, TargetRow } from './report.js';
import { STACK_DIR, type EnvoyArm, type FastPathState, type StackChildReady, type StackCpuSample } from './protocol.js';
import { countInto, fmt, formatCounts, nowNs, percentile, summarise, type Summary } from './stats.js';

/** Core v1: BUILTINS_OLD and BUILTINS_NEW list it identically, so it is a fast-path request. */
export const COMMON_PATH = '/api/v1/namespaces/default/configmaps';
/** admissionregistration.k8s.io/v1: only apiserver-c (BUILTINS_NEW) serves this resource. */
export const SKEWED_PATH = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const TARGET_ADDED_P99_MS = 2;
const TARGET_FAST_ADDED_P50_MS = 0.05;
const TARGET_FAST_ADDED_P99_MS = 0.2;
/** Sequential requests per path and ext_proc arm in the exact streams-per-request probe. */
const PROBE_REQUESTS = 200;

export interface EnvoyBenchOptions {
  readonly rates: readonly number[];
  /** Rounds per rate; each round runs every arm once, the order rotated round by round. */
  readonly rounds: number;
  readonly windowMs: number;
  readonly warmupMs: number;
  /** Every n-th request goes to the skewed path, the rest to the common one. */
  readonly skewedEvery: number;
  /** Extra rounds at the first rate, bare vs fast, common path only: Envoy's own cost of the fast-path routes. */
  readonly commonOnlyRounds: number;
}

export const DEFAULT_ENVOY_OPTIONS: EnvoyBenchOptions = {
  rates: [500, 2000],
  rounds: 8,
  windowMs: 3000,
  warmupMs: 2000,
  skewedEvery: 5,
  commonOnlyRounds: 3,
};
/** skewedEvery for the common-only rounds: no request is skewed. */
const NEVER = Number.MAX_SAFE_INTEGER;

const ARMS: readonly EnvoyArm[] = ['baseline', 'every', 'fast'];
const EXTPROC_ARMS: readonly EnvoyArm[] = ['every', 'fast'];
const ARM_LABEL: Record<EnvoyArm, string> = {
  baseline: 'bare Envoy (baseline)',
  every: 'ext_proc every request',
  fast: 'fast path',
};

interface PathStats {
  readonly latNs: number[];
  readonly statuses: Map<string, number>;
  readonly servers: Map<string, number>;
  readonly errors: Map<string, number>;
  sent: number;
}

interface ArmStats {
  readonly common: PathStats;
  readonly skewed: PathStats;
  /** Scheduled send → actual send: the generator's own lateness. */
  readonly lagNs: number[];
  sent: number;
  completed: number;
  wallNs: number;
  envoyCpuUs: number;
  nodeCpuUs: number;
  genCpuUs: number;
  /** ext_proc streams its Envoy started over the measured windows. */
  streams: number;
  readonly roundP50Ms: number[];
  readonly roundP99Ms: number[];
}

const newPath = (): PathStats => ({ latNs: [], statuses: new Map(), servers: new Map(), errors: new Map(), sent: 0 });
const newArm = (): ArmStats => ({
  common: newPath(),
  skewed: newPath(),
  lagNs: [],
  sent: 0,
  completed: 0,
  wallNs: 0,
  envoyCpuUs: 0,
  nodeCpuUs: 0,
  genCpuUs: 0,
  streams: 0,
  roundP50Ms: [],
  roundP99Ms: [],
});

interface Arm {
  readonly name: EnvoyArm;
  readonly pool: Pool;
}

interface RateResult {
  readonly rate: number;
  readonly stats: Record<EnvoyArm, ArmStats>;
}

/** The common-only rounds: bare and fast arms only. */
type CommonOnly = { readonly rate: number; readonly stats: Record<'baseline' | 'fast', ArmStats> } | null;

interface Probe {
  readonly arm: EnvoyArm;
  readonly path: 'common' | 'skewed';
  readonly requests: number;
  readonly streams: number;
}

function headerText(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

const isSkewed = (i: number, o: EnvoyBenchOptions): boolean => i % o.skewedEvery === o.skewedEvery - 1;

/** One window of open-loop load on one arm; latency runs from the due time to the last body byte. */
async function runWindow(
  arm: Arm,
  s: ArmStats | null,
  rate: number,
  o: EnvoyBenchOptions,
  durationMs: number,
  headers: Record<string, string>,
): Promise<void> {
  const windowLat: number[] = [];
  let lastEnd = 0;
  const fire = async (i: number, due: number): Promise<void> => {
    const skewed = isSkewed(i, o);
    const ps = s === null ? null : skewed ? s.skewed : s.common;
    if (s !== null && ps !== null) {
      s.sent++;
      ps.sent++;
      s.lagNs.push(nowNs() - due);
    }
    try {
      const res = await arm.pool.request({ method: 'GET', path: skewed ? SKEWED_PATH : COMMON_PATH, headers });
      await res.body.text();
      const end = nowNs();
      lastEnd = Math.max(lastEnd, end);
      if (s === null || ps === null) return;
      s.completed++;
      ps.latNs.push(end - due);
      if (!skewed) windowLat.push(end - due);
      countInto(ps.statuses, String(res.statusCode));
      countInto(ps.servers, headerText(res.headers['x-fake-apiserver']) ?? 'edge (no apiserver)');
    } catch (err) {
      lastEnd = Math.max(lastEnd, nowNs());
      if (ps !== null) countInto(ps.errors, (err as { code?: string }).code ?? (err as Error).message ?? String(err));
    }
  };
  const start = await openLoop(Math.round((rate * durationMs) / 1000), rate, fire);
  if (s !== null) {
    s.wallNs += Math.max(lastEnd, start) - start;
    windowLat.sort((a, b) => a - b);
    s.roundP50Ms.push(percentile(windowLat, 50) / 1e6);
    s.roundP99Ms.push(percentile(windowLat, 99) / 1e6);
  }
}

async function get(pool: Pool, path: string, headers: Record<string, string>): Promise<{ status: number; server?: string }> {
  try {
    const res = await pool.request({ method: 'GET', path, headers });
    await res.body.text();
    const server = headerText(res.headers['x-fake-apiserver']);
    return { status: res.statusCode, ...(server ? { server } : {}) };
  } catch {
    return { status: 0 };
  }
}

const fastPathRunning = (f: FastPathState): boolean => f.written && f.fileVersion !== null && f.fileVersion === f.runningVersion;

async function waitUntilReady(
  arms: readonly Arm[],
  headers: Record<string, string>,
  fastPath: () => Promise<FastPathState>,
): Promise<FastPathState> {
  const deadline = Date.now() + 30_000;
  const timeout = (what: string): Error => new Error(`${what} within 30 s`);
  for (const arm of arms) {
    // Every apiserver healthy in this Envoy (all three answer the common path), and for the
    // ext_proc arms, skewgate routing the skewed path.
    const seen = new Set<string>();
    let routedInARow = 0;
    const judged = arm.name !== 'baseline';
    while (seen.size < 3 || (judged && routedInARow < 10)) {
      if (Date.now() > deadline)
        throw timeout(`the ${ARM_LABEL[arm.name]} Envoy did not become ready (servers seen: ${[...seen].join(', ') || 'none'})`);
      const a = await get(arm.pool, COMMON_PATH, headers);
      if (a.status === 200 && a.server) seen.add(a.server);
      if (judged) {
        const b = await get(arm.pool, SKEWED_PATH, headers);
        routedInARow = b.status === 200 && b.server === 'apiserver-c' ? routedInARow + 1 : 0;
      }
      if (a.status !== 200) await sleep(100);
    }
  }
  // The fast arm measures nothing until its Envoy runs the fast-path routes skewgate wrote.
  for (;;) {
    const f = await fastPath();
    if (fastPathRunning(f)) return f;
    if (Date.now() > deadline)
      throw timeout(
        `the fast arm's Envoy did not run fast-path routes (rds.json ${f.written ? 'has' : 'lacks'} them; file ${f.fileVersion}, running ${f.runningVersion})`,
      );
    await sleep(100);
  }
}

/** Exact ext_proc streams per request: sequential requests with nothing else in flight. */
async function probeStreams(
  arms: Record<EnvoyArm, Arm>,
  headers: Record<string, string>,
  streams: () => Promise<Record<string, number>>,
): Promise<Probe[]> {
  const out: Probe[] = [];
  for (const arm of EXTPROC_ARMS) {
    for (const path of ['common', 'skewed'] as const) {
      const before = (await streams())[arm] ?? Number.NaN;
      for (let i = 0; i < PROBE_REQUESTS; i++) await get(arms[arm].pool, path === 'common' ? COMMON_PATH : SKEWED_PATH, headers);
      const after = (await streams())[arm] ?? Number.NaN;
      out.push({ arm, path, requests: PROBE_REQUESTS, streams: after - before });
    }
  }
  return out;
}

function latencyRow(arm: string, path: string, s: Summary, base: Summary | null): string[] {
  const ms = (ns: number): string => fmt(ns / 1e6);
  const added = base === null ? '—' : `${signed((s.p50 - base.p50) / 1e6)} / ${signed((s.p99 - base.p99) / 1e6)}`;
  return [arm, path, s.count.toLocaleString('en-US'), ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), added];
}

const signed = (v: number): string => `${v >= 0 ? '+' : ''}${fmt(v)}`;

export async function benchEnvoy(progress: (msg: string) => void, o: EnvoyBenchOptions = DEFAULT_ENVOY_OPTIONS): Promise<Section> {
  progress(`(c) starting the stack in a child process (${STACK_DIR}: 3 fake apiservers, skewgate, 3 Envoys)`);
  let child: ChildHandle<StackChildReady> | undefined;
  const pools: Pool[] = [];
  try {
    child = await forkChild<StackChildReady>('./stack-child.js', {
      readyTimeoutMs: 90_000,
      alsoKill: (r) => Object.values(r.pids),
    });
    const r = child.ready;
    const ca = readFileSync(r.caFile, 'utf8');
    const pool = (url: string): Pool => {
      const p = new Pool(url, {
        connect: { ca },
        connections: 64,
        pipelining: 1,
        keepAliveTimeout: 60_000,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      pools.push(p);
      return p;
    };
    const arms = Object.fromEntries(ARMS.map((a) => [a, { name: a, pool: pool(r.urls[a]) }])) as Record<EnvoyArm, Arm>;
    const headers = {
      authorization: `Bearer ${r.token}`,
      accept: 'application/json',
      'user-agent': 'skewgate-bench/0.1 (open-loop load generator)',
    };
    const stackChild = child;
    const cpu = (): Promise<StackCpuSample> => stackChild.call<StackCpuSample>('cpu');
    const streams = (): Promise<Record<string, number>> => stackChild.call<Record<string, number>>('streams');
    const fastPath = (): Promise<FastPathState> => stackChild.call<FastPathState>('fastPath');

    progress('(c) waiting until every Envoy sees every apiserver healthy, skewgate routes, and the fast arm runs fast-path routes');
    const firstFast = await waitUntilReady(
      ARMS.map((a) => arms[a]),
      headers,
      fastPath,
    );
    progress(`(c) fast arm runs routes version ${firstFast.runningVersion}`);

    /** One measured window: latency, CPU of its Envoy and of the Node processes, ext_proc streams. */
    const measure = async (name: EnvoyArm, s: ArmStats, rate: number, wo: EnvoyBenchOptions): Promise<void> => {
      await stackChild.call('clear');
      const before = await cpu();
      const streamsBefore = await streams();
      const genBefore = process.cpuUsage();
      await runWindow(arms[name], s, rate, wo, wo.windowMs, headers);
      const gen = process.cpuUsage(genBefore);
      const streamsAfter = await streams();
      const after = await cpu();
      s.envoyCpuUs += after.envoyUs[name] - before.envoyUs[name];
      s.nodeCpuUs += after.nodeUs - before.nodeUs;
      s.genCpuUs += gen.user + gen.system;
      if (name !== 'baseline') s.streams += (streamsAfter[name] ?? Number.NaN) - (streamsBefore[name] ?? Number.NaN);
    };
    const results: RateResult[] = [];
    const fastStates: FastPathState[] = [firstFast];
    let commonOnly: CommonOnly = null;
    for (const rate of o.rates) {
      progress(`(c) ${rate} req/s: warm-up ${o.warmupMs} ms per arm`);
      for (const a of ARMS) await runWindow(arms[a], null, rate, o, o.warmupMs, headers);
      const stats = Object.fromEntries(ARMS.map((a) => [a, newArm()])) as Record<EnvoyArm, ArmStats>;
      for (let round = 0; round < o.rounds; round++) {
        // Rotated, so that each arm runs first, second and third equally often.
        const order = ARMS.map((_, i) => ARMS[(i + round) % ARMS.length] as EnvoyArm);
        for (const name of order) await measure(name, stats[name], rate, o);
        const p = (a: EnvoyArm): string => fmt(stats[a].roundP99Ms.at(-1) ?? NaN);
        progress(
          `(c) ${rate} req/s round ${round + 1}/${o.rounds}: common-path p99 bare ${p('baseline')}, every ${p('every')}, fast ${p('fast')} ms`,
        );
      }
      results.push({ rate, stats });
      fastStates.push(await fastPath());
      if (commonOnly === null && o.commonOnlyRounds > 0) {
        const only = { baseline: newArm(), fast: newArm() };
        for (let round = 0; round < o.commonOnlyRounds; round++) {
          const order = round % 2 === 0 ? (['baseline', 'fast'] as const) : (['fast', 'baseline'] as const);
          for (const name of order) await measure(name, only[name], rate, { ...o, skewedEvery: NEVER });
        }
        commonOnly = { rate, stats: only };
        progress(
          `(c) ${rate} req/s common path only, ${o.commonOnlyRounds} rounds: Envoy CPU/req bare ${fmt(only.baseline.envoyCpuUs / Math.max(1, only.baseline.sent))}, fast ${fmt(only.fast.envoyCpuUs / Math.max(1, only.fast.sent))} µs`,
        );
      }
    }

    progress(`(c) probing ext_proc streams per request (${PROBE_REQUESTS} sequential requests per path and arm)`);
    const probes = await probeStreams(arms, headers, streams);
    const envoyStats = await stackChild
      .call<Record<string, number>>('envoyStats')
      .catch((err: unknown) => ({ [`unavailable: ${String(err)}`]: 0 }));
    return report(results, commonOnly, probes, fastStates, o, envoyStats);
  } finally {
    await Promise.all(pools.map((p) => p.destroy().catch(() => undefined)));
    await child?.stop(15_000);
  }
}

/** Median over rounds of (arm − bare) for one per-round figure. */
function roundMedian(arm: readonly number[], bare: readonly number[]): number {
  return percentile(
    arm.map((x, i) => x - (bare[i] ?? NaN)).sort((x, y) => x - y),
    50,
  );
}

// apiserver-c serves the skewed resource the whole time, so every 404 for it is a false one.
const false404 = (s: ArmStats): number => s.skewed.statuses.get('404') ?? 0;
/** Streams the common path caused in the windows: each skewed request meets ext_proc once in both ext_proc arms. */
const commonStreams = (s: ArmStats): number => s.streams - s.skewed.sent;

function report(
  results: readonly RateResult[],
  commonOnly: CommonOnly,
  probes: readonly Probe[],
  fastStates: readonly FastPathState[],
  o: EnvoyBenchOptions,
  envoyStats: Readonly<Record<string, number>>,
): Section {
  const sum = (ps: PathStats): Summary => summarise(ps.latNs);
  const perReq = (us: number, s: ArmStats): string => fmt(us / Math.max(1, s.sent));
  const lag = (s: ArmStats): string => {
    const l = summarise(s.lagNs);
    return `${fmt(l.p50 / 1e6)} / ${fmt(l.p99 / 1e6)}`;
  };
  const ms = (v: number): string => `${signed(v)} ms`;
  const targets: TargetRow[] = [];
  const tables: Table[] = [];
  for (const { rate, stats } of results) {
    const b = stats.baseline;
    const bc = sum(b.common);
    const bs = sum(b.skewed);
    const added = (a: EnvoyArm, path: 'common' | 'skewed', q: 'p50' | 'p99'): number =>
      (sum(stats[a][path])[q] - (path === 'common' ? bc : bs)[q]) / 1e6;
    const fastCommonStreams = commonStreams(stats.fast);
    targets.push(
      {
        metric: `${rate} req/s, fast path: p50 added over bare Envoy, common path`,
        target: `≤ ${TARGET_FAST_ADDED_P50_MS} ms`,
        measured: `${ms(added('fast', 'common', 'p50'))} (${fmt(sum(stats.fast.common).p50 / 1e6)} vs ${fmt(bc.p50 / 1e6)} ms)`,
        met: added('fast', 'common', 'p50') <= TARGET_FAST_ADDED_P50_MS,
      },
      {
        metric: `${rate} req/s, fast path: p99 added over bare Envoy, common path`,
        target: `≤ ${TARGET_FAST_ADDED_P99_MS} ms`,
        measured: `${ms(added('fast', 'common', 'p99'))} (${fmt(sum(stats.fast.common).p99 / 1e6)} vs ${fmt(bc.p99 / 1e6)} ms)`,
        met: added('fast', 'common', 'p99') <= TARGET_FAST_ADDED_P99_MS,
      },
      {
        metric: `${rate} req/s, median over rounds of the round's common-path p50 / p99 added (every request; fast path)`,
        target: '—',
        measured: EXTPROC_ARMS.map(
          (a) => `${ms(roundMedian(stats[a].roundP50Ms, b.roundP50Ms))} / ${ms(roundMedian(stats[a].roundP99Ms, b.roundP99Ms))}`,
        ).join('; '),
        met: null,
      },
      {
        metric: `${rate} req/s, fast path: ext_proc streams per unskewed request (windows: streams − skewed requests, over common requests)`,
        target: '0',
        measured: `${fmt(fastCommonStreams / Math.max(1, stats.fast.common.sent))} (${fastCommonStreams.toLocaleString('en-US')} for ${stats.fast.common.sent.toLocaleString('en-US')})`,
        met: fastCommonStreams === 0,
      },
      {
        metric: `${rate} req/s, ext_proc every request: p99 added over bare Envoy, common path`,
        target: `≤ ${TARGET_ADDED_P99_MS} ms`,
        measured: `${ms(added('every', 'common', 'p99'))} (${fmt(sum(stats.every.common).p99 / 1e6)} vs ${fmt(bc.p99 / 1e6)} ms)`,
        met: added('every', 'common', 'p99') <= TARGET_ADDED_P99_MS,
      },
      {
        metric: `${rate} req/s, p50 added, common path (every request; fast path)`,
        target: '—',
        measured: `${ms(added('every', 'common', 'p50'))}; ${ms(added('fast', 'common', 'p50'))}`,
        met: null,
      },
      {
        metric: `${rate} req/s, skewed path p50 / p99 added (every request; fast path)`,
        target: '—',
        measured: `${ms(added('every', 'skewed', 'p50'))} / ${ms(added('every', 'skewed', 'p99'))}; ${ms(added('fast', 'skewed', 'p50'))} / ${ms(added('fast', 'skewed', 'p99'))}`,
        met: null,
      },
      {
        metric: `${rate} req/s, CPU added per request over bare (its Envoy; fakes + skewgate process): every request; fast path`,
        target: '—',
        measured: EXTPROC_ARMS.map(
          (a) =>
            `${signed(stats[a].envoyCpuUs / Math.max(1, stats[a].sent) - b.envoyCpuUs / Math.max(1, b.sent))} µs; ${signed(stats[a].nodeCpuUs / Math.max(1, stats[a].sent) - b.nodeCpuUs / Math.max(1, b.sent))} µs`,
        ).join(' | '),
        met: null,
      },
      {
        metric: `${rate} req/s, false 404s on the skewed path (every request / fast path / bare)`,
        target: '0 with skewgate',
        measured: `${false404(stats.every)} / ${false404(stats.fast)} / ${false404(b).toLocaleString('en-US')} of ${b.skewed.sent.toLocaleString('en-US')} (${fmt((100 * false404(b)) / Math.max(1, b.skewed.sent))} % bare)`,
        met: false404(stats.every) === 0 && false404(stats.fast) === 0,
      },
    );
    tables.push(
      {
        caption: `${rate} req/s — latency, ms, from the scheduled send time to the end of the response body (common = \`GET ${COMMON_PATH}\`, skewed = \`GET ${SKEWED_PATH}\`); added = p50 / p99 minus bare Envoy's:`,
        headers: ['Arm', 'path', 'responses', 'p50', 'p90', 'p99', 'max', 'added p50 / p99'],
        rows: ARMS.flatMap((a) => [
          latencyRow(ARM_LABEL[a], 'common', sum(stats[a].common), a === 'baseline' ? null : bc),
          latencyRow(ARM_LABEL[a], 'skewed', sum(stats[a].skewed), a === 'baseline' ? null : bs),
        ]),
      },
      {
        caption: `${rate} req/s — load, answers, CPU per request (µs, over the measured windows; /proc for Envoy, process.cpuUsage for Node) and ext_proc streams:`,
        headers: [
          'Arm',
          'sent',
          'achieved rate',
          'generator lag p50 / p99 (ms)',
          'common: status × count',
          'skewed: status × count',
          'skewed: answered by',
          'errors',
          'CPU/req: its Envoy',
          'CPU/req: fakes + skewgate (one Node process)',
          'CPU/req: load generator',
          'ext_proc streams per request (all; common-path share)',
        ],
        rows: ARMS.map((a) => {
          const s = stats[a];
          return [
            ARM_LABEL[a],
            s.sent.toLocaleString('en-US'),
            `${fmt(s.completed / (s.wallNs / 1e9))} req/s`,
            lag(s),
            formatCounts(s.common.statuses),
            formatCounts(s.skewed.statuses),
            formatCounts(s.skewed.servers),
            formatCounts(new Map([...s.common.errors, ...s.skewed.errors])),
            perReq(s.envoyCpuUs, s),
            perReq(s.nodeCpuUs, s),
            perReq(s.genCpuUs, s),
            a === 'baseline'
              ? 'no filter'
              : `${fmt(s.streams / Math.max(1, s.sent))}; ${fmt(commonStreams(s) / Math.max(1, s.common.sent))} per common request`,
          ];
        }),
      },
      {
        caption: `${rate} req/s — common-path p50 / p99 per round, ms:`,
        headers: ['Round', ...ARMS.map((a) => ARM_LABEL[a]), 'every − bare (p50 / p99)', 'fast − bare (p50 / p99)'],
        rows: b.roundP99Ms.map((x, i) => {
          const at = (a: EnvoyArm, q: 'roundP50Ms' | 'roundP99Ms'): number => stats[a][q][i] ?? NaN;
          const both = (a: EnvoyArm): string => `${fmt(at(a, 'roundP50Ms'))} / ${fmt(at(a, 'roundP99Ms'))}`;
          const diff = (a: EnvoyArm): string =>
            `${signed(at(a, 'roundP50Ms') - at('baseline', 'roundP50Ms'))} / ${signed(at(a, 'roundP99Ms') - x)}`;
          return [String(i + 1), both('baseline'), both('every'), both('fast'), diff('every'), diff('fast')];
        }),
      },
    );
  }
  const probeOf = (arm: EnvoyArm, path: 'common' | 'skewed'): Probe | undefined => probes.find((p) => p.arm === arm && p.path === path);
  const fastProbe = probeOf('fast', 'common');
  targets.push({
    metric: `fast path: ext_proc streams per unskewed request, probe (${PROBE_REQUESTS} sequential common requests)`,
    target: '0',
    measured: fastProbe === undefined ? 'n/a' : `${fmt(fastProbe.streams / fastProbe.requests)} (${fastProbe.streams} streams)`,
    met: fastProbe !== undefined && fastProbe.streams === 0,
  });
  if (commonOnly !== null) {
    const cb = commonOnly.stats.baseline;
    const cf = commonOnly.stats.fast;
    const cpuPer = (s: ArmStats, us: number): number => us / Math.max(1, s.sent);
    targets.push({
      metric: `${commonOnly.rate} req/s, common path only: Envoy CPU per request, fast path − bare (the fast-path route match)`,
      target: '—',
      measured: `${signed(cpuPer(cf, cf.envoyCpuUs) - cpuPer(cb, cb.envoyCpuUs))} µs (${fmt(cpuPer(cf, cf.envoyCpuUs))} vs ${fmt(cpuPer(cb, cb.envoyCpuUs))} µs)`,
      met: null,
    });
    tables.push({
      caption: `${commonOnly.rate} req/s, common path only (${o.commonOnlyRounds} rounds × 2 arms × ${o.windowMs / 1000} s, no skewed request, so no ext_proc stream in either arm): what the fast-path routes cost Envoy itself:`,
      headers: ['Arm', 'responses', 'p50', 'p99', 'CPU/req: its Envoy (µs)', 'CPU/req: fakes + skewgate (µs)', 'ext_proc streams'],
      rows: (['baseline', 'fast'] as const).map((a) => {
        const s = commonOnly.stats[a];
        const l = sum(s.common);
        return [
          ARM_LABEL[a],
          l.count.toLocaleString('en-US'),
          fmt(l.p50 / 1e6),
          fmt(l.p99 / 1e6),
          fmt(cpuPer(s, s.envoyCpuUs)),
          fmt(cpuPer(s, s.nodeCpuUs)),
          a === 'baseline' ? 'no filter' : String(s.streams),
        ];
      }),
    });
  }
  const versions = [...new Set(fastStates.map((f) => f.runningVersion ?? 'none'))];
  tables.push(
    {
      caption: `ext_proc streams per request, exact (after the load: ${PROBE_REQUESTS} sequential requests per path, nothing else in flight; Envoy's \`http.skewgate.ext_proc.streams_started\`):`,
      headers: ['Arm', 'path', 'requests', 'streams', 'per request'],
      rows: probes.map((p) => [ARM_LABEL[p.arm], p.path, String(p.requests), String(p.streams), fmt(p.streams / p.requests)]),
    },
    {
      caption:
        "Envoy's own ext_proc and route-reload counters in the two ext_proc arms (non-zero, whole run including warm-up, readiness checks and the probe):",
      headers: ['counter', 'value'],
      rows: Object.entries(envoyStats)
        .sort((x, y) => (x[0] < y[0] ? -1 : 1))
        .map(([k, v]) => [k, v.toLocaleString('en-US')]),
    },
  );
  const rates = o.rates.join(' and ');
  return {
    id: 'c',
    title: 'latency added through the real Envoy',
    method:
      `\`startStack\` (in a child process) runs 3 fake apiservers (2 × BUILTINS_OLD, 1 × BUILTINS_NEW; core v1 is the same in both, so the common path is a fast-path request), one skewgate (\`envoy.xds\`, \`routing.fastPath\` at its default, true) and three real Envoys: the stack's own on filesystem xDS (the fast arm: skewgate's fast-path routes, ext_proc off on them), one from the same config without xDS (static routes, ext_proc on every request) and one without the ext_proc filter at all (bare Envoy, the baseline). ` +
      `The fast arm is measured only once rds.json holds \`fast-path-*\` routes and Envoy's config_dump runs that version. ` +
      `An open-loop generator in this process sends at fixed ${rates} req/s (each send scheduled by the clock, latency measured from the scheduled time, so stalls are not hidden) over HTTPS keep-alive without a client certificate (undici Pool, the stack's CA, bearer token); ${o.skewedEvery - 1} in ${o.skewedEvery} requests go to the common path, 1 in ${o.skewedEvery} to the skewed one. ` +
      `Per rate the three arms alternate in ${o.rounds} rounds × 3 arms × ${o.windowMs / 1000} s (order rotated every round) after ${o.warmupMs / 1000} s of warm-up each, so the generator's overhead and the machine's state are the same for all.`,
    targets,
    tables,
    notes: [
      "Everything shares the same cores: the load generator (this process), the fakes and skewgate (one Node process, so skewgate competes with the fakes for one event loop, and its CPU is not split from theirs), and three Envoys (each with worker threads; the two idle ones still run health checks). Absolute latencies are therefore mostly the machine's; the differences between arms are what matters, and they include the CPU contention that skewgate's extra work causes.",
      "The fakes answer the same requests in every arm, so the Node process CPU per request of an ext_proc arm minus the bare arm's is skewgate's share (a difference, not a split measured apart). In the mixed windows the fast arm's Envoy still runs ext_proc for the skewed fifth of the requests; the common-only rounds isolate what the fast-path routes themselves cost Envoy.",
      'The Node process CPU per request includes what skewgate and the fakes do whatever the load (discovery rounds, health checks of three Envoys), spread over the requests of the window.',
      `The generator wakes on timers (≈1 ms granularity) rather than spinning; its lateness (the lag column) is in every latency of every arm alike. Where the achieved rate is below the target rate, the machine (2 cores) saturated.`,
      'In the bare arm the skewed path is balanced over all three apiservers, so the two old ones answer 404 (the problem skewgate solves); in both ext_proc arms every skewed request meets ext_proc and is routed to apiserver-c.',
      `Fast-path routes Envoy ran: ${(fastStates[0]?.routes ?? []).map((r) => `${r.name} (path regex ${r.regexChars.toLocaleString('en-US')} characters)`).join(', ') || 'none'}; versions at the start and after each rate: ${versions.join(', ')}${versions.length > 1 ? ' (skewgate rewrote the routes during the run)' : ''}.`,
      `Envoy access logs, the xDS files and the stack's config are in ${STACK_DIR}/.`,
    ],
  };
}
