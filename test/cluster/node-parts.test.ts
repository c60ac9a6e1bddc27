// The node's parts run on these machines (issue: a real node): Debian's containerd (its CRI
// plugin) with runc and the CNI bridge, the pause and Debian images imported from the local Docker
// engine (no registry is reachable), and kubelet KUBE_OLD, standalone, running a static pod on the
// pod network. Asserted: the pod Running with an address from the node's range, its container's
// output in its log, the kubelet's API (a client certificate of the lab CA) and crictl reporting
// it; and after down, nothing of the node left (no shim, no mount, no bridge). Uses its lab slot's
// alias address. Fails, never skips, when a part is missing.
import t from 'tap';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { createLabPki } from '../../harness/lab/pki.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { LabNode } from '../../harness/node/node.js';
import { ipv4InCidr, labNodeSpec } from '../../harness/node/placement.js';
import { cgroupPids } from '../../harness/node/cgroups.js';
import { nodeCgroupRoot } from '../../harness/node/config.js';
import { requireNodeParts } from '../../harness/node/lab-node.js';
import { waitMs } from '../helpers/waits.js';

const run = promisify(execFile);
const parts = requireNodeParts();
const DEBIAN = 'debian:bookworm-slim';
for (const image of [parts.pauseImage, DEBIAN]) {
  await run('docker', ['image', 'inspect', image]).catch(() => {
    throw new Error(`image ${image} is not in the local Docker engine: run scripts/demo-images.sh`);
  });
}

const started = performance.now();
const progress = (line: string): void => t.comment(`[node-parts +${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
const slot = claimLabSlot();
const dir = await mkdtemp(join(tmpdir(), 'skewgate-node-parts-'));
const pki = await createLabPki(join(dir, 'pki'));
const spec = labNodeSpec({
  addresses: slot,
  index: 0,
  name: 'node-parts',
  labDir: dir,
  sandboxImage: parts.pauseImage,
  cniBinDir: parts.cniBinDir,
  clientCaFile: pki.caFile,
});
const { ip, podCidr } = spec;
const node = new LabNode({
  spec,
  ca: { certFile: pki.caFile, keyFile: pki.caKeyFile },
  binaries: { kubelet: parts.kubelet, containerd: parts.containerd, ctr: parts.ctr },
  images: [parts.pauseImage, DEBIAN],
  log: progress,
  killOnExit: true,
});
t.teardown(async () => {
  await node.down().catch((err: Error) => progress(`down: ${err.message}`));
  slot.release();
  await rm(dir, { recursive: true, force: true });
});

// The kubelet's API as the apiserver calls it: TLS verified against the lab CA, a client certificate.
const agent = new Agent({
  connect: {
    ca: await readFile(pki.caFile),
    cert: await readFile(pki.adminCertFile),
    key: await readFile(pki.adminKeyFile),
    servername: ip,
  },
});
interface Pod {
  metadata: { name: string; uid: string; namespace: string };
  status?: { phase?: string; podIP?: string; containerStatuses?: { name: string; ready: boolean; state?: { running?: object } }[] };
}
async function kubeletPods(): Promise<Pod[]> {
  const res = await request(`https://${ip}:10250/pods`, { dispatcher: agent });
  const body = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET /pods: ${res.statusCode} ${body.slice(0, 200)}`);
  // A kubelet with no pod yet answers `"items": null`.
  return (JSON.parse(body) as { items: Pod[] | null }).items ?? [];
}

t.test('containerd, runc, CNI and kubelet run a static pod on the pod network', async (t) => {
  try {
    await node.start(waitMs(10_000));
  } catch (err) {
    t.fail(`the node did not start: ${(err as Error).message}\n${await node.logTails()}`);
    return;
  }
  const images = (await node.ctr(['images', 'list', '-q'])).stdout;
  t.match(images, parts.pauseImage, 'the sandbox image imported into the k8s.io namespace');
  await node.addStaticPod('echo.yaml', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'echo', namespace: 'default' },
    spec: {
      containers: [
        {
          name: 'echo',
          image: DEBIAN,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', 'echo "echo started in $(hostname)"; exec sleep 3600'],
        },
      ],
    },
  });
  progress('static pod echo placed');
  const deadline = Date.now() + waitMs(20_000);
  let pod: Pod | undefined;
  let last = '';
  while (Date.now() < deadline) {
    pod = (await kubeletPods().catch((err: Error) => ((last = err.message), []))).find((p) => p.metadata.name === 'echo-node-parts');
    if (pod?.status?.phase === 'Running' && pod.status.podIP) break;
    last = JSON.stringify(pod?.status ?? last);
    await new Promise((r) => setTimeout(r, 500));
  }
  if (pod?.status?.phase !== 'Running') {
    t.fail(`the static pod did not run: ${last}\n${await node.logTails(60)}`);
    return;
  }
  progress(`pod running at ${pod.status.podIP}`);
  t.ok(ipv4InCidr(pod.status.podIP ?? '', podCidr), `its address ${pod.status.podIP} is from the node's range ${podCidr} (CNI bridge)`);
  t.ok(pod.status.containerStatuses?.[0]?.state?.running, 'its container is running');

  // Its output, where the kubelet keeps container logs (podLogsDir/<ns>_<pod>_<uid>/<container>/0.log).
  const logDir = join(node.paths.podLogs, `default_echo-node-parts_${pod.metadata.uid}`, 'echo');
  let logText = '';
  while (Date.now() < deadline && !logText.includes('echo started')) {
    const files = await readdir(logDir).catch(() => [] as string[]);
    logText = files.length > 0 ? await readFile(join(logDir, files[0] ?? ''), 'utf8').catch(() => '') : '';
    if (!logText.includes('echo started')) await new Promise((r) => setTimeout(r, 250));
  }
  t.match(logText, /echo started in echo-node-parts/, "the container's output in its log");

  const crictl = await run(parts.crictl, ['--runtime-endpoint', `unix://${node.paths.containerdSocket}`, 'pods', '-o', 'json'], {
    timeout: 30_000,
  });
  const sandboxes = (JSON.parse(crictl.stdout) as { items: { metadata: { name: string }; state: string }[] }).items;
  t.same(
    sandboxes.map((s) => [s.metadata.name, s.state]),
    [['echo-node-parts', 'SANDBOX_READY']],
    'crictl: the one sandbox, ready',
  );
  const tasks = await node.tasks();
  t.equal(tasks.filter((x) => x.status === 'RUNNING').length, 2, `containerd runs the sandbox and the container: ${JSON.stringify(tasks)}`);
  const inNodeCgroups = await cgroupPids(nodeCgroupRoot(node.spec.name));
  t.same(
    tasks.map((x) => x.pid).filter((pid) => !inNodeCgroups.includes(pid)),
    [],
    `the pod's processes are in the node's own cgroups (${nodeCgroupRoot(node.spec.name)}), apart from any other kubelet's`,
  );
});

t.test('down leaves nothing of the node: no shim, no mount, no bridge', async (t) => {
  await node.down();
  const shims: string[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (argv.includes(node.paths.containerdSocket)) shims.push(`${pid}: ${argv.join(' ')}`);
  }
  t.same(shims, [], 'no process of the node');
  const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').filter((l) => l.includes(`${node.spec.dir}/`));
  t.same(mounts, [], 'no mount under the node folder');
  const link = await run('ip', ['link', 'show', node.spec.bridge]).then(
    () => 'present',
    () => 'absent',
  );
  t.equal(link, 'absent', 'the bridge is gone');
  const left = (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((l) => / - cgroup2? /.test(l))
    .map((l) => join(l.split(' ')[4] ?? '', nodeCgroupRoot(node.spec.name)))
    .filter((d) => existsSync(d));
  t.same(left, [], "the node's cgroups are removed");
});
