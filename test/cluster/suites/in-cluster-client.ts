// An in-cluster client through the `kubernetes` Service (issue 26, item 3c; a suite of
// test/cluster/node.test.ts): the node's gateway runs with kubernetesService.publish, so the
// Service's endpoints are that gateway; kube-proxy on the node turns 10.96.0.1:443 into it. A Job's
// pods run the unmodified kubectl image with no kubeconfig — kubectl's in-cluster config: the
// ServiceAccount token the kubelet mounts, the cluster CA from kube-root-ca.crt, the Service's
// address from the environment — and list the resource only the newer apiserver (kas-3) serves, in
// this mixed control plane. Asserted: kube-proxy's rules send the Service to the gateway; every
// pod's list answered 200 (none a false 404: the Job allows no failure); the gateway carried them.
import type { Test as Tap } from 'tap';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { NodeLab, NodeSuite } from '../../helpers/node-lab.js';
import { allowList, listPath, runInClusterJob } from '../../helpers/in-cluster-job.js';
import { waitMs } from '../../helpers/waits.js';

const run = promisify(execFile);
const NS = 'in-cluster';
const JOB = 'list-skewed';
const RUNS = 5;
/** The node gateway publishes itself every third of its 15 s Lease (test/helpers/node-lab.ts). */
const PUBLISH_TICK_MS = 5000;
const SKEWED = { group: 'admissionregistration.k8s.io', version: 'v1', resource: 'mutatingadmissionpolicies' };
const SKEWED_PATH = listPath(SKEWED);

export const inClusterClientSuite: NodeSuite = {
  title:
    'kubernetesService.publish: an in-cluster kubectl on the node lists what only the newer apiserver serves, through the kubernetes Service',
  run: async (t, l) => {
    await serviceRules(t, l);
    await job(t, l);
  },
};

async function serviceRules(t: Tap, l: NodeLab): Promise<void> {
  const gw = new URL(l.nodeGw.url);
  const slice = await l.until('the kubernetes EndpointSlice naming the node gateway', waitMs(PUBLISH_TICK_MS), async () => {
    const r = await l.api(l.gw.url, 'GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes');
    const s = r.json as { endpoints?: { addresses: string[] }[] };
    const addresses = (s.endpoints ?? []).flatMap((e) => e.addresses);
    return addresses.includes(gw.hostname) ? addresses : undefined;
  });
  t.same(slice, [gw.hostname], `default/kubernetes names the node's gateway ${gw.hostname} (the gateway published itself)`);
  const rules = await l.until("kube-proxy's rule for the kubernetes Service", 60_000, async () => {
    const { stdout } = await run('nsenter', [`--net=/run/netns/${l.node.spec.netns}`, '--', 'iptables-save', '-t', 'nat']);
    return stdout.includes(`--to-destination ${gw.host}`) ? stdout : undefined;
  });
  t.match(rules, /default\/kubernetes:https/, `the node's iptables send default/kubernetes:https to ${gw.host}`);
}

async function job(t: Tap, l: NodeLab): Promise<void> {
  t.equal((await l.api(l.gw.url, 'POST', '/api/v1/namespaces', { metadata: { name: NS } })).status, 201, `namespace ${NS}`);
  await l.namespaceReady(NS);
  t.ok(await allowList(l.api, l.gw.url, NS, SKEWED), `${NS}:default may list ${SKEWED.resource}`);
  const started = Date.now();
  const spec = { namespace: NS, name: JOB, nodeName: l.nodeName, image: l.parts.kubectlImage, runs: RUNS, parallelism: 1, list: SKEWED };
  const done = await runInClusterJob(l.api, l.gw.url, spec, l.until, 120_000);
  t.same(
    [done.outcome, done.succeeded, done.failed],
    ['Complete', RUNS, 0],
    `Job ${JOB} (${RUNS} pods, one after the other, no failure allowed) completed: ${RUNS} in-cluster lists succeeded`,
  );
  for (const a of done.answers)
    t.same(
      [a.server, a.path, a.status],
      ['https://10.96.0.1:443', SKEWED_PATH, '200 OK'],
      `${a.pod}: GET ${SKEWED_PATH} through the kubernetes Service → 200 (kubectl's in-cluster config)`,
    );
  const envoy = (await readFile(l.lab.logFile('envoy-node-gateway'), 'utf8'))
    .split('\n')
    .filter((x) => x.includes(`"path":"${SKEWED_PATH}?`))
    .map((x) => JSON.parse(x) as { start: string; status: number })
    .filter((x) => Date.parse(x.start) >= started);
  t.ok(envoy.length >= RUNS, `the node's gateway carried ${envoy.length} of those lists`);
  t.ok(
    envoy.every((x) => x.status === 200),
    `every one answered 200 (statuses ${[...new Set(envoy.map((x) => x.status))].join(', ')})`,
  );
}
