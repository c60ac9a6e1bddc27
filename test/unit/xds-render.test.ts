// The filesystem xDS files' contents: which member gets its own clusters, a place in the pools and
// routes, by role; and the bootstrap's pointers to the files.
import t from 'tap';
import { parseConfig } from '../../src/config/load.js';
import { type ApiServerConfig } from '../../src/config/core/schema.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { cdsConfig, rdsConfig, renderClusters, renderRoutes } from '../../src/envoy/xds.js';
import { xdsMembersOf } from '../../src/envoy-runtime/xds-files.js';
import { membersText } from '../../src/envoy-runtime/xds-disk.js';
import type { MemberEntry } from '../../src/membership/members.js';

const config = parseConfig(
  {
    apiservers: [{ name: 'kas-1', url: 'https://10.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } }],
    envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' }, xds: { directory: 'xds' } },
    routing: { retryAfterSeconds: 3 },
  },
  '/etc/skewgate/skewgate.yaml',
  '/etc/skewgate',
);
const spec = (name: string, ip: string): ApiServerConfig =>
  ({ name, url: `https://${ip}:6443`, caFile: '/etc/skewgate/ca.crt' }) as ApiServerConfig;
const pool = (clusters: readonly Record<string, unknown>[]): string[] =>
  (
    (
      clusters.find((c) => c.name === 'default') as {
        load_assignment: { endpoints: { lb_endpoints: { endpoint: { address: { socket_address: { address: string } } } }[] }[] };
      }
    ).load_assignment.endpoints[0]?.lb_endpoints ?? []
  ).map((e) => e.endpoint.address.socket_address.address);
const routed = (rds: Record<string, unknown>): string[] =>
  [
    ...new Set(
      ((rds.virtual_hosts as { routes: { route?: { cluster: string } }[] }[])[0]?.routes ?? [])
        .map((r) => r.route?.cluster)
        .filter((c): c is string => c !== undefined && c !== 'default'),
    ),
  ].sort();

t.test('by role: a member is pooled and routed, a joining one routed only, a draining one neither; each keeps its cluster', async (t) => {
  const members = {
    routable: [spec('kas-1', '10.0.0.1')],
    joining: [spec('learnt-10-0-0-4-6443', '10.0.0.4')],
    draining: [spec('kas-2', '10.0.0.2')],
  };
  const clusters = renderClusters(config, members, (p) => p);
  t.same(
    clusters.map((c) => c.name),
    ['kas-1', 'learnt-10-0-0-4-6443', 'kas-2', 'default'],
  );
  t.ok(
    clusters.every((c) => c['@type'] === 'type.googleapis.com/envoy.config.cluster.v3.Cluster'),
    'typed resources',
  );
  t.same(pool(clusters), ['10.0.0.1'], 'the pool: members only');
  const rds = renderRoutes(config, members);
  t.equal(rds['@type'], 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration');
  t.equal(rds.name, 'skewgate', 'the route_config_name the connection manager asks for');
  t.same(routed(rds), ['kas-1', 'learnt-10-0-0-4-6443'], 'routes: members and joining ones, never a draining one');
  t.same(
    pool(renderClusters(config, { routable: [], draining: [spec('kas-2', '10.0.0.2')] }, (p) => p)),
    ['10.0.0.2'],
    'a pool is never empty',
  );
});

t.test(
  "an operator's cordon: a cordoned member is routed but out of the pool; a drained one neither; both stay known members",
  async (t) => {
    const entries: MemberEntry[] = [
      { spec: spec('kas-1', '10.0.0.1'), role: 'member', seed: true, sources: ['config'] },
      { spec: spec('kas-2', '10.0.0.2'), role: 'member', seed: true, sources: ['config'], cordon: 'cordon' },
      { spec: spec('kas-3', '10.0.0.3'), role: 'member', seed: true, sources: ['config'], cordon: 'drain' },
      { spec: spec('kas-4', '10.0.0.4'), role: 'draining', seed: false, sources: [], cordon: 'cordon' },
    ];
    const members = xdsMembersOf(entries);
    t.same(
      [members.routable, members.cordoned, members.drained, members.draining].map((l) => (l ?? []).map((s) => s.name)),
      [['kas-1'], ['kas-2'], ['kas-3'], ['kas-4']],
      'placed by role and cordon (a draining member stays draining)',
    );
    const clusters = renderClusters(config, members, (p) => p);
    t.same(clusters.map((c) => c.name).sort(), ['default', 'kas-1', 'kas-2', 'kas-3', 'kas-4'], 'each keeps its cluster');
    t.same(pool(clusters), ['10.0.0.1'], 'the pool: the open member only');
    t.same(routed(renderRoutes(config, members)), ['kas-1', 'kas-2'], 'routes: the open and the cordoned member');
    t.same(
      (JSON.parse(membersText(members)) as { members: { name: string }[] }).members.map((m) => m.name),
      ['kas-1', 'kas-2', 'kas-3'],
      'members.json: a cordon leaves them members (a draining one is leaving)',
    );
    t.same(
      pool(
        renderClusters(config, xdsMembersOf(entries.map((e) => (e.role === 'member' ? { ...e, cordon: 'cordon' as const } : e))), (p) => p),
      ).sort(),
      ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'],
      'every member cordoned: the pool is never empty',
    );
  },
);

t.test('the bootstrap points at the files and holds no apiserver', async (t) => {
  const b = renderBootstrap(config) as { dynamic_resources: unknown; static_resources: { clusters: { name: string }[] } };
  t.same(
    b.dynamic_resources,
    cdsConfig('/etc/skewgate/xds', (p) => p),
  );
  t.same(
    b.static_resources.clusters.map((c) => c.name),
    ['skewgate-extproc'],
  );
  t.same(
    rdsConfig('/etc/skewgate/xds', (p) => p),
    {
      route_config_name: 'skewgate',
      config_source: {
        path_config_source: { path: '/etc/skewgate/xds/rds.json', watched_directory: { path: '/etc/skewgate/xds' } },
        resource_api_version: 'V3',
      },
    },
  );
  t.match(JSON.stringify(b), /"rds":\{"route_config_name":"skewgate"/, 'the connection manager reads rds.json');
});

t.test('the routes file carries the bounded twins and the keepalive clusters, as the bootstrap would', async (t) => {
  const rds = renderRoutes(config, { routable: [spec('kas-1', '10.0.0.1')], draining: [] });
  const routes = (rds.virtual_hosts as { routes: { name: string; route?: { timeout: string } }[] }[])[0]?.routes ?? [];
  t.same(
    routes.filter((r) => r.route !== undefined).map((r) => [r.name, r.route?.timeout]),
    [
      ['kas-1-read-bounded', '65s'],
      ['kas-1-read', '0s'],
      ['kas-1-write-bounded', '65s'],
      ['kas-1-write', '0s'],
      ['default-read-bounded', '65s'],
      ['default-read', '0s'],
      ['default-write-bounded', '65s'],
      ['default-write', '0s'],
    ],
    'each route and its bounded twin before it (envoy.requestTimeout, default 65 s)',
  );
  t.ok((rds.request_headers_to_remove as string[]).includes('x-skewgate-bounded'), 'the mark never goes upstream');
  for (const c of renderClusters(config, { routable: [spec('kas-1', '10.0.0.1')], draining: [] }, (p) => p)) {
    t.same(
      c.upstream_connection_options,
      { tcp_keepalive: { keepalive_time: 15, keepalive_interval: 5, keepalive_probes: 3 } },
      `${String(c.name)}: a silent apiserver connection is closed after ~30 s`,
    );
  }
});
