// A rollback (issue 29, item 6): three real kube-apiservers KUBE_OLD, upgraded part-way — kas-1,
// then kas-2 to KUBE_NEW in place — then rolled back: kas-2 in place (cordoned first, as a bad new
// apiserver would be), kas-1 by replacement (a KUBE_OLD kas-4 added at a new address, its Node
// registered as Cluster API's would be, then kas-1's Machine deleted and removed). Under a load
// through skewgate (fast path on) and through the same Envoy without ext_proc (the baseline, its
// pool updated as a load balancer is). Proves: no false 404 and no lost write through skewgate in
// any phase; the merged /apis ETag changes with every change of the union (clients rediscover) and
// comes back to its first value once every member is old again; a cordon keeps every request off
// the cordoned apiserver; the gate's answers at each step — and it holds the removal of kas-1, the
// last apiserver serving an API the load still uses, until that use stops. The pre-terminate hook
// script (deploy/cluster-api/pre-terminate-hook.sh) runs against a Machine of a CRD the test
// installs: it keeps the hook while the gate holds and removes it once it proceeds. Every step waits
// for the event it needs; phases end on counts of answered requests.
import t from 'tap';
import { execFile } from 'node:child_process';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { claimLabSlot } from '../../harness/lab/slots.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { loadConfig } from '../../src/config/load.js';
import type { ApiServerConfig } from '../../src/config/core/schema.js';
import type { MemberEntry } from '../../src/membership/members.js';
import { learntName } from '../../src/membership/members.js';
import { XdsWriter } from '../../src/envoy-runtime/xds-files.js';
import { packageRoot } from '../../src/util/package-root.js';
import { account, total, type Accounting, type AccountingRules } from '../load/accounting.js';
import { phaseEvidence as untilPhaseEvidence, untilInEffect } from '../load/wait.js';
import { LoadRun, freeLoopbackPort, seededRng } from '../load/run.js';
import { ensureNamespace, listFinal } from '../load/verify.js';
import { configMaps, labNamespace, mutatingAdmissionPolicies, type Workload } from '../load/workload.js';
import { false404Table, phaseTable, problemsTable, render, timelineTable, writeClusterPart } from '../../bench/cluster-results.js';
import { withLoadLab } from '../helpers/load-lab.js';
import { describeFalse404s } from '../helpers/false-404s.js';
import { controlPlaneNode } from '../helpers/k8s-objects.js';
import { CLI, runCli } from '../helpers/cli.js';
import { FAST_ON, skewgateArmOptions } from '../helpers/fast-path-arms.js';
import { REASON_HEADER } from '../../src/constants.js';

const slot = claimLabSlot();
const RATE_PER_ARM = 12;
/** Skewed answers per phase through skewgate since the change was in effect there: what "no false 404" rests on. */
const MIN_SKEWED_PER_PHASE = 30;
/** The baseline's false 404s required in each mixed phase (the problem, shown once more for a rollback's shape). */
const MIN_BASELINE_FALSE_404 = 5;
const SG = FAST_ON;
const ARMS = [SG, 'baseline'] as const;
const MIXED = ['P1', 'P2', 'P3'];
const SEEDS = ['kas-1', 'kas-2', 'kas-3'] as const;
const HOOK = 'pre-terminate.delete.hook.machine.cluster.x-k8s.io/skewgate';
/** The gate's window and usage window here: short, so that the lab's steps are seconds apart. */
const GATE = { window: '5s', usageWindow: '15s', minDecisions: 5, maxErrorRate: 0.05 };
const POOL_TRIES = 600;

t.setTimeout(14 * 60_000);

interface GateRecord {
  readonly step: string;
  readonly verdict: string;
  readonly reasons: readonly string[];
  readonly detail: string;
}

t.test('a part-way upgrade rolled back, in place and by replacement, through skewgate and plain round robin', async (t) => {
  await withLoadLab(
    'rollback',
    { connections: 16, addresses: slot },
    async ({ parts: { versions: v, kubectl }, dir, session, lab, timeline, http, clock, origin, progress, runSeconds, track }) => {
      // The writers' settle timers are unref'd (they must not hold a gateway open): once the load
      // stops, nothing else would keep this test's event loop turning while it waits on them.
      const keepAlive = setInterval(() => undefined, 1000);
      t.teardown(() => clearInterval(keepAlive));
      const ipOf = (name: string): string => slot.loopback(Number(name.slice(4)));
      const spec = (name: string, version: string): ApiServerSpec => ({ name, version, ip: ipOf(name), port: 6443 });
      await Promise.all(SEEDS.map((s) => session.start(spec(s, v.kubeOld))));
      const admin = lab.apiServerUrl('kas-3');
      for (const s of SEEDS) await registerNode(s, admin);
      const sg = await lab.startGateway({
        ...skewgateArmOptions(SG, await freeLoopbackPort(), true),
        membershipSources: ['nodes'],
        operator: { gate: GATE },
      });
      const baseline = await lab.startGateway({ name: 'baseline', withSkewgate: false, port: await freeLoopbackPort(), xds: true });
      const ADMIN = ['--admin', sg.adminAddress as string];
      const baselineConfig = loadConfig(baseline.configFile);
      const pool = new Map<string, ApiServerConfig>(baselineConfig.apiservers.map((s) => [s.name, s]));
      const lb = new XdsWriter(baselineConfig, pino({ level: 'silent' }));
      const writePool = (): Promise<void> =>
        lb.update([...pool.values()].map((s): MemberEntry => ({ spec: s, role: 'member', seed: false, sources: ['lb'] })));

      const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
      for (const arm of ARMS) await ensureNamespace(session.direct, admin, labNamespace(arm));
      const run = track(
        new LoadRun({
          arms: ARMS.map((arm) => ({ arm, baseUrl: arm === SG ? sg.url : baseline.url })),
          http,
          workload,
          ratePerSec: RATE_PER_ARM,
          clock,
          rng: seededRng(29),
        }),
      );
      const rules: AccountingRules = { serves: { skewed: (_s, version) => version === v.kubeNew, common: () => true }, graceMs: 1000 };
      const waits = { requests: () => run.log.requests, clock, progress };
      const phaseEvidence = untilPhaseEvidence({
        waits,
        timeline,
        rules,
        arms: [SG],
        minSkewed: MIN_SKEWED_PER_PHASE,
        mixedPhases: MIXED,
        minFalse404: MIN_BASELINE_FALSE_404,
      });
      const gates: GateRecord[] = [];
      /** Asks the gate (once, or --wait up to `waitS`), records the answer under `step`. */
      const gate = async (step: string, args: string[], waitS = 0): Promise<GateRecord> => {
        const r = await runCli([
          'gate',
          ...ADMIN,
          '-o',
          'json',
          ...args,
          ...(waitS > 0 ? ['--wait', '--wait-timeout', `${waitS}s`, '--interval', '1s'] : []),
        ]);
        const g = JSON.parse(r.stdout) as { verdict: string; holds: { reason: string; detail: string }[] };
        const rec = { step, verdict: g.verdict, reasons: g.holds.map((h) => h.reason), detail: g.holds.map((h) => h.detail).join('; ') };
        gates.push(rec);
        progress(`gate ${args.join(' ')} (${step}): ${rec.verdict} ${rec.reasons.join(',')}`);
        return rec;
      };
      /** The merged /apis's ETag as skewgate answers it (kubectl's Accept); asked again while an apiserver answers instead. */
      const etag = async (): Promise<string> => {
        for (let i = 0; ; i++) {
          const r = await http.send('GET', `${sg.url}/apis`, undefined, {
            accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
          });
          if (r.status === 200 && r.headers[REASON_HEADER] === 'merged_apis') return String(r.headers['etag'] ?? '');
          if (i >= 100) throw new Error(`GET /apis through skewgate: ${r.status}, ${String(r.headers[REASON_HEADER])}`);
          await new Promise((res) => setTimeout(res, 100));
        }
      };
      const etags: Record<string, string> = {};
      /** Until skewgate has `server` in effect again (its own log line, then a skewed or common answer routed after it). */
      const inEffect = async (server: string, since: number, kind: 'skewed' | 'common'): Promise<number> =>
        (
          await untilInEffect({
            logFile: lab.logFile(`skewgate-${SG}`),
            seeds: SEEDS,
            server,
            sinceMs: since,
            logFromMs: origin,
            arm: SG,
            kind,
            ...waits,
          })
        ).inEffectAtMs;

      // ---- P0: all old ----
      timeline.phase('P0');
      progress(`P0: 3 × v${v.kubeOld}; load ${RATE_PER_ARM} req/s per arm through ${ARMS.join(' and ')}`);
      const p0 = clock();
      run.start();
      await phaseEvidence('P0', {}, p0);
      t.equal((await gate('P0: all old', [], 60)).verdict, 'proceed', 'P0: the gate proceeds on a calm plane');
      etags['P0'] = await etag();

      // ---- P1, P2: kas-1 then kas-2 to the new version, in place ----
      const since: Record<string, number> = {};
      for (const [phase, name] of [
        ['P1', 'kas-1'],
        ['P2', 'kas-2'],
      ] as const) {
        const at = timeline.phase(phase);
        progress(`${phase}: ${name} v${v.kubeOld} → v${v.kubeNew} in place`);
        await session.stop(name);
        const ready = await session.start(spec(name, v.kubeNew));
        since[phase] = await inEffect(name, ready, 'skewed');
        await phaseEvidence(phase, { [SG]: since[phase] as number }, at);
        const g = await gate(`${phase}: ${name} upgraded`, ['--expect', name], 60);
        t.equal(g.verdict, 'proceed', `${phase}: the gate proceeds once ${name} is back, discovered and sent requests`);
        etags[phase] = await etag();
      }

      // ---- P3: kas-2 is bad: cordoned, then rolled back in place ----
      let at = timeline.phase('P3');
      const cordon = await runCli(['cordon', 'kas-2', ...ADMIN, '--reason', 'rollback test: a bad new apiserver', '--by', 'rollback-test']);
      t.equal(cordon.code, 0, `cordon kas-2: ${cordon.stderr}`);
      const cordonedAt = clock();
      // Every request that reached kas-2 since: its audit log, by the gateway's request ids (Envoy's access log).
      await phaseEvidence('P3', { [SG]: cordonedAt }, at);
      const skewOut = await runCli(['skew', ...ADMIN, '--if-removed', 'kas-2']);
      t.equal(skewOut.code, 0, `P3: nothing only kas-2 serves (kas-1 serves it too): ${skewOut.stdout}`);
      t.equal((await gate('P3: before kas-2 goes back', ['--removing', 'kas-2'], 60)).verdict, 'proceed');
      const reachedCordoned = await upstreamHits(ipOf('kas-2'), cordonedAt);
      await session.stop('kas-2');
      const back = await session.start(spec('kas-2', v.kubeOld));
      await inEffect('kas-2', back, 'common');
      const uncordon = await runCli(['uncordon', 'kas-2', ...ADMIN, '--by', 'rollback-test']);
      t.equal(uncordon.code, 0, uncordon.stderr);
      t.equal(reachedCordoned, 0, 'P3: no request reached kas-2 through skewgate while it was cordoned');
      t.equal((await gate('P3: kas-2 back as old', ['--expect', 'kas-2'], 60)).verdict, 'proceed');
      etags['P3'] = await etag();

      // ---- P4: kas-1, the last new apiserver, replaced by an old kas-4 ----
      at = timeline.phase('P4');
      progress(`P4: adding kas-4 v${v.kubeOld} at ${ipOf('kas-4')}, then removing kas-1 (the last v${v.kubeNew})`);
      const added = await session.start(spec('kas-4', v.kubeOld));
      await registerNode('kas-4', admin);
      pool.set('kas-4', { name: 'kas-4', url: lab.apiServerUrl('kas-4'), caFile: lab.pki.caFile } as ApiServerConfig);
      await writePool();
      await inEffect(learntName(ipOf('kas-4'), 6443), added, 'common');
      await baselinePool('kas-4', true);
      t.equal((await gate('P4: kas-4 joined', ['--expect', ipOf('kas-4')], 60)).verdict, 'proceed', 'P4: kas-4 expected, found by address');
      await phaseEvidence('P4', { [SG]: added }, at);
      // Cluster API deletes kas-1's Machine: its pre-terminate hook asks the gate, which holds — the
      // load still uses what only kas-1 serves.
      await installMachines();
      await createMachine('cp-kas-1', 'kas-1');
      await session.direct.send('DELETE', `${admin}/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/cp-kas-1`);
      const held = await gate('P4: removing kas-1 while the load uses its API', ['--removing', 'kas-1']);
      t.ok(held.reasons.includes('removal_in_use'), `P4: the gate holds the removal of kas-1 (${held.reasons.join(', ')}): ${held.detail}`);
      t.match(held.detail, /admissionregistration\.k8s\.io\/v1\/mutatingadmissionpolicies/);
      const inUse = await runCli(['skew', ...ADMIN, '--if-removed', 'kas-1']);
      t.equal(inUse.code, 1, 'skew --if-removed kas-1: something in use (exit 1)');
      t.match(inUse.stdout, /mutatingadmissionpolicies +\S/, `who uses it:\n${inUse.stdout}`);
      const hookHeld = await hookPass();
      t.match(hookHeld, /default\/cp-kas-1 \(kas-1\): gate holds/, 'the hook script keeps the hook while the gate holds');
      t.ok((await machineAnnotations('cp-kas-1')).includes(HOOK), 'the Machine still carries the hook');

      progress('the clients of the new API stop: the load ends');
      await run.stop();
      // What each arm wrote, listed while kas-1 still serves the new resource (after it, nobody does).
      const final = await listFinal(session.direct, lab.apiServerUrl('kas-1'), workload, [...ARMS]);
      // The use ends: within the usage window, the gate lets kas-1 go; the hook script removes the hook.
      const free = await gate('after the load: removing kas-1', ['--removing', 'kas-1'], 60);
      t.equal(free.verdict, 'proceed', `the gate proceeds once nothing only kas-1 serves is in use: ${free.detail}`);
      const hookFree = await hookPass();
      t.match(hookFree, /default\/cp-kas-1 \(kas-1\): gate proceeds; hook removed/);
      t.notOk((await machineAnnotations('cp-kas-1')).includes(HOOK), 'the hook is gone: Cluster API may delete the machine');
      // Cluster API goes on: out of the load balancer, the apiserver stopped, the Node deleted.
      pool.delete('kas-1');
      await writePool();
      await baselinePool('kas-1', false);
      await session.stop('kas-1');
      await deleteNode('kas-1', admin);
      await finishMachine('cp-kas-1');
      const done = await gate('rolled back', ['--kubernetes-version', `v${v.kubeOld}`], 90);
      t.equal(done.verdict, 'proceed', `every member runs v${v.kubeOld} again: ${done.detail}`);
      // The test's own CRD goes too; then the document is that of P0, once every apiserver dropped it.
      await session.direct.send('DELETE', `${admin}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.cluster.x-k8s.io`);
      for (let i = 0; (etags['end'] = await etag()) !== etags['P0'] && i < 600; i++) await new Promise((res) => setTimeout(res, 100));
      const gone = await http.send('GET', `${sg.url}${'/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies'}`);
      t.equal(gone.status, 404, 'the new API is gone for good: a true 404 now');

      await lb.close();
      const tl = timeline.snapshot();
      const a: Accounting = account({ timeline: tl, requests: run.log.requests, watch: run.log.watch, final, rules });
      const history = await runCli(['history', ...ADMIN]);
      const md = [
        `### Rollback: part-way upgrade v${v.kubeOld} → v${v.kubeNew} and back (test/cluster/rollback.test.ts)`,
        '',
        `**Method.** etcd and three kube-apiservers v${v.kubeOld} (kas-1/2/3 on ${SEEDS.map(ipOf).join(', ')}), Nodes registered; skewgate (\`envoy.xds\`, fast path on, \`membership.sources: [nodes]\`, gate window ${GATE.window}, usage window ${GATE.usageWindow}) and the same Envoy without ext_proc (baseline; its pool updated by the test as a load balancer's). Load ${RATE_PER_ARM} req/s per arm (creates, gets, lists of \`${workload.skewed.resource}\` — served by v${v.kubeNew} only — and configmaps; a watch each). P1, P2: kas-1, kas-2 upgraded in place. P3: kas-2 cordoned (\`skewgate cordon\`), then rolled back in place and uncordoned. P4: kas-4 v${v.kubeOld} added at ${ipOf('kas-4')} and kas-1's Machine deleted; its pre-terminate hook (the script) held while the load used the new API; the load then stopped, the gate proceeded, the hook was removed and kas-1 went. Phases end on ${MIN_SKEWED_PER_PHASE} skewed answers through skewgate (and, mixed, ${MIN_BASELINE_FALSE_404} false 404s through the baseline).`,
        '',
        render(phaseTable(a)),
        '',
        `Totals: skewgate ${total(a, 'requests', SG)} requests, ${total(a, 'false404s', SG)} false 404s, ${total(a, 'lostWrites', SG)} lost writes; baseline ${total(a, 'requests', 'baseline')} requests, ${total(a, 'false404s', 'baseline')} false 404s.`,
        '',
        'The gate at each step:',
        '',
        render({
          headers: ['step', 'verdict', 'reasons', 'detail'],
          rows: gates.map((g) => [g.step, g.verdict, g.reasons.join(', ') || '-', g.detail.slice(0, 160) || '-']),
        }),
        '',
        `Merged /apis ETag through skewgate: ${Object.entries(etags)
          .map(([k, e]) => `${k} ${e.slice(1, 9)}`)
          .join(', ')}. Requests that reached kas-2 through skewgate while it was cordoned: ${reachedCordoned}.`,
        '',
        render(problemsTable(a)),
        '',
        render(false404Table(a, origin, 10, await session.auditIds())),
        '',
        render(timelineTable(tl, origin)),
        '',
        '`skewgate history` at the end:',
        '',
        '```',
        history.stdout.trim(),
        '```',
        '',
        `Run time ${runSeconds().toFixed(0)} s.`,
      ].join('\n');
      await writeClusterPart('rollback', md);
      t.comment(md);

      // ---- the claims ----
      const evidence = {
        origin,
        accessLogOf: (arm: string) => lab.logFile(`envoy-${arm}`),
        skewgateLogOf: (arm: string) => (arm === SG ? lab.logFile(`skewgate-${SG}`) : undefined),
        auditLogs: lab.apiServerSpecs().map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) })),
      };
      for (const phase of a.phases) {
        const row = a.rows.find((r) => r.phase === phase && r.arm === SG);
        t.same(
          await describeFalse404s(
            a.false404s.filter((f) => f.arm === SG && f.phase === phase),
            evidence,
          ),
          [],
          `${phase}: no false 404 through skewgate`,
        );
        t.equal(row?.lostWrites, 0, `${phase}: no lost write through skewgate`);
        t.equal(row?.duplicatedWrites, 0, `${phase}: no duplicated write through skewgate`);
      }
      for (const phase of MIXED) {
        const b = a.rows.find((r) => r.phase === phase && r.arm === 'baseline')?.false404s ?? 0;
        t.ok(b >= MIN_BASELINE_FALSE_404, `${phase} (mixed): the baseline shows ${b} false 404s (≥ ${MIN_BASELINE_FALSE_404})`);
      }
      t.not(etags['P1'], etags['P0'], 'P1: the merged /apis changed (a new API): clients rediscover');
      t.equal(etags['P2'], etags['P1'], 'P2: kas-2 adds nothing kas-1 did not: the same document');
      t.equal(etags['P3'], etags['P1'], 'P3 (kas-2 back): the document is P1’s again');
      t.not(etags['end'], etags['P3'], 'rolled back: the merged /apis changed again');
      t.equal(etags['end'], etags['P0'], 'rolled back: the very document of P0');
      t.match(
        history.stdout,
        /kas-2 +cordoned +cordon by rollback-test: rollback test: a bad new apiserver/,
        'the history has the cordon and who',
      );

      async function registerNode(name: string, via: string): Promise<void> {
        const r = await session.direct.send('POST', `${via}/api/v1/nodes`, controlPlaneNode(name, ipOf(name)));
        if (r.status !== 201) throw new Error(`registering Node ${name}: ${r.status} ${r.text.slice(0, 200)}`);
      }
      async function deleteNode(name: string, via: string): Promise<void> {
        const r = await session.direct.send('DELETE', `${via}/api/v1/nodes/${name}`);
        if (r.status !== 200) throw new Error(`deleting Node ${name}: ${r.status} ${r.text.slice(0, 200)}`);
      }
      async function baselinePool(name: string, present: boolean): Promise<void> {
        const endpoint = new RegExp(`^default::${ipOf(name).replaceAll('.', '\\.')}:6443::`, 'm');
        for (let i = 1; ; i++) {
          const clusters = await (await fetch(`${baseline.envoyAdminUrl}/clusters`)).text();
          if (endpoint.test(clusters) === present) return;
          if (i >= POOL_TRIES) throw new Error(`the baseline's Envoy still ${present ? 'lacks' : 'has'} ${name}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      /** Requests skewgate's Envoy sent to `ip` that started at or after `sinceMs` (its access log). */
      async function upstreamHits(ip: string, sinceMs: number): Promise<number> {
        const text = await readFile(lab.logFile(`envoy-${SG}`), 'utf8');
        let n = 0;
        for (const line of text.split('\n')) {
          if (!line.startsWith('{')) continue;
          const o = JSON.parse(line) as { start?: string; upstream_host?: string };
          if (o.start !== undefined && Date.parse(o.start) >= sinceMs && o.upstream_host?.startsWith(`${ip}:`) === true) n++;
        }
        return n;
      }
      async function installMachines(): Promise<void> {
        const crd = {
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: 'machines.cluster.x-k8s.io' },
          spec: {
            group: 'cluster.x-k8s.io',
            scope: 'Namespaced',
            names: { kind: 'Machine', plural: 'machines', singular: 'machine', listKind: 'MachineList' },
            versions: [
              {
                name: 'v1beta2',
                served: true,
                storage: true,
                schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            ],
          },
        };
        const r = await session.direct.send('POST', `${admin}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, crd);
        if (r.status !== 201) throw new Error(`the Machine CRD: ${r.status} ${r.text.slice(0, 200)}`);
        // Served through the gateway once every apiserver lists it (the script lists through it).
        for (let i = 0; ; i++) {
          const l = await session.direct.send('GET', `${admin}/apis/cluster.x-k8s.io/v1beta2/machines`);
          const g = await http.send('GET', `${sg.url}/apis/cluster.x-k8s.io/v1beta2/machines`);
          if (l.status === 200 && g.status === 200) return;
          if (i > 600) throw new Error(`Machines not served: ${l.status} direct, ${g.status} through skewgate`);
          await new Promise((res) => setTimeout(res, 100));
        }
      }
      async function createMachine(name: string, node: string): Promise<void> {
        const r = await session.direct.send('POST', `${admin}/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines`, {
          apiVersion: 'cluster.x-k8s.io/v1beta2',
          kind: 'Machine',
          metadata: {
            name,
            labels: { 'cluster.x-k8s.io/control-plane': '' },
            annotations: { [HOOK]: '' },
            // Cluster API's own finalizer keeps a Machine being deleted; this one stands in for it.
            finalizers: ['test.skewgate.dev/machine'],
          },
          status: { nodeRef: { name: node }, addresses: [{ type: 'InternalIP', address: ipOf(node) }] },
        });
        if (r.status !== 201) throw new Error(`Machine ${name}: ${r.status} ${r.text.slice(0, 200)}`);
      }
      /** Cluster API's finalizer stand-in goes: the Machine is deleted (GET, then PUT without it). */
      async function finishMachine(name: string): Promise<void> {
        const path = `${admin}/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/${name}`;
        const m = JSON.parse((await session.direct.send('GET', path)).text) as { metadata: Record<string, unknown> };
        const r = await session.direct.send('PUT', path, { ...m, metadata: { ...m.metadata, finalizers: [] } });
        if (r.status !== 200) throw new Error(`finishing Machine ${name}: ${r.status} ${r.text.slice(0, 200)}`);
      }
      async function machineAnnotations(name: string): Promise<string> {
        const r = await session.direct.send('GET', `${admin}/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/${name}`);
        return JSON.stringify((JSON.parse(r.text) as { metadata?: { annotations?: unknown } }).metadata?.annotations ?? {});
      }
      /** One pass of the pre-terminate hook script: kubectl through the gateway, skewgate's CLI asking its admin endpoint. */
      async function hookPass(): Promise<string> {
        const bin = join(dir, 'bin');
        await mkdir(bin, { recursive: true });
        const wrapper = join(bin, 'skewgate');
        await writeFile(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
        // The lab's kubectl, under the name the script calls.
        await writeFile(join(bin, 'kubectl'), `#!/bin/sh\nexec "${kubectl}" "$@"\n`);
        await Promise.all([chmod(wrapper, 0o755), chmod(join(bin, 'kubectl'), 0o755)]);
        const script = join(packageRoot(), 'deploy/cluster-api/pre-terminate-hook.sh');
        return new Promise((resolve, reject) => {
          execFile(
            'bash',
            [script, '--once', '--', ...ADMIN],
            {
              timeout: 60_000,
              env: { ...process.env, KUBECONFIG: sg.kubeconfigFile, SKEWGATE: wrapper, PATH: `${bin}:${process.env['PATH'] ?? ''}` },
            },
            (err, _stdout, stderr) => (err ? reject(new Error(`the hook script failed: ${err.message}\n${stderr}`)) : resolve(stderr)),
          );
        });
      }
    },
  );
});
