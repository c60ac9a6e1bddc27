// skewgate next to Kubernetes' built-in Mixed Version Proxy (MVP, KEP-4020), in a mixed phase:
// two KUBE_OLD apiservers (MVP gate switched on: alpha there) and one KUBE_NEW, all with
// --peer-ca-file, behind (a) plain round-robin Envoy — the MVP forwards what an old server does
// not serve, a second hop — and (b) Envoy + skewgate, which sends it to the new server at once,
// with the fast path on (envoy.xds) and off (routing.fastPath: false, static routes: ext_proc on
// every request). Same client, same run, requests interleaved through all three: who answers, in
// how many hops (audit logs). Then the new server restarts under load: who answers 404 or 503
// while it is away and right after it is back. Latency is not measured here: one run on a shared
// two-core machine decides nothing, so the p50/p99 comparison (issue 15's targets) is a benchmark's
// to make, not this test's.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { account, total, type AccountingRules } from '../load/accounting.js';
import { describe503, gatewayGaps, unexplained503s, versionAt } from '../load/gateway-view.js';
import { interleavedRun, type TimedRequest } from '../load/interleaved.js';
import { untilAnswered, untilInEffect } from '../load/wait.js';
import { sumCounter } from '../load/metrics.js';
import { LoadRun, seededRng } from '../load/run.js';
import { listFinal } from '../load/verify.js';
import { configMaps, labNamespace, mutatingAdmissionPolicies, objectPath, type Workload } from '../load/workload.js';
import { false404Table, phaseTable, problemsTable, render, timelineTable, writeClusterPart } from '../../bench/cluster-results.js';
import { withLoadLab } from '../helpers/load-lab.js';
import { MVP_ARMS, PROBE, startMvpLab } from '../helpers/mvp-lab.js';
import { FAST_OFF, FAST_ON, SKEWGATE_ARMS, accessLogRoutes, fastByPhaseText, modeText } from '../helpers/fast-path-arms.js';

// This file's addresses and etcd ports (harness/lab/slots.ts): it can run beside any other lab.
const slot = claimLabSlot();

/**
 * Interleaved rounds (each a skewed get, list and create and a configmap get through every arm):
 * 150 skewed requests per arm, of which about two thirds land on an old server through the MVP
 * arm, so that "the MVP really proxied" and "skewgate never needs a second hop" rest on a hundred
 * requests each, and the MVP arm's 1 % error allowance is one request.
 */
const ROUNDS = 50;
/** The MVP arm: at most this share of skewed requests may fail (its proxying is Kubernetes', alpha in 1.35). */
const MVP_ERROR_SHARE = 0.01;
const RATE_PER_ARM = 10;
/** Answered requests per arm before kas-3 restarts, and skewed ones per skewgate arm after it is back in effect. */
const MIN_STEADY = 40;
const MIN_AFTER_RESTART = 40;
const ARMS = MVP_ARMS;
const SERVERS = ['kas-1', 'kas-2', 'kas-3'];
const REROUTED = 'apiserver_rerouted_request_total';
const PEER_ERRORS = 'apiserver_peer_proxy_errors_total';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.setTimeout(8 * 60_000);

t.test('skewgate vs the built-in Mixed Version Proxy', async (t) => {
  await withLoadLab('mvp-compare', { connections: 16, addresses: slot }, async (l) => {
    const {
      parts: { versions: v },
      session,
      lab,
      timeline,
      http,
      clock,
      origin,
      progress,
      runSeconds,
      track,
    } = l;
    const { specs, gateways, proxyingAfter } = await startMvpLab(l, slot);
    const url = (name: string): string => lab.apiServerUrl(name);
    const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
    const arms = ARMS.map((arm) => ({ arm, baseUrl: gateways[arm].url }));

    const metrics = async (): Promise<Record<string, { rerouted: number; errors: number }>> => {
      const out: Record<string, { rerouted: number; errors: number }> = {};
      for (const s of specs) {
        const text = (await session.direct.send('GET', `${url(s.name)}/metrics`)).text;
        out[s.name] = { rerouted: sumCounter(text, REROUTED), errors: sumCounter(text, PEER_ERRORS) };
      }
      return out;
    };

    // ---- (1) interleaved, one request at a time: who answers, in how many hops ----
    // A few rounds first, not counted: every connection open and each gateway past its first requests.
    await interleavedRun({ arms, http, workload, rounds: 10, clock, rng: seededRng(1), existing: { skewed: PROBE, common: PROBE } });
    const before = await metrics();
    const interleavedFrom = clock();
    progress(`interleaved run: ${ROUNDS} rounds × 4 requests × ${ARMS.length} arms`);
    const timed = await interleavedRun({
      arms,
      http,
      workload,
      rounds: ROUNDS,
      clock,
      rng: seededRng(2),
      existing: { skewed: PROBE, common: PROBE },
    });
    const after = await metrics();
    const interleavedTo = clock();
    // The audit logs are written a moment after the answer: read them until every answer of the run is there.
    let hopsOf = await session.auditIds();
    for (let i = 0; i < 50 && timed.some((r) => r.auditId !== undefined && !hopsOf.has(r.auditId)); i++) {
      await sleep(100);
      hopsOf = await session.auditIds();
    }
    const hops = (r: TimedRequest): number => (r.auditId === undefined ? 0 : (hopsOf.get(r.auditId)?.size ?? 0));

    const ok = (r: TimedRequest): boolean => r.status !== null && r.status >= 200 && r.status < 300;
    const rows: string[][] = [];
    const stats: Record<string, { n: number; ok: number; proxied: number; unknown: number }> = {};
    const groups: { label: string; arm: string; pick: (r: TimedRequest) => boolean }[] = [];
    for (const arm of ARMS) {
      groups.push({ label: 'skewed: all', arm, pick: (r) => r.kind === 'skewed' });
      for (const op of ['get', 'list', 'create'] as const)
        groups.push({ label: `skewed: ${op}`, arm, pick: (r) => r.kind === 'skewed' && r.op === op });
      groups.push({ label: 'common (configmaps get), reference', arm, pick: (r) => r.kind === 'common' });
    }
    for (const g of groups) {
      const rs = timed.filter((r) => r.arm === g.arm && g.pick(r));
      const st = {
        n: rs.length,
        ok: rs.filter(ok).length,
        proxied: rs.filter((r) => hops(r) === 2).length,
        unknown: rs.filter((r) => hops(r) === 0).length,
      };
      stats[`${g.arm}/${g.label}`] = st;
      rows.push([
        `${armText(g.arm)} — ${g.label}`,
        `${st.n}`,
        `${st.n - st.ok}`,
        st.n === 0 ? '—' : `${st.proxied} (${((100 * st.proxied) / st.n).toFixed(1)} %)`,
        `${st.unknown}`,
      ]);
    }
    const delta = Object.fromEntries(
      specs.map((s) => [
        s.name,
        {
          rerouted: (after[s.name]?.rerouted ?? 0) - (before[s.name]?.rerouted ?? 0),
          errors: (after[s.name]?.errors ?? 0) - (before[s.name]?.errors ?? 0),
        },
      ]),
    );
    const mvpSkewed = stats['mvp/skewed: all'] ?? { n: 0, ok: 0, proxied: 0, unknown: 0 };
    const sgSkewed = Object.fromEntries(
      SKEWGATE_ARMS.map((arm) => [arm, stats[`${arm}/skewed: all`] ?? { n: 0, ok: 0, proxied: 0, unknown: 0 }]),
    ) as Record<(typeof SKEWGATE_ARMS)[number], { n: number; ok: number; proxied: number; unknown: number }>;
    progress(
      `interleaved run done: MVP arm ${mvpSkewed.proxied}/${mvpSkewed.n} skewed requests proxied; ${SKEWGATE_ARMS.map((arm) => `${arm} ${sgSkewed[arm].proxied}/${sgSkewed[arm].n}`).join(', ')}`,
    );
    const interleavedRoutes = {
      [FAST_ON]: await accessLogRoutes(lab.logFile(`envoy-${FAST_ON}`), interleavedFrom, (at, path) =>
        at > interleavedTo ? 'after' : path.includes('/configmaps/') ? 'common' : 'skewed',
      ),
      [FAST_OFF]: await accessLogRoutes(lab.logFile(`envoy-${FAST_OFF}`), interleavedFrom, (at, path) =>
        at > interleavedTo ? 'after' : path.includes('/configmaps/') ? 'common' : 'skewed',
      ),
    };

    // ---- (2) the new server restarts under load ----
    const run = track(new LoadRun({ arms, http, workload, ratePerSec: RATE_PER_ARM, clock, rng: seededRng(5), watch: ['skewed'] }));
    const waits = { requests: () => run.log.requests, clock, progress };
    const steadyAt = timeline.phase('steady');
    run.start();
    for (const arm of ARMS)
      await untilAnswered(
        `answers through ${arm} before the restart`,
        waits,
        (r) => r.arm === arm && r.startMs >= steadyAt,
        MIN_STEADY,
        (r) => r.arm === arm,
      );
    timeline.phase('kas-3 restart');
    progress(`restart of kas-3 (v${v.kubeNew}) under load, ${RATE_PER_ARM} req/s per arm`);
    await session.stop('kas-3');
    const back = await session.start(specs[2] as ApiServerSpec);
    // Back once each skewgate has logged kas-3 ready and routed a skewed request after that; then
    // enough skewed requests through each to show none is refused or answered 404 any more.
    for (const arm of SKEWGATE_ARMS) {
      const e = await untilInEffect({
        logFile: lab.logFile(`skewgate-${arm}`),
        seeds: SERVERS,
        server: 'kas-3',
        sinceMs: back,
        logFromMs: origin,
        arm,
        kind: 'skewed',
        ...waits,
      });
      await untilAnswered(
        `skewed answers through ${arm} after kas-3 is back`,
        waits,
        (r) => r.arm === arm && r.kind === 'skewed' && r.startMs >= e.inEffectAtMs,
        MIN_AFTER_RESTART,
        (r) => r.arm === arm,
      );
    }
    await run.stop();
    const final = await listFinal(session.direct, url('kas-3'), workload, ARMS);
    const rules: AccountingRules = { serves: { skewed: (_s, version) => version === v.kubeNew, common: () => true }, graceMs: 1000 };
    const a = account({
      timeline: timeline.snapshot(),
      requests: run.log.requests,
      watch: run.log.watch,
      final,
      rules,
    });

    const md = [
      `### skewgate vs the built-in Mixed Version Proxy (test/cluster/mvp-compare.test.ts)`,
      '',
      `**Method.** A mixed phase: kas-1 and kas-2 run v${v.kubeOld} with the Mixed Version Proxy switched on (\`--feature-gates=UnknownVersionInteroperabilityProxy=true\`, alpha in 1.35), kas-3 runs v${v.kubeNew} (gate beta, on); all three with \`--peer-ca-file\` (the cluster CA), \`--peer-advertise-ip/port\` and the front-proxy client certificate, so an old server forwards a request for a resource only a peer serves. Checked first: a GET of \`${objectPath(mutatingAdmissionPolicies, '', PROBE)}\` straight to each old server answers 200 once its peer discovery has synced (${Object.entries(
        proxyingAfter,
      )
        .map(([k, ms]) => `${k} after ${(ms / 1000).toFixed(1)} s`)
        .join(
          ', ',
        )}, counted from kas-3's readiness). Three gateways in front of the same servers: (a) plain round-robin Envoy (no ext_proc) — the MVP does the work; (b) Envoy + skewgate, ${modeText(FAST_ON)}; (c) Envoy + skewgate, ${modeText(FAST_OFF)}. One client (undici, keep-alive, HTTPS, bearer token), one request at a time, ${ROUNDS} rounds of get/list/create of the skewed \`mutatingadmissionpolicies\` plus a configmap get as a reference, each request sent through all three gateways in a random order (interleaved). Hops per request from the audit logs: the MVP copies the Audit-ID to the peer, so an ID logged by two servers was proxied.`,
      '',
      render({ headers: ['arm — requests', 'n', 'errors', 'proxied (2 hops)', 'hops unknown'], rows }),
      '',
      `Fast path (requests on a \`fast-path-*\` route in Envoy's access log during the interleaved run, so without a skewgate call): ${SKEWGATE_ARMS.map((arm) => `${arm} ${fastByPhaseText(interleavedRoutes[arm])}`).join('; ')}. Latency is left to a benchmark (one run on a shared two-core machine, every process of the lab on it, decides nothing).`,
      '',
      `\`${REROUTED}\` during the run (MVP's own count of proxied requests): ${specs.map((s) => `${s.name} +${delta[s.name]?.rerouted ?? 0}`).join(', ')}; \`${PEER_ERRORS}\`: ${specs.map((s) => `${s.name} +${delta[s.name]?.errors ?? 0}`).join(', ')}. Requests sent through the MVP arm for the skewed resource: ${mvpSkewed.n}, proxied according to the audit logs: ${mvpSkewed.proxied}.`,
      '',
      `**kas-3 (the only v${v.kubeNew} server) restarts under load** (${RATE_PER_ARM} req/s per arm, open loop, a watch of the skewed resource per arm, ${MIN_STEADY} answers per arm before the restart, ${MIN_AFTER_RESTART} skewed answers per skewgate arm after it routed by kas-3 again): while it is away nobody serves \`mutatingadmissionpolicies\`; a 404 is false from 1 s after it is ready again.`,
      '',
      render(phaseTable(a)),
      '',
      render(problemsTable(a)),
      '',
      render(false404Table(a, origin, 10, await session.auditIds())),
      '',
      'Timeline (t from etcd ready):',
      '',
      render(timelineTable(timeline.snapshot(), origin)),
      '',
      `Run time ${runSeconds().toFixed(0)} s.`,
    ].join('\n');
    await writeClusterPart('mvp-compare', md);
    t.comment(md);

    t.ok(mvpSkewed.proxied > 0, `the MVP really proxied: ${mvpSkewed.proxied}/${mvpSkewed.n} skewed requests took 2 hops`);
    t.equal(mvpSkewed.n, 3 * ROUNDS, `MVP arm: ${3 * ROUNDS} skewed requests sent`);
    t.ok(
      (delta['kas-1']?.rerouted ?? 0) + (delta['kas-2']?.rerouted ?? 0) >= mvpSkewed.proxied,
      `${REROUTED} on the old servers grew at least as much`,
    );
    t.ok(
      mvpSkewed.ok >= (1 - MVP_ERROR_SHARE) * mvpSkewed.n,
      `MVP arm: ${mvpSkewed.ok}/${mvpSkewed.n} skewed requests 2xx (at most ${MVP_ERROR_SHARE * 100} % failed)`,
    );
    t.ok(
      interleavedRoutes[FAST_ON].fast > 0,
      `${FAST_ON}: the fast path was in effect in the interleaved run (${fastByPhaseText(interleavedRoutes[FAST_ON])} on fast-path routes)`,
    );
    t.equal(
      interleavedRoutes[FAST_OFF].fast,
      0,
      `${FAST_OFF}: no request on a fast-path route (${interleavedRoutes[FAST_OFF].requests} requests)`,
    );
    const tl = timeline.snapshot();
    for (const arm of SKEWGATE_ARMS) {
      const sk = sgSkewed[arm];
      t.equal(sk.ok, sk.n, `${arm} arm: every skewed request 2xx (${sk.ok}/${sk.n})`);
      t.equal(sk.n, 3 * ROUNDS, `${arm} arm: ${3 * ROUNDS} skewed requests sent`);
      t.equal(sk.proxied, 0, `${arm} arm: no request took a second hop`);
      t.equal(sk.unknown, 0, `${arm} arm: every answer found in an audit log`);
      t.equal(total(a, 'false404s', arm), 0, `restart: no false 404 through ${arm}`);
      // While kas-3, the only server of the skewed resource, is away skewgate answers 503: only then (in its own view).
      const own = run.log.requests.filter((r) => r.arm === arm);
      const { gaps } = await gatewayGaps({
        logFile: lab.logFile(`skewgate-${arm}`),
        fromMs: origin,
        seeds: SERVERS,
        capable: { skewed: (server, at) => versionAt(tl, server, at) === v.kubeNew, common: () => true },
        requests: own,
      });
      const sg503 = own.filter((r) => r.status === 503);
      const unexplained = unexplained503s({ timeline: tl, requests: sg503, gaps, serves: rules.serves });
      t.comment(`restart, ${arm} arm: ${sg503.length} 503s, ${unexplained.length} outside the gaps of the gateway's view`);
      t.same(
        unexplained.map(describe503(origin)),
        [],
        `restart: every 503 through ${arm} fell where the gateway had no capable apiserver in effect (or, not skewgate's own, while one was down)`,
      );
    }
    t.equal(total(a, 'lostWrites'), 0, 'restart: no lost write in any arm');
    t.equal(total(a, 'duplicatedWrites'), 0, 'restart: no duplicated write in any arm');
  });
});

function armText(arm: string): string {
  return arm === 'mvp' ? 'plain Envoy + MVP' : arm === FAST_ON ? 'Envoy + skewgate, fast path on' : 'Envoy + skewgate, fast path off';
}
