// (c) latency added through the REAL Envoy: the same fake control plane and one skewgate behind
// three Envoys — bare (no ext_proc filter, the baseline), ext_proc on every request (no xDS), and
// the fast path (filesystem xDS, skewgate's fast-path routes) — driven by an open-loop generator
// at fixed rates in short interleaved rounds, so that every arm sees the same machine at the same
// times. A contended variant repeats the windows of one rate with a CPU-bound neighbour pinned to
// one core, as on a busy control-plane node next to its apiserver.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { forkChild, type ChildHandle } from './child-ipc.js';
import {
  ARMS,
  ARM_LABEL,
  EXTPROC_ARMS,
  armFailures,
  commonStreams,
  newArm,
  type ArmStats,
  type PathStats,
  type RoundFigures,
} from './envoy-arms.js';
import { RESTARTED, restartPhase, restartReport, type RestartResult } from './envoy-restart.js';
import { startNeighbour, type Neighbour } from './neighbour.js';
import { openLoop } from './open-loop.js';
import type { Section, Table, TargetRow } from './report.js';
import { STACK_DIR, type EnvoyArm, type FastPathState, type StackChildReady, type StackCpuSample } from './protocol.js';
import { countInto, fmt, formatCounts, nowNs, percentile, summarise, type Summary } from './stats.js';
import {
  NO_FAILURES,
  addFailures,
  formatFailures,
  judgePaired,
  judgeZero,
  median,
  pairedDifferences,
  summariseRounds,
  type Failures,
} from './verdict.js';

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
  /**
   * The rate whose rounds also run every arm with a CPU-bound neighbour on one core (each round:
   * the three arms without it, then with it, or the other way round); null: no contended variant.
   */
  readonly contendedRate: number | null;
  /**
   * Rounds at the first rate with one apiserver restarting (issue 28): every arm with all three
   * up, then with apiserver-b stopped (once the fast arm runs its routes on the two others), then
   * it starts again. 0: none.
   */
  readonly restartRounds: number;
}

export const DEFAULT_ENVOY_OPTIONS: EnvoyBenchOptions = {
  rates: [500, 2000],
  rounds: 8,
  windowMs: 3000,
  warmupMs: 2000,
  skewedEvery: 5,
  commonOnlyRounds: 3,
  contendedRate: 500,
  restartRounds: 4,
};

/** For iterating on the bench itself (`run.js --quick`): the same shape, a fraction of the time; not for RESULTS.md. */
export const QUICK_ENVOY_OPTIONS: EnvoyBenchOptions = {
  rates: [500],
  rounds: 3,
  windowMs: 1500,
  warmupMs: 1000,
  skewedEvery: 5,
  commonOnlyRounds: 1,
  contendedRate: 500,
  restartRounds: 1,
};
/** skewedEvery for the common-only rounds: no request is skewed. */
const NEVER = Number.MAX_SAFE_INTEGER;

interface Arm {
  readonly name: EnvoyArm;
  readonly pool: Pool;
}

interface RateResult {
  readonly rate: number;
  readonly stats: Record<EnvoyArm, ArmStats>;
  /** The same rounds' windows with the CPU-bound neighbour running; null when this rate has none. */
  readonly contended: Record<EnvoyArm, ArmStats> | null;
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

const NO_APISERVER = 'edge (no apiserver)';

/**
 * Whether an answer is the one expected: the common path is 200 from any apiserver; the skewed
 * path is 200 from apiserver-c (the only one serving it) behind skewgate, and in the bare arm 200
 * from apiserver-c or 404 from one of the two old apiservers (the problem skewgate solves). Pure.
 */
export function expectedAnswer(arm: EnvoyArm, skewed: boolean, status: number, server: string): boolean {
  if (!skewed) return status === 200 && server !== NO_APISERVER;
  if (status === 200 && server === 'apiserver-c') return true;
  return arm === 'baseline' && status === 404 && (server === 'apiserver-a' || server === 'apiserver-b');
}

/** undici's timeout errors (headers, body, connect), as opposed to resets and refusals. */
const isTimeout = (code: string): boolean => /TIMEOUT/i.test(code);

interface WindowResult {
  readonly commonLatNs: number[];
  readonly skewedLatNs: number[];
  readonly failed: number;
  readonly sent: number;
}

/**
 * One window of open-loop load on one arm; latency runs from the due time to the last body byte.
 * What is still in flight when the window closes (the open loop's drain timeout) is counted as
 * unanswered, and an answer arriving later is not recorded (it would fall into another arm's window).
 */
async function runWindow(
  arm: Arm,
  s: ArmStats | null,
  rate: number,
  o: EnvoyBenchOptions,
  durationMs: number,
  headers: Record<string, string>,
): Promise<WindowResult> {
  const lat = { common: [] as number[], skewed: [] as number[] };
  const sentIn = { common: 0, skewed: 0 };
  const doneIn = { common: 0, skewed: 0 };
  let failed = 0;
  let closed = false;
  let lastEnd = 0;
  const fire = async (i: number, due: number): Promise<void> => {
    const skewed = isSkewed(i, o);
    const key = skewed ? 'skewed' : 'common';
    const ps = s === null ? null : s[key];
    if (s !== null && ps !== null) {
      s.sent++;
      ps.sent++;
      sentIn[key]++;
      s.lagNs.push(nowNs() - due);
    }
    try {
      const res = await arm.pool.request({ method: 'GET', path: skewed ? SKEWED_PATH : COMMON_PATH, headers });
      await res.body.text();
      const end = nowNs();
      if (closed) return;
      lastEnd = Math.max(lastEnd, end);
      if (s === null || ps === null) return;
      doneIn[key]++;
      s.completed++;
      ps.latNs.push(end - due);
      lat[key].push(end - due);
      const server = headerText(res.headers['x-fake-apiserver']) ?? NO_APISERVER;
      countInto(ps.statuses, String(res.statusCode));
      countInto(ps.servers, server);
      if (!expectedAnswer(arm.name, skewed, res.statusCode, server)) {
        failed++;
        countInto(ps.unexpected, `${res.statusCode} from ${server}`);
      }
    } catch (err) {
      if (closed) return;
      lastEnd = Math.max(lastEnd, nowNs());
      if (ps === null) return;
      doneIn[key]++;
      failed++;
      const code = (err as { code?: string }).code ?? (err as Error).message ?? String(err);
      countInto(ps.errors, code);
      if (isTimeout(code)) ps.timeouts++;
    }
  };
  const start = await openLoop(Math.round((rate * durationMs) / 1000), rate, fire);
  closed = true;
  let sent = 0;
  if (s !== null) {
    for (const key of ['common', 'skewed'] as const) {
      const unanswered = sentIn[key] - doneIn[key];
      s[key].unanswered += unanswered;
      failed += unanswered;
      sent += sentIn[key];
    }
    s.wallNs += Math.max(lastEnd, start) - start;
  }
  const byValue = (a: number, b: number): number => a - b;
  return { commonLatNs: lat.common.sort(byValue), skewedLatNs: lat.skewed.sort(byValue), failed, sent };
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
    const measure = async (
      name: EnvoyArm,
      s: ArmStats,
      rate: number,
      wo: EnvoyBenchOptions,
      neighbour: Neighbour | null = null,
    ): Promise<RoundFigures> => {
      await stackChild.call('clear');
      const before = await cpu();
      const streamsBefore = await streams();
      const genBefore = process.cpuUsage();
      const nbBefore = neighbour?.cpuUs() ?? 0;
      const t0 = nowNs();
      const w = await runWindow(arms[name], s, rate, wo, wo.windowMs, headers);
      const t1 = nowNs();
      const nbAfter = neighbour?.cpuUs() ?? 0;
      const gen = process.cpuUsage(genBefore);
      const streamsAfter = await streams();
      const after = await cpu();
      const envoyUs = after.envoyUs[name] - before.envoyUs[name];
      const nodeUs = after.nodeUs - before.nodeUs;
      s.envoyCpuUs += envoyUs;
      s.nodeCpuUs += nodeUs;
      s.genCpuUs += gen.user + gen.system;
      s.measuredNs += t1 - t0;
      s.neighbourCpuUs += nbAfter - nbBefore;
      if (name !== 'baseline') s.streams += (streamsAfter[name] ?? Number.NaN) - (streamsBefore[name] ?? Number.NaN);
      const ms = (sorted: readonly number[], q: number): number => percentile(sorted, q) / 1e6;
      const figures: RoundFigures = {
        commonP50Ms: ms(w.commonLatNs, 50),
        commonP99Ms: ms(w.commonLatNs, 99),
        skewedP50Ms: ms(w.skewedLatNs, 50),
        skewedP99Ms: ms(w.skewedLatNs, 99),
        envoyCpuPerReqUs: envoyUs / Math.max(1, w.sent),
        nodeCpuPerReqUs: nodeUs / Math.max(1, w.sent),
        failed: w.failed,
      };
      s.rounds.push(figures);
      return figures;
    };
    const results: RateResult[] = [];
    const fastStates: FastPathState[] = [firstFast];
    let commonOnly: CommonOnly = null;
    let neighbour: Neighbour | null = null;
    try {
      for (const rate of o.rates) {
        progress(`(c) ${rate} req/s: warm-up ${o.warmupMs} ms per arm`);
        for (const a of ARMS) await runWindow(arms[a], null, rate, o, o.warmupMs, headers);
        const stats = Object.fromEntries(ARMS.map((a) => [a, newArm()])) as Record<EnvoyArm, ArmStats>;
        const contended =
          rate === o.contendedRate ? (Object.fromEntries(ARMS.map((a) => [a, newArm()])) as Record<EnvoyArm, ArmStats>) : null;
        if (contended !== null && neighbour === null) {
          neighbour = startNeighbour();
          progress(
            `(c) CPU-bound neighbour: pid ${neighbour.pid}, ${neighbour.core === null ? 'not pinned (no taskset)' : `pinned to core ${neighbour.core}`}, stopped until its windows`,
          );
        }
        for (let round = 0; round < o.rounds; round++) {
          // Rotated, so that each arm runs first, second and third equally often; with and without
          // the neighbour alternately first.
          const order = ARMS.map((_, i) => ARMS[(i + round) % ARMS.length] as EnvoyArm);
          const conditions = contended === null ? [false] : round % 2 === 0 ? [false, true] : [true, false];
          for (const withNeighbour of conditions) {
            const nb = withNeighbour ? neighbour : null;
            const into = withNeighbour && contended !== null ? contended : stats;
            if (nb !== null) {
              nb.run();
              await sleep(200);
            }
            const figures: Partial<Record<EnvoyArm, RoundFigures>> = {};
            for (const name of order) figures[name] = await measure(name, into[name], rate, o, nb);
            nb?.pause();
            const p = (a: EnvoyArm): string =>
              `${fmt(figures[a]?.commonP99Ms ?? NaN)}${figures[a]?.failed ? ` (${figures[a]?.failed} failed)` : ''}`;
            progress(
              `(c) ${rate} req/s round ${round + 1}/${o.rounds}${withNeighbour ? ', contended' : ''}: common-path p99 bare ${p('baseline')}, every ${p('every')}, fast ${p('fast')} ms`,
            );
          }
        }
        results.push({ rate, stats, contended });
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
    } finally {
      await neighbour?.stop();
    }
    const neighbourCore = neighbour?.core ?? null;

    const restarts: RestartResult[] = [];
    for (const rate of o.restartRounds > 0 ? o.rates : [])
      restarts.push(
        await restartPhase({
          rounds: o.restartRounds,
          rate,
          measure: (name, into) => measure(name, into, rate, o),
          fastPath,
          stop: () => stackChild.call('stopServer', RESTARTED),
          start: () => stackChild.call('startServer', RESTARTED),
          progress,
        }),
      );

    progress(`(c) probing ext_proc streams per request (${PROBE_REQUESTS} sequential requests per path and arm)`);
    const probes = await probeStreams(arms, headers, streams);
    const envoyStats = await stackChild
      .call<Record<string, number>>('envoyStats')
      .catch((err: unknown) => ({ [`unavailable: ${String(err)}`]: 0 }));
    return report(results, commonOnly, probes, fastStates, o, envoyStats, neighbourCore, restarts);
  } finally {
    await Promise.all(pools.map((p) => p.destroy().catch(() => undefined)));
    await child?.stop(15_000);
  }
}

// apiserver-c serves the skewed resource the whole time, so behind skewgate every 404 for it is a false one.
const false404 = (s: ArmStats): number => s.skewed.statuses.get('404') ?? 0;
/** An ext_proc arm's failed requests other than its false 404s (which are unexpected answers too). */
function otherFailures(s: ArmStats): Failures {
  const f = armFailures(s);
  return { ...f, unexpected: f.unexpected - false404(s) };
}
const col = (s: ArmStats, k: Exclude<keyof RoundFigures, never>): number[] => s.rounds.map((r) => r[k]);
/** A count map of both paths, keys prefixed with the path. */
function byPath(s: ArmStats, k: 'unexpected' | 'errors'): Map<string, number> {
  const out = new Map<string, number>();
  for (const path of ['common', 'skewed'] as const) for (const [key, n] of s[path][k]) out.set(`${path} ${key}`, n);
  return out;
}

/** "+0.4 ms (worst round 3: +12 ms)": the median over rounds of a paired difference, for rows without a verdict. */
function pairedInfo(arm: readonly number[], base: readonly number[], unit = 'ms'): string {
  const s = summariseRounds(pairedDifferences(arm, base));
  const u = (v: number): string => (Number.isFinite(v) ? `${signed(v)} ${unit}` : 'n/a');
  return `${u(s.median)} (worst round ${s.worstRound > 0 ? `${s.worstRound}: ${u(s.worst)}` : 'n/a'})`;
}

/** Per round, each arm's common-path p50 / p99, its failed requests, and the paired differences to bare. */
function roundTable(caption: string, stats: Record<EnvoyArm, ArmStats>): Table {
  const b = stats.baseline;
  return {
    caption,
    headers: ['Round', ...ARMS.map((a) => ARM_LABEL[a]), 'every − bare (p50 / p99)', 'fast − bare (p50 / p99)'],
    rows: b.rounds.map((br, i) => {
      const r = (a: EnvoyArm): RoundFigures | undefined => stats[a].rounds[i];
      const both = (a: EnvoyArm): string => {
        const x = r(a);
        return x === undefined ? 'n/a' : `${fmt(x.commonP50Ms)} / ${fmt(x.commonP99Ms)}${x.failed > 0 ? ` (${x.failed} failed)` : ''}`;
      };
      const diff = (a: EnvoyArm): string =>
        `${signed((r(a)?.commonP50Ms ?? NaN) - br.commonP50Ms)} / ${signed((r(a)?.commonP99Ms ?? NaN) - br.commonP99Ms)}`;
      return [String(i + 1), both('baseline'), both('every'), both('fast'), diff('every'), diff('fast')];
    }),
  };
}

function report(
  results: readonly RateResult[],
  commonOnly: CommonOnly,
  probes: readonly Probe[],
  fastStates: readonly FastPathState[],
  o: EnvoyBenchOptions,
  envoyStats: Readonly<Record<string, number>>,
  neighbourCore: number | null,
  restarts: readonly RestartResult[],
): Section {
  const sum = (ps: PathStats): Summary => summarise(ps.latNs);
  const perReq = (us: number, s: ArmStats): string => fmt(us / Math.max(1, s.sent));
  const lag = (s: ArmStats): string => {
    const l = summarise(s.lagNs);
    return `${fmt(l.p50 / 1e6)} / ${fmt(l.p99 / 1e6)}`;
  };
  const targets: TargetRow[] = [];
  const tables: Table[] = [];
  const latencyTable = (caption: string, stats: Record<EnvoyArm, ArmStats>): Table => {
    const bc = sum(stats.baseline.common);
    const bs = sum(stats.baseline.skewed);
    return {
      caption,
      headers: ['Arm', 'path', 'responses', 'p50', 'p90', 'p99', 'max', 'added p50 / p99 (pooled, not judged)'],
      rows: ARMS.flatMap((a) => [
        latencyRow(ARM_LABEL[a], 'common', sum(stats[a].common), a === 'baseline' ? null : bc),
        latencyRow(ARM_LABEL[a], 'skewed', sum(stats[a].skewed), a === 'baseline' ? null : bs),
      ]),
    };
  };
  const loadTable = (caption: string, stats: Record<EnvoyArm, ArmStats>, withNeighbour: boolean): Table => ({
    caption,
    headers: [
      'Arm',
      'sent',
      'achieved rate',
      'generator lag p50 / p99 (ms)',
      'common: status × count',
      'skewed: status × count',
      'skewed: answered by',
      'failed requests',
      'unexpected answers',
      'errors',
      'CPU/req: its Envoy',
      'CPU/req: fakes + skewgate (one Node process)',
      'CPU/req: load generator',
      ...(withNeighbour ? ['neighbour CPU (share of one core)'] : []),
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
        formatFailures(armFailures(s)),
        formatCounts(byPath(s, 'unexpected')),
        formatCounts(byPath(s, 'errors')),
        perReq(s.envoyCpuUs, s),
        perReq(s.nodeCpuUs, s),
        perReq(s.genCpuUs, s),
        ...(withNeighbour ? [`${fmt((100 * s.neighbourCpuUs) / (s.measuredNs / 1e3))} %`] : []),
        a === 'baseline'
          ? 'no filter'
          : `${fmt(s.streams / Math.max(1, s.sent))}; ${fmt(commonStreams(s) / Math.max(1, s.common.sent))} per common request`,
      ];
    }),
  });
  for (const { rate, stats, contended } of results) {
    const b = stats.baseline;
    const bc = sum(b.common);
    const paired = (a: EnvoyArm, q: 'p50' | 'p99', limit: number, metric: string): TargetRow =>
      judgePaired({
        metric,
        limit,
        unit: 'ms',
        arm: col(stats[a], q === 'p50' ? 'commonP50Ms' : 'commonP99Ms'),
        baseline: col(b, q === 'p50' ? 'commonP50Ms' : 'commonP99Ms'),
        pooled: { arm: sum(stats[a].common)[q] / 1e6, baseline: bc[q] / 1e6 },
        failures: armFailures(stats[a]),
        baselineFailures: armFailures(b),
      });
    const fastCommonStreams = commonStreams(stats.fast);
    const f404 = EXTPROC_ARMS.map((a) => false404(stats[a]));
    const other = EXTPROC_ARMS.map((a) => otherFailures(stats[a]));
    targets.push(
      paired('fast', 'p50', TARGET_FAST_ADDED_P50_MS, `${rate} req/s, fast path: p50 added over bare Envoy, common path`),
      paired('fast', 'p99', TARGET_FAST_ADDED_P99_MS, `${rate} req/s, fast path: p99 added over bare Envoy, common path`),
      judgeZero(
        `${rate} req/s, fast path: ext_proc streams per unskewed request (windows: streams − skewed requests, over common requests)`,
        fastCommonStreams,
        `streams for ${stats.fast.common.sent.toLocaleString('en-US')} common requests (${fmt(fastCommonStreams / Math.max(1, stats.fast.common.sent))} per request)`,
        armFailures(stats.fast),
      ),
      paired('every', 'p99', TARGET_ADDED_P99_MS, `${rate} req/s, ext_proc every request: p99 added over bare Envoy, common path`),
      {
        metric: `${rate} req/s, p50 added, common path, median of paired rounds (every request; fast path)`,
        target: '—',
        measured: EXTPROC_ARMS.map((a) => pairedInfo(col(stats[a], 'commonP50Ms'), col(b, 'commonP50Ms'))).join('; '),
        met: null,
      },
      {
        metric: `${rate} req/s, skewed path p50 / p99 added, median of paired rounds (every request; fast path)`,
        target: '—',
        measured: EXTPROC_ARMS.map(
          (a) =>
            `${pairedInfo(col(stats[a], 'skewedP50Ms'), col(b, 'skewedP50Ms'))} / ${pairedInfo(col(stats[a], 'skewedP99Ms'), col(b, 'skewedP99Ms'))}`,
        ).join('; '),
        met: null,
      },
      {
        metric: `${rate} req/s, CPU added per request over bare, median of paired rounds (its Envoy; fakes + skewgate process): every request; fast path`,
        target: '—',
        measured: EXTPROC_ARMS.map(
          (a) =>
            `${pairedInfo(col(stats[a], 'envoyCpuPerReqUs'), col(b, 'envoyCpuPerReqUs'), 'µs')}; ${pairedInfo(col(stats[a], 'nodeCpuPerReqUs'), col(b, 'nodeCpuPerReqUs'), 'µs')}`,
        ).join(' | '),
        met: null,
      },
      judgeZero(
        `${rate} req/s, false 404s on the skewed path (every request / fast path; bare for comparison)`,
        f404.reduce((x, y) => x + y, 0),
        `false 404s (${EXTPROC_ARMS.map((a, i) => `${ARM_LABEL[a]}: ${f404[i]} of ${stats[a].skewed.sent.toLocaleString('en-US')}, ${formatFailures(other[i] ?? NO_FAILURES)}`).join('; ')}; bare: ${false404(b).toLocaleString('en-US')} of ${b.skewed.sent.toLocaleString('en-US')}, ${fmt((100 * false404(b)) / Math.max(1, b.skewed.sent))} %); both skewgate arms together`,
        other.reduce(addFailures, NO_FAILURES),
      ),
    );
    tables.push(
      latencyTable(
        `${rate} req/s — latency, ms, from the scheduled send time to the end of the response body (common = \`GET ${COMMON_PATH}\`, skewed = \`GET ${SKEWED_PATH}\`), all rounds pooled; added = p50 / p99 minus bare Envoy's (information only: the verdicts are on the paired rounds below):`,
        stats,
      ),
      loadTable(
        `${rate} req/s — load, answers, failed requests, CPU per request (µs, over the measured windows; /proc for Envoy, process.cpuUsage for Node) and ext_proc streams:`,
        stats,
        false,
      ),
      roundTable(
        `${rate} req/s — common-path p50 / p99 per round, ms (the verdicts are the medians of the two difference columns):`,
        stats,
      ),
    );
    if (contended !== null) {
      const degradation = (a: EnvoyArm, k: 'commonP50Ms' | 'commonP99Ms'): string => pairedInfo(col(contended[a], k), col(stats[a], k));
      for (const a of EXTPROC_ARMS)
        targets.push(
          judgeZero(
            `${rate} req/s, CPU-bound neighbour on one core, ${ARM_LABEL[a]}: false 404s and failed requests`,
            false404(contended[a]),
            `false 404s of ${contended[a].skewed.sent.toLocaleString('en-US')} skewed`,
            otherFailures(contended[a]),
          ),
        );
      targets.push(
        {
          metric: `${rate} req/s, CPU-bound neighbour on one core: common-path p50 / p99, median of rounds, and the change from the same round without it (median; worst round), per arm`,
          target: '— (reported)',
          measured: ARMS.map(
            (a) =>
              `${ARM_LABEL[a]}: ${fmt(median(col(contended[a], 'commonP50Ms')))} / ${fmt(median(col(contended[a], 'commonP99Ms')))} ms, ${degradation(a, 'commonP50Ms')} / ${degradation(a, 'commonP99Ms')}`,
          ).join('; '),
          met: null,
        },
        {
          metric: `${rate} req/s, CPU-bound neighbour on one core: common-path p50 / p99 added over bare, median of paired rounds (every request; fast path)`,
          target: '— (reported)',
          measured: EXTPROC_ARMS.map(
            (a) =>
              `${pairedInfo(col(contended[a], 'commonP50Ms'), col(contended.baseline, 'commonP50Ms'))} / ${pairedInfo(col(contended[a], 'commonP99Ms'), col(contended.baseline, 'commonP99Ms'))}`,
          ).join('; '),
          met: null,
        },
      );
      const nb =
        ARMS.reduce((acc, a) => acc + contended[a].neighbourCpuUs, 0) / (ARMS.reduce((acc, a) => acc + contended[a].measuredNs, 0) / 1e3);
      tables.push(
        {
          caption: `${rate} req/s with a CPU-bound neighbour (a \`node -e\` busy loop ${neighbourCore === null ? 'not pinned: taskset was not available' : `pinned to core ${neighbourCore} with taskset`}; it used ${fmt(100 * nb)} % of one core over the contended windows) — how each arm degrades: common-path p50 / p99 in ms, median over rounds, and the change from the same arm's window without the neighbour in the same round (median of the paired differences; worst round):`,
          headers: [
            'Arm',
            'without: p50 / p99',
            'with: p50 / p99',
            'change p50 (worst)',
            'change p99 (worst)',
            'with: pooled p50 / p99',
            'with: failed requests',
          ],
          rows: ARMS.map((a) => {
            const c = contended[a];
            const u = stats[a];
            const pc = sum(c.common);
            return [
              ARM_LABEL[a],
              `${fmt(median(col(u, 'commonP50Ms')))} / ${fmt(median(col(u, 'commonP99Ms')))}`,
              `${fmt(median(col(c, 'commonP50Ms')))} / ${fmt(median(col(c, 'commonP99Ms')))}`,
              degradation(a, 'commonP50Ms'),
              degradation(a, 'commonP99Ms'),
              `${fmt(pc.p50 / 1e6)} / ${fmt(pc.p99 / 1e6)}`,
              formatFailures(armFailures(c)),
            ];
          }),
        },
        latencyTable(
          `${rate} req/s with the CPU-bound neighbour — latency, ms, all contended rounds pooled (information only):`,
          contended,
        ),
        loadTable(`${rate} req/s with the CPU-bound neighbour — load, answers, failed requests, CPU per request:`, contended, true),
        roundTable(`${rate} req/s with the CPU-bound neighbour — common-path p50 / p99 per round, ms:`, contended),
      );
    }
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
  for (const restart of restarts) {
    const r = restartReport(restart);
    targets.push(...r.targets);
    tables.push(...r.tables);
  }
  const rates = o.rates.join(' and ');
  return {
    id: 'c',
    title: 'latency added through the real Envoy',
    method:
      `\`startStack\` (in a child process) runs 3 fake apiservers (2 × BUILTINS_OLD, 1 × BUILTINS_NEW; core v1 is the same in both, so the common path is a fast-path request), one skewgate (\`envoy.xds\`, \`routing.fastPath\` at its default, true) and three real Envoys: the stack's own on filesystem xDS (the fast arm: skewgate's fast-path routes, ext_proc off on them), one from the same config without xDS (static routes, ext_proc on every request) and one without the ext_proc filter at all (bare Envoy, the baseline). ` +
      `The fast arm is measured only once rds.json holds \`fast-path-*\` routes and Envoy's config_dump runs that version. ` +
      `An open-loop generator in this process sends at fixed ${rates} req/s (each send scheduled by the clock, latency measured from the scheduled time, so stalls are not hidden) over HTTPS keep-alive without a client certificate (undici Pool, the stack's CA, bearer token); ${o.skewedEvery - 1} in ${o.skewedEvery} requests go to the common path, 1 in ${o.skewedEvery} to the skewed one. ` +
      (o.restartRounds > 0
        ? `**One apiserver restarting** (issue 28): at ${rates} req/s, ${o.restartRounds} rounds of every arm with all three apiservers up, then with apiserver-b stopped (its process gone, as in a restart) once the fast arm's Envoy runs its routes on the pool of the other two; apiserver-b then starts again and is back in the pool before the next round. Judged: the share of common-path requests that meet ext_proc on the fast arm while it is away (Envoy's streams minus the skewed requests, each of which meets ext_proc once). `
        : '') +
      `Per rate the three arms alternate in ${o.rounds} rounds × 3 arms × ${o.windowMs / 1000} s (order rotated every round) after ${o.warmupMs / 1000} s of warm-up each, so the generator's overhead and the machine's state are the same for all. ` +
      `**Verdicts**: every latency target is judged on the median over rounds of the paired difference (the arm's round p50 or p99 minus bare Envoy's in the same round), never on a pooled percentile (a few stalled rounds dominate a pooled p99 of every arm alike); the worst round's difference and the number of rounds the arm was worse stand beside it, the pooled difference only as information. A verdict is met only when neither the arm nor its baseline failed a single request in the windows: transport errors, timeouts (10 s for headers or body), answers other than the expected one (common path: 200 from an apiserver; skewed path behind skewgate: 200 from apiserver-c, the only one serving it), and requests still unanswered when the window closed (15 s after its last send); the counts are in each verdict's text.` +
      (o.contendedRate === null
        ? ''
        : ` **Contended variant**: at ${o.contendedRate} req/s every round also runs the three arms with a CPU-bound neighbour (a \`node -e\` busy loop pinned to one core with taskset, as on a busy control-plane node next to its apiserver), running only during those windows (SIGCONT / SIGSTOP), with and without it alternately first; its latencies are reported, not judged against the targets (which are for the node without the neighbour), but a failed request or a false 404 under contention misses its row.`),
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
