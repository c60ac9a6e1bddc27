// Namespace deletion behind the gateway (suite of test/cluster/api-switched-off.test.ts: three
// kube-apiservers KUBE_NEW, kas-3 with --runtime-config=batch/v1=false): a real
// kube-controller-manager (KUBE_OLD) finalises deleted namespaces through each arm; through
// skewgate no Job is left in etcd, through plain round robin some are (the namespace controller
// was told batch/v1 does not exist). Its objects live in namespaces ns-<try>-<i>.
import type { Test } from 'tap';
import { labBinary } from '../../../harness/lab/versions.js';
import { render, writeClusterPart } from '../../../bench/cluster-results.js';
import { ensureNamespace } from '../../load/verify.js';
import type { ShapeLab, Suite } from '../../helpers/shape-lab.js';
import { SKEWGATE_ARMS, modeText, type SkewgateArm, checkFastPathModes, armRoutes, fastShareText } from '../../helpers/fast-path-arms.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** The namespace test's tries: each skewgate arm once, the baseline up to three times. */
const RUNS = [...SKEWGATE_ARMS, 'baseline-1', 'baseline-2', 'baseline-3'] as const;
const NAMESPACES_PER_ARM = 10;
const JOBS_PER_NAMESPACE = 3;

export const namespaceDeletionSuite: Suite = {
  title: 'namespace deletion with batch/v1 switched off on one apiserver: nothing left in etcd through skewgate',
  run: async (t: Test, { parts: { versions: v }, specs, gateways, lab, session, origin, progress, runSeconds }: ShapeLab) => {
    labBinary('kube-controller-manager', v.kubeOld);
    if (!specs.some((s) => s.runtimeConfig === 'batch/v1=false') || specs.find((s) => s.name === 'kas-1')?.runtimeConfig !== undefined)
      throw new Error('the shape must serve batch/v1 on kas-1 and switch it off on another apiserver');
    const direct = session.direct;
    const kas1 = lab.apiServerUrl('kas-1');
    const jobsLeft = async (arm: string): Promise<number> => {
      const r = await direct.send('GET', `${kas1}/apis/batch/v1/jobs?labelSelector=arm%3D${arm}`);
      if (r.status !== 200) throw new Error(`listing jobs: ${r.status}`);
      return (JSON.parse(r.text) as { items: unknown[] }).items.length;
    };
    const rows: string[][] = [];
    const left: Record<string, number> = {};
    // As for the garbage collector, the baseline is tried up to three times (stopping at the first
    // that shows the harm), and every try is listed.
    for (const run of RUNS) {
      if (run.startsWith('baseline') && Object.entries(left).some(([r, n]) => r.startsWith('baseline') && n > 0)) break;
      const arm = run.startsWith('baseline') ? 'baseline' : (run as SkewgateArm);
      const namespaces = Array.from({ length: NAMESPACES_PER_ARM }, (_, i) => `ns-${run}-${i}`);
      for (const ns of namespaces) {
        await ensureNamespace(direct, kas1, ns);
        for (let j = 0; j < JOBS_PER_NAMESPACE; j++) {
          const job = {
            apiVersion: 'batch/v1',
            kind: 'Job',
            metadata: { name: `job-${j}`, labels: { arm: run } },
            // No job controller runs: the Job never makes a Pod; it is only an object to be deleted.
            spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] } } },
          };
          const r = await direct.send('POST', `${kas1}/apis/batch/v1/namespaces/${ns}/jobs`, job);
          if (r.status !== 201) throw new Error(`creating job ${ns}/job-${j}: ${r.status} ${r.text.slice(0, 200)}`);
        }
      }
      const planted = await jobsLeft(run);
      const name = `kcm-ns-${run}`;
      // No wait for its caches: the namespace controller takes up a terminating namespace whether
      // its first list or a later event shows it.
      await lab.startControllerManager({ name, version: v.kubeOld, kubeconfig: gateways[arm].kubeconfigFile });
      for (const ns of namespaces) {
        const r = await direct.send('DELETE', `${kas1}/api/v1/namespaces/${ns}`);
        if (r.status !== 200 && r.status !== 202) throw new Error(`deleting namespace ${ns}: ${r.status}`);
      }
      progress(
        `${run}: ${planted} Jobs in ${namespaces.length} namespaces; namespaces deleted, the namespace controller runs through the ${arm} gateway`,
      );
      let gone = 0;
      for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(500)) {
        gone = 0;
        for (const ns of namespaces) if ((await direct.send('GET', `${kas1}/api/v1/namespaces/${ns}`)).status === 404) gone++;
        if (gone === namespaces.length) break;
      }
      await lab.stopControllerManager(name);
      left[run] = await jobsLeft(run);
      progress(`${run}: ${gone}/${namespaces.length} namespaces gone; Jobs left in etcd: ${left[run]} of ${planted}`);
      rows.push([
        run.startsWith('baseline') ? run : `${run}: ${modeText(run as SkewgateArm)}`,
        String(planted),
        `${gone}/${namespaces.length}`,
        String(left[run]),
      ]);
    }
    const routes = await armRoutes((arm) => lab.logFile(`envoy-${arm}`), origin);
    const fastText = fastShareText(routes);
    const md = [
      `### Namespace deletion behind the gateway (test/cluster/suites/namespace-deletion.ts)`,
      '',
      `**Method.** etcd and three kube-apiservers v${v.kubeNew}, kas-3 with \`--runtime-config=batch/v1=false\`. Per try, ${NAMESPACES_PER_ARM} namespaces with ${JOBS_PER_NAMESPACE} Jobs each are created straight on kas-1; a real kube-controller-manager v${v.kubeOld} (garbage collector and namespace controllers) runs with the gateway's kubeconfig; the namespaces are deleted and the test waits up to 90 s for them to go. Jobs left are listed straight from kas-1 (which serves batch/v1): objects in etcd whose namespace is gone, to reappear if the name is reused. The skewgate arms (fast path on, then off) run one after the other; the baseline is tried up to three times after them, stopping at the first try that shows the harm. Requests on a fast-path route (Envoy's access log: no skewgate call), of all: ${fastText}.`,
      '',
      render({ headers: ['try', 'Jobs', 'namespaces finalised', 'Jobs left in etcd'], rows }),
      '',
      `Run time ${runSeconds().toFixed(0)} s.`,
    ].join('\n');
    await writeClusterPart('controller-harms-namespaces', md);
    t.comment(md);
    checkFastPathModes(t, routes);
    for (const arm of SKEWGATE_ARMS) t.equal(left[arm], 0, `through ${arm}: no Job left in etcd`);
    const tries = Object.entries(left).filter(([r]) => r.startsWith('baseline'));
    t.ok(
      tries.some(([, n]) => n > 0),
      `through round robin, Jobs left in etcd (${tries.map(([r, n]) => `${r}: ${n}`).join(', ')}) — the harm skewgate prevents`,
    );
  },
};
