// (f) The request path while a discovery change is absorbed. Three apiservers (static HTTPS fakes
// in this process, stall-documents.ts); skewgate's discovery service, skew tracking and ext_proc
// server run in a child process (stall-child.ts); this process probes the ext_proc server at a
// fixed rate and measures each answer from its due time, while one apiserver's /apis changes:
// typical → the largest document the cap accepts → the largest again → typical, in a fresh child
// and in one that has run until its RSS levelled off (the steady gateway). The arms (stall-arms.ts) alternate round by round.
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPki } from '../harness/fake/index.js';
import { DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_RESOURCES } from '../src/constants.js';
import { DEFAULT_SLICE_BUDGET_MS } from '../src/util/slice-runner.js';
import { RECLAIM_DELAY_MS } from '../src/memory/reclaimer.js';
import { createExtProcClient, requestHeadersMessage, type ExtProcTestClient } from '../test/helpers/extproc-client.js';
import { forkChild, type ChildHandle } from './child-ipc.js';
import type { StallChildStart, StallChildStatus } from './protocol.js';
import type { Section } from './report.js';
import { countInto, fmt, formatCounts, nowNs } from './stats.js';
import { crdDocument, largestDocument, pastBoundsDocument, StaticApiServer, type Doc } from './stall-documents.js';
import { judgeStall, stallArms, type StallArm, type Window } from './stall-verdict.js';

const PROBE_RATE = 500;
/** Envoy's ext_proc message timeout in the shipped config: an answer later than this fails open. */
export const MESSAGE_TIMEOUT_MS = 500;
const ROUNDS = Number(process.env.STALL_ROUNDS ?? 2);
/**
 * The long-running child runs under the probe with a typical change every 5 s until its RSS levels
 * off — a steady gateway — in blocks of WARM_BLOCK_MS: the median of a block within 2 % of the
 * block before, after WARM_MIN_MS at least; at most WARM_MAX_MS. (Measured here: a process under
 * the probe grows from ~130 MiB at 10 s to 160–175 MiB in 60–80 s, where it stays.)
 */
const WARM_BLOCK_MS = 10_000;
const WARM_MIN_MS = 30_000;
const WARM_MAX_MS = 150_000;
/** How long the RSS is followed after the last change (back to typical), under the probe. */
export const SETTLE_MS = 30_000;
/** The last change's window lasts at least this long: both collections of src/memory/ fall within it. */
const RECLAIMED_AFTER_MS = 2 * RECLAIM_DELAY_MS + 5000;
/** The document past the bounds: lean resources filling 31.5 MB, as in the probe behind issue 31. */
const PAST_BYTES = 31.5e6;

const PROBE_REQUEST = { method: 'GET', path: '/api/v1/namespaces/default/pods', headers: { authorization: 'Bearer probe' } };

interface ProbeResult {
  readonly replyMs: number | null;
  readonly status: string;
  readonly notFound: boolean;
}

/**
 * One exchange as Envoy has it: request_headers, the reply — the time that counts, Envoy acts on
 * it — then a half-close, as Envoy does with the bootstrap skewgate renders. Every apiserver
 * serves pods throughout: a 404 is a false one.
 */
function probeOnce(client: ExtProcTestClient, dueNs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const call = client.open();
    let replyMs: number | null = null;
    let notFound = false;
    call.on('data', (msg: { immediate_response?: { status?: { code?: unknown } } }) => {
      if (replyMs !== null) return;
      replyMs = (nowNs() - dueNs) / 1e6;
      const code = msg.immediate_response?.status?.code;
      notFound = code === 404 || code === 'NotFound';
      call.end();
    });
    call.on('error', () => undefined); // the status event carries the outcome
    call.on('status', (st: { code: number; details: string }) => resolve({ replyMs, status: `gRPC ${st.code}: ${st.details}`, notFound }));
    call.write(requestHeadersMessage(PROBE_REQUEST));
  });
}

interface ProbeTally {
  latencies: number[];
  failures: Map<string, number>;
  notFound: number;
}

/** Probes at PROBE_RATE until stopped; `take()` hands over what was measured since the last take. */
function probe(port: number): { take(): ProbeTally; stop(): Promise<void> } {
  const client = createExtProcClient(`127.0.0.1:${port}`);
  let tally: ProbeTally = { latencies: [], failures: new Map(), notFound: 0 };
  let running = true;
  const loop = (async () => {
    const intervalNs = 1e9 / PROBE_RATE;
    const start = nowNs();
    const inflight = new Set<Promise<void>>();
    for (let i = 0; running; i++) {
      const due = start + i * intervalNs;
      const wait = Math.floor((due - nowNs()) / 1e6);
      if (wait > 0) await sleep(wait);
      const into = tally;
      const p: Promise<void> = probeOnce(client, due)
        .then((r) => {
          if (r.replyMs === null) countInto(into.failures, r.status);
          else into.latencies.push(r.replyMs);
          if (r.notFound) into.notFound++;
        })
        .catch((err: unknown) => countInto(into.failures, String(err)))
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await Promise.all(inflight);
    client.close();
  })();
  return {
    take() {
      const t = tally;
      tally = { latencies: [], failures: new Map(), notFound: 0 };
      return t;
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** The child's resident set now, and its peak since the last reset (VmHWM; reset by clear_refs 5). */
function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}
const resetPeak = (pid: number): void => writeFileSync(`/proc/${pid}/clear_refs`, '5');

/** Samples of the RSS, one a second, and their median: the RSS follows V8's collections in a sawtooth. */
const RSS_SAMPLES = 5;
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
async function medianRss(pid: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < RSS_SAMPLES; i++) {
    if (i > 0) await sleep(1000);
    xs.push(rssOf(pid).rss);
  }
  return median(xs);
}

/** Typical changes (`change(i)` every 5 s) until the RSS levels off (WARM_*); each block's median RSS. */
async function warmUntilLevel(pid: number, change: (i: number) => void): Promise<{ levels: number[] }> {
  const levels: number[] = [];
  const t0 = performance.now();
  for (let i = 0; ;) {
    const xs: number[] = [];
    for (const end = performance.now() + WARM_BLOCK_MS; performance.now() < end;) {
      if (xs.length % 5 === 0) change(i++);
      await sleep(1000);
      xs.push(rssOf(pid).rss);
    }
    levels.push(median(xs));
    const [prev, last] = levels.slice(-2);
    const elapsed = performance.now() - t0;
    if (elapsed >= WARM_MAX_MS) return { levels };
    if (elapsed >= WARM_MIN_MS && prev !== undefined && last !== undefined && Math.abs(last - prev) <= 0.02 * prev) return { levels };
  }
}

/**
 * Follows the RSS, a sample a second, until the median of the last RSS_SAMPLES is within 10 % of
 * `steady`, or SETTLE_MS have passed; that median then, and when it was within (NaN: not).
 */
async function followSettle(pid: number, steady: number, from: number, minMs = 0): Promise<{ rss: number; afterMs: number }> {
  const xs: number[] = [];
  for (const until = performance.now() + SETTLE_MS; ;) {
    xs.push(rssOf(pid).rss);
    const m = median(xs.slice(-RSS_SAMPLES));
    const now = performance.now();
    if (xs.length >= RSS_SAMPLES && m <= steady * 1.1 && now - from >= minMs) return { rss: m, afterMs: now - from };
    if (performance.now() >= until) return { rss: m, afterMs: Number.NaN };
    await sleep(1000);
  }
}

interface Step {
  readonly label: string;
  readonly doc: Doc;
}

type Child = ChildHandle<Record<string, never>>;

/**
 * Whether the child shows server 0 with `doc`, or (a refused document) a failed round. After a
 * failing round only the view counts: the failure a 304 re-states is the old document's.
 */
async function absorbed(child: Child, doc: Doc, failingBefore: boolean): Promise<'view' | 'refused' | null> {
  const s = await child.call<StallChildStatus>('status');
  const failing = (s.failures[0]?.consecutive ?? 0) > 0;
  if (s.perServer[0] === doc.resources && !failing) return 'view';
  if (!failingBefore && failing) return 'refused';
  return null;
}

async function measureStep(
  ctx: { arm: StallArm; kind: string; round: number; child: Child; pid: number; probe: ReturnType<typeof probe> },
  server: StaticApiServer,
  step: Step,
  steadyRss: number,
  last: boolean,
): Promise<Omit<Window, 'startRss'>> {
  const { child, pid } = ctx;
  const failingBefore = ((await child.call<StallChildStatus>('status')).failures[0]?.consecutive ?? 0) > 0;
  await sleep(1000);
  await child.call('resetLoopDelay');
  resetPeak(pid);
  ctx.probe.take();
  const t0 = performance.now();
  server.apis = step.doc;
  let outcome: 'view' | 'refused' | null = null;
  for (const deadline = t0 + 90_000; outcome === null && performance.now() < deadline;) {
    await sleep(50);
    outcome = await absorbed(child, step.doc, failingBefore);
  }
  const absorbMs = performance.now() - t0;
  if (outcome === null) throw new Error(`${ctx.arm.name}/${step.label}: the change was not absorbed within 90 s`);
  await sleep(1000);
  const peak = rssOf(pid).peak;
  // Settled: what the process holds 3 s later, once the change's garbage has had time to go; after
  // the last change, the median of RSS_SAMPLES followed up to SETTLE_MS — and the window runs
  // until then, so that the collections which give a dropped view's memory back (src/memory/,
  // RECLAIM_DELAY_MS and twice that after the change) are judged as the change itself is.
  let settle: number;
  let settledAfterMs: number;
  if (last) ({ rss: settle, afterMs: settledAfterMs } = await followSettle(pid, steadyRss, t0, RECLAIMED_AFTER_MS));
  else {
    await sleep(3000);
    settle = rssOf(pid).rss;
    settledAfterMs = performance.now() - t0;
  }
  const s = await child.call<StallChildStatus>('status');
  const tally = ctx.probe.take();
  // Then with the probe stopped: what the process gives back once nothing asks (V8's memory
  // reducer collects only when the allocation rate is low).
  let idleSettleRss = Number.NaN;
  let idleSettledAfterMs = Number.NaN;
  if (last) {
    await ctx.probe.stop();
    const idleFrom = performance.now();
    ({ rss: idleSettleRss, afterMs: idleSettledAfterMs } = await followSettle(pid, steadyRss, idleFrom));
  }
  const heap = await child.call<StallChildStatus>('status');
  // With STALL_CHILD_ARGS=--expose-gc: what is still live once collected (a diagnostic, not a verdict).
  const live = await child.call<number | null>('liveHeap');
  const lat = tally.latencies;
  return {
    arm: ctx.arm.name,
    kind: ctx.kind,
    round: ctx.round,
    step: step.label,
    outcome,
    probes: lat.length,
    maxMs: lat.reduce((a, v) => Math.max(a, v), 0),
    overTimeout: lat.filter((v) => v > MESSAGE_TIMEOUT_MS).length,
    failed: [...tally.failures.values()].reduce((a, n) => a + n, 0),
    failures: formatCounts(tally.failures),
    falseNotFound: tally.notFound,
    loopDelayMaxMs: s.loopDelayMaxMs,
    gcMaxMs: s.gcMaxMs,
    gcMaxKind: s.gcMaxKind,
    absorbMs,
    steadyRss,
    peakRss: peak,
    settleRss: settle,
    settledAfterMs,
    idleSettleRss,
    idleSettledAfterMs,
    settleHeapUsed: heap.heapUsedBytes,
    settleHeapTotal: heap.heapTotalBytes,
    settleExternal: heap.externalBytes,
    ...(live === null ? {} : { liveHeap: live }),
  };
}

export async function benchStall(progress: (msg: string) => void): Promise<Section> {
  const pki = await createPki(join(tmpdir(), 'skewgate-bench-pki-stall'));
  const maxBytes = DEFAULT_MAX_DOCUMENT_BYTES;
  const maxEntries = DEFAULT_MAX_RESOURCES;
  progress(`(f) encoding the documents (the largest: just under ${fmt(maxBytes / 2 ** 20)} MiB and ${fmt(maxEntries)} entries)`);
  const typical = [crdDocument(60, 12, 0), crdDocument(60, 12, 1)] as const;
  const largest = [largestDocument(maxBytes, maxEntries, 50, 0), largestDocument(maxBytes, maxEntries, 50, 1)] as const;
  const past = pastBoundsDocument(PAST_BYTES, 50);
  const steps: Step[] = [
    { label: 'typical', doc: typical[1] },
    { label: 'largest', doc: largest[0] },
    { label: 'largest again', doc: largest[1] },
    { label: 'past the bounds', doc: past },
    { label: 'typical again', doc: typical[0] },
  ];
  const servers = ['apiserver-a', 'apiserver-b', 'apiserver-c'].map((n) => new StaticApiServer(n, pki, typical[0]));
  await Promise.all(servers.map((s) => s.start()));
  const windows: Window[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      // Arms in turn within a round, the order rotated every round: the machine's state is shared.
      const arms = round % 2 === 1 ? stallArms() : [...stallArms()].reverse();
      for (const kind of ['fresh', 'long-running'] as const)
        for (const arm of arms) {
          for (const s of servers) s.apis = typical[0];
          // STALL_CHILD_ARGS (e.g. "--cpu-prof --trace-gc") and STALL_CHILD_LOG (a file for its debug log) help find what stalls.
          const child = await forkChild<Record<string, never>>(arm.childModule, {
            readyTimeoutMs: 10_000,
            execArgv: [...arm.execArgv, ...(process.env.STALL_CHILD_ARGS ?? '').split(' ').filter(Boolean)],
          });
          try {
            const start: StallChildStart = {
              apiservers: servers.map((s) => ({ name: s.name, url: s.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } })),
              sliceBudgetMs: DEFAULT_SLICE_BUDGET_MS,
              ...arm.start,
            };
            const { port } = await child.call<{ port: number }>('start', start);
            const p = probe(port);
            try {
              const ctx = { arm, kind, round, child, pid: child.pid, probe: p };
              await sleep(2000);
              const startRss = await medianRss(ctx.pid);
              let steady = startRss;
              if (kind === 'long-running') {
                progress(`(f) round ${round}, ${arm.name}: typical changes under the probe until the RSS levels off`);
                const warm = await warmUntilLevel(ctx.pid, (i) => (servers[1 + (i % 2)]!.apis = typical[(i + 1) % 2]!));
                progress(
                  `(f) round ${round}, ${arm.name}: ${fmt(startRss / 2 ** 20)} MiB at start, ${warm.levels.map((m) => fmt(m / 2 ** 20)).join(' → ')} MiB`,
                );
                steady = await medianRss(ctx.pid);
              }
              for (const step of steps) {
                progress(`(f) round ${round}, ${arm.name}, ${kind}: ${step.label}`);
                windows.push({ ...(await measureStep(ctx, servers[0]!, step, steady, step === steps.at(-1))), startRss });
              }
            } finally {
              await p.stop();
            }
          } finally {
            await child.stop();
          }
        }
    }
  } finally {
    await Promise.all(servers.map((s) => s.close()));
  }
  return judgeStall({
    windows,
    typical: typical[0],
    largest: largest[0],
    past,
    maxBytes,
    maxEntries,
    probeRate: PROBE_RATE,
    messageTimeoutMs: MESSAGE_TIMEOUT_MS,
  });
}
