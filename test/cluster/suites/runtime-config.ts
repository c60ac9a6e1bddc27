// "An API switched off on one server" (suite of test/cluster/api-switched-off.test.ts): three
// kube-apiservers of one binary (KUBE_NEW), one of them with --runtime-config=batch/v1=false.
// Through skewgate no request for batch/v1 ever gets a 404 (they go to the two servers that serve
// it), with the fast path on and off; through plain round robin about a third do.
import type { Test } from 'tap';
import { account, total } from '../../load/accounting.js';
import { LoadRun, seededRng } from '../../load/run.js';
import { ensureNamespace, listFinal } from '../../load/verify.js';
import { configMaps, groupVersionPath, jobs, labNamespace, type Workload } from '../../load/workload.js';
import { false404Table, phaseTable, problemsTable, render, writeClusterPart } from '../../../bench/cluster-results.js';
import type { ShapeLab, Suite } from '../../helpers/shape-lab.js';
import { FAST_OFF, FAST_ON, SKEWGATE_ARMS, modeText, checkFastPathModes, armRoutes, fastShareText } from '../../helpers/fast-path-arms.js';

const RATE_PER_ARM = 12;
const LOAD_MS = 30_000;
const ARMS = [...SKEWGATE_ARMS, 'baseline'] as const;
/** On by default in 1.36 and the only version of its group: switching it off removes batch from that server. */
export const SWITCHED_OFF = 'batch/v1';

export const runtimeConfigSuite: Suite = {
  title: `${SWITCHED_OFF} switched off on one of three apiservers: no 404 for it through skewgate`,
  run: async (
    t: Test,
    { parts: { versions: v }, specs, gateways, session, lab, timeline, http, clock, origin, progress, runSeconds, track }: ShapeLab,
  ) => {
    const off = specs.filter((s) => s.runtimeConfig === `${SWITCHED_OFF}=false`);
    if (off.length !== 1 || specs.length !== 3) throw new Error(`the shape must be three apiservers, one with ${SWITCHED_OFF}=false`);
    const OFF_SERVER = off[0]?.name ?? '';

    // The ground truth, straight from each apiserver.
    const gvPath = groupVersionPath(jobs);
    for (const s of specs) {
      const res = await session.direct.send('GET', `${lab.apiServerUrl(s.name)}${gvPath}`);
      t.equal(res.status, s.name === OFF_SERVER ? 404 : 200, `${s.name}: GET ${gvPath} directly → ${res.status}`);
    }

    const workload: Workload = { skewed: jobs, common: configMaps, namespace: labNamespace };
    for (const arm of ARMS) await ensureNamespace(session.direct, lab.apiServerUrl('kas-1'), labNamespace(arm));

    const run = track(
      new LoadRun({
        arms: ARMS.map((arm) => ({ arm, baseUrl: gateways[arm].url })),
        http,
        workload,
        ratePerSec: RATE_PER_ARM,
        clock,
        rng: seededRng(6),
      }),
    );
    timeline.phase('steady');
    progress(`load ${RATE_PER_ARM} req/s per arm for ${LOAD_MS / 1000} s: ${SWITCHED_OFF} jobs (off on ${OFF_SERVER}) and configmaps`);
    run.start();
    await new Promise((r) => setTimeout(r, LOAD_MS));
    await run.stop();
    progress(`load done: ${run.progress()}`);

    const final = await listFinal(session.direct, lab.apiServerUrl('kas-1'), workload, ARMS);
    const a = account({
      timeline: timeline.snapshot(),
      requests: run.log.requests,
      watch: run.log.watch,
      final,
      rules: { serves: { skewed: (server) => server !== OFF_SERVER, common: () => true }, graceMs: 1000 },
    });
    const share = (arm: string): { n: number; notFound: number } => {
      const rs = run.log.requests.filter((r) => r.arm === arm && r.kind === 'skewed' && r.op !== 'watch');
      return { n: rs.length, notFound: rs.filter((r) => r.status === 404).length };
    };
    const sg = { [FAST_ON]: share(FAST_ON), [FAST_OFF]: share(FAST_OFF) };
    const base = share('baseline');
    const routes = await armRoutes((arm) => lab.logFile(`envoy-${arm}`), origin);
    const fastText = fastShareText(routes);
    const pct = (x: { n: number; notFound: number }): string =>
      `${x.notFound}/${x.n} (${((100 * x.notFound) / Math.max(1, x.n)).toFixed(1)} %)`;

    const md = [
      `### One API switched off on one apiserver (test/cluster/suites/runtime-config.ts)`,
      '',
      `**Method.** Three kube-apiservers of one binary (v${v.kubeNew}) on ${specs.map((s) => s.ip).join(', ')}, port 6443; ${OFF_SERVER} runs with \`--runtime-config=${SWITCHED_OFF}=false\` (checked: \`GET ${gvPath}\` answers 404 there and 200 on the others). The same three gateways and the same open-loop load as the rolling upgrade (${RATE_PER_ARM} req/s per arm for ${LOAD_MS / 1000} s; creates, gets and lists of \`${SWITCHED_OFF} jobs\` and of \`configmaps\`, a watch of each), all arms at once: \`${FAST_ON}\`, ${modeText(FAST_ON)}; \`${FAST_OFF}\`, ${modeText(FAST_OFF)}; the baseline. Every 404 of \`${SWITCHED_OFF}\` is false here: two apiservers serve it all along.`,
      '',
      render(phaseTable(a)),
      '',
      `404s of \`${SWITCHED_OFF}\` creates, gets and lists (watch reconnects excluded): ${SKEWGATE_ARMS.map((arm) => `${arm} ${pct(sg[arm])}`).join(', ')}, plain round robin ${pct(base)} — about one in three is what round robin over three servers, one without the API, predicts. Requests on a fast-path route (Envoy's access log: no skewgate call), of all: ${fastText} (\`${SWITCHED_OFF}\`, not served by every apiserver, is never on it).`,
      '',
      render(problemsTable(a)),
      '',
      render(false404Table(a, origin, 5, await session.auditIds())),
      '',
      `Run time ${runSeconds().toFixed(0)} s.`,
    ].join('\n');
    await writeClusterPart('runtime-config', md);
    t.comment(md);

    checkFastPathModes(t, routes);
    for (const arm of SKEWGATE_ARMS) {
      t.equal(total(a, 'false404s', arm), 0, `no 404 for ${SWITCHED_OFF} through ${arm}`);
      t.equal(sg[arm].notFound, 0, `${arm}: ${pct(sg[arm])} 404s`);
      t.equal(total(a, 'lostWrites', arm), 0, `no lost write through ${arm}`);
      t.ok(sg[arm].n > 100, `${arm} arm sent ${sg[arm].n} ${SWITCHED_OFF} requests`);
    }
    t.equal(total(a, 'duplicatedWrites'), 0, 'no duplicated write in any arm');
    const baseShare = base.notFound / Math.max(1, base.n);
    t.ok(baseShare > 0.15 && baseShare < 0.55, `plain round robin: ${pct(base)} 404s, about a third`);
    t.ok(total(a, 'false404s', 'baseline') > 0, 'the baseline shows false 404s');
  },
};
