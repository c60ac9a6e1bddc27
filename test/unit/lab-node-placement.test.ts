import t from 'tap';
import { labAddresses } from '../../harness/lab/addresses.js';
import { NODES_PER_SLOT, ipv4InCidr, labNodeSpec } from '../../harness/node/placement.js';
import { schedulerArgs } from '../../harness/lab/scheduler.js';
import { certKubeconfig } from '../../harness/lab/kubeconfig.js';
import { createCommands, inNodeNetwork } from '../../harness/node/netns.js';
import { controllerManagerArgs } from '../../harness/lab/controller-manager.js';

const base = { name: 'n', labDir: '/lab', sandboxImage: 'p', cniBinDir: '/cni', clientCaFile: '/ca' };

t.test('lab nodes: no two (of any slots) share an address, a pod range, a bridge or a folder', async (t) => {
  const specs = [0, 1, 7, 15].flatMap((slot) =>
    Array.from({ length: NODES_PER_SLOT }, (_, index) =>
      labNodeSpec({ ...base, name: `node-${slot}-${index}`, addresses: labAddresses(slot), index }),
    ),
  );
  for (const key of ['ip', 'hostIp', 'podCidr', 'netns', 'hostIf', 'dir'] as const) {
    const values = specs.map((s) => s[key]);
    t.equal(new Set(values).size, values.length, `every ${key} distinct (${values.length} nodes)`);
  }
  for (const s of specs)
    for (const name of [s.bridge, s.hostIf]) t.ok(name.length <= 15, `${name}: a Linux interface name (≤ 15 characters)`);
  t.same(
    labNodeSpec({ ...base, addresses: labAddresses(3), index: 1 }),
    {
      name: 'n',
      dir: '/lab/nodes/n',
      ip: '10.215.3.6',
      netns: 'skewgate-lab-3-1',
      hostIf: 'sgn3-1',
      hostIp: '10.215.3.5',
      kubeletPort: 10250,
      streamPort: 10010,
      podCidr: '10.244.3.64/26',
      bridge: 'sglab3-1',
      sandboxImage: 'p',
      cniBinDir: '/cni',
      clientCaFile: '/ca',
    },
    'slot 3, node 1',
  );
  for (const index of [-1, NODES_PER_SLOT, 0.5])
    t.throws(() => labNodeSpec({ ...base, addresses: labAddresses(1), index }), RangeError, `index ${index} refused`);
});

t.test('the control plane of a node lab: scheduler, controller manager, one-identity kubeconfigs', async (t) => {
  t.same(schedulerArgs({ name: 's', version: '1.35.4', kubeconfig: '/k' }), [
    '--kubeconfig=/k',
    '--secure-port=0',
    '--leader-elect=false',
    '--v=2',
  ]);
  const kcm = controllerManagerArgs({
    name: 'kcm',
    version: '1.35.4',
    kubeconfig: '/k',
    controllers: ['*'],
    serviceAccountKeyFile: '/sa.key',
    rootCaFile: '/ca',
  });
  t.ok(kcm.includes('--controllers=*'), 'the default set');
  t.ok(
    kcm.includes('--service-account-private-key-file=/sa.key') && kcm.includes('--root-ca-file=/ca'),
    'the token controller and root CA',
  );
  t.notOk(
    controllerManagerArgs({ name: 'kcm', version: '1.35.4', kubeconfig: '/k' }).some((a) => a.startsWith('--root-ca-file')),
    'the harm controllers alone: no service-account flags',
  );
  t.same(
    certKubeconfig({ cluster: 'lab', server: 'https://127.0.0.1:1', caFile: '/ca', user: 'system:node:n', certFile: '/c', keyFile: '/k' }),
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'lab', cluster: { server: 'https://127.0.0.1:1', 'certificate-authority': '/ca' } }],
      users: [{ name: 'system:node:n', user: { 'client-certificate': '/c', 'client-key': '/k' } }],
      contexts: [{ name: 'lab', context: { cluster: 'lab', user: 'system:node:n' } }],
      'current-context': 'lab',
    },
  );
});

t.test('ipv4InCidr', async (t) => {
  for (const [ip, cidr, want] of [
    ['10.244.3.64', '10.244.3.64/26', true],
    ['10.244.3.127', '10.244.3.64/26', true],
    ['10.244.3.128', '10.244.3.64/26', false],
    ['10.244.3.63', '10.244.3.64/26', false],
    ['10.244.4.1', '10.244.3.0/24', false],
    ['10.1.2.3', '0.0.0.0/0', true],
    ['', '10.244.3.0/24', false],
    ['10.244.3', '10.244.3.0/24', false],
  ] as const)
    t.equal(ipv4InCidr(ip, cidr), want, `${ip} in ${cidr}: ${want}`);
});

t.test('the node network: the ip commands that make it, in order', async (t) => {
  const n = { netns: 'skewgate-lab-3-1', hostIf: 'sgn3-1', hostIp: '10.215.3.5', nodeIp: '10.215.3.6', podCidr: '10.244.3.64/26' };
  t.same(createCommands(n), [
    ['netns', 'add', 'skewgate-lab-3-1'],
    ['link', 'add', 'sgn3-1', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'skewgate-lab-3-1'],
    ['addr', 'add', '10.215.3.5/30', 'dev', 'sgn3-1'],
    ['link', 'set', 'sgn3-1', 'up'],
    ['-n', 'skewgate-lab-3-1', 'link', 'set', 'lo', 'up'],
    ['-n', 'skewgate-lab-3-1', 'addr', 'add', '10.215.3.6/30', 'dev', 'eth0'],
    ['-n', 'skewgate-lab-3-1', 'link', 'set', 'eth0', 'up'],
    ['-n', 'skewgate-lab-3-1', 'route', 'add', 'default', 'via', '10.215.3.5'],
    ['route', 'add', '10.244.3.64/26', 'via', '10.215.3.6', 'dev', 'sgn3-1'],
  ]);
  t.same(inNodeNetwork('ns', '/usr/bin/kubelet', ['--v=2']), {
    cmd: 'nsenter',
    args: ['--net=/run/netns/ns', '--', '/usr/bin/kubelet', '--v=2'],
  });
  for (const slot of [0, 15]) {
    const s = labNodeSpec({ ...base, addresses: labAddresses(slot), index: 3 });
    t.ok(ipv4InCidr(s.ip, `${s.hostIp}/30`) && s.ip !== s.hostIp, `slot ${slot}: the node and this machine on one /30`);
  }
});
