// The fast path compiled from a snapshot (src/routing/fast-path.ts) and rendered as Envoy routes
// (src/envoy/fast-routes.ts). The claim under test: a request the rendered routes match is one the
// decision ladder sends to a member of the table's pool — default/served_by_all when the pool is
// every apiserver, routed/served_by_subset with exactly the pool as its ready candidates
// otherwise — at any moment until the table expires; the routes are interpreted here as Envoy
// matches them (regex on the path, headers, query, TLS).
import t from 'tap';
import { syntheticPlane, requestMix, seededRandom, SERVER_NAMES, type SyntheticPlane } from '../../bench/synthetic.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import type { Membership } from '../../src/membership/identity-leases.js';
import type { ServerState, Snapshot } from '../../src/discovery/core/types.js';
import { fastPathRoutes, fastPathTakes, FAST_PATH_ROUTE_PREFIX, FAST_PATH_X509 } from '../../src/envoy/fast-routes.js';
import { fastClusterName } from '../../src/envoy/clusters.js';
import { classifyRequest } from '../../src/k8s/classify.js';
import { decide } from '../../src/routing/decide.js';
import { compileFastPath, type FastTable } from '../../src/routing/fast-path.js';
import { fastResourceCount, fastTableCovers, intersectFastTables, sameFastRequests } from '../../src/routing/fast-table.js';

const NOW = 1_800_000_000_000;
const STALE = 3000;
const MARGIN = 1000;
const opts = { now: NOW, staleAfterMs: STALE, marginMs: MARGIN };

const plane = syntheticPlane(42, NOW);
const snap = (servers: readonly ServerState[], membership?: Membership): Snapshot =>
  buildSnapshot(servers, 7, undefined, membership ? { membership } : {});
const withServer = (i: number, over: Partial<ServerState>): ServerState[] =>
  plane.servers.map((s, j) => (j === i ? Object.freeze({ ...s, ...over }) : s));
const gvs = (table: FastTable): Set<string> => new Set(table.groupVersions.map((g) => `${g.group}/${g.version}`));

t.test('compile: the group/versions every apiserver serves identically, and only those', async (t) => {
  const table = compileFastPath(snap(plane.servers), opts);
  const fast = gvs(table);
  t.equal(table.generation, 7, "the snapshot's generation");
  t.same(table.members, [...SERVER_NAMES], 'compiled over the three apiservers');
  t.notOk(fast.has('/v1'), 'core v1 is not: only the new apiserver lists pods/resize');
  t.notOk(fast.has('legacy0.example.com/v1beta1'), 'a group/version the new apiserver removed is not');
  t.notOk(fast.has('new0.k8s.io/v1'), 'a group/version only the new apiserver serves is not');
  const touched = [...new Set(plane.newOnly.filter((r) => !r.group.startsWith('new')).map((r) => `${r.group}/${r.version}`))];
  t.equal(touched.length, 40, 'the plane adds a resource to 40 existing groups');
  t.same(
    touched.filter((gv) => fast.has(gv)),
    [],
    'no group/version where the new apiserver lists one more resource',
  );
  const untouched = [...new Set(plane.common.filter((r) => r.group !== '').map((r) => `${r.group}/${r.version}`))].filter(
    (gv) => !touched.includes(gv),
  );
  t.ok(untouched.length > 150, `${untouched.length} common group/versions untouched by the upgrade`);
  t.same(
    untouched.filter((gv) => !fast.has(gv)),
    [],
    'every one of them is fast',
  );
  t.equal(table.groupVersions.length, untouched.length, 'and nothing else');
  t.equal(table.validUntil, NOW + STALE, 'valid until the oldest view would go stale');
  t.match(table.why, /not served identically/, 'says why the rest is not');

  const old = compileFastPath(snap(plane.servers.slice(0, 2)), opts);
  t.ok(gvs(old).has('/v1'), 'between the two old apiservers alone, core v1 is fast');
  const pods = old.groupVersions.find((g) => g.group === '')?.resources.find((r) => r.resource === 'pods');
  t.same(
    pods?.subresources.map((s) => s.name),
    ['binding', 'ephemeralcontainers', 'eviction', 'status'],
    'pods without its long-running subresources (log, exec, portforward, proxy)',
  );
  t.notOk(
    old.groupVersions.some((g) => g.resources.some((r) => ['watch', 'proxy', 'status', 'finalize'].includes(r.resource))),
    'no resource named like a path keyword',
  );
});

t.test('compile: a server in doubt leaves the fast pool, and the table is what the others serve', async (t) => {
  const cases: [string, Snapshot, string, RegExp][] = [
    ['a server not ready', snap(withServer(1, { ready: false })), 'apiserver-b', /apiserver-b is not ready/],
    ['a server never probed', snap(withServer(1, { ready: null })), 'apiserver-b', /apiserver-b is not ready/],
    ['a server draining', snap(withServer(2, { draining: true })), 'apiserver-c', /apiserver-c is draining/],
    ['a server cordoned', snap(withServer(2, { cordon: 'cordon' })), 'apiserver-c', /apiserver-c is cordoned/],
    ['a server drained by an operator', snap(withServer(0, { cordon: 'drain' })), 'apiserver-a', /apiserver-a is drained/],
    ['a failed round', snap(withServer(0, { consecutiveFailures: 1 })), 'apiserver-a', /apiserver-a's view is not current/],
    [
      'a view going stale within the margin',
      snap(withServer(0, { lastSuccessAt: NOW - STALE + MARGIN / 2 })),
      'apiserver-a',
      /not current/,
    ],
    ['a view never fetched', snap(withServer(0, { view: null, lastSuccessAt: null })), 'apiserver-a', /not current/],
  ];
  for (const [what, s, out, why] of cases) {
    const table = compileFastPath(s, opts);
    const rest = SERVER_NAMES.filter((n) => n !== out);
    t.same(table.members, rest, `${what}: the pool is the other two`);
    t.equal(table.servesAll, false, `${what}: routed/served_by_subset, not default`);
    t.match(table.why, why, `${what}: ${table.why}`);
    const others = compileFastPath(snap(plane.servers.filter((x) => x.name !== out)), opts);
    t.ok(sameFastRequests({ ...table, servesAll: true }, others), `${what}: the same requests as with ${out} gone`);
  }
  t.ok(
    gvs(compileFastPath(snap(withServer(2, { ready: false })), opts)).has('/v1'),
    'the new apiserver restarting: core v1 is fast again between the old two',
  );
  const none: [string, Snapshot, RegExp][] = [
    ['no apiservers', snap([]), /no apiservers/],
    [
      'every server in doubt',
      snap(plane.servers.map((x) => ({ ...x, ready: false }))),
      /apiserver-a is not ready; apiserver-b is not ready; apiserver-c is not ready/,
    ],
  ];
  for (const [what, s, why] of none) {
    const table = compileFastPath(s, opts);
    t.equal(table.groupVersions.length, 0, `${what}: nothing fast`);
    t.same(table.members, [], `${what}: no pool`);
    t.match(table.why, why, `${what}: ${table.why}`);
  }
  const expired = snap(plane.servers.map((s) => ({ ...s, lastSuccessAt: NOW - STALE + MARGIN + 1 })));
  t.ok(compileFastPath(expired, opts).groupVersions.length > 0, 'a view current for more than the margin still counts');
  // The ladder's default rung does not look at unknown identities or apiservers being verified
  // (they turn 404s into 503s), and Envoy's pool holds members only: no reason to withdraw.
  const unknown = snap(plane.servers, {
    synced: true,
    unmatched: [{ name: 'apiserver-x', hostname: 'x', renewTime: NOW - 1000 }],
    livenessMs: 60_000,
    probing: [{ name: 'learnt-x', url: 'https://x', sources: ['nodes'], problem: null }],
  });
  t.ok(
    sameFastRequests(compileFastPath(unknown, opts), compileFastPath(snap(plane.servers), opts)),
    'a live unmatched identity and a probing apiserver change nothing',
  );
});

t.test('tables: intersection, cover, same requests', async (t) => {
  const all = compileFastPath(snap(plane.servers), opts);
  const lessFresh = compileFastPath(snap(plane.servers.map((s, i) => (i === 0 ? { ...s, lastSuccessAt: NOW - 500 } : s))), opts);
  t.ok(sameFastRequests(all, lessFresh), 'an older view changes the expiry, not the requests');
  t.equal(intersectFastTables(all, lessFresh).validUntil, NOW - 500 + STALE, 'the intersection keeps the earlier expiry');
  // One resource fewer on the new apiserver: its group/version stops being fast.
  const gv = all.groupVersions[0];
  t.ok(gv, 'a fast group/version to take away');
  const dropped = `${gv?.group ?? ''}/${gv?.version ?? ''}/${gv?.resources[0]?.resource ?? ''}`;
  const c = plane.servers[2] as ServerState;
  const view = c.view;
  if (view === null || gv === undefined) throw new Error('the plane has views');
  const fewer = new Map(view.resources);
  fewer.delete(dropped);
  const shrunk = compileFastPath(
    snap([plane.servers[0] as ServerState, plane.servers[1] as ServerState, { ...c, view: { ...view, resources: fewer } }]),
    opts,
  );
  t.notOk(gvs(shrunk).has(`${gv.group}/${gv.version}`), 'the group/version is no longer fast');
  t.notOk(fastTableCovers(shrunk, all), 'going from all to shrunk withdraws routes');
  t.ok(fastTableCovers(all, shrunk), 'going from shrunk to all only adds');
  const both = intersectFastTables(all, shrunk);
  t.equal(fastResourceCount(both), fastResourceCount(shrunk), 'the intersection is what both allow');
  t.equal(both.generation, shrunk.generation, "with the new table's generation");
  const pairAB = compileFastPath(snap(withServer(2, { ready: false })), opts);
  const pairBC = compileFastPath(snap(withServer(0, { ready: false })), opts);
  t.same(intersectFastTables(pairAB, pairBC).members, ['apiserver-b'], 'the intersection sends only to the members both pools hold');
  t.notOk(fastTableCovers(pairAB, pairBC), 'a pool with a member the other lacks is not covered by it');
  t.notOk(fastTableCovers(all, pairAB), 'nor is a table that makes more fast (core v1 between a and b) by one that does not');
  t.notOk(fastTableCovers(pairAB, all), 'nor a pool that grows');
  const onlyA = compileFastPath(snap(plane.servers.map((x) => (x.name === 'apiserver-a' ? x : { ...x, ready: false }))), opts);
  const onlyC = compileFastPath(snap(plane.servers.map((x) => (x.name === 'apiserver-c' ? x : { ...x, ready: false }))), opts);
  t.equal(intersectFastTables(onlyA, onlyC).groupVersions.length, 0, 'pools with no member in common share nothing');
  t.equal(intersectFastTables(all, pairAB).servesAll, false, 'a smaller pool is routed/served_by_subset');
});

// ---- the rendered routes, matched as Envoy matches them ----

interface Req {
  readonly method: string;
  /** Path with query. */
  readonly path: string;
  readonly cert?: boolean;
  readonly headers?: Readonly<Record<string, string>>;
}

type Json = Record<string, unknown>;

/** Compiled once: the routes' expressions are large. */
const compiled = new Map<string, RegExp>();
function regex(source: string): RegExp {
  let rx = compiled.get(source);
  if (rx === undefined) compiled.set(source, (rx = new RegExp(source)));
  return rx;
}

function stringMatch(m: Json, value: string): boolean {
  if (typeof m.exact === 'string') return value === m.exact;
  const rx = (m.safe_regex as Json | undefined)?.regex;
  if (typeof rx === 'string') return regex(`^(?:${rx})$`).test(value);
  throw new Error(`string matcher not interpreted here: ${JSON.stringify(m)}`);
}

/** Envoy's route match, for the matchers fast-path routes use (and only those: anything else throws). */
function routeMatches(route: Json, req: Req): boolean {
  const match = route.match as Json;
  const known = new Set(['safe_regex', 'headers', 'query_parameters', 'tls_context']);
  for (const k of Object.keys(match)) if (!known.has(k)) throw new Error(`matcher ${k} not interpreted here`);
  // All matchers must hold (their order is Envoy's business); the large path expression last.
  const tls = match.tls_context as Json;
  if (tls.presented !== (req.cert === true)) return false;
  const q = req.path.indexOf('?');
  const params =
    q < 0
      ? []
      : req.path
          .slice(q + 1)
          .split('&')
          .map((kv) => [kv.split('=')[0] as string, kv.includes('=') ? kv.slice(kv.indexOf('=') + 1) : ''] as const);
  for (const p of match.query_parameters as Json[]) {
    // Envoy matches a parameter's first value, undecoded here: a %-escaped value never matches a plain one.
    const first = params.find(([n]) => n === p.name);
    if (p.present_match === false) {
      if (first !== undefined) return false;
    } else if (p.string_match !== undefined) {
      if (first === undefined || !stringMatch(p.string_match as Json, first[1])) return false;
    } else throw new Error(`query matcher not interpreted here: ${JSON.stringify(p)}`);
  }
  for (const h of match.headers as Json[]) {
    const name = h.name as string;
    const value = name === ':method' ? req.method : name === ':path' ? req.path : req.headers?.[name];
    let ok: boolean;
    if (h.present_match === true) ok = value !== undefined;
    else if (h.string_match !== undefined) ok = value !== undefined && stringMatch(h.string_match as Json, value);
    else throw new Error(`header matcher not interpreted here: ${JSON.stringify(h)}`);
    if (h.invert_match === true ? ok : !ok) return false;
  }
  const pathOnly = q < 0 ? req.path : req.path.slice(0, q);
  return regex((match.safe_regex as Json).regex as string).test(pathOnly);
}

function fastRouteFor(routes: readonly Json[], req: Req): Json | undefined {
  return routes.find((r) => routeMatches(r, req));
}

/** Every shape of every resource any apiserver lists, as a client might send it, and its near misses. */
function requestUniverse(p: SyntheticPlane, count: number, seed: number): Req[] {
  const rng = seededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)] as T;
  const all = [...p.common, ...p.oldOnly, ...p.newOnly];
  const out: Req[] = requestMix(p, 1000, seed).map((r) => ({ method: r.method, path: r.path }));
  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
  for (let i = 0; i < count; i++) {
    const r = pick(all);
    const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
    const ns = rng() < 0.7 ? `namespaces/${pick(['default', 'kube-system', 'x'])}/` : '';
    const name = pick(['web-1', 'a.b', 'system:node:n1', 'status', 'x']);
    const sub = pick([...r.subresources.map(([s]) => s), 'status', 'scale', 'log', 'exec', 'nope']);
    const shape = pick([
      `${ns}${r.resource}`,
      `${ns}${r.resource}/${name}`,
      `${ns}${r.resource}/${name}/${sub}`,
      `${ns}${r.resource}/${name}/${sub}/more`,
      `watch/${ns}${r.resource}`,
      `${ns}${r.resource}/`,
      `${ns}${r.resource}/na%2Fme`,
      `${ns}${pick(['unknown', 'watch', 'proxy'])}`,
    ]);
    const query = pick([
      '',
      '',
      '?limit=500',
      '?watch=true',
      '?watch=1',
      '?watch=false',
      '?watch=True',
      '?watch=true&watch=false',
      '?watch=false&watch=true',
      '?w%61tch=1',
      '?watch=tru%65',
      '?labelSelector=app%3Dweb',
      '?resourceVersion=0&watch=1',
    ]);
    out.push({
      method: pick(methods),
      path: `${base}/${shape}${query}`,
      ...(rng() < 0.15 ? { cert: true } : {}),
      ...(rng() < 0.05 ? { headers: { upgrade: 'websocket' } } : {}),
    });
  }
  return out;
}

/** Snapshots of an upgrade's moments: all three ready; one old apiserver, then the new one, restarting; the new one draining. */
const moments: readonly [string, Snapshot][] = [
  ['every apiserver ready', snap(plane.servers)],
  ['apiserver-b restarting', snap(withServer(1, { ready: false, consecutiveFailures: 2 }))],
  ['apiserver-c (the new version) not ready', snap(withServer(2, { ready: false }))],
  ['apiserver-c draining', snap(withServer(2, { draining: true }))],
  ['apiserver-c cordoned', snap(withServer(2, { cordon: 'cordon' }))],
  ['apiserver-a drained by an operator', snap(withServer(0, { cordon: 'drain' }))],
];

t.test(
  'rendered routes: every request they send straight to the pool is one the ladder sends to that pool, until the table expires',
  async (t) => {
    const universe = requestUniverse(plane, 3000, 11);
    for (const [moment, s] of moments) {
      const table = compileFastPath(s, opts);
      const routes = fastPathRoutes(table, 65_000) as Json[];
      const alone = snap(plane.servers.filter((x) => table.members.includes(x.name)));
      let matched = 0;
      const wrong: string[] = [];
      for (const req of universe) {
        if (fastRouteFor(routes, req) === undefined) continue;
        matched++;
        const info = classifyRequest(req.method, req.path);
        for (const now of [NOW, table.validUntil - MARGIN - 1]) {
          const at = { now, staleAfterMs: STALE };
          // The extremes of the random pick: whichever apiserver it takes is in the pool.
          for (const rng of [() => 0, () => 0.999]) {
            const d = decide({ info, headers: new Map(), identity: { kind: 'none' } }, s, { ...at, rng });
            const ok = table.servesAll
              ? d.outcome === 'default' && d.reason === 'served_by_all'
              : d.outcome === 'routed' && d.reason === 'served_by_subset' && table.members.includes(d.upstream);
            if (!ok) wrong.push(`${req.method} ${req.path} at +${now - NOW} ms: ${d.outcome}/${d.reason}`);
          }
          // And every pool member could take it: over the pool alone, the ladder balances it.
          const d = decide({ info, headers: new Map(), identity: { kind: 'none' } }, alone, { ...at, rng: () => 0.5 });
          if (d.outcome !== 'default') wrong.push(`${req.method} ${req.path} over the pool alone: ${d.outcome}/${d.reason}`);
        }
      }
      t.same(wrong.slice(0, 20), [], `${moment}: no request the routes take is judged otherwise by the ladder`);
      t.ok(matched > universe.length / 10, `${moment}: not vacuous: ${matched} of ${universe.length} requests take the fast path`);
    }
    const s = snap(plane.servers);
    const table = compileFastPath(s, opts);
    const routes = fastPathRoutes(table, 65_000) as Json[];
    t.same(
      routes.map((r) => r.name),
      ['read', 'watch', 'create', 'update', 'patch', 'delete'].map((n) => `${FAST_PATH_ROUTE_PREFIX}${n}`),
      'one route per method group',
    );
    // explain's own evaluation (fastPathTakes) gives the routes' answer, request by request.
    const disagree = universe.filter(
      (req) =>
        fastPathTakes(table, {
          method: req.method,
          path: req.path,
          headers: new Map(Object.entries(req.headers ?? {})),
          clientCertificate: req.cert === true,
        }) !==
        (fastRouteFor(routes, req) !== undefined),
    );
    t.same(
      disagree.slice(0, 10).map((r) => `${r.method} ${r.path}`),
      [],
      'fastPathTakes agrees with the rendered routes on every request',
    );

    // The kinds that must always meet skewgate.
    const common = plane.common.find((r) => r.group !== '' && gvs(table).has(`${r.group}/${r.version}`) && r.verbs.includes('list'));
    if (!common) throw new Error('a fast resource');
    const list = `/apis/${common.group}/${common.version}/${common.namespaced ? 'namespaces/default/' : ''}${common.resource}`;
    t.ok(fastRouteFor(routes, { method: 'GET', path: list }), `a list of a fast resource is fast (${list})`);
    t.ok(fastRouteFor(routes, { method: 'GET', path: `${list}?labelSelector=app%3Dweb&limit=500` }), 'with %-escaped values too');
    if (!common.verbs.includes('watch')) throw new Error('a watchable fast resource');
    const watchRoute = (path: string): string | undefined => fastRouteFor(routes, { method: 'GET', path })?.name as string | undefined;
    t.equal(
      watchRoute(`${list}?watch=true&resourceVersion=7`),
      `${FAST_PATH_ROUTE_PREFIX}watch`,
      'a watch of a fast resource takes the watch route',
    );
    t.equal(watchRoute(`${list}?watch=1`), `${FAST_PATH_ROUTE_PREFIX}watch`, 'watch=1 too');
    t.equal(
      ((routes.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}watch`) as Json).route as Json).timeout,
      '0s',
      'unbounded, as kube-apiserver leaves a watch (its timeoutSeconds ends it)',
    );
    const never: [string, Req][] = [
      ['a client certificate', { method: 'GET', path: list, cert: true }],
      ['a watch with a client certificate', { method: 'GET', path: `${list}?watch=true`, cert: true }],
      ['a watch of one object', { method: 'GET', path: `${list}/web-1?watch=true` }],
      ['a watch=True (judged by skewgate)', { method: 'GET', path: `${list}?watch=True` }],
      ['a watch=false (judged by skewgate, bounded there)', { method: 'GET', path: `${list}?watch=false` }],
      ['a watch=false before a watch=true (Go reads the first)', { method: 'GET', path: `${list}?watch=false&watch=true` }],
      ['a %-escaped watch', { method: 'GET', path: `${list}?w%61tch=true` }],
      ['an upgrade', { method: 'GET', path: list, headers: { upgrade: 'websocket' } }],
      ['a trailing slash', { method: 'GET', path: `${list}/` }],
      ['a %-escaped name', { method: 'GET', path: `${list}/a%2Fb` }],
      ['an unknown method', { method: 'OPTIONS', path: list }],
      ['the merged /apis', { method: 'GET', path: '/apis' }],
      ['a group/version document', { method: 'GET', path: `/apis/${common.group}/${common.version}` }],
      ['core v1 (skewed)', { method: 'GET', path: '/api/v1/namespaces/default/pods' }],
      ['a skewed group/version', { method: 'GET', path: `/apis/${plane.newOnly[0]?.group ?? ''}/v1/${plane.newOnly[0]?.resource ?? ''}` }],
    ];
    for (const [what, req] of never) t.notOk(fastRouteFor(routes, req), `never fast: ${what}`);

    const old = snap(plane.servers.slice(0, 2));
    const oldRoutes = fastPathRoutes(compileFastPath(old, opts), 65_000) as Json[];
    for (const path of [
      '/api/v1/namespaces/default/pods/web-1/log',
      '/api/v1/namespaces/default/pods/web-1/exec',
      '/api/v1/namespaces/default/pods/web-1/proxy/x',
      '/api/v1/nodes/n1/proxy',
      '/api/v1/watch/namespaces/default/pods',
    ])
      t.notOk(fastRouteFor(oldRoutes, { method: 'GET', path }), `never fast: long-running ${path}`);
    t.ok(fastRouteFor(oldRoutes, { method: 'GET', path: '/api/v1/namespaces/default/pods/web-1' }), 'a pod is fast between the old ones');
    t.ok(fastRouteFor(oldRoutes, { method: 'PATCH', path: '/api/v1/namespaces/default/pods/web-1/status' }), 'its status too');
    t.ok(fastRouteFor(oldRoutes, { method: 'GET', path: '/api/v1/namespaces/kube-system' }), 'a namespace object (the core special case)');
  },
);

t.test('rendered routes: the ladder literals, the generation, ext_proc off, bounded and retried as the default routes', async (t) => {
  const table = compileFastPath(snap(plane.servers), opts);
  const routes = fastPathRoutes(table, 65_000) as Json[];
  const read = routes.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}read`);
  const create = routes.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}create`);
  t.same((read?.metadata as Json).filter_metadata, {
    skewgate: { outcome: 'default', reason: 'served_by_all', generation: '7', path: 'fast' },
  });
  t.same(
    ((read?.tracing as Json).custom_tags as Json[]).map((c) => `${c.tag as string}=${(c.literal as Json).value as string}`),
    ['skewgate.outcome=default', 'skewgate.reason=served_by_all', 'skewgate.generation=7', 'skewgate.path=fast'],
  );
  // Selected before any filter ran: Envoy builds the chain without ext_proc (nor the Lua, where there is one).
  const off = { '@type': 'type.googleapis.com/envoy.config.route.v3.FilterConfig', disabled: true };
  t.same(read?.typed_per_filter_config, { 'envoy.filters.http.ext_proc': off });
  const withCerts = fastPathRoutes(table, 65_000, true) as Json[];
  t.same(withCerts.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}read`)?.typed_per_filter_config, {
    'envoy.filters.http.ext_proc': off,
    'envoy.filters.http.lua': off,
  });
  // Reached after the Lua stated the certificate and cleared the route cache: the chain holds ext_proc, told to stand aside.
  t.same(withCerts.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}${FAST_PATH_X509}read`)?.typed_per_filter_config, {
    'envoy.filters.http.ext_proc': {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute',
      disabled: true,
    },
  });
  t.equal((read?.route as Json).cluster, fastClusterName(SERVER_NAMES), "the table's pool: the three apiservers");
  const subset = compileFastPath(snap(withServer(1, { ready: false })), opts);
  const [subRead] = fastPathRoutes(subset, 65_000) as Json[];
  t.same((subRead?.metadata as Json).filter_metadata, {
    skewgate: { outcome: 'routed', reason: 'served_by_subset', generation: '7', path: 'fast' },
  });
  t.equal((subRead?.route as Json).cluster, fastClusterName(['apiserver-a', 'apiserver-c']), 'a pool of the two ready ones');
  t.not(fastClusterName(['apiserver-a', 'apiserver-c']), fastClusterName(SERVER_NAMES), 'another pool, another cluster');
  t.equal(
    fastClusterName(['apiserver-c', 'apiserver-a']),
    fastClusterName(['apiserver-a', 'apiserver-c']),
    'named for the members, whatever their order',
  );
  t.equal((read?.route as Json).timeout, '65s', 'bounded: nothing fast is long-running');
  t.match(((read?.route as Json).retry_policy as Json).retry_on, /reset/, 'reads retried as on the default route');
  t.equal(
    ((create?.route as Json).retry_policy as Json).retry_on,
    'connect-failure,reset-before-request',
    'writes only when nothing was sent',
  );
  t.same(fastPathRoutes(null, 65_000), [], 'no table, no routes');
  t.same(
    fastPathRoutes(compileFastPath(snap(plane.servers.map((x) => ({ ...x, ready: false }))), opts), 65_000),
    [],
    'an empty table, no routes',
  );
});
