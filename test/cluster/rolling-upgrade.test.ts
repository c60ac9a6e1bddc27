// A rolling upgrade of three real kube-apiservers (KUBE_OLD → KUBE_NEW, one at a time on the same
// address) under a client load through three gateways at once: Envoy + skewgate with the fast path
// on (envoy.xds) and off (routing.fastPath: false), and the same Envoy without ext_proc (plain round
// robin, the baseline). Proves, for both skewgate modes: no false 404s and no lost writes in any
// phase; the baseline shows false 404s in the mixed phases. Real kubectl and
// @kubernetes/client-node work through both skewgate gateways in every phase.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { account, describe503, total, unexplained503s, type Accounting, type AccountingRules } from '../load/accounting.js';
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
import { LAB_READINESS_LAG_MS, withLoadLab } from '../helpers/load-lab.js';
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
/** How long each phase runs after its new apiserver is ready. */
const DWELL_MS = 30_000;
/** GET /apis through a gateway this many times per phase: does it list the skewed resource? */
const DISCOVERY_TRIES = 6;
const SERVERS = ['kas-1', 'kas-2', 'kas-3'] as const;
const ARMS = [...SKEWGATE_ARMS, 'baseline'] as const;

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
      const { checks, dwell } = phaseChecks({
        gateways,
        arms: ARMS,
        http,
        workload,
        kubectl,
        workDir: work,
        clock,
        progress,
        run,
        dwellMs: DWELL_MS,
        discoveryTries: DISCOVERY_TRIES,
      });

      timeline.phase('P0');
      progress(`P0: 3 × v${v.kubeOld}; load ${RATE_PER_ARM} req/s per arm through ${ARMS.join(' and ')}`);
      run.start();
      await dwell('P0', clock(), false);

      for (const [i, name] of SERVERS.entries()) {
        const phase = `P${i + 1}`;
        timeline.phase(phase);
        progress(`${phase}: replacing ${name} v${v.kubeOld} → v${v.kubeNew}`);
        await session.stop(name);
        const ready = await session.start(spec(name, v.kubeNew));
        await dwell(phase, ready, true);
      }

      progress('stopping the load');
      await run.stop();
      const final = await listFinal(session.direct, lab.apiServerUrl('kas-1'), workload, ARMS);
      const tl = timeline.snapshot();
      const rules: AccountingRules = { serves: { skewed: (_s, version) => version === v.kubeNew, common: () => true }, graceMs: 1000 };
      const a: Accounting = account({
        timeline: tl,
        requests: run.log.requests,
        watch: run.log.watch,
        final,
        rules,
      });

      const mergedEverywhere = checks
        .filter((c) => c.arm !== 'baseline' && !c.phase.startsWith('P0 '))
        .every((c) => c.listed === DISCOVERY_TRIES);
      const routes = await armRoutes((arm) => lab.logFile(`envoy-${arm}`), origin, byTimelinePhase(tl));
      const sgTotals = SKEWGATE_ARMS.map(
        (arm) =>
          `${arm} ${total(a, 'requests', arm)} requests, ${total(a, 'false404s', arm)} false 404s, ${total(a, 'lostWrites', arm)} lost and ${total(a, 'duplicatedWrites', arm)} duplicated writes`,
      ).join('; ');
      const md = [
        `### Rolling upgrade v${v.kubeOld} → v${v.kubeNew} (test/cluster/rolling-upgrade.test.ts)`,
        '',
        `**Method.** etcd and three kube-apiservers (kas-1/2/3 on ${[1, 2, 3].map((n) => slot.loopback(n)).join(', ')}, port 6443, v${v.kubeOld}), three gateways in front of the same three addresses: Envoy + skewgate in two modes — \`${FAST_ON}\`, ${modeText(FAST_ON)}, and \`${FAST_OFF}\`, ${modeText(FAST_OFF)} — and the same Envoy bootstrap without the ext_proc filter (baseline, round robin). All arms run the same open-loop load at ${RATE_PER_ARM} req/s each for the whole run (creates with generateName + a unique token label, gets of acknowledged objects, lists; of \`${workload.skewed.group}/${workload.skewed.version} ${workload.skewed.resource}\` — served only by v${v.kubeNew} — and of \`configmaps\`), plus an open watch of each per arm that reconnects from its last resourceVersion. Phases: P0 all old; P1–P3 replace kas-1, kas-2, kas-3 with v${v.kubeNew} on the same address (stop, start, ready), then ${DWELL_MS / 1000} s of load. A 404 is **false** when an apiserver serving the resource had been ready (/readyz 200, probed every 100 ms) for more than 1 s when the request was sent, or when the object had been acknowledged as created; lost/duplicated writes come from listing every object straight from kas-1 at the end. Nothing is retried by the client; no answer (connection reset during a restart) is counted, not hidden.`,
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
        `Real clients (kubectl v${v.kubeNew} and @kubernetes/client-node, unmodified, gateway kubeconfig; run while the load runs):`,
        '',
        render(clientChecksTable(checks)),
        '',
        `Aggregated discovery through each gateway (GET /apis as kubectl asks, ${DISCOVERY_TRIES} times per phase): answers listing \`${workload.skewed.resource}\` — ${checks.map((c) => `${c.phase} ${c.listed}/${DISCOVERY_TRIES}`).join(', ')}. kubectl maps a kind or resource name through discovery, so in a mixed phase its commands for the skewed resource work only if the discovery answer lists it: ${mergedEverywhere ? 'through skewgate (both modes) it always did (the merged, peer-aggregated document), through plain round robin only when a new apiserver happened to answer.' : "skewgate did not always answer with the merged document, so those kubectl checks are reported as TODO (not failures) for the phases where it did not; client-node's direct paths do not need discovery."}`,
        '',
        `Run time ${runSeconds().toFixed(0)} s.`,
      ].join('\n');
      await writeClusterPart('rolling-upgrade', md);
      t.comment(md);
      progress('results written to bench/RESULTS.md');

      // ---- the claims ----
      checkFastPathModes(t, routes, fastByPhaseText(routes[FAST_ON]));
      for (const arm of SKEWGATE_ARMS) {
        // Every 503 through skewgate is bounded by the timeline: none while a capable apiserver was ready.
        const sg503 = run.log.requests.filter((r) => r.arm === arm && r.status === 503);
        const unexplained = unexplained503s({ timeline: tl, requests: sg503, rules, lagMs: LAB_READINESS_LAG_MS });
        t.comment(`${arm} arm: ${sg503.length} 503s, ${unexplained.length} outside the windows the timeline allows`);
        t.same(
          unexplained.map(describe503),
          [],
          `${arm} arm: every 503 fell in a window when no capable apiserver was ready (or, not skewgate's own, while one was going down)`,
        );
        for (const phase of a.phases) {
          const sg = a.rows.find((r) => r.phase === phase && r.arm === arm);
          t.equal(sg?.false404s, 0, `${phase}: no false 404 through ${arm}`);
          t.equal(sg?.lostWrites, 0, `${phase}: no lost write through ${arm}`);
          t.equal(sg?.duplicatedWrites, 0, `${phase}: no duplicated write through ${arm}`);
          t.ok((sg?.requests ?? 0) > 0, `${phase}: ${arm} arm sent requests`);
        }
      }
      for (const phase of ['P1', 'P2']) {
        const b = a.rows.find((r) => r.phase === phase && r.arm === 'baseline');
        t.ok(
          (b?.false404s ?? 0) > 0,
          `${phase} (mixed): the baseline shows false 404s (${b?.false404s ?? 0}) — the problem skewgate solves`,
        );
      }
      t.equal(total(a, 'duplicatedWrites', 'baseline'), 0, 'no duplicated write through the baseline either (Envoy never retries a write)');
      for (const arm of SKEWGATE_ARMS) {
        const sgCreates = total(a, 'createsAcked', arm);
        t.ok(sgCreates > 50, `${arm} arm: ${sgCreates} acknowledged creates checked`);
        const sgSkewedOkLate = a.rows.filter((r) => r.arm === arm && r.phase === 'P3').reduce((s, r) => s + r.skewedOk, 0);
        t.ok(sgSkewedOkLate > 0, `P3: skewed requests succeed through ${arm}`);
        t.equal(a.watchMissed.get(`${arm}/common`) ?? 0, 0, `${arm} arm: the configmap watch saw every acknowledged create`);
        // kubectl finds the new resource through skewgate's merged /apis (issue 6) in every phase.
        for (const c of checks.filter((c) => c.arm === arm)) {
          for (const x of c.checks) t.ok(x.ok, `${c.phase}: ${x.client} ${x.what}${x.ok ? '' : ` — ${x.detail}`}`);
        }
      }
    },
  );
});
