// Publishing the gateways as the kubernetes Service's endpoints, the pure half: which addresses,
// the Lease a gateway renews, and the objects written.
import t from 'tap';
import {
  desiredPublication,
  endpointSliceObject,
  endpointsObject,
  gatewayLeaseObject,
  gatewayNameOf,
  parseAddress,
  parseGatewayLease,
  portGroup,
  publishedAddresses,
} from '../../src/kubernetes-service/core/publication.js';

const NOW = 1_800_000_000_000;
const lease = (name: string, ip: string, renewAgoMs: number) =>
  parseGatewayLease(gatewayLeaseObject(name, { ip, port: 16443 }, NOW - renewAgoMs, 15_000)) ?? {
    name: 'x',
    address: { ip, port: 0 },
    renewTime: null,
    durationMs: 0,
  };

t.test('which addresses: the live gateways, else the apiservers, else nothing is written', async (t) => {
  const apiservers = [
    { ip: '10.0.0.12', port: 6443 },
    { ip: '10.0.0.11', port: 6443 },
  ];
  const gw = (ip: string) => ({ ip, port: 16443 });
  const api = (ip: string) => ({ ip, port: 6443 });
  const cases: [string, Parameters<typeof desiredPublication>[0], unknown][] = [
    [
      'two live gateways',
      [lease('cp-2', '10.0.0.12', 1000), lease('cp-1', '10.0.0.11', 14_000)],
      { source: 'gateways', addresses: [gw('10.0.0.11'), gw('10.0.0.12')] },
    ],
    [
      'one expired',
      [lease('cp-1', '10.0.0.11', 1000), lease('cp-2', '10.0.0.12', 16_000)],
      { source: 'gateways', addresses: [gw('10.0.0.11')] },
    ],
    [
      'all expired: the apiservers',
      [lease('cp-1', '10.0.0.11', 20_000)],
      { source: 'apiservers', addresses: [api('10.0.0.11'), api('10.0.0.12')] },
    ],
    ['none: the apiservers', [], { source: 'apiservers', addresses: [api('10.0.0.11'), api('10.0.0.12')] }],
  ];
  for (const [what, leases, want] of cases) t.same(desiredPublication(leases, apiservers, NOW), want, what);
  t.equal(desiredPublication([], [], NOW), null, 'no gateway, no ready apiserver: nothing to write (the last addresses stay)');
  t.same(
    desiredPublication([lease('a', '10.0.0.11', 0), lease('b', '10.0.0.11', 0)], [], NOW)?.addresses,
    [{ ip: '10.0.0.11', port: 16443 }],
    'deduplicated',
  );
});

t.test('the gateway Lease round-trips; foreign Leases are not gateways', async (t) => {
  const o = gatewayLeaseObject('cp-1', { ip: 'fd00::1', port: 16443 }, NOW, 15_000, '42') as {
    metadata: Record<string, unknown>;
    spec: Record<string, unknown>;
  };
  t.match(o.metadata, {
    name: 'skewgate-gateway-cp-1',
    namespace: 'default',
    resourceVersion: '42',
    annotations: { 'skewgate.dev/address': '[fd00::1]:16443' },
  });
  t.equal(o.spec.leaseDurationSeconds, 15);
  t.match(o.spec.renewTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/, 'MicroTime');
  t.same(parseGatewayLease(o), {
    name: 'skewgate-gateway-cp-1',
    address: { ip: 'fd00::1', port: 16443 },
    renewTime: NOW,
    durationMs: 15_000,
  });
  t.equal(parseGatewayLease({ metadata: { name: 'apiserver-x', labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver' } } }), null);
  t.equal(
    parseGatewayLease({
      metadata: { name: 'g', labels: { 'skewgate.dev/gateway': 'true' }, annotations: { 'skewgate.dev/address': 'cp-1:16443' } },
    }),
    null,
    'a name, not an address',
  );
  t.same([parseAddress('10.0.0.1:0'), parseAddress('10.0.0.1:65536'), parseAddress('[::1]:443')], [null, null, { ip: '::1', port: 443 }]);
  t.same(
    ['CP-1.example.com', 'cp_1', '-x-', '', 'a'.repeat(70)].map(gatewayNameOf),
    ['cp-1', 'cp-1', 'x', 'gateway', 'a'.repeat(63)],
    'a host name becomes a DNS label',
  );
});

t.test('the objects: one port, the Endpoints not mirrored, the slice marked as skewgate’s; comparison by addresses', async (t) => {
  const g = portGroup({
    source: 'gateways',
    addresses: [
      { ip: '10.0.0.11', port: 16443 },
      { ip: '10.0.0.12', port: 16443 },
      { ip: '10.0.0.13', port: 8443 },
    ],
  });
  t.same(
    g,
    { port: 16443, ips: ['10.0.0.11', '10.0.0.12'], leftOut: [{ ip: '10.0.0.13', port: 8443 }] },
    'the most common port; the rest left out',
  );
  const eps = endpointsObject(g.port, g.ips);
  const slice = endpointSliceObject(g.port, g.ips, '7');
  t.match(eps, {
    kind: 'Endpoints',
    metadata: { name: 'kubernetes', namespace: 'default', labels: { 'endpointslice.kubernetes.io/skip-mirror': 'true' } },
  });
  t.match(slice, {
    kind: 'EndpointSlice',
    addressType: 'IPv4',
    metadata: {
      name: 'kubernetes',
      resourceVersion: '7',
      labels: { 'kubernetes.io/service-name': 'kubernetes', 'endpointslice.kubernetes.io/managed-by': 'skewgate.dev' },
    },
  });
  t.same(publishedAddresses(eps), ['10.0.0.11:16443', '10.0.0.12:16443']);
  t.same(publishedAddresses(slice), publishedAddresses(eps), 'both forms compare alike');
  t.same(
    publishedAddresses({ subsets: [{ addresses: [{ ip: '10.0.0.1' }], ports: [{ port: 6443 }] }] }),
    ['10.0.0.1:6443'],
    "the apiservers' own Endpoints",
  );
  t.equal(publishedAddresses('x'), null);
});
