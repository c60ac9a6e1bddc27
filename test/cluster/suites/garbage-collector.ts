// The harm a false 404 does, with a real kube-controller-manager (KUBE_OLD, garbage collector and
// namespace controllers) in the mixed phase of an upgrade (suite of test/cluster/mixed-versions.test.ts:
// kas-1 and kas-2 KUBE_OLD, kas-3 KUBE_NEW). Dependents (ConfigMaps and Secrets) owned by a
// MutatingAdmissionPolicy — a type only KUBE_NEW serves — must never be deleted while their owner
// lives, and must be collected once it is deleted. The controller manager talks to the cluster
// through (a) skewgate gateways, the fast path on and off, and (b) the plain round-robin baseline,
// one arm after the other. Each start over the live owner lasts until the garbage collector's own
// log says it has judged: its monitors synced, and it has deleted a canary whose owner of the same
// type truly does not exist (a lookup of that type through the gateway, judged absent, acted on),
// not a fixed time. Counts are written to bench/RESULTS.md. Its objects live in namespace gc-harm.
import type { Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { labBinary } from '../../../harness/lab/versions.js';
import { render, writeClusterPart } from '../../../bench/cluster-results.js';
import { ensureNamespace } from '../../load/verify.js';
import { mutatingAdmissionPolicies } from '../../load/workload.js';
import { gcLogFacts, lastRun, type GcLogFacts } from '../../helpers/gc-log.js';
import type { ShapeLab, Suite } from '../../helpers/shape-lab.js';
import { SKEWGATE_ARMS, modeText, checkFastPathModes, armRoutes, fastShareText } from '../../helpers/fast-path-arms.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const MAP_PATH = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const NS = 'gc-harm';
/** Per kind, per arm: how many dependents hang off the owner. */
const DEPENDENTS = { configmaps: 20, secrets: 10 } as const;
/** Controller-manager starts per arm over one live owner (the baseline stops at the first that shows the harm). */
const STARTS = 12;
/**
 * kube-controller-manager's garbage collector syncs on a 30 s period: its workers start at the
 * latest one period after it does (its initial sync timeout), and its discovery is read again
 * after another. A start that has not judged its canary after two periods is over: through
 * skewgate that fails the test (there every start judges within moments of collecting).
 */
const GC_SYNC_PERIOD_MS = 30_000;
const GC_JUDGE_WAIT_MS = 2 * GC_SYNC_PERIOD_MS;
/**
 * The baseline is the control: its only verdict is that some start shows the harm. Through round
 * robin a collector either judges its canary within moments of collecting, or its REST mapper
 * lacks the type (discovery answered by an old apiserver) and its lookups back off for minutes:
 * such a start is cut this long after the collector said it proceeds, and the next one tried.
 */
const BASELINE_CUT_MS = 6000;

export const garbageCollectorSuite: Suite = {
  title: 'garbage collector: dependents of an owner only the new apiservers serve, through skewgate and through round robin',
  run: async (t: Test, { parts: { versions: v }, specs, gateways, lab, session, origin, progress, runSeconds }: ShapeLab) => {
    labBinary('kube-controller-manager', v.kubeOld);
    const news = specs.filter((s) => s.version === v.kubeNew).map((s) => s.name);
    if (specs.length !== 3 || news.length !== 1 || news[0] !== 'kas-3')
      throw new Error('the shape must be kas-1, kas-2 (old) and kas-3 (new)');
    const direct = session.direct;
    const kas1 = lab.apiServerUrl('kas-1');
    const kas3 = lab.apiServerUrl('kas-3');
    await ensureNamespace(direct, kas1, NS);

    /** An owner (through kas-3, the one server that serves the type) and its dependents (through kas-1). */
    const plant = async (arm: string): Promise<{ owner: string; uid: string }> => {
      const body = mutatingAdmissionPolicies.body();
      const created = await direct.send('POST', `${kas3}${MAP_PATH}`, { ...body, metadata: { name: `owner-${arm}` } });
      if (created.status !== 201) throw new Error(`creating the owner: ${created.status} ${created.text.slice(0, 300)}`);
      const uid = (JSON.parse(created.text) as { metadata: { uid: string } }).metadata.uid;
      const ownerReferences = [
        { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicy', name: `owner-${arm}`, uid },
      ];
      for (const [resource, n] of Object.entries(DEPENDENTS)) {
        for (let i = 0; i < n; i++) {
          const obj =
            resource === 'configmaps'
              ? { apiVersion: 'v1', kind: 'ConfigMap', data: { i: String(i) } }
              : { apiVersion: 'v1', kind: 'Secret', stringData: { i: String(i) } };
          const r = await direct.send('POST', `${kas1}/api/v1/namespaces/${NS}/${resource}`, {
            ...obj,
            metadata: { name: `${arm}-${i}`, labels: { arm }, ownerReferences },
          });
          if (r.status !== 201) throw new Error(`creating ${resource} ${arm}-${i}: ${r.status} ${r.text.slice(0, 200)}`);
        }
      }
      return { owner: `owner-${arm}`, uid };
    };
    const survivors = async (arm: string): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const resource of Object.keys(DEPENDENTS)) {
        const r = await direct.send('GET', `${kas1}/api/v1/namespaces/${NS}/${resource}?labelSelector=arm%3D${arm}`);
        if (r.status !== 200) throw new Error(`listing ${resource}: ${r.status}`);
        out[resource] = (JSON.parse(r.text) as { items: unknown[] }).items.length;
      }
      return out;
    };
    const totalPlanted = Object.values(DEPENDENTS).reduce((a, b) => a + b, 0);
    const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
    /**
     * A ConfigMap owned by a MutatingAdmissionPolicy that does not exist: the garbage collector
     * must look the owner up through the gateway (the type only kas-3 serves), find it absent and
     * delete the canary. Its "Deleting item" line is the collector's own word that it has run a
     * dependent of that type through its whole judgement.
     */
    const ghostUid = randomUUID();
    const plantCanary = async (name: string): Promise<void> => {
      const r = await direct.send('POST', `${kas1}/api/v1/namespaces/${NS}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name,
          labels: { canary: 'true' },
          ownerReferences: [
            { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicy', name: 'ghost', uid: ghostUid },
          ],
        },
      });
      if (r.status !== 201) throw new Error(`creating canary ${name}: ${r.status} ${r.text.slice(0, 200)}`);
    };
    /**
     * One start over the live owner: until the collector has deleted the canary (or a dependent:
     * the harm), else GC_JUDGE_WAIT_MS; a baseline start (`cutMs`) is cut that long after its
     * collector began collecting.
     */
    const oneStart = async (arm: string, canary: string, cutMs: number | null): Promise<GcLogFacts> => {
      const name = `kcm-${arm}`;
      await plantCanary(canary);
      await lab.startControllerManager({ name, version: v.kubeOld, kubeconfig: gateways[arm as keyof typeof gateways].kubeconfigFile });
      const facts = async (): Promise<GcLogFacts> => gcLogFacts(lastRun(await readFile(lab.logFile(name), 'utf8').catch(() => '')));
      const over = (x: GcLogFacts): boolean =>
        x.proceeding !== null && x.deleted.some((d) => d === `${NS}/${canary}` || !d.startsWith(`${NS}/canary-`));
      let f = await facts();
      let deadline = Date.now() + GC_JUDGE_WAIT_MS;
      let proceedingSeen = false;
      while (Date.now() < deadline && !over(f)) {
        if (cutMs !== null && !proceedingSeen && f.proceeding !== null) {
          proceedingSeen = true;
          deadline = Math.min(deadline, Date.now() + cutMs);
        }
        await sleep(100);
        f = await facts();
      }
      await lab.stopControllerManager(name);
      return f;
    };

    const rows: string[][] = [];
    const results: Record<
      string,
      { alive: Record<string, number>; starts: number; judged: number; ownerSeen: number; collectedMs: number | null }
    > = {};
    // Whether round robin harms depends on which apiserver answers the controller manager's
    // discovery and lookups when it starts: each arm's controller manager is started up to STARTS
    // times over the same live owner, each start until its collector has judged the canary; the
    // baseline stops at the first start that shows the harm. The arms one after the other.
    for (const arm of [...SKEWGATE_ARMS, 'baseline'] as const) {
      const isSkewgate = arm !== 'baseline';
      const { owner, uid } = await plant(arm);
      let alive = await survivors(arm);
      progress(`${arm}: an owner and ${totalPlanted} dependents planted; kube-controller-manager v${v.kubeOld} through the ${arm} gateway`);
      let starts = 0;
      let judged = 0;
      let ownerSeen = 0;
      while (starts < STARTS && (isSkewgate || sum(alive) === totalPlanted)) {
        starts++;
        const canary = `canary-${arm}-${starts}`;
        const f = await oneStart(arm, canary, isSkewgate ? null : BASELINE_CUT_MS);
        if (f.proceeding !== null && f.deleted.includes(`${NS}/${canary}`)) judged++;
        if (f.seenAlive.includes(uid)) ownerSeen++;
        alive = await survivors(arm);
      }
      progress(
        `${arm}: after ${starts} starts with the owner alive (${judged} judged their canary, ${ownerSeen} held the owner alive): ${JSON.stringify(alive)} of ${JSON.stringify(DEPENDENTS)} left`,
      );
      // The owner is deleted: the garbage collector must collect its dependents (it is not merely starved).
      const name = `kcm-${arm}`;
      await lab.startControllerManager({ name, version: v.kubeOld, kubeconfig: gateways[arm].kubeconfigFile });
      const del = await direct.send('DELETE', `${kas3}${MAP_PATH}/${owner}`);
      if (del.status !== 200) throw new Error(`deleting the owner: ${del.status}`);
      const deletedAt = Date.now();
      let collectedMs: number | null = null;
      for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(500)) {
        if (sum(await survivors(arm)) === 0) {
          collectedMs = Date.now() - deletedAt;
          break;
        }
      }
      await lab.stopControllerManager(name);
      results[arm] = { alive, starts, judged, ownerSeen, collectedMs };
      rows.push([
        arm === 'baseline' ? arm : `${arm}: ${modeText(arm)}`,
        String(totalPlanted),
        `${starts} (${judged} judged their canary)`,
        String(totalPlanted - sum(alive)),
        Object.entries(alive)
          .map(([k, n]) => `${k} ${((DEPENDENTS as Record<string, number>)[k] ?? 0) - n}`)
          .join(', '),
        collectedMs === null ? 'not within 90 s' : `${(collectedMs / 1000).toFixed(1)} s`,
      ]);
    }
    const routes = await armRoutes((arm) => lab.logFile(`envoy-${arm}`), origin);
    const fastText = fastShareText(routes);

    const md = [
      `### Garbage collector behind the gateway (test/cluster/suites/garbage-collector.ts)`,
      '',
      `**Method.** etcd, kas-1 and kas-2 v${v.kubeOld}, kas-3 v${v.kubeNew} (the mixed phase of an upgrade). Per arm, one MutatingAdmissionPolicy (\`admissionregistration.k8s.io/v1\`, served by v${v.kubeNew} only) is created through kas-3, and ${DEPENDENTS.configmaps} ConfigMaps and ${DEPENDENTS.secrets} Secrets owned by it through kas-1; then a real kube-controller-manager v${v.kubeOld} (\`--controllers=garbage-collector-controller,namespace-controller\`, built from the Go module proxy like the apiservers) is started with the gateway's kubeconfig up to ${STARTS} times with the owner alive (whether round robin harms depends on which apiserver answers the controller's discovery at its start; the baseline stops at the first start that shows it, skewgate runs all ${STARTS}); then the owner is deleted and the dependents must go. Each start lasts until the garbage collector's own log says it has judged: its monitors synced and it deleted a canary ConfigMap planted for that start, owned by a MutatingAdmissionPolicy that does not exist (a lookup of the type through the gateway, found absent, acted on), at most ${GC_JUDGE_WAIT_MS / 1000} s (two of its ${GC_SYNC_PERIOD_MS / 1000} s sync periods); a baseline start whose collector has not judged ${BASELINE_CUT_MS / 1000} s after it began collecting is cut (its REST mapper lacks the type and its lookups back off). The arms run one after the other. Counted straight from kas-1. Requests on a fast-path route (Envoy's access log: no skewgate call), of all: ${fastText}.`,
      '',
      render({
        headers: [
          'arm',
          'dependents',
          'controller-manager starts',
          'deleted while the owner lived',
          'by kind',
          'collected after the owner was deleted',
        ],
        rows,
      }),
      '',
      `Run time ${runSeconds().toFixed(0)} s.`,
    ].join('\n');
    await writeClusterPart('controller-harms', md);
    t.comment(md);

    checkFastPathModes(t, routes);
    for (const arm of SKEWGATE_ARMS) {
      const r = results[arm];
      // Every start over the live owner ran until its collector had judged (not a fixed time).
      t.equal(r?.starts, STARTS, `through ${arm}: ${STARTS} controller-manager starts with the owner alive`);
      t.equal(r?.judged, STARTS, `through ${arm}: in each, the collector synced and deleted its canary (${r?.judged ?? 0} of ${STARTS})`);
      t.ok((r?.ownerSeen ?? 0) >= 1, `through ${arm}: in ${r?.ownerSeen ?? 0} starts its log shows it held the owner alive (at least 1)`);
      t.same(r?.alive, DEPENDENTS, `through ${arm}: no dependent of a live owner deleted`);
      t.ok(typeof r?.collectedMs === 'number', `through ${arm}: the dependents are collected once the owner is deleted (the GC works)`);
    }
    const b = results.baseline;
    t.ok(
      b !== undefined && sum(b.alive) < totalPlanted,
      `through round robin: ${totalPlanted - sum(b?.alive ?? {})} of ${totalPlanted} dependents of a live owner deleted within ${b?.starts} starts — the harm skewgate prevents`,
    );
  },
};
