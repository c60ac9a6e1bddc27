// A rolling upgrade of three real kube-apiservers (KUBE_OLD → KUBE_NEW, one at a time on the same
// address) under a client load through three gateways at once: Envoy + skewgate with the fast path
// on (envoy.xds) and off (routing.fastPath: false), and the same Envoy without ext_proc (plain round
// robin, the baseline). Proves, for both skewgate modes: no false 404s and no lost writes in any
// phase, every 503 inside a gap of the gateway's own view; the baseline shows false 404s in the
// mixed phases (this file proves that for the in-place shape). Real kubectl and
// @kubernetes/client-node work through both skewgate gateways in every phase, and their GET /apis
// lists the new resource exactly from the phase a new apiserver serves it. Phases end on counts of
// answered requests, never on a clock.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { account, total, type Accounting, type AccountingRules } from '../load/accounting.js';
import { describe503, gatewayGaps, unexplained503s, versionAt } from '../load/gateway-view.js';
import { phaseEvidence as untilPhaseEvidence, untilInEffect } from '../load/wait.js';
import { LoadRun, freeLoopbackPort, seededRng } from '../load/run.js';
import { ensureNamespace, listFinal } from '../load/verify.js';
import { configMaps, labNamespace, mutatingAdmissionPolicies, type Workload } from '../load/workload.js';
import {
  clientChecksTable,
  false404Table,
  phaseTable,
  problemsTable,
  render,
  timelineTable,
  writeClusterPart,
} from '../../bench/cluster-results.js';
import { withLoadLab } from '../helpers/load-lab.js';
import { describeFalse404s } from '../helpers/false-404s.js';
import { phaseChecks } from '../helpers/phase-checks.js';
import {
  FAST_OFF,
  FAST_ON,
  SKEWGATE_ARMS,
  byTimelinePhase,
  fastByPhaseText,
  modeText,
  skewgateArmOptions,
  checkFastPathModes,
  armRoutes,
} from '../helpers/fast-path-arms.js';

// This file's addresses and etcd ports (harness/lab/slots.ts): it can run beside any other lab.
const slot = claimLabSlot();

const RATE_PER_ARM = 12;
/** GET /apis through a skewgate gateway this many times per phase: every answer must list the new resource once one serves it. */
const DISCOVERY_TRIES = 3;
/**
 * Each phase runs until each skewgate arm has this many skewed requests answered since the new
 * apiserver was in effect there (P0: since the start): the "no false 404 while mixed" claim rests
 * on them (about 7 s of load at RATE_PER_ARM).
 */
const MIN_SKEWED_PER_PHASE = 40;
/**
 * The baseline's false 404s required in each mixed phase (P1: one new of three, P2: two): the
 * problem skewgate solves, proven once for this shape here. The phase also runs until the
 * baseline has this many (about 3 s in P1 at RATE_PER_ARM; 115 and 93 were seen in 30 s phases).
 */
const MIN_BASELINE_FALSE_404 = 10;
/** Acknowledged creates per skewgate arm over the run, for the lost and duplicated writes check. */
const MIN_ACKED_CREATES = 50;
const SERVERS = ['kas-1', 'kas-2', 'kas-3'] as const;
const ARMS = [...SKEWGATE_ARMS, 'baseline'] as const;
const MIXED = ['P1', 'P2'];
/** What each phase waits for before it ends (test/load/wait.ts phaseEvidence). */
const EVIDENCE = { arms: SKEWGATE_ARMS, minSkewed: MIN_SKEWED_PER_PHASE, mixedPhases: MIXED, minFalse404: MIN_BASELINE_FALSE_404 };

t.setTimeout(14 * 60_000);

t.test('rolling upgrade through skewgate (fast path on and off) and through plain round robin', async (t) => {
  await withLoadLab(
    'rolling-upgrade',
    { connections: 24, addresses: slot },
    async ({ parts: { versions: v, kubectl }, dir, session, lab, timeline, http, clock, origin, progress, runSeconds, track }) => {
      // The lab's flags end open watches 5 s into a stop (--shutdown-watch-termination-grace-period).
      const spec = (name: string, version: string): ApiServerSpec => ({
        name,
        version,
        ip: slot.loopback(Number(name.slice(-1))),
        port: 6443,
      });
      await Promise.all(SERVERS.map((s) => session.start(spec(s, v.kubeOld))));

      const gateways = {
        [FAST_ON]: await lab.startGateway(skewgateArmOptions(FAST_ON, await freeLoopbackPort())),
        [FAST_OFF]: await lab.startGateway(skewgateArmOptions(FAST_OFF, await freeLoopbackPort())),
        baseline: await lab.startGateway({ name: 'baseline', withSkewgate: false, port: await freeLoopbackPort() }),
      };
      const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
      for (const arm of [...ARMS, 'clients']) await ensureNamespace(session.direct, lab.apiServerUrl('kas-1'), labNamespace(arm));
      const work = join(dir, 'clients');
      await rm(work, { recursive: true, force: true });
      await mkdir(work, { recursive: true });

      const run = track(
        new LoadRun({
          arms: ARMS.map((arm) => ({ arm, baseUrl: gateways[arm].url })),
          http,
          workload,
          ratePerSec: RATE_PER_ARM,
          clock,
          rng: seededRng(36),
        }),
      );
      // Real clients only through skewgate: the baseline's false 404s are proven by the load.
      const { checks, dwell } = phaseChecks({
        gateways,
        arms: SKEWGATE_ARMS,
        http,
        workload,
        kubectl,
        workDir: work,
        clock,
        progress,
        run,
        // The phase's length is the counts below, not a dwell.
        dwellMs: 0,
        discoveryTries: DISCOVERY_TRIES,
      });
      const rules: AccountingRules = { serves: { skewed: (_s, version) => version === v.kubeNew, common: () => true }, graceMs: 1000 };
      const waits = { requests: () => run.log.requests, clock, progress };
      /** Until every skewgate arm has MIN_SKEWED_PER_PHASE skewed answers sent since `sinceMs` (and the baseline its false 404s, in a mixed phase). */
      const phaseEvidence = untilPhaseEvidence({ waits, timeline, rules, ...EVIDENCE });

      timeline.phase('P0');
      progress(`P0: 3 × v${v.kubeOld}; load ${RATE_PER_ARM} req/s per arm through ${ARMS.join(' and ')}`);
      const p0 = clock();
      run.start();
      await dwell('P0', p0, false);
      await phaseEvidence('P0', {}, p0);

      for (const [i, name] of SERVERS.entries()) {
        const phase = `P${i + 1}`;
        const phaseAt = timeline.phase(phase);
        progress(`${phase}: replacing ${name} v${v.kubeOld} → v${v.kubeNew}`);
        await session.stop(name);
        const ready = await session.start(spec(name, v.kubeNew));
        // The client checks after each skewgate has the new apiserver in its view and routes by it
        // (its own log line, then a skewed answer sent after it).
        const since: Record<string, number> = {};
        for (const arm of SKEWGATE_ARMS) {
          const e = await untilInEffect({
            logFile: lab.logFile(`skewgate-${arm}`),
            seeds: SERVERS,
            server: name,
            sinceMs: ready,
            logFromMs: origin,
            arm,
            kind: 'skewed',
            ...waits,
          });
          since[arm] = e.inEffectAtMs;
          progress(`${phase}: ${arm} logged ${name} usable ${((e.usableAtMs - ready) / 1000).toFixed(1)} s after its /readyz passed`);
        }
        await dwell(phase, ready, true);
        await phaseEvidence(phase, since, phaseAt);
      }

      progress('stopping the load');
      await run.stop();
      const final = await listFinal(session.direct, lab.apiServerUrl('kas-1'), workload, ARMS);
      const tl = timeline.snapshot();
      const a: Accounting = account({
        timeline: tl,
        requests: run.log.requests,
        watch: run.log.watch,
        final,
        rules,
      });

      const routes = await armRoutes((arm) => lab.logFile(`envoy-${arm}`), origin, byTimelinePhase(tl));
      const sgTotals = SKEWGATE_ARMS.map(
        (arm) =>
          `${arm} ${total(a, 'requests', arm)} requests, ${total(a, 'false404s', arm)} false 404s, ${total(a, 'lostWrites', arm)} lost and ${total(a, 'duplicatedWrites', arm)} duplicated writes`,
      ).join('; ');
      const md = [
        `### Rolling upgrade v${v.kubeOld} → v${v.kubeNew} (test/cluster/rolling-upgrade.test.ts)`,
        '',
        `**Method.** etcd and three kube-apiservers (kas-1/2/3 on ${[1, 2, 3].map((n) => slot.loopback(n)).join(', ')}, port 6443, v${v.kubeOld}), three gateways in front of the same three addresses: Envoy + skewgate in two modes — \`${FAST_ON}\`, ${modeText(FAST_ON)}, and \`${FAST_OFF}\`, ${modeText(FAST_OFF)} — and the same Envoy bootstrap without the ext_proc filter (baseline, round robin). All arms run the same open-loop load at ${RATE_PER_ARM} req/s each for the whole run (creates with generateName + a unique token label, gets of acknowledged objects, lists; of \`${workload.skewed.group}/${workload.skewed.version} ${workload.skewed.resource}\` — served only by v${v.kubeNew} — and of \`configmaps\`), plus an open watch of each per arm that reconnects from its last resourceVersion. Phases: P0 all old; P1–P3 replace kas-1, kas-2, kas-3 with v${v.kubeNew} on the same address (stop, start, ready), then load until each skewgate arm has ${MIN_SKEWED_PER_PHASE} skewed answers sent after it routed by the new apiserver (its own log line, then a skewed answer) and, in P1 and P2, the baseline ${MIN_BASELINE_FALSE_404} false 404s. A 404 is **false** when an apiserver serving the resource had been ready (/readyz 200, probed every 100 ms) for more than 1 s when the request was sent, or when the object had been acknowledged as created; lost/duplicated writes come from listing every object straight from kas-1 at the end. Nothing is retried by the client; no answer (connection reset during a restart) is counted, not hidden.`,
        '',
        render(phaseTable(a)),
        '',
        `Totals: ${sgTotals}; baseline ${total(a, 'requests', 'baseline')} requests, ${total(a, 'false404s', 'baseline')} false 404s, ${total(a, 'lostWrites', 'baseline')} lost and ${total(a, 'duplicatedWrites', 'baseline')} duplicated writes. Acknowledged creates never seen by the arm's watch: ${[...a.watchMissed].map(([k, c]) => `${k} ${c}`).join(', ') || 'none'}.`,
        '',
        `Fast path (Envoy's access log, requests on a \`fast-path-*\` route, so without a skewgate call, of all, per phase): ${FAST_ON} ${fastByPhaseText(routes[FAST_ON])}; ${FAST_OFF} ${fastByPhaseText(routes[FAST_OFF])}. The fast path is compiled only while every apiserver is ready and lists a group/version alike (docs/design.md, "The fast path").`,
        '',
        render(problemsTable(a)),
        '',
        render(false404Table(a, origin, 10, await session.auditIds())),
        '',
        'Timeline (t from etcd ready):',
        '',
        render(timelineTable(tl, origin)),
        '',
        `Real clients (kubectl v${v.kubeNew} and @kubernetes/client-node, unmodified, gateway kubeconfig; run through each skewgate gateway while the load runs, once it routes by the new apiserver):`,
        '',
        render(clientChecksTable(checks)),
        '',
        `Aggregated discovery through each skewgate gateway (GET /apis as kubectl asks, ${DISCOVERY_TRIES} times per phase): answers listing \`${workload.skewed.resource}\` — ${checks.map((c) => `${c.phase} ${c.listed}/${DISCOVERY_TRIES}`).join(', ')}. kubectl maps a kind or resource name through discovery, so in a mixed phase its commands for the skewed resource work only if the answer lists it, whichever apiserver the request would reach: skewgate answers with the merged, peer-aggregated document.`,
        '',
        `Run time ${runSeconds().toFixed(0)} s.`,
      ].join('\n');
      await writeClusterPart('rolling-upgrade', md);
      t.comment(md);
      progress('results written to bench/RESULTS.md');

      // ---- the claims ----
      checkFastPathModes(t, routes, fastByPhaseText(routes[FAST_ON]));
      const false404Evidence = {
        origin,
        accessLogOf: (arm: string) => lab.logFile(`envoy-${arm}`),
        skewgateLogOf: (arm: string) => ((SKEWGATE_ARMS as readonly string[]).includes(arm) ? lab.logFile(`skewgate-${arm}`) : undefined),
        auditLogs: lab.apiServerSpecs().map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) })),
      };
      for (const arm of SKEWGATE_ARMS) {
        // Every 503 through skewgate is bounded by the gateway's own view: none once it routed by a capable apiserver.
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
        t.comment(`${arm} arm: ${sg503.length} 503s, ${unexplained.length} outside the gaps of the gateway's view`);
        t.same(
          unexplained.map(describe503(origin)),
          [],
          `${arm} arm: every 503 fell where the gateway had no capable apiserver in effect (or, not skewgate's own, while one was down)`,
        );
        for (const phase of a.phases) {
          const sg = a.rows.find((r) => r.phase === phase && r.arm === arm);
          t.same(
            await describeFalse404s(
              a.false404s.filter((f) => f.arm === arm && f.phase === phase),
              false404Evidence,
            ),
            [],
            `${phase}: no false 404 through ${arm}`,
          );
          t.equal(sg?.lostWrites, 0, `${phase}: no lost write through ${arm}`);
          t.equal(sg?.duplicatedWrites, 0, `${phase}: no duplicated write through ${arm}`);
          t.ok(
            (sg?.skewedRequests ?? 0) >= MIN_SKEWED_PER_PHASE,
            `${phase}: ${arm} arm sent ${sg?.skewedRequests ?? 0} skewed requests (≥ ${MIN_SKEWED_PER_PHASE})`,
          );
        }
      }
      for (const phase of MIXED) {
        const b = a.rows.find((r) => r.phase === phase && r.arm === 'baseline');
        t.ok(
          (b?.false404s ?? 0) >= MIN_BASELINE_FALSE_404,
          `${phase} (mixed): the baseline shows ${b?.false404s ?? 0} false 404s (≥ ${MIN_BASELINE_FALSE_404}) — the problem skewgate solves`,
        );
      }
      t.equal(total(a, 'duplicatedWrites', 'baseline'), 0, 'no duplicated write through the baseline either (Envoy never retries a write)');
      for (const arm of SKEWGATE_ARMS) {
        const sgCreates = total(a, 'createsAcked', arm);
        t.ok(sgCreates >= MIN_ACKED_CREATES, `${arm} arm: ${sgCreates} acknowledged creates checked (≥ ${MIN_ACKED_CREATES})`);
        const sgSkewedOkLate = a.rows.filter((r) => r.arm === arm && r.phase === 'P3').reduce((s, r) => s + r.skewedOk, 0);
        t.ok(sgSkewedOkLate > 0, `P3: skewed requests succeed through ${arm}`);
        t.equal(a.watchMissed.get(`${arm}/common`) ?? 0, 0, `${arm} arm: the configmap watch saw every acknowledged create`);
        // kubectl finds the new resource through skewgate's merged /apis (issue 6) in every phase.
        for (const c of checks.filter((c) => c.arm === arm)) {
          for (const x of c.checks) t.ok(x.ok, `${c.phase}: ${x.client} ${x.what}${x.ok ? '' : ` — ${x.detail}`}`);
          // None serves it in P0; from P1 on, every answer is the merged document that lists it.
          const want = c.phase.startsWith('P0 ') ? 0 : DISCOVERY_TRIES;
          t.equal(c.listed, want, `${c.phase}: GET /apis listed ${workload.skewed.resource} in ${c.listed} of ${DISCOVERY_TRIES} answers`);
        }
      }
    },
  );
});
