// A replace-style rolling upgrade, as Cluster API's KubeadmControlPlane (and every control-plane
// node replacement) does it: three KUBE_OLD apiservers on their lab slot's first three loopback addresses, then, one at a
// time, a KUBE_NEW apiserver added on a NEW address (the slot's 4th-6th) and an old one removed. skewgate's config
// names only the three old ones (the seed) and learns the rest from the control-plane Nodes; Envoy
// follows through filesystem xDS. No config edit, no restart of Envoy or skewgate. Two skewgate
// gateways run side by side, the fast path on (the default) and off (routing.fastPath: false),
// and every skewgate claim holds for both. The baseline is
// the same Envoy without ext_proc whose pool is updated the way a load balancer is (new machine in
// once ready, old machine out before it goes). There are no kubelets in the lab: the test
// registers and deletes each machine's Node object where its kubelet and Cluster API would.
// Each step waits for the event it needs (skewgate's own "admitted" line and a request routed
// after it; Envoy's pool without the machine that leaves), and each phase ends on counts of
// answered requests: no verdict rests on how long a step took.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { loadConfig } from '../../src/config/load.js';
import { type ApiServerConfig } from '../../src/config/core/schema.js';
import { learntName } from '../../src/membership/members.js';
import type { MemberEntry } from '../../src/membership/members.js';
import { UPSTREAM_UNKNOWN_REASON } from '../../src/envoy/routes.js';
import { XdsWriter } from '../../src/envoy-runtime/xds-files.js';
import { account, total, type Accounting, type AccountingRules } from '../load/accounting.js';
import { describe503, gatewayGaps, skewgateLogRecords, unexplained503s, versionAt } from '../load/gateway-view.js';
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
import { controlPlaneNode } from '../helpers/k8s-objects.js';
import {
  FAST_OFF,
  FAST_ON,
  SKEWGATE_ARMS,
  byTimelinePhase,
  fastByPhaseText,
  modeText,
  skewgateArmOptions,
  type SkewgateArm,
  checkFastPathModes,
  armRoutes,
} from '../helpers/fast-path-arms.js';

// This file's addresses and etcd ports (harness/lab/slots.ts): it can run beside any other lab.
const slot = claimLabSlot();

const RATE_PER_ARM = 12;
const DISCOVERY_TRIES = 3;
/**
 * Each phase runs until each skewgate arm has this many skewed requests answered since the new
 * member was in effect there (P0: since the start): what "no false 404, no lost write" rests on.
 */
const MIN_SKEWED_PER_PHASE = 40;
/**
 * The baseline's false 404s required in each mixed phase: a load balancer that follows the
 * machines (new in once ready, old out before it goes) still sends requests for the new resource
 * to an old apiserver. The phase runs until the baseline has them.
 */
const MIN_BASELINE_FALSE_404 = 10;
/** Acknowledged creates per skewgate arm over the run, for the lost and duplicated writes check. */
const MIN_ACKED_CREATES = 50;
const MIXED = ['P1', 'P2'];
/** What each phase waits for before it ends (test/load/wait.ts phaseEvidence). */
const EVIDENCE = { arms: SKEWGATE_ARMS, minSkewed: MIN_SKEWED_PER_PHASE, mixedPhases: MIXED, minFalse404: MIN_BASELINE_FALSE_404 };
/** Looks at the baseline's Envoy (100 ms apart) for a pool change it was given before giving up. */
const POOL_TRIES = 600;
const ARMS = [...SKEWGATE_ARMS, 'baseline'] as const;
const OLD = ['kas-1', 'kas-2', 'kas-3'] as const;
const NEW = ['kas-4', 'kas-5', 'kas-6'] as const;
/** skewgate's log lines that mark a membership change, and how the results name them. */
const MEMBERSHIP_LINES: Readonly<Record<string, string>> = {
  'apiserver learnt; probing it': 'learnt (probing)',
  'apiserver admitted as a member': 'admitted',
  'apiserver left every source: draining': 'draining',
  'drained apiserver removed': 'removed',
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
t.setTimeout(16 * 60_000);
/** The apiserver's name in skewgate's config and log: the seed's own, a learnt one by its address. */
const gatewayName = (name: string): string =>
  (NEW as readonly string[]).includes(name) ? learntName(slot.loopback(Number(name.slice(4))), 6443) : name;

t.test(
  'replace-style rolling upgrade (new apiservers at new addresses) through skewgate and a load balancer updated the same way',
  async (t) => {
    await withLoadLab(
      'replace-upgrade',
      { connections: 24, addresses: slot },
      async ({ parts: { versions: v, kubectl }, dir, session, lab, timeline, http, clock, origin, progress, runSeconds, track }) => {
        const spec = (name: string, version: string): ApiServerSpec => ({
          name,
          version,
          ip: slot.loopback(Number(name.slice(4))),
          port: 6443,
        });
        await Promise.all(OLD.map((s) => session.start(spec(s, v.kubeOld))));
        const admin = lab.apiServerUrl('kas-1');
        const nodeEvents: MembershipEvent[] = [];
        // The old machines' kubelets registered their Nodes long ago.
        for (const s of OLD) await registerNode(s, admin);

        const skewgateGateway = async (arm: SkewgateArm): Promise<Awaited<ReturnType<typeof lab.startGateway>>> =>
          lab.startGateway({ ...skewgateArmOptions(arm, await freeLoopbackPort(), true), membershipSources: ['nodes'] });
        const gateways = {
          [FAST_ON]: await skewgateGateway(FAST_ON),
          [FAST_OFF]: await skewgateGateway(FAST_OFF),
          baseline: await lab.startGateway({ name: 'baseline', withSkewgate: false, port: await freeLoopbackPort(), xds: true }),
        };
        const configHashes = async (): Promise<string[]> =>
          Promise.all(
            SKEWGATE_ARMS.map(async (arm) =>
              createHash('sha256')
                .update(await readFile(gateways[arm].configFile))
                .digest('hex'),
            ),
          );
        const configHash = await configHashes();
        const pidsBefore = await gatewayPids();
        // The baseline's pool, updated as a load balancer is: the same files, written by the test.
        const baselineConfig = loadConfig(gateways.baseline.configFile);
        const pool = new Map<string, ApiServerConfig>(baselineConfig.apiservers.map((s) => [s.name, s]));
        const lb = new XdsWriter(baselineConfig, pino({ level: 'silent' }));
        const writePool = (): Promise<void> =>
          lb.update([...pool.values()].map((s): MemberEntry => ({ spec: s, role: 'member', seed: false, sources: ['lb'] })));

        const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
        for (const arm of [...ARMS, 'clients']) await ensureNamespace(session.direct, admin, labNamespace(arm));
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
            rng: seededRng(46),
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
        /** Until every skewgate arm has MIN_SKEWED_PER_PHASE skewed answers sent since it routed by the new member (and the baseline its false 404s, in a mixed phase). */
        const phaseEvidence = untilPhaseEvidence({ waits, timeline, rules, ...EVIDENCE });
        /** Until the baseline's Envoy has (or has not) the machine among its balanced endpoints: the load balancer's pool as it runs it. */
        const baselinePool = async (name: string, present: boolean): Promise<void> => {
          const endpoint = new RegExp(`^default::${spec(name, v.kubeNew).ip.replaceAll('.', '\\.')}:6443::`, 'm');
          for (let i = 1; ; i++) {
            const clusters = await (await fetch(`${gateways.baseline.envoyAdminUrl}/clusters`)).text();
            if (endpoint.test(clusters) === present) return;
            if (i >= POOL_TRIES)
              throw new Error(`the baseline's Envoy still ${present ? 'lacks' : 'has'} ${name} after ${POOL_TRIES} looks`);
            await sleep(100);
          }
        };

        timeline.phase('P0');
        progress(`P0: 3 × v${v.kubeOld} on ${slot.loopback(1)}-3; load ${RATE_PER_ARM} req/s per arm`);
        const p0 = clock();
        run.start();
        await dwell('P0', p0, false);
        await phaseEvidence('P0', {}, p0);

        for (const [i, added] of NEW.entries()) {
          const removed = OLD[i] as string;
          const phase = `P${i + 1}`;
          const phaseAt = timeline.phase(phase);
          progress(`${phase}: adding ${added} v${v.kubeNew} at ${spec(added, v.kubeNew).ip}, then removing ${removed}`);
          // Cluster API: the new machine first; its apiserver joins, then its kubelet registers the Node.
          const ready = await session.start(spec(added, v.kubeNew));
          await registerNode(added, lab.apiServerUrl(added));
          pool.set(added, { name: added, url: lab.apiServerUrl(added), caFile: lab.pki.caFile } as ApiServerConfig);
          await writePool();
          // The old machine goes once the new one is in: admitted by each skewgate (its own log
          // line) with a skewed request routed after it, and in the load balancer's pool.
          const since: Record<string, number> = {};
          for (const arm of SKEWGATE_ARMS) {
            const e = await untilInEffect({
              logFile: lab.logFile(`skewgate-${arm}`),
              seeds: OLD,
              server: gatewayName(added),
              sinceMs: ready,
              logFromMs: origin,
              arm,
              kind: 'skewed',
              ...waits,
            });
            since[arm] = e.inEffectAtMs;
            progress(`${phase}: ${arm} admitted ${added} ${((e.usableAtMs - ready) / 1000).toFixed(1)} s after its /readyz passed`);
          }
          await baselinePool(added, true);
          // Then the old machine goes: out of the load balancer, its apiserver stopped, its Node deleted.
          pool.delete(removed);
          await writePool();
          await baselinePool(removed, false);
          await session.stop(removed);
          await deleteNode(removed, lab.apiServerUrl(added));
          await dwell(phase, ready, true);
          await phaseEvidence(phase, since, phaseAt);
        }

        progress('stopping the load');
        await run.stop();
        await lb.close();
        const final = await listFinal(session.direct, lab.apiServerUrl('kas-6'), workload, ARMS);
        const tl = timeline.snapshot();
        const a: Accounting = account({ timeline: tl, requests: run.log.requests, watch: run.log.watch, final, rules });
        const pidsAfter = await gatewayPids();
        const configAfter = await configHashes();
        const configSame = JSON.stringify(configAfter) === JSON.stringify(configHash);
        const envoyMembers: Record<string, string[]> = {};
        const membership: MembershipEvent[] = [];
        for (const arm of SKEWGATE_ARMS) {
          const clustersNow = await (await fetch(`${gateways[arm].envoyAdminUrl}/clusters`)).text();
          envoyMembers[arm] = [...new Set([...clustersNow.matchAll(/^([a-z0-9-]+)::/gm)].map((m) => m[1] as string))]
            .filter((n) => n !== 'default' && n !== 'skewgate-extproc')
            .sort();
          // The log file outlives a run: only this run's lines.
          membership.push(...(await membershipTimeline(lab.logFile(`skewgate-${arm}`), arm)).filter((e) => e.atMs >= origin));
        }
        const routes = await armRoutes((arm) => lab.logFile(`envoy-${arm}`), origin, byTimelinePhase(tl));
        const sgTotals = SKEWGATE_ARMS.map(
          (arm) =>
            `${arm} ${total(a, 'requests', arm)} requests, ${total(a, 'false404s', arm)} false 404s, ${total(a, 'lostWrites', arm)} lost and ${total(a, 'duplicatedWrites', arm)} duplicated writes`,
        ).join('; ');

        const md = [
          `### Replace-style rolling upgrade v${v.kubeOld} → v${v.kubeNew}, new addresses (test/cluster/replace-upgrade.test.ts)`,
          '',
          `**Method.** etcd and three kube-apiservers v${v.kubeOld} (kas-1/2/3 on ${[1, 2, 3].map((n) => slot.loopback(n)).join(', ')}, port 6443). skewgate's config names only those three (the seed) with \`membership.sources: [nodes]\` and \`envoy.xds\`, in two gateways side by side: \`${FAST_ON}\`, ${modeText(FAST_ON)}, and \`${FAST_OFF}\`, ${modeText(FAST_OFF, true)}; the baseline is the same Envoy without ext_proc, its pool in the same filesystem xDS files, rewritten by the test the way a load balancer is updated (the new machine in once ready, the old one out before it goes). Phases P1–P3 follow Cluster API's order: a v${v.kubeNew} apiserver is started on a new address (kas-4/5/6 on ${[4, 5, 6].map((n) => slot.loopback(n)).join(', ')}), its Node registered (the lab has no kubelets: the test writes the Node object with the machine's InternalIP and hostname, right after its apiserver is ready; until then skewgate cannot know the apiserver, and its identity Lease makes what only it serves a 503 instead of a 404), once each skewgate has admitted it (its own log line) and routed a skewed request after that, and the baseline's Envoy has it in its pool, the oldest machine leaves: out of the baseline's pool (and gone from its Envoy), apiserver stopped, Node deleted; then load until each skewgate arm has ${MIN_SKEWED_PER_PHASE} skewed answers sent after it routed by the new member and, in P1 and P2, the baseline ${MIN_BASELINE_FALSE_404} false 404s. The load and the accounting are those of the in-place rolling upgrade above (${RATE_PER_ARM} req/s per arm of \`${workload.skewed.group}/${workload.skewed.version} ${workload.skewed.resource}\`, served by v${v.kubeNew} only, and configmaps; a 404 is false when a serving apiserver had been ready for more than 1 s, or the object had been acknowledged).`,
          '',
          render(phaseTable(a)),
          '',
          `Totals: ${sgTotals}; baseline ${total(a, 'requests', 'baseline')} requests, ${total(a, 'false404s', 'baseline')} false 404s, ${total(a, 'lostWrites', 'baseline')} lost and ${total(a, 'duplicatedWrites', 'baseline')} duplicated writes. skewgate's config files unchanged: ${configSame ? 'yes' : '**no**'}; Envoy and skewgate processes the same from start to end: ${samePids(pidsBefore, pidsAfter) ? 'yes' : '**no**'}; Envoy's apiserver clusters at the end: ${SKEWGATE_ARMS.map((arm) => `${arm} ${envoyMembers[arm]?.join(', ') ?? ''}`).join('; ')}.`,
          '',
          `Fast path (Envoy's access log, requests on a \`fast-path-*\` route, so without a skewgate call, of all, per phase): ${FAST_ON} ${fastByPhaseText(routes[FAST_ON])}; ${FAST_OFF} ${fastByPhaseText(routes[FAST_OFF])}. A member joining or leaving withdraws every fast-path route before the pool changes (docs/design.md, invariant 7).`,
          '',
          render(problemsTable(a)),
          '',
          render(false404Table(a, origin, 10, await session.auditIds())),
          '',
          'Timeline (t from etcd ready), with skewgate’s membership changes from its log:',
          '',
          render(mergeTimeline(timelineTable(tl, origin), [...nodeEvents, ...membership], origin)),
          '',
          `Real clients (kubectl v${v.kubeNew} and @kubernetes/client-node, unmodified, gateway kubeconfig, while the load runs):`,
          '',
          render(clientChecksTable(checks)),
          '',
          `Run time ${runSeconds().toFixed(0)} s.`,
        ].join('\n');
        await writeClusterPart('replace-upgrade', md);
        t.comment(md);

        // ---- the claims ----
        t.ok(configSame, 'no config edit');
        checkFastPathModes(t, routes, fastByPhaseText(routes[FAST_ON]));
        t.ok(
          samePids(pidsBefore, pidsAfter),
          `no restart of Envoy or skewgate (${JSON.stringify(pidsBefore)} → ${JSON.stringify(pidsAfter)})`,
        );
        for (const arm of SKEWGATE_ARMS) {
          t.same(
            envoyMembers[arm],
            NEW.map((n) => learntName(spec(n, v.kubeNew).ip, 6443)).sort(),
            `${arm}: Envoy's clusters are the learnt members; the seed is gone`,
          );
          for (const n of NEW) {
            const name = learntName(spec(n, v.kubeNew).ip, 6443);
            t.ok(
              membership.some((m) => m.server === name && m.what === `${arm}: admitted`),
              `${arm}: ${name} admitted (span events and metrics carry the same change)`,
            );
          }
          for (const o of OLD)
            t.ok(
              membership.some((m) => m.server === o && m.what === `${arm}: removed`),
              `${arm}: ${o} drained, then removed`,
            );
        }
        // skewgate cannot route to an apiserver before a source names it and it is admitted (its
        // own log line): until then, and until a request routed after that line proves it in
        // effect, its identity Lease turns would-be 404s into 503 unmatched_apiserver_identity, and
        // a route that reaches Envoy a moment after its cluster gives upstream_unknown_to_envoy.
        const harnessName = new Map(NEW.map((n) => [gatewayName(n), n as string]));
        const false404Evidence = {
          origin,
          accessLogOf: (arm: string) => lab.logFile(`envoy-${arm}`),
          skewgateLogOf: (arm: string) => ((SKEWGATE_ARMS as readonly string[]).includes(arm) ? lab.logFile(`skewgate-${arm}`) : undefined),
          auditLogs: lab.apiServerSpecs().map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) })),
        };
        for (const arm of SKEWGATE_ARMS) {
          const own = run.log.requests.filter((r) => r.arm === arm);
          const { gaps } = await gatewayGaps({
            logFile: lab.logFile(`skewgate-${arm}`),
            fromMs: origin,
            seeds: OLD,
            capable: {
              skewed: (server, at) => versionAt(tl, harnessName.get(server) ?? server, at) === v.kubeNew,
              common: () => true,
            },
            requests: own,
          });
          const sg503 = own.filter((r) => r.status === 503);
          const unexplained = unexplained503s({
            timeline: tl,
            requests: sg503,
            gaps,
            serves: rules.serves,
            reasons: ['no_healthy_capable_server', 'unmatched_apiserver_identity', UPSTREAM_UNKNOWN_REASON],
          });
          t.comment(`${arm} arm: ${sg503.length} 503s, ${unexplained.length} outside the gaps of the gateway's view`);
          t.same(
            unexplained.map(describe503(origin)),
            [],
            `${arm} arm: every 503 fell where the gateway had no admitted, ready apiserver that serves it in effect (or, not skewgate's own, while one was down)`,
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
          const b = a.rows.find((r) => r.phase === phase && r.arm === 'baseline')?.false404s ?? 0;
          t.ok(b >= MIN_BASELINE_FALSE_404, `${phase} (mixed): the baseline shows ${b} false 404s (≥ ${MIN_BASELINE_FALSE_404})`);
        }
        t.equal(total(a, 'duplicatedWrites', 'baseline'), 0, 'no duplicated write through the baseline either');
        for (const arm of SKEWGATE_ARMS) {
          const acked = total(a, 'createsAcked', arm);
          t.ok(acked >= MIN_ACKED_CREATES, `${arm} arm: ${acked} acknowledged creates checked (≥ ${MIN_ACKED_CREATES})`);
          for (const c of checks.filter((c) => c.arm === arm)) {
            for (const x of c.checks) t.ok(x.ok, `${c.phase}: ${x.client} ${x.what}${x.ok ? '' : ` — ${x.detail}`}`);
            // None serves it in P0; from P1 on, every answer is the merged document that lists it.
            const want = c.phase.startsWith('P0 ') ? 0 : DISCOVERY_TRIES;
            t.equal(
              c.listed,
              want,
              `${c.phase}: GET /apis listed ${workload.skewed.resource} in ${c.listed} of ${DISCOVERY_TRIES} answers`,
            );
          }
        }

        async function registerNode(name: string, via: string): Promise<void> {
          const r = await session.direct.send('POST', `${via}/api/v1/nodes`, controlPlaneNode(name, spec(name, v.kubeNew).ip));
          if (r.status !== 201) throw new Error(`registering Node ${name}: ${r.status} ${r.text.slice(0, 200)}`);
          nodeEvents.push({ atMs: clock(), server: name, what: 'Node registered' });
        }
        async function deleteNode(name: string, via: string): Promise<void> {
          const r = await session.direct.send('DELETE', `${via}/api/v1/nodes/${name}`);
          if (r.status !== 200) throw new Error(`deleting Node ${name}: ${r.status} ${r.text.slice(0, 200)}`);
          nodeEvents.push({ atMs: clock(), server: name, what: 'Node deleted' });
        }
        async function gatewayPids(): Promise<Record<string, number | null>> {
          const st = await lab.status();
          return Object.fromEntries(st.filter((p) => /^(envoy|skewgate)-/.test(p.name)).map((p) => [p.name, p.pid]));
        }
      },
    );
  },
);

function samePids(a: Record<string, number | null>, b: Record<string, number | null>): boolean {
  const keys = Object.keys(a).sort();
  return (
    // An Envoy and a skewgate per skewgate arm, and the baseline's Envoy.
    keys.length === 2 * SKEWGATE_ARMS.length + 1 &&
    JSON.stringify(keys) === JSON.stringify(Object.keys(b).sort()) &&
    keys.every((k) => a[k] !== null && a[k] === b[k])
  );
}

interface MembershipEvent {
  readonly atMs: number;
  readonly server: string;
  readonly what: string;
}

/** One skewgate's membership changes from its log, named `<arm>: <change>`. */
async function membershipTimeline(logFile: string, arm: string): Promise<MembershipEvent[]> {
  const out: MembershipEvent[] = [];
  for (const o of skewgateLogRecords(await readFile(logFile, 'utf8'))) {
    const what = typeof o['msg'] === 'string' ? MEMBERSHIP_LINES[o['msg']] : undefined;
    if (what !== undefined && typeof o['server'] === 'string' && typeof o['time'] === 'string')
      out.push({ atMs: Date.parse(o['time']), server: o['server'], what: `${arm}: ${what}` });
  }
  return out;
}

function mergeTimeline(
  table: ReturnType<typeof timelineTable>,
  events: readonly MembershipEvent[],
  origin: number,
): ReturnType<typeof timelineTable> {
  const rows = [
    ...table.rows.map((r) => [...r]),
    ...events.map((e) => [`${((e.atMs - origin) / 1000).toFixed(1)} s`, e.what, e.server, '']),
  ];
  rows.sort((x, y) => parseFloat(x[0] as string) - parseFloat(y[0] as string));
  return { ...table, rows };
}
