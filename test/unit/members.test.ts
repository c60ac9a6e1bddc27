// The membership's pure parts: Nodes and the kubernetes EndpointSlice read into candidate
// addresses, and the seed and the candidates merged into the members skewgate should poll.
import t from 'tap';
import type { ApiServerConfig } from '../../src/config/core/schema.js';
import { applySourceChange, candidatesOf, emptySourceTable, parseKubernetesSlice, parseNode } from '../../src/membership/sources.js';
import { addressOf, desiredMembers, knownMemberSpec, learntName } from '../../src/membership/members.js';

const SETTINGS = { nodePort: 6443 };

function node(name: string, addresses: { type: string; address: string }[], hostname?: string): unknown {
  return {
    kind: 'Node',
    metadata: {
      name,
      labels: { 'node-role.kubernetes.io/control-plane': '', ...(hostname ? { 'kubernetes.io/hostname': hostname } : {}) },
    },
    status: { addresses },
  };
}

function slice(name: string, addressType: string, ports: unknown[], endpoints: unknown[]): unknown {
  return {
    kind: 'EndpointSlice',
    metadata: { name, labels: { 'kubernetes.io/service-name': 'kubernetes' } },
    addressType,
    ports,
    endpoints,
  };
}

t.test('a Node: its first InternalIP at the configured port, its hostname label (else its name)', async (t) => {
  const cases: [string, unknown, unknown][] = [
    [
      'kubeadm node',
      node('cp-1', [
        { type: 'Hostname', address: 'cp-1' },
        { type: 'InternalIP', address: '10.0.0.11' },
        { type: 'InternalIP', address: '10.0.0.12' },
      ]),
      [{ host: '10.0.0.11', port: 6443, hostname: 'cp-1', source: 'nodes', from: 'node/cp-1' }],
    ],
    ['hostname label wins', node('cp-1.example', [{ type: 'InternalIP', address: '10.0.0.11' }], 'cp-1'), [{ hostname: 'cp-1' }]],
    ['ExternalIP only: no candidate', node('cp-2', [{ type: 'ExternalIP', address: '203.0.113.4' }]), []],
    ['InternalIP that is no IP', node('cp-3', [{ type: 'InternalIP', address: 'cp-3.example' }]), []],
    ['IPv6', node('cp-4', [{ type: 'InternalIP', address: 'fd00::4' }]), [{ host: 'fd00::4' }]],
    ['no status', { metadata: { name: 'cp-5' } }, []],
  ];
  // t.match treats [] as "any array": no candidate is checked with t.same.
  for (const [what, o, want] of cases) {
    const got = parseNode(o, SETTINGS)?.candidates;
    if (Array.isArray(want) && want.length === 0) t.same(got, [], what);
    else t.match(got, want, what);
  }
  t.equal(parseNode({ metadata: {} }, SETTINGS), null, 'no name: not a Node');
  t.equal(parseNode('x', SETTINGS), null);
});

t.test('the kubernetes EndpointSlice: every ready IP at its https port', async (t) => {
  const eps = [
    { addresses: ['10.0.0.11'] },
    { addresses: ['10.0.0.12'], conditions: { ready: true } },
    { addresses: ['10.0.0.13'], conditions: { ready: false } },
  ];
  const cases: [string, unknown, unknown][] = [
    [
      'as the reconciler writes it',
      slice('kubernetes', 'IPv4', [{ name: 'https', port: 6443, protocol: 'TCP' }], eps),
      [
        { host: '10.0.0.11', port: 6443, hostname: null, source: 'endpointSlice', from: 'endpointslice/kubernetes' },
        { host: '10.0.0.12', port: 6443 },
      ],
    ],
    ['an only port without a name', slice('k', 'IPv4', [{ port: 8443 }], [{ addresses: ['10.0.0.11'] }]), [{ port: 8443 }]],
    ['two unnamed ports: which?', slice('k', 'IPv4', [{ port: 1 }, { port: 2 }], [{ addresses: ['10.0.0.11'] }]), []],
    ['FQDN slices name no single server', slice('k', 'FQDN', [{ name: 'https', port: 6443 }], [{ addresses: ['cp.example'] }]), []],
    ['a port out of range', slice('k', 'IPv4', [{ name: 'https', port: 70000 }], [{ addresses: ['10.0.0.11'] }]), []],
    ['no endpoints', slice('k', 'IPv6', [{ name: 'https', port: 6443 }], []), []],
    [
      "the gateways' own slice (kubernetesService.publish)",
      {
        ...(slice('kubernetes', 'IPv4', [{ name: 'https', port: 16443 }], [{ addresses: ['10.0.0.11'] }]) as object),
        metadata: {
          name: 'kubernetes',
          labels: { 'kubernetes.io/service-name': 'kubernetes', 'endpointslice.kubernetes.io/managed-by': 'skewgate.dev' },
        },
      },
      [],
    ],
  ];
  for (const [what, o, want] of cases) {
    const got = parseKubernetesSlice(o)?.candidates;
    if (Array.isArray(want) && want.length === 0) t.same(got, [], what);
    else t.match(got, want, what);
  }
  const got = parseKubernetesSlice(slice('k', 'IPv4', [{ name: 'https', port: 6443 }], eps))?.candidates ?? [];
  t.equal(got.length, 2, 'the not-ready endpoint is left out');
});

t.test('a source table: relist, events, unreadable objects counted', async (t) => {
  let table = emptySourceTable('nodes');
  t.equal(table.synced, false);
  let r = applySourceChange(
    table,
    { type: 'RELIST', items: [node('cp-1', [{ type: 'InternalIP', address: '10.0.0.11' }]), 'junk'] },
    SETTINGS,
  );
  t.equal(r.skipped, 1);
  table = r.table;
  t.equal(table.synced, true);
  r = applySourceChange(table, { type: 'ADDED', object: node('cp-2', [{ type: 'InternalIP', address: '10.0.0.12' }]) }, SETTINGS);
  table = r.table;
  t.same(
    candidatesOf([table]).map((c) => c.host),
    ['10.0.0.11', '10.0.0.12'],
  );
  r = applySourceChange(table, { type: 'DELETED', object: node('cp-1', []) }, SETTINGS);
  t.same(
    candidatesOf([r.table]).map((c) => c.host),
    ['10.0.0.12'],
  );
  const same = applySourceChange(r.table, { type: 'MODIFIED', object: { metadata: 'x' } }, SETTINGS);
  t.equal(same.table, r.table, 'an unreadable event changes nothing');
  t.equal(same.skipped, 1);
});

const seed = (name: string, url: string, hostname?: string): ApiServerConfig =>
  ({ name, url, caFile: '/pki/ca.crt', ...(hostname ? { hostname } : {}) }) as ApiServerConfig;
const TEMPLATE = { caFile: '/pki/ca.crt', serverName: 'kubernetes' };
const cand = (host: string, hostname: string | null, source: 'nodes' | 'endpointSlice' = 'nodes', port = 6443) => ({
  host,
  port,
  hostname,
  source,
  from: `x/${host}`,
});

t.test('desiredMembers: seed and sources merged by address and identity', async (t) => {
  const seeds = [seed('kas-1', 'https://127.0.0.1:6443'), seed('kas-2', 'https://cp-2.example:6443', 'cp-2')];
  const names = (input: Parameters<typeof desiredMembers>[0]): string[] =>
    desiredMembers(input).map((d) => `${d.spec.name}<${d.sources.join(',')}>`);
  const base = { seeds, enabled: true, synced: true, template: TEMPLATE };
  t.same(names({ ...base, enabled: false, candidates: [] }), ['kas-1<config>', 'kas-2<config>'], 'no sources: the seed');
  t.same(
    names({ ...base, synced: false, candidates: [cand('127.0.0.4', 'kas-4')] }),
    ['kas-1<config>', 'kas-2<config>', 'learnt-127-0-0-4-6443<nodes>'],
    'not listed yet: the seed stays',
  );
  t.same(
    names({ ...base, candidates: [] }),
    ['kas-1<config>', 'kas-2<config>'],
    'sources name nothing: the seed stays (a source that cannot see them)',
  );
  t.same(
    names({
      ...base,
      candidates: [
        cand('127.0.0.1', 'kas-1'),
        cand('127.0.0.9', 'cp-2'),
        cand('127.0.0.4', 'kas-4'),
        cand('127.0.0.4', null, 'endpointSlice'),
      ],
    }),
    ['kas-1<nodes>', 'kas-2<nodes>', 'learnt-127-0-0-4-6443<endpointSlice,nodes>'],
    'kas-1 by address, kas-2 by identity, a new address learnt from two sources',
  );
  t.same(
    names({ ...base, candidates: [cand('127.0.0.4', 'kas-4'), cand('127.0.0.5', null, 'endpointSlice')] }),
    ['learnt-127-0-0-4-6443<nodes>', 'learnt-127-0-0-5-6443<endpointSlice>'],
    'the seed named by no source leaves',
  );
  const [learnt] = desiredMembers({ ...base, seeds: [], candidates: [cand('fd00::4', null, 'endpointSlice'), cand('fd00::4', 'cp-4')] });
  t.same(
    learnt?.spec,
    { name: 'learnt-fd00-4-6443', url: 'https://[fd00::4]:6443', hostname: 'cp-4', caFile: '/pki/ca.crt', serverName: 'kubernetes' },
    'a learnt member: its address, the hostname any source gave, the template',
  );
  t.equal(learnt?.seed, false);
  t.ok(Object.isFrozen(learnt?.spec));
});

t.test('names and addresses', async (t) => {
  t.equal(learntName('10.0.0.4', 6443), 'learnt-10-0-0-4-6443');
  t.equal(learntName('FD00::A', 443), 'learnt-fd00-a-443');
  t.match(learntName('2001:db8:1234:5678:9abc:def0:1234:5678', 65535), /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'always a DNS label');
  t.equal(addressOf('https://[fd00::1]:6443'), 'fd00::1:6443');
  t.equal(addressOf('https://cp.example'), 'cp.example:443');
  t.same(knownMemberSpec({ name: 'learnt-x', url: 'https://10.0.0.4:6443' }, { caFile: '/ca' }), {
    name: 'learnt-x',
    url: 'https://10.0.0.4:6443',
    caFile: '/ca',
  });
});
