// What a node upgrade run (node-upgrade-run.ts) did to each node, written to bench/RESULTS.md and
// judged: the skewgate node Ready in every phase and never flipped, every Lease renewal within the
// 40 s lease, its pod never restarted, evicted or moved, no 404 to its kubelet or through its
// gateway, every streaming check passing, every in-cluster list answered as the phase's
// apiservers serve it, and every held session that ended ended at its own apiserver's stop. The
// round-robin node is measured beside it, not judged.
import type { Test } from 'tap';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KUBE_PROXY_USER } from '../../harness/lab/pki.js';
import type { ServerAuditEvent } from '../../harness/lab/audit-events.js';
import { nodeUser } from '../../harness/node/node.js';
import { packageRoot } from '../../src/util/package-root.js';
import { render, writeClusterPart } from '../../bench/cluster-results.js';
import type { HeldSession, SessionEnd } from './held-sessions.js';
import { lagSummary, leaseRenewals, type LagSummary } from './lease-renewals.js';
import { leaseGapEvidence } from './lease-gap-evidence.js';
import { LEASE_SECONDS, RENEW_MS } from './node-lab.js';
import { nodeArmTable } from './node-upgrade-table.js';
import { ARMS, JUDGED, SKEWED, podName, type Arm, type Change, type NodeUpgradeRun } from './node-upgrade-run.js';
import type { NodeView, PodView } from './node-views.js';
import { mixSummary, trafficMix, writeTrafficMix, type MixWindowResult } from './traffic-mix.js';
import { FAST_PATH_ROUTE_PREFIX, FAST_PATH_X509 } from '../../src/envoy/fast-routes.js';

export interface Outcome {
  readonly end: number;
  readonly phases: readonly string[];
  readonly lags: ReadonlyMap<Arm, LagSummary>;
  readonly last: ReadonlyMap<Arm, { node: NodeView; pod: PodView }>;
  readonly kubelet404: ReadonlyMap<Arm, readonly string[]>;
  /** 404s in the node gateway's access log since P0 (the kubelet's and kube-proxy's requests). */
  readonly envoy404: readonly string[];
  /** The node gateway's requests since P0: all, on fast routes, on the fast routes for certificates Envoy stated. */
  readonly nodeGatewayRoutes: { readonly requests: number; readonly fast: number; readonly x509: number };
  readonly sessionEnds: readonly (SessionEnd<Arm> & { server: string | undefined; own: Change | undefined })[];
  readonly survived: ReadonlyMap<Arm, number>;
  /** The skewgate node's traffic, steady and through the upgrade (when asked for). */
  readonly mix: readonly MixWindowResult[];
  /** What the gateways recorded during the skewgate node's longest Lease lag, when it passed two renewals. */
  readonly lagEvidence: readonly string[];
  readonly md: string;
}

const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

export interface Report {
  /** The results part's id (bench/RESULTS.md) and the file named in its heading. */
  readonly id: string;
  readonly title: string;
  /** The method paragraph, after "**Method.**". */
  readonly method: string;
  /** Writes bench/node-traffic-mix.json (one file owns it). */
  readonly trafficMix?: { readonly upgradeWindow: string };
}

async function gapEvidence(run: NodeUpgradeRun, lag: LagSummary | undefined): Promise<string[]> {
  if (lag === undefined || lag.maxMs <= 2 * RENEW_MS) return [];
  const lab = run.lab;
  return leaseGapEvidence({
    fromMs: lag.maxEndedAt - lag.maxMs,
    toMs: lag.maxEndedAt,
    leasePath: `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${run.nodeName(JUDGED)}`,
    envoyLog: lab.logFile('envoy-node-gateway'),
    skewgateLogs: ['node-gateway', 'gateway'].map((g) => ({ name: `skewgate-${g}`, file: lab.logFile(`skewgate-${g}`) })),
  });
}

/** Gathers what happened once the last phase ended, writes the results part, returns it all. */
export async function finish(run: NodeUpgradeRun, report: Report): Promise<Outcome> {
  run.held.tend();
  const end = Date.now();
  const { origin, changes } = run;
  const events = await run.auditEvents();
  const servedBy = (s: HeldSession<Arm>): string | undefined => run.held.servedBy(events, s);
  const lags = new Map<Arm, LagSummary>();
  const last = new Map<Arm, { node: NodeView; pod: PodView }>();
  const kubelet404 = new Map<Arm, string[]>();
  for (const arm of ARMS) {
    const r = leaseRenewals(events, run.nodeName(arm), origin);
    lags.set(arm, lagSummary(r.renewals, r.failed, end));
    last.set(arm, { node: await run.viewNode(arm), pod: await run.viewPod(arm) });
    kubelet404.set(arm, notFoundTo(events, nodeUser(run.nodeName(arm)), origin));
  }
  const nodeGateway = (await readFile(run.lab.logFile('envoy-node-gateway'), 'utf8'))
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { start: string; method: string; path: string; status: number; route?: string })
    .filter((x) => Date.parse(x.start) >= origin);
  const envoy404 = nodeGateway.filter((x) => x.status === 404).map((x) => `${x.method} ${x.path}`);
  const routes = {
    requests: nodeGateway.length,
    fast: nodeGateway.filter((x) => x.route?.startsWith(FAST_PATH_ROUTE_PREFIX) === true).length,
    x509: nodeGateway.filter((x) => x.route?.startsWith(`${FAST_PATH_ROUTE_PREFIX}${FAST_PATH_X509}`) === true).length,
  };
  const sessionEnds = run.held.ended.map((e) => {
    const server = servedBy(e.held);
    // Its own apiserver's stop: that server's SIGTERM while the session was open, before it ended.
    const own = changes.find((c) => c.stopped === server && c.sigterm >= e.held.openedAt && c.sigterm <= e.at);
    return { ...e, server, own };
  });
  // Another apiserver's change the session was open across (stopped, and its replacement ready).
  const survived = new Map<Arm, number>();
  for (const arm of ARMS)
    survived.set(
      arm,
      run.held.all
        .filter((s) => s.arm === arm)
        .reduce(
          (n, s) =>
            n +
            changes.filter(
              (c) => c.stopped !== servedBy(s) && c.sigterm > s.openedAt && Math.max(c.gone, c.ready) < (s.session.done?.at ?? end),
            ).length,
          0,
        ),
    );
  const phases = [...new Set(run.rows.map((r) => r.phase))];
  const mix = report.trafficMix === undefined ? [] : await writeMix(run, events, end, report.trafficMix.upgradeWindow);
  const lagEvidence = await gapEvidence(run, lags.get(JUDGED));
  const outcome = { end, phases, lags, last, kubelet404, envoy404, nodeGatewayRoutes: routes, sessionEnds, survived, mix, lagEvidence };
  const md = markdown(run, report, outcome);
  await writeClusterPart(report.id, md);
  return { ...outcome, md };
}

function notFoundTo(events: readonly ServerAuditEvent[], user: string, fromMs: number): string[] {
  return events
    .filter(
      (e) =>
        e.event.stage === 'ResponseComplete' &&
        e.event.user.username === user &&
        e.event.responseStatus?.code === 404 &&
        Date.parse(e.event.stageTimestamp ?? '') >= fromMs,
    )
    .map((e) => `${e.server} ${e.event.verb ?? ''} ${e.event.requestURI ?? ''}`);
}

// The skewgate node's own traffic (issue 26, item 6): its kubelet and its kube-proxy (the address
// the gateway forwarded tells it from the other node's, which shares the identity), steady and
// through the upgrade, as bench/node-traffic-mix.json for the benchmarks to replay and scale.
async function writeMix(
  run: NodeUpgradeRun,
  events: readonly ServerAuditEvent[],
  end: number,
  upgradeWindow: string,
): Promise<MixWindowResult[]> {
  const sgIp = run.nodes.get(JUDGED)?.spec.ip;
  const firstStop = run.changes[0]?.sigterm ?? end;
  const mix = trafficMix(
    events,
    [
      { name: 'kubelet', matches: (e) => e.user.username === nodeUser(run.nodeName(JUDGED)) },
      { name: 'kube-proxy', matches: (e) => e.user.username === KUBE_PROXY_USER && e.sourceIPs?.[0] === sgIp },
    ],
    [
      { name: 'steady (P0)', fromMs: run.origin, toMs: firstStop },
      { name: upgradeWindow, fromMs: firstStop, toMs: end },
    ],
  );
  const v = run.versions;
  await writeTrafficMix(join(packageRoot(), 'bench', 'node-traffic-mix.json'), {
    source: 'test/cluster/node-upgrade.test.ts',
    kubelet: v.kubeOld,
    kubeProxy: v.kubeOld,
    apiservers: `${v.kubeOld} → ${v.kubeNew}`,
    pods: 1,
    windows: mix,
  });
  return mix;
}

function markdown(run: NodeUpgradeRun, report: Report, o: Omit<Outcome, 'md'>): string {
  const { origin, changes, rows, inCluster } = run;
  const label = (arm: Arm): string => (arm === 'skewgate' ? 'Envoy + skewgate' : 'TCP round robin');
  return [
    `### ${report.title} (${report.id === 'node-upgrade' ? 'test/cluster/node-upgrade.test.ts' : `test/cluster/${report.id}.test.ts`})`,
    '',
    `**Method.** ${report.method} In each phase, kubectl (v${run.versions.kubeNew}) runs logs, exec, attach -i and port-forward over WebSocket and SPDY to each node's pod through that node's front; an \`exec -i\` per front stays open the whole run (reopened when it ends; not \`logs -f\`, which holds its stopping apiserver until the SIGKILL: see node-sessions). A phase lasts until each node has stored the phase's Lease renewals after its change was complete (a renewal every ${RENEW_MS / 1000} s). Lease lags are the apiservers' own timestamps of consecutive renewals (audit logs), the last to the end of the run included.`,
    '',
    render(
      nodeArmTable(
        ARMS.map((arm) => {
          const f = run.first.get(arm);
          const z = o.last.get(arm);
          const checks = rows.filter((r) => r.arm === arm).flatMap((r) => r.checks);
          const ends = o.sessionEnds.filter((e) => e.held.arm === arm);
          return {
            label: label(arm),
            readyByPhase: rows.filter((r) => r.arm === arm).map((r) => r.node.ready),
            flippedAt: f?.node.since === z?.node.since ? undefined : (z?.node.since ?? '?'),
            lag: o.lags.get(arm),
            podRestarts: z?.pod.restarts,
            podMovedOrEvicted: !(f?.pod.uid === z?.pod.uid && z?.pod.nodeName === run.nodeName(arm) && z?.pod.deleting === false),
            kubelet404: o.kubelet404.get(arm)?.length ?? 0,
            checksOk: checks.filter((c) => c.ok).length,
            checks: checks.length,
            sessionsEnded: ends.length,
            sessionsEndedAtOwnStop: ends.filter((e) => e.own !== undefined).length,
            restartsSurvived: o.survived.get(arm) ?? 0,
          };
        }),
      ),
    ),
    '',
    `Through the skewgate node's gateway since P0: ${o.nodeGatewayRoutes.requests} requests, ${o.nodeGatewayRoutes.fast} of them on fast routes (no ext_proc stream), ${o.nodeGatewayRoutes.x509} of those with a client certificate Envoy stated (docs/design.md, "Certificates on the fast path").`,
    '',
    `Sessions that ended: ${o.sessionEnds.map((e) => `${e.held.arm} exec -i on ${e.server ?? '?'}, ${e.own === undefined ? "not during its apiserver's stop" : `${sec(e.at - e.own.sigterm)} after its SIGTERM`}: exit ${e.code} \`${e.error}\``).join('; ') || 'none'}.`,
    '',
    ...(o.mix.length === 0
      ? []
      : [
          `The skewgate node's traffic (bench/node-traffic-mix.json): ${o.mix.map((w) => `${w.name}, ${w.seconds} s: ${mixSummary(w, ['kubelet', 'kube-proxy'])}`).join('. ')}.`,
          '',
        ]),
    `In-cluster client (a Job of two unmodified kubectl pods on \`${run.nodeName(JUDGED)}\`, in-cluster config, listing \`${SKEWED.resource}\` through the \`kubernetes\` Service, which the skewgate node gateway publishes; the round-robin node's pods would use the same Service): ${inCluster.map((j) => `${j.phase} ${j.run.outcome === 'Complete' ? `Complete, ${j.run.answers.map((a) => a.status.split(' ')[0]).join('/')}` : `${j.run.outcome}: kubectl says the server has no such resource type (none serves it yet)`}`).join(', ')}.`,
    '',
    `Changes: ${changes.map((c) => `${c.started} ready ${c.stopped === c.started ? `${sec(c.ready - c.sigterm)} after ${c.stopped}'s SIGTERM` : `at +${sec(c.ready - origin)}`}, ${c.stopped} gone ${sec(c.gone - c.sigterm)} after its SIGTERM`).join('; ')}. Longest Lease lag ended at ${ARMS.map((a) => `${a} +${sec((o.lags.get(a)?.maxEndedAt ?? origin) - origin)}`).join(', ')} (t from P0). Run time ${sec(o.end - origin)} from P0.`,
  ].join('\n');
}

/** The claims for the skewgate node (the round-robin node's row is only required to be real). */
export function judge(t: Test, run: NodeUpgradeRun, o: Outcome, minRenewals: number): void {
  const arm = JUDGED;
  const node = run.nodeName(arm);
  t.equal(
    run.rows.find((r) => r.phase === 'P0' && r.arm === 'round-robin')?.node.ready,
    'True',
    'the round-robin node ran too: Ready in P0 (its row is a real comparison)',
  );
  for (const p of o.phases) {
    const r = run.rows.find((x) => x.phase === p && x.arm === arm);
    t.equal(r?.node.ready, 'True', `${p}: ${node} Ready`);
    t.same(r?.node.taints, [], `${p}: no taint on ${node}`);
    for (const c of r?.checks ?? []) t.ok(c.ok, `${p}: ${c.what} through skewgate${c.ok ? '' : `: ${c.detail}`}`);
  }
  t.equal(o.last.get(arm)?.node.since, run.first.get(arm)?.node.since, `${node}'s Ready condition never changed (lastTransitionTime)`);
  const lag = o.lags.get(arm);
  t.ok((lag?.renewals ?? 0) >= minRenewals, `${lag?.renewals ?? 0} Lease renewals stored over the run (≥ ${minRenewals})`);
  t.ok(
    (lag?.maxMs ?? Infinity) < LEASE_SECONDS * 1000,
    `every Lease renewal within the ${LEASE_SECONDS} s lease: longest lag ${sec(lag?.maxMs ?? 0)}${o.lagEvidence.map((l) => `; ${l}`).join('')}`,
  );
  // The kubelet and kube-proxy present certificates: Envoy's Lua states them (cert-identity-lua.ts).
  t.ok(
    o.nodeGatewayRoutes.x509 > 0,
    `the node's certificate clients took fast routes, stated by Envoy: ${o.nodeGatewayRoutes.x509} of ${o.nodeGatewayRoutes.requests} requests`,
  );
  const f = run.first.get(arm)?.pod;
  const z = o.last.get(arm)?.pod;
  t.same(
    [z?.uid, z?.nodeName, z?.phase, z?.restarts, z?.deleting],
    [f?.uid, node, 'Running', 0, false],
    `pod ${podName(arm)}: the same pod, on its node, Running, never restarted, not evicted`,
  );
  for (const j of run.inCluster)
    if (j.phase === 'P0')
      // No apiserver serves it yet: kubectl's true answer is that the server has no such resource.
      t.ok(
        j.run.outcome === 'Failed' &&
          j.run.answers.every((a) => a.status.includes(`the server doesn't have a resource type "${SKEWED.resource}"`)),
        `P0 (none serves ${SKEWED.resource}): the in-cluster kubectl says the server has no such resource type`,
      );
    else
      t.same(
        [j.run.outcome, ...j.run.answers.map((a) => `${a.server}${a.path} ${a.status}`)],
        ['Complete', ...j.run.answers.map(() => `https://10.96.0.1:443/apis/${SKEWED.group}/${SKEWED.version}/${SKEWED.resource} 200 OK`)],
        `${j.phase}: the in-cluster kubectl Job listed ${SKEWED.resource} through the kubernetes Service, every pod 200`,
      );
  t.same(
    run.inCluster.map((j) => j.run.answers.length),
    o.phases.map(() => 2),
    'two in-cluster pods per phase',
  );
  t.same(o.kubelet404.get(arm), [], `no 404 to ${nodeUser(node)} (the apiservers' audit logs)`);
  t.same(o.envoy404, [], "no 404 in the node gateway's access log (kubelet and kube-proxy)");
  for (const e of o.sessionEnds.filter((x) => x.held.arm === arm))
    t.ok(
      e.own !== undefined,
      `exec -i ended ${e.own === undefined ? 'while its apiserver ran' : `${sec(e.at - e.own.sigterm)} after its apiserver ${e.server ?? ''}'s SIGTERM`} (exit ${e.code})`,
    );
  // Which apiserver a session lands on is the balancer's choice: how many other changes one spanned is reported, not required (node-sessions proves it on purpose).
  t.comment(`open sessions through skewgate carried on over ${o.survived.get(arm) ?? 0} changes of another apiserver`);
}
