// The lab node's configuration (harness/node/config.ts): everything a node writes or listens on is
// its own (its folder, its address), so that nodes and the machine's Docker run side by side; and
// what these machines need is set (cgroup v1 with cgroupfs, oom_score_adj, no registry).
import t from 'tap';
import { cgroupMounts } from '../../harness/node/cgroups.js';
import {
  containerdConfig,
  cniConflist,
  kubeletArgs,
  kubeletConfiguration,
  nodeCgroupRoot,
  nodePaths,
  type NodeSpec,
} from '../../harness/node/config.js';

const spec: NodeSpec = {
  name: 'node-1',
  dir: '/tmp/lab/node-node-1',
  ip: '10.215.3.2',
  netns: 'skewgate-lab-3-0',
  hostIf: 'sgn3-0',
  hostIp: '10.215.3.1',
  kubeletPort: 10250,
  streamPort: 10010,
  podCidr: '10.244.3.0/24',
  bridge: 'sglab3',
  sandboxImage: 'registry.k8s.io/pause:3.10.1',
  cniBinDir: '/usr/lib/cni',
  clientCaFile: '/tmp/lab/pki/ca.crt',
  servingCertFile: '/tmp/lab/node-node-1/pki/kubelet.crt',
  servingKeyFile: '/tmp/lab/node-node-1/pki/kubelet.key',
};

t.test('containerd: its own root, state and sockets; the CRI as these machines need it', async (t) => {
  const text = containerdConfig(spec);
  const quoted = [...text.matchAll(/= "([^"]*)"/g)].map((m) => m[1] ?? '');
  const paths = quoted.filter((v) => v.startsWith('/'));
  t.same(
    paths.filter((v) => !v.startsWith(`${spec.dir}/`) && v !== spec.cniBinDir),
    [],
    "every path but the CNI plugins' is under the node's folder (not /var/lib/containerd, /run/containerd)",
  );
  t.match(text, /^\s*address = ""$/m, 'no debug or metrics listener to collide with another containerd');
  t.match(text, /restrict_oom_score_adj = true/, 'oom_score_adj is not lowered (these machines forbid it)');
  t.match(text, /sandbox_image = "registry\.k8s\.io\/pause:3\.10\.1"/, 'the imported sandbox image, never a pull');
  t.match(text, /SystemdCgroup = false/, 'cgroupfs');
  t.match(text, /netns_mounts_under_state_dir = true/, "pods' network namespaces under the node's state");
  t.match(text, /stream_server_address = "10\.215\.3\.2"\n\s*stream_server_port = "10010"/, "streaming on the node's own address");
  t.match(text, new RegExp(`conf_dir = "${nodePaths(spec.dir).cniConfDir}"`), "the node's own CNI folder");
});

t.test('the kubelet: cgroup v1 with cgroupfs, its own folders, standalone or with an apiserver', async (t) => {
  const standalone = kubeletConfiguration(spec) as Record<string, unknown>;
  t.equal(standalone.failCgroupV1, false, 'cgroup v1 accepted (kubelet ≥ 1.35 refuses it otherwise)');
  t.equal(standalone.cgroupDriver, 'cgroupfs');
  t.equal(standalone.containerRuntimeEndpoint, `unix://${nodePaths(spec.dir).containerdSocket}`);
  t.equal(standalone.staticPodPath, nodePaths(spec.dir).staticPods);
  t.equal(standalone.readOnlyPort, 0, 'no unauthenticated port');
  t.same(standalone.authorization, { mode: 'AlwaysAllow' }, 'standalone: no apiserver to ask');
  const joined = kubeletConfiguration({ ...spec, kubeconfig: '/tmp/k' }) as Record<string, unknown>;
  t.same(joined.authorization, { mode: 'Webhook' }, 'registered: the apiserver decides who may exec');
  t.same((joined.authentication as Record<string, unknown>).anonymous, { enabled: false });
  t.equal(joined.nodeLeaseDurationSeconds, 40, "the Lease the node controller's grace period is measured against");
  const args = kubeletArgs({ ...spec, kubeconfig: '/tmp/k' });
  t.ok(args.includes(`--config=${nodePaths(spec.dir).kubeletConfig}`), 'its config (also the supervisor marker)');
  t.ok(args.includes(`--root-dir=${nodePaths(spec.dir).kubeletRoot}`), 'not /var/lib/kubelet');
  t.ok(args.includes('--node-ip=10.215.3.2'));
  t.ok(args.includes('--kubeconfig=/tmp/k'));
  t.notOk(
    kubeletArgs(spec).some((a) => a.startsWith('--kubeconfig')),
    'standalone: no kubeconfig',
  );
});

t.test("the pod network: the node's bridge and range, addresses recorded in its folder", async (t) => {
  const c = cniConflist(spec) as { plugins: Record<string, unknown>[] };
  const bridge = c.plugins[0] ?? {};
  t.equal(bridge.type, 'bridge');
  t.equal(bridge.bridge, 'sglab3');
  t.equal(bridge.ipMasq, false, 'no NAT chains left behind');
  t.same((bridge.ipam as Record<string, unknown>).ranges, [[{ subnet: '10.244.3.0/24' }]]);
  t.equal((bridge.ipam as Record<string, unknown>).dataDir, nodePaths(spec.dir).cniIpam);
});

t.test("the node's cgroups: its own subtree in every cgroup v1 hierarchy", async (t) => {
  t.equal((kubeletConfiguration(spec) as Record<string, unknown>).cgroupRoot, nodeCgroupRoot('node-1'));
  t.equal(nodeCgroupRoot('node-1'), '/skewgate-lab-node-1', 'not the default root another kubelet uses');
  const mountinfo = [
    '35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory',
    '36 25 0:31 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset',
    '30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw',
    '24 1 0:22 / /sys rw - sysfs sysfs rw',
  ].join('\n');
  t.same(cgroupMounts(mountinfo), ['/sys/fs/cgroup/memory', '/sys/fs/cgroup/cpuset'], 'v1 hierarchies: where the root is made');
  t.same(
    cgroupMounts(mountinfo, true),
    ['/sys/fs/cgroup/memory', '/sys/fs/cgroup/cpuset', '/sys/fs/cgroup/unified'],
    'and the unified one: where it is removed from too',
  );
});
