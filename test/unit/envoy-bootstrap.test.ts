// Structure of the rendered Envoy bootstrap (the real binary is exercised in test/integration).
import { DETAILS_PREFIX } from '../../src/constants.js';
import t from 'tap';
import { join } from 'node:path';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import {
  BOUNDED_HEADER,
  extprocStreamCeiling,
  CLIENT_CERT_HEADER,
  ENVOY_IDENTITY_HEADER,
  EXTPROC_SERVICE_NAME,
  HEALTH_CHECK_USER,
  HEALTH_PATH,
  IDENTITY_UNSTATED_REASON,
  REASON_HEADER,
  REMOTE_USER_HEADER,
  SANITIZED_REQUEST_HEADER_PREFIXES,
  SANITIZED_REQUEST_HEADERS,
  UPSTREAM_HEADER,
} from '../../src/constants.js';
import {
  BootstrapError,
  duration,
  EXTPROC_GRACEFUL_CLOSE,
  FRONT_PROXY_SUFFIX,
  HEALTH_LISTENER,
  IDENTITY_BACKSTOP_ROUTE,
  MAX_REQUEST_HEADERS_COUNT,
  MAX_REQUEST_HEADERS_KB,
  READ_NUM_RETRIES,
  READ_RETRY_ON,
  WRITE_NUM_RETRIES,
  WRITE_RETRY_ON,
  renderBootstrap,
  renderPath,
} from '../../src/envoy/bootstrap.js';
import { renderBootstrapYaml } from '../../src/envoy/render.js';
import { arr, at, obj, type Obj } from '../helpers/json.js';
import { packageRoot } from '../../src/util/package-root.js';

interface Opts {
  failureMode?: 'open' | 'closed';
  /** envoy.extprocPeers endpoints. */
  peers?: string[];
  /** envoy.health port. */
  health?: number;
  extproc?: string;
  /** extproc.workers. */
  workers?: number;
  clientCert?: boolean;
  /** envoy.tls.clientCaFile (implies the front-proxy upstreamClientCert). */
  clientCa?: boolean;
  apiservers?: { name: string; url: string; serverName?: string; caFile?: string }[];
}

function config(o: Opts = {}): Config {
  return parseConfig(rawConfig(o), '/srv/sg/skewgate.yaml', '/srv/sg');
}

function rawConfig(o: Opts = {}) {
  return {
    apiservers: (
      o.apiservers ?? [
        { name: 'apiserver-a', url: 'https://127.0.0.1:16441', credentials: { tokenFile: 'token' } },
        { name: 'apiserver-b', url: 'https://127.0.0.1:16442', credentials: { tokenFile: 'token' } },
        { name: 'apiserver-c', url: 'https://kube-c.example:6443', serverName: 'kubernetes', credentials: { tokenFile: 'token' } },
      ]
    ).map((s) => ({ caFile: 'pki/ca.crt', ...s })),
    extproc: {
      listen: o.extproc ?? '127.0.0.1:9002',
      failureMode: o.failureMode ?? 'open',
      messageTimeout: '500ms',
      ...(o.workers === undefined ? {} : { workers: o.workers }),
    },
    envoy: {
      listen: { address: '127.0.0.1', port: 8443 },
      tls: { certFile: 'pki/gw.crt', keyFile: 'pki/gw.key', ...(o.clientCa === true ? { clientCaFile: 'pki/client-ca.crt' } : {}) },
      healthCheck: { interval: '3s', timeout: '1s', unhealthyThreshold: 3, healthyThreshold: 2 },
      ...(o.clientCert === true || o.clientCa === true ? { upstreamClientCert: { certFile: 'pki/fp.crt', keyFile: 'pki/fp.key' } } : {}),
      ...(o.peers
        ? {
            extprocPeers: {
              endpoints: o.peers,
              certFile: 'pki/peer.crt',
              keyFile: 'pki/peer.key',
              caFile: 'pki/peer-ca.crt',
              serverName: 'skewgate-peer',
            },
          }
        : {}),
      ...(o.health === undefined ? {} : { health: { port: o.health } }),
    },
  };
}

const hcm = (b: unknown): Obj => obj(at(b, 'static_resources.listeners.0.filter_chains.0.filters.0.typed_config'));
const filters = (b: unknown): Obj[] => arr(hcm(b).http_filters).map((f) => obj(f));
const extproc = (b: unknown): Obj => obj(filters(b).find((f) => f.name === 'envoy.filters.http.ext_proc')?.typed_config);
const allRoutes = (b: unknown): Obj[] => arr(at(hcm(b), 'route_config.virtual_hosts.0.routes')).map((r) => obj(r));
/** The routes without their bounded twins (checked on their own below). */
const routes = (b: unknown): Obj[] => allRoutes(b).filter((r) => !String(r.name).endsWith('-bounded'));
const clusters = (b: unknown): Obj[] => arr(at(b, 'static_resources.clusters')).map((c) => obj(c));
const cluster = (b: unknown, name: string): Obj => {
  const c = clusters(b).find((x) => x.name === name);
  if (!c) throw new Error(`no cluster ${name}`);
  return c;
};

t.test('duration renders Envoy Duration strings', async (t) => {
  t.equal(duration(500), '0.5s');
  t.equal(duration(2000), '2s');
  t.equal(duration(0), '0s');
  t.equal(duration(1250), '1.25s');
  t.equal(duration(90_000), '90s');
});

t.test('HTTP filters: sanitiser, then ext_proc, then router', async (t) => {
  const b = renderBootstrap(config());
  t.same(
    filters(b).map((f) => f.name),
    ['envoy.filters.http.header_mutation', 'envoy.filters.http.ext_proc', 'envoy.filters.http.router'],
  );
});

t.test('sanitising removes every identity and routing header, early and in the chain', async (t) => {
  const b = renderBootstrap(config());
  const early = arr(at(hcm(b), 'early_header_mutation_extensions'));
  t.equal(early.length, 1, 'one early header mutation (runs before route selection)');
  t.equal(at(early[0], 'name'), 'envoy.http.early_header_mutation.header_mutation');
  const earlyMutations = arr(at(early[0], 'typed_config.mutations')).map((m) => obj(m));
  const chainMutations = arr(at(filters(b)[0], 'typed_config.mutations.request_mutations')).map((m) => obj(m));
  for (const [where, list] of [
    ['early', earlyMutations],
    ['filter', chainMutations],
  ] as const) {
    const removed = list.map((m) => m.remove).filter((x) => x !== undefined);
    const prefixes = list
      .map((m) => (m.remove_on_match === undefined ? undefined : at(m, 'remove_on_match.key_matcher.prefix')))
      .filter((x) => x !== undefined);
    for (const h of SANITIZED_REQUEST_HEADERS) t.ok(removed.includes(h), `${where}: removes ${h}`);
    for (const p of SANITIZED_REQUEST_HEADER_PREFIXES) t.ok(prefixes.includes(p), `${where}: removes prefix ${p}`);
    t.ok(prefixes.includes('x-envoy-'), `${where}: removes client x-envoy-* (e.g. x-envoy-retry-on)`);
    t.ok(removed.includes(UPSTREAM_HEADER), `${where}: removes the routing header`);
    t.ok(
      list.every((m) => m.append === undefined),
      `${where}: only removals`,
    );
  }
  t.ok(
    earlyMutations.some((m) => m.remove === 'x-forwarded-for'),
    'client X-Forwarded-For dropped before Envoy appends the peer',
  );
  t.notOk(
    chainMutations.some((m) => m.remove === 'x-forwarded-for'),
    'the filter keeps the X-Forwarded-For Envoy wrote',
  );
  t.equal(hcm(b).forward_client_cert_details, 'SANITIZE');
  t.same(
    at(hcm(b), 'route_config.request_headers_to_remove'),
    [UPSTREAM_HEADER, BOUNDED_HEADER, CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER],
    'the routing headers and XFCC are never forwarded upstream',
  );
  t.same(
    at(hcm(b), 'route_config.request_headers_to_add'),
    [{ header: { key: 'audit-id', value: '%REQ(X-REQUEST-ID)%' }, append_action: 'ADD_IF_ABSENT' }],
    "kube-apiserver audits each request under Envoy's request id, unless the client sent an Audit-ID",
  );
});

const mutationsOf = (b: unknown): { early: Obj[]; chain: Obj[] } => ({
  early: arr(at(hcm(b), 'early_header_mutation_extensions.0.typed_config.mutations')).map((m) => obj(m)),
  chain: arr(at(filters(b)[0], 'typed_config.mutations.request_mutations')).map((m) => obj(m)),
});

t.test('client certificates: asked for, verified against clientCaFile, optional', async (t) => {
  const tls = (b: unknown): Obj => obj(at(b, 'static_resources.listeners.0.filter_chains.0.transport_socket.typed_config'));
  const on = tls(renderBootstrap(config({ clientCa: true })));
  t.equal(on.require_client_certificate, false, 'bearer tokens keep working without a certificate');
  t.same(at(on, 'common_tls_context.validation_context'), { trusted_ca: { filename: '/srv/sg/pki/client-ca.crt' } });
  t.same(at(on, 'common_tls_context.alpn_protocols'), ['h2', 'http/1.1']);
  const off = tls(renderBootstrap(config()));
  t.notOk('validation_context' in obj(off.common_tls_context), 'no client CA: no certificate requested');
  t.notOk('require_client_certificate' in off);
});

t.test("client certificates: Envoy sets XFCC (cert + chain) for skewgate; a client's XFCC never survives", async (t) => {
  const on = renderBootstrap(config({ clientCa: true }));
  t.equal(hcm(on).forward_client_cert_details, 'SANITIZE_SET');
  t.same(hcm(on).set_current_client_cert_details, { cert: true, chain: true });
  const m = mutationsOf(on);
  t.ok(
    m.early.some((x) => x.remove === CLIENT_CERT_HEADER),
    "the early mutation drops a client's XFCC (before Envoy sets its own)",
  );
  t.notOk(
    m.chain.some((x) => x.remove === CLIENT_CERT_HEADER),
    'the filter keeps the XFCC Envoy set, for skewgate',
  );
  for (const h of SANITIZED_REQUEST_HEADERS.filter((x) => x !== CLIENT_CERT_HEADER)) {
    t.ok(
      m.chain.some((x) => x.remove === h),
      `the filter still removes ${h}`,
    );
  }
  t.same(
    at(hcm(on), 'route_config.request_headers_to_remove'),
    [UPSTREAM_HEADER, BOUNDED_HEADER, CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER],
    'XFCC never reaches an apiserver, even with skewgate down',
  );

  const off = renderBootstrap(config());
  t.equal(hcm(off).forward_client_cert_details, 'SANITIZE');
  t.notOk('set_current_client_cert_details' in hcm(off));
  t.ok(
    mutationsOf(off).chain.some((x) => x.remove === CLIENT_CERT_HEADER),
    'without client certificates the filter strips XFCC too',
  );
});

t.test('client certificates: the backstop route answers 401 when nobody stated the identity', async (t) => {
  const cfg = config({ clientCa: true });
  const rs = routes(renderBootstrap(cfg));
  t.equal(
    rs.length,
    (cfg.apiservers.length * 2 + 3) * 2 + 1,
    'the backstop, then the routes of both cluster sets, each with its 503 for an unknown upstream',
  );
  const first = rs[0] as Obj;
  t.equal(first.name, IDENTITY_BACKSTOP_ROUTE);
  t.equal(first.name, 'client-identity-unstated');
  t.same(
    first.match,
    {
      prefix: '/',
      tls_context: { presented: true },
      headers: [{ name: REMOTE_USER_HEADER, present_match: true, invert_match: true }],
    },
    'a certificate was presented and no X-Remote-User was stated',
  );
  t.notOk('route' in first, 'never forwarded');
  t.equal(at(first, 'direct_response.status'), 401);
  const body = JSON.parse(String(at(first, 'direct_response.body.inline_string'))) as Obj;
  t.match(body, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'Unauthorized', code: 401 });
  t.match(body.message, /^Unauthorized/);
  const added = arr(first.response_headers_to_add).map((h) => obj(h));
  t.same(
    added.map((h) => [at(h, 'header.key'), at(h, 'header.value'), h.append_action]),
    [
      ['content-type', 'application/json', 'OVERWRITE_IF_EXISTS_OR_ADD'],
      [REASON_HEADER, IDENTITY_UNSTATED_REASON, 'OVERWRITE_IF_EXISTS_OR_ADD'],
    ],
  );
  t.notOk(
    routes(renderBootstrap(config())).some((r) => r.name === IDENTITY_BACKSTOP_ROUTE),
    'no backstop without client certificates',
  );
});

t.test('client certificates: a stated identity goes over front-proxy connections, everything else over direct ones', async (t) => {
  const b = renderBootstrap(config({ clientCa: true }));
  const cs = clusters(b).filter((x) => x.name !== 'skewgate-extproc');
  const names = cs.map((c) => String(c.name));
  const fp = names.filter((n) => n.endsWith(FRONT_PROXY_SUFFIX));
  // Non-empty first: the comparisons and loops below would pass on nothing at all.
  t.equal(fp.length, config({ clientCa: true }).apiservers.length + 1, 'one front-proxy twin per apiserver and one for default');
  t.same(
    fp,
    names.filter((n) => !n.endsWith(FRONT_PROXY_SUFFIX)).map((n) => `${n}${FRONT_PROXY_SUFFIX}`),
    'a front-proxy twin of every apiserver cluster and of default',
  );
  for (const c of cs) {
    const front = String(c.name).endsWith(FRONT_PROXY_SUFFIX);
    const certs = at(c, 'transport_socket.typed_config.common_tls_context.tls_certificates');
    if (front)
      t.same(
        at(c, 'transport_socket.typed_config.common_tls_context.tls_certificates.0'),
        { certificate_chain: { filename: '/srv/sg/pki/fp.crt' }, private_key: { filename: '/srv/sg/pki/fp.key' } },
        `${String(c.name)}: the front-proxy certificate`,
      );
    else t.equal(certs, undefined, `${String(c.name)}: no client certificate (tokens and anonymous requests as if direct)`);
    const hc = at(c, 'health_checks.0.http_health_check.request_headers_to_add');
    if (front)
      t.same(
        arr(hc).map((h) => [at(h, 'header.key'), at(h, 'header.value')]),
        [[REMOTE_USER_HEADER, HEALTH_CHECK_USER]],
        `${String(c.name)}: /readyz as the health-check user`,
      );
    else t.equal(hc, undefined, `${String(c.name)}: anonymous /readyz`);
  }
  const matches = arr(at(cluster(b, `default${FRONT_PROXY_SUFFIX}`), 'transport_socket_matches'));
  t.equal(matches.length, config({ clientCa: true }).apiservers.length, 'default front-proxy: a transport socket per apiserver');
  for (const m of matches) {
    t.same(
      at(m, 'transport_socket.typed_config.common_tls_context.tls_certificates.0.certificate_chain'),
      { filename: '/srv/sg/pki/fp.crt' },
      `default front-proxy: ${String(at(m, 'name'))}`,
    );
  }
  // Routes: backstop, then X-Remote-User present → front-proxy twins, then the direct ones.
  const rs = routes(b);
  t.equal(rs[0]?.name, IDENTITY_BACKSTOP_ROUTE);
  const stated = rs
    .slice(1)
    .filter((r) => r.route !== undefined)
    .filter((r) =>
      arr(at(r, 'match.headers') ?? []).some(
        (h) => at(h, 'name') === REMOTE_USER_HEADER && at(h, 'present_match') === true && at(h, 'invert_match') === undefined,
      ),
    );
  t.same(
    stated.map((r) => at(r, 'route.cluster')),
    stated.map((r) => String(at(r, 'route.cluster'))).filter((c) => c.endsWith(FRONT_PROXY_SUFFIX)),
    'every route on a stated identity goes to a front-proxy cluster',
  );
  t.equal(
    stated.length,
    (config({ clientCa: true }).apiservers.length + 1) * 2,
    'one read and one write route per apiserver and for default',
  );
  const lastStated = rs.indexOf(stated.at(-1) as Obj);
  const direct = rs.slice(lastStated + 1).filter((r) => r.route !== undefined);
  t.equal(direct.length, (config({ clientCa: true }).apiservers.length + 1) * 2, 'and as many direct routes');
  t.ok(
    direct.every((r) => !String(at(r, 'route.cluster')).endsWith(FRONT_PROXY_SUFFIX)),
    'the direct routes come after, and never use the front-proxy certificate',
  );
  const plain = renderBootstrap(config({ clientCert: true }));
  t.notOk(
    clusters(plain).some((c) => String(c.name).endsWith(FRONT_PROXY_SUFFIX)),
    'without clientCaFile: one set of clusters',
  );
  t.ok(
    at(cluster(plain, 'default'), 'transport_socket.typed_config.common_tls_context.tls_certificates.0'),
    'and upstreamClientCert on it, as configured',
  );
});

t.test('ext_proc: headers only, timeouts, route cache, failure mode', async (t) => {
  const open = extproc(renderBootstrap(config({ failureMode: 'open' })));
  const closed = extproc(renderBootstrap(config({ failureMode: 'closed' })));
  t.equal(open.failure_mode_allow, true, 'open: continue without skewgate');
  t.equal(closed.failure_mode_allow, false, 'closed: error');
  t.same(open.processing_mode, {
    request_header_mode: 'SEND',
    response_header_mode: 'SKIP',
    request_body_mode: 'NONE',
    response_body_mode: 'NONE',
    request_trailer_mode: 'SKIP',
    response_trailer_mode: 'SKIP',
  });
  t.equal(open.message_timeout, '0.5s');
  t.equal(open.route_cache_action, 'CLEAR');
  t.notOk('disable_clear_route_cache' in open, 'only one of the two route-cache fields');
  t.equal(at(open, 'grpc_service.envoy_grpc.cluster_name'), 'skewgate-extproc');
  t.same(open.status_on_error, { code: 'ServiceUnavailable' });
  t.equal(at(open, 'mutation_rules.allow_envoy'), false, 'x-envoy-* cannot be set by the processor');
});

t.test('routes: one pair per apiserver on the exact header value, then the default', async (t) => {
  const cfg = config();
  const all = routes(renderBootstrap(cfg));
  t.equal(all.length, cfg.apiservers.length * 2 + 3);
  const unknown = all.filter((r) => r.route === undefined);
  t.same(
    unknown.map((r) => [r.name, at(r, 'direct_response.status'), at(r, 'match.headers')]),
    [['upstream-unknown', 503, [{ name: UPSTREAM_HEADER, present_match: true }]]],
    'an upstream this Envoy has no route for is answered 503, never balanced',
  );
  t.ok(
    arr(unknown[0]?.response_headers_to_add).some((h) => at(h, 'header.key') === 'retry-after'),
    'with Retry-After',
  );
  t.ok(all.indexOf(unknown[0] as Obj) > all.findIndex((r) => String(r.name).endsWith('-write')), 'after the apiservers’ own routes');
  const rs = all.filter((r) => r.route !== undefined);
  for (const s of cfg.apiservers) {
    const mine = rs.filter((r) => r.route !== undefined && at(r, 'route.cluster') === s.name);
    t.equal(mine.length, 2, `${s.name}: read and write routes`);
    for (const r of mine) {
      const hdr = arr(at(r, 'match.headers'))
        .map((h) => obj(h))
        .find((h) => h.name === UPSTREAM_HEADER);
      t.same(hdr?.string_match, { exact: s.name }, `${s.name}: exact match on ${UPSTREAM_HEADER}`);
    }
  }
  const last = rs[rs.length - 1] as Obj;
  t.same(last.match, { prefix: '/' }, 'catch-all last');
  t.equal(at(last, 'route.cluster'), 'default');
  t.notOk(
    rs.some((r) => at(r, 'route.cluster') === 'skewgate-extproc'),
    'no route can reach the processor cluster',
  );
  t.notOk(JSON.stringify(rs).includes('cluster_header'), 'no cluster_header: a value can never name an arbitrary cluster');
  for (const r of rs) {
    t.equal(at(r, 'route.timeout'), '0s', `${String(r.name)}: no route timeout (watches, exec)`);
    t.equal(at(r, 'route.idle_timeout'), '0s', `${String(r.name)}: no idle timeout`);
  }
});

t.test('bounded twins: what skewgate marks bounded waits envoy.requestTimeout at most; nothing else is bounded', async (t) => {
  for (const clientCa of [false, true]) {
    const all = allRoutes(renderBootstrap(config({ clientCa })));
    const twins = all.filter((r) => String(r.name).endsWith('-bounded'));
    const plain = all.filter((r) => r.route !== undefined && !String(r.name).endsWith('-bounded'));
    t.equal(twins.length, plain.length, `clientCa ${clientCa}: one twin per route to a cluster`);
    for (const twin of twins) {
      const name = String(twin.name).slice(0, -'-bounded'.length);
      const i = all.indexOf(twin);
      const original = all[i + 1] as Obj;
      t.equal(original.name, name, `${name}: the twin comes right before its route`);
      t.same(
        at(twin, 'match.headers'),
        [...arr(at(original, 'match.headers') ?? []), { name: BOUNDED_HEADER, present_match: true }],
        `${name}: the same match and the mark`,
      );
      t.same({ ...obj(twin.route), timeout: '0s' }, original.route, `${name}: the same cluster, retries and idle timeout`);
      t.equal(at(twin, 'route.timeout'), '65s', `${name}: the default bound, above kube-apiserver's 60 s`);
    }
  }
  const raised = parseConfig(
    { ...rawConfig(), envoy: { ...rawConfig().envoy, requestTimeout: '190s' } },
    '/srv/sg/skewgate.yaml',
    '/srv/sg',
  );
  t.ok(
    allRoutes(renderBootstrap(raised))
      .filter((r) => String(r.name).endsWith('-bounded'))
      .every((r) => at(r, 'route.timeout') === '190s'),
    'envoy.requestTimeout sets it',
  );
  const off = parseConfig({ ...rawConfig(), envoy: { ...rawConfig().envoy, requestTimeout: 0 } }, '/srv/sg/skewgate.yaml', '/srv/sg');
  t.notOk(
    allRoutes(renderBootstrap(off)).some((r) => String(r.name).endsWith('-bounded')),
    '0: no bounded routes',
  );
});

t.test('retries: reads only (no upgrades), on failures before any answer; writes never', async (t) => {
  const rs = routes(renderBootstrap(config())).filter((r) => r.route !== undefined);
  const methodRegex = (r: Obj): RegExp | undefined => {
    const m =
      (r.match as Obj).headers === undefined
        ? undefined
        : arr(at(r, 'match.headers'))
            .map((h) => obj(h))
            .find((h) => h.name === ':method');
    return m === undefined ? undefined : new RegExp(String(at(m, 'string_match.safe_regex.regex')));
  };
  let reads = 0;
  let writes = 0;
  for (const r of rs) {
    const re = methodRegex(r);
    const retry = at(r, 'route.retry_policy');
    if (re === undefined) {
      // A write is retried only when none of it was sent (invariant 2): never on a reset or an answer.
      t.equal(at(retry, 'retry_on'), WRITE_RETRY_ON, `${String(r.name)}: a route that admits writes retries only unsent requests`);
      t.equal(at(retry, 'num_retries'), WRITE_NUM_RETRIES);
      writes++;
      continue;
    }
    reads++;
    for (const m of ['GET', 'HEAD']) t.ok(re.test(m), `${String(r.name)} matches ${m}`);
    for (const m of ['POST', 'PUT', 'PATCH', 'DELETE', 'GETX', 'XGET']) t.notOk(re.test(m), `${String(r.name)} does not match ${m}`);
    t.equal(at(retry, 'retry_on'), READ_RETRY_ON);
    t.equal(at(retry, 'num_retries'), READ_NUM_RETRIES);
  }
  // Counted, so that an empty route table cannot pass: one read and one write route per apiserver and for default.
  t.equal(reads, config().apiservers.length + 1, 'a read route (with retries) per apiserver and for default');
  t.equal(writes, reads, 'every read route has a write twin');
  t.same(WRITE_RETRY_ON.split(',').sort(), ['connect-failure', 'reset-before-request'], 'writes: only failures before anything was sent');
  t.equal(reads + writes, rs.length, 'and nothing else');
  const conditions = READ_RETRY_ON.split(',');
  t.same(
    conditions.filter((c) => !['connect-failure', 'refused-stream', 'reset-before-request', 'reset'].includes(c)),
    [],
    'no condition that fires on an answer (5xx, retriable status codes)',
  );
  t.ok(conditions.includes('reset'), 'a read reset before any response (an apiserver stopping) is tried again');
  for (const r of rs.filter((x) => String(x.name).endsWith('-read'))) {
    t.same(
      arr(at(r, 'match.headers')).find((h) => obj(h).name === 'upgrade'),
      { name: 'upgrade', present_match: true, invert_match: true },
      `${String(r.name)}: not for upgrades (an exec session may have started)`,
    );
  }
  const defaultRead = rs.find((r) => r.name === 'default-read') as Obj;
  t.equal(
    at(defaultRead, 'route.retry_policy.retry_host_predicate.0.name'),
    'envoy.retry_host_predicates.previous_hosts',
    'default: a retry goes to another apiserver',
  );
});

t.test('listener: TLS with h2 + http/1.1, upgrades, no stream timeouts, trusted addresses', async (t) => {
  const b = renderBootstrap(config());
  const l = obj(at(b, 'static_resources.listeners.0'));
  t.same(at(l, 'address.socket_address'), { address: '127.0.0.1', port_value: 8443 });
  const tls = obj(at(l, 'filter_chains.0.transport_socket.typed_config'));
  t.same(at(tls, 'common_tls_context.alpn_protocols'), ['h2', 'http/1.1']);
  t.same(at(tls, 'common_tls_context.tls_certificates.0'), {
    certificate_chain: { filename: '/srv/sg/pki/gw.crt' },
    private_key: { filename: '/srv/sg/pki/gw.key' },
  });
  const h = hcm(b);
  t.equal(h.codec_type, 'AUTO');
  t.same(
    arr(h.upgrade_configs).map((u) => at(u, 'upgrade_type')),
    ['websocket', 'spdy/3.1'],
  );
  t.equal(h.stream_idle_timeout, '0s');
  t.equal(h.use_remote_address, true);
  t.equal(h.xff_num_trusted_hops, 0);
  t.equal(h.normalize_path, true);
  t.equal(h.merge_slashes, true);
  t.same(at(b, 'admin.address.socket_address'), { address: '127.0.0.1', port_value: 9901 });
});

t.test('clusters: one per apiserver with TLS and /readyz checks, plus default and processor', async (t) => {
  const cfg = config({ clientCert: true });
  const b = renderBootstrap(cfg);
  t.same(
    clusters(b).map((c) => c.name),
    ['apiserver-a', 'apiserver-b', 'apiserver-c', 'default', 'skewgate-extproc'],
  );
  for (const s of cfg.apiservers) {
    const c = cluster(b, s.name);
    t.equal(at(c, 'health_checks.0.http_health_check.path'), '/readyz', `${s.name}: /readyz`);
    t.equal(at(c, 'health_checks.0.interval'), '3s');
    t.equal(at(c, 'health_checks.0.timeout'), '1s');
    t.equal(at(c, 'health_checks.0.unhealthy_threshold'), 3);
    t.equal(at(c, 'health_checks.0.healthy_threshold'), 2);
    t.equal(at(c, 'connect_timeout'), '2s');
    const opts = obj(at(c, 'typed_extension_protocol_options'))['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'];
    t.same(at(opts, 'explicit_http_config'), { http_protocol_options: {} }, `${s.name}: HTTP/1.1 upstream, so upgrades pass`);
    t.equal(at(c, 'transport_socket.typed_config.common_tls_context.validation_context.trusted_ca.filename'), '/srv/sg/pki/ca.crt');
    t.same(
      at(c, 'transport_socket.typed_config.common_tls_context.tls_certificates.0.certificate_chain'),
      { filename: '/srv/sg/pki/fp.crt' },
      'client certificate',
    );
    t.ok(Number(at(c, 'circuit_breakers.thresholds.0.max_requests')) >= 100_000, 'long watches do not exhaust the circuit breaker');
  }
  const a = cluster(b, 'apiserver-a');
  t.equal(a.type, 'STATIC', 'IP URL: STATIC');
  t.notOk('sni' in obj(at(a, 'transport_socket.typed_config')), 'no SNI for an IP');
  t.same(at(a, 'transport_socket.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names'), [
    { san_type: 'IP_ADDRESS', matcher: { exact: '127.0.0.1' } },
  ]);
  const c = cluster(b, 'apiserver-c');
  t.equal(c.type, 'STRICT_DNS', 'host name URL: STRICT_DNS');
  t.same(at(c, 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address'), {
    address: 'kube-c.example',
    port_value: 6443,
  });
  t.equal(at(c, 'transport_socket.typed_config.sni'), 'kubernetes', 'serverName is the SNI');
  t.same(at(c, 'transport_socket.typed_config.common_tls_context.validation_context.match_typed_subject_alt_names'), [
    { san_type: 'DNS', matcher: { exact: 'kubernetes' } },
  ]);

  const d = cluster(b, 'default');
  t.equal(d.type, 'STRICT_DNS', 'default: STRICT_DNS as one apiserver has a host name');
  const eps = arr(at(d, 'load_assignment.endpoints.0.lb_endpoints'));
  t.equal(eps.length, 3, 'default balances over every apiserver');
  t.same(
    eps.map((e) => obj(at(e, 'metadata.filter_metadata'))['envoy.transport_socket_match']),
    cfg.apiservers.map((s) => ({ apiserver: s.name })),
  );
  const matches = arr(d.transport_socket_matches).map((m) => obj(m));
  t.same(
    matches.map((m) => m.match),
    cfg.apiservers.map((s) => ({ apiserver: s.name })),
    'each endpoint keeps its own TLS settings',
  );
  t.equal(at(matches[2], 'transport_socket.typed_config.sni'), 'kubernetes');
  t.ok(d.transport_socket !== undefined, 'never plaintext');
  t.equal(at(d, 'health_checks.0.http_health_check.path'), '/readyz');
});

t.test('processor cluster with extproc.workers: one endpoint per worker, a dead one ejected', async (t) => {
  const one = cluster(renderBootstrap(config({ workers: 1 })), 'skewgate-extproc');
  t.equal(arr(at(one, 'load_assignment.endpoints.0.lb_endpoints')).length, 1);
  t.equal(one.outlier_detection, undefined, 'one endpoint: nothing to eject it for');
  const three = cluster(renderBootstrap(config({ workers: 3 })), 'skewgate-extproc');
  t.same(
    arr(at(three, 'load_assignment.endpoints.0.lb_endpoints')).map((e) => at(e, 'endpoint.address.socket_address.port_value')),
    [9002, 9003, 9004],
    'the ports after extproc.listen, all at the local priority',
  );
  t.equal(arr(at(three, 'load_assignment.endpoints')).length, 1, 'one priority');
  t.equal(at(three, 'outlier_detection.consecutive_local_origin_failure'), 1, 'a refused connection ejects that worker at once');
  t.equal(at(three, 'circuit_breakers.thresholds.0.max_requests'), 2000, 'the breaker stays at the whole skewgate');
  const unix = cluster(renderBootstrap(config({ workers: 2, extproc: 'unix:/run/sg/x.sock' })), 'skewgate-extproc');
  t.same(
    arr(at(unix, 'load_assignment.endpoints.0.lb_endpoints')).map((e) => at(e, 'endpoint.address.pipe.path')),
    ['/run/sg/x.sock', '/run/sg/x.sock.1'],
  );
});

t.test('apiserver clusters without a client certificate present none', async (t) => {
  const b = renderBootstrap(config({ clientCert: false }));
  t.notOk('tls_certificates' in obj(at(cluster(b, 'apiserver-a'), 'transport_socket.typed_config.common_tls_context')));
});

t.test("processor cluster: HTTP/2, TCP or unix socket, gRPC health, the breaker at skewgate's ceiling", async (t) => {
  const tcp = cluster(renderBootstrap(config({ extproc: '127.0.0.1:9002' })), 'skewgate-extproc');
  t.same(at(tcp, 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address'), {
    socket_address: { address: '127.0.0.1', port_value: 9002 },
  });
  const unix = cluster(renderBootstrap(config({ extproc: 'unix:/run/skewgate/extproc.sock' })), 'skewgate-extproc');
  t.same(at(unix, 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address'), { pipe: { path: '/run/skewgate/extproc.sock' } });
  const rel = cluster(renderBootstrap(config({ extproc: 'unix:run/x.sock' })), 'skewgate-extproc');
  t.same(
    at(rel, 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address'),
    { pipe: { path: '/srv/sg/run/x.sock' } },
    'relative socket resolved against the config',
  );
  const v6 = cluster(renderBootstrap(config({ extproc: '[::1]:9002' })), 'skewgate-extproc');
  t.same(at(v6, 'load_assignment.endpoints.0.lb_endpoints.0.endpoint.address'), { socket_address: { address: '::1', port_value: 9002 } });
  const opts = obj(at(tcp, 'typed_extension_protocol_options'))['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'];
  t.ok(at(opts, 'explicit_http_config.http2_protocol_options') !== undefined, 'gRPC needs HTTP/2');
  t.same(at(tcp, 'health_checks.0.grpc_health_check'), { service_name: EXTPROC_SERVICE_NAME });
  for (const [maxStreams, want] of [
    [undefined, 2000],
    [1, 2],
    [250, 500],
  ] as const) {
    const raw = rawConfig();
    const cfg = parseConfig(
      { ...raw, extproc: { ...raw.extproc, ...(maxStreams === undefined ? {} : { limits: { maxStreams } }) } },
      '/srv/sg/skewgate.yaml',
      '/srv/sg',
    );
    const breaker = at(cluster(renderBootstrap(cfg), 'skewgate-extproc'), 'circuit_breakers.thresholds');
    t.same(
      breaker,
      [{ priority: 'DEFAULT', max_connections: want, max_pending_requests: want, max_requests: want, max_retries: want }],
      `maxStreams ${maxStreams ?? 'default (1000)'}: breaker ${want}, skewgate's ceiling (routed + answered 429)`,
    );
    t.equal(want, extprocStreamCeiling(cfg.extproc.limits.maxStreams), 'the same function skewgate refuses by');
  }
});

t.test('caFile is required to render', async (t) => {
  const cfg = parseConfig(
    {
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:1', credentials: { tokenFile: 'token' } }],
      envoy: { tls: { certFile: 'c', keyFile: 'k' } },
    },
    '/x/s.yaml',
    '/x',
  );
  t.throws(() => renderBootstrap(cfg), BootstrapError);
});

t.test('renderPath and relative rendering', async (t) => {
  t.equal(renderPath('/repo/examples/pki/ca.crt', '/repo'), 'examples/pki/ca.crt');
  t.equal(renderPath('/elsewhere/ca.crt', '/repo'), '/elsewhere/ca.crt', 'outside: unchanged');
  t.equal(renderPath('/repo2/ca.crt', '/repo'), '/repo2/ca.crt', 'a sibling with a common prefix is outside');
  t.equal(renderPath('/repo/ca.crt', undefined), '/repo/ca.crt');
  const yaml = renderBootstrapYaml(config(), { relativeTo: '/srv' });
  t.match(yaml, /^# generated by skewgate envoy-config from sg\/skewgate\.yaml — do not edit\n/);
  t.match(yaml, /filename: sg\/pki\/ca\.crt/);
  t.notMatch(yaml, /\/srv\//, 'no absolute path inside the base folder');
  const plain = renderBootstrapYaml(config());
  t.match(plain, /^# generated by skewgate envoy-config from skewgate\.yaml — do not edit\n/);
  t.equal(renderBootstrapYaml(config()), plain, 'stable output');
});

t.test('the example config renders machine-independent', async (t) => {
  const root = packageRoot();
  const cfg = loadConfig(join(root, 'examples/skewgate.yaml'));
  const yaml = renderBootstrapYaml(cfg, { relativeTo: root });
  t.match(yaml, /from examples\/skewgate\.yaml — do not edit/);
  t.notOk(yaml.includes(root), 'no path of this machine');
  t.match(yaml, /filename: examples\/pki\/ca\.crt/);
  t.equal(cfg.apiservers.length, 3);
  t.ok(cfg.envoy.tls.clientCaFile, 'the example states client-certificate identity');
  t.match(yaml, /name: client-identity-unstated/);
  t.match(yaml, /filename: examples\/pki\/front-proxy-client\.crt/);
});

t.test('ext_proc streams are half-closed, not reset (Node HTTP/2 rapid-reset protection)', async (t) => {
  const layer = obj(at(renderBootstrap(config()), 'layered_runtime.layers.0.static_layer'));
  t.equal(layer[EXTPROC_GRACEFUL_CLOSE], true);
});

t.test('peer skewgates: priority 1 behind the local one, mutual TLS by endpoint metadata, ejected on a refused connection', async (t) => {
  const b = renderBootstrap(config({ clientCa: true, peers: ['10.0.0.2:9444', '[fd00::3]:9444'] }));
  const c = cluster(b, 'skewgate-extproc');
  const eps = arr(at(c, 'load_assignment.endpoints')).map((e) => obj(e));
  t.same(
    eps.map((e) => e.priority),
    [0, 1],
    'the local skewgate first, the peers only while it is not healthy',
  );
  t.same(at(eps[1], 'lb_endpoints.1.endpoint.address'), { socket_address: { address: 'fd00::3', port_value: 9444 } });
  t.same(at(eps[1], 'lb_endpoints.0.metadata.filter_metadata'), { 'envoy.transport_socket_match': { skewgate: 'peer' } });
  t.equal(at(eps[0], 'lb_endpoints.0.metadata'), undefined, 'the local one: no match, plaintext on the machine');
  const tls = obj(at(c, 'transport_socket_matches.0.transport_socket.typed_config'));
  t.equal(at(tls, 'sni'), 'skewgate-peer');
  t.same(at(tls, 'common_tls_context.alpn_protocols'), ['h2']);
  t.same(at(tls, 'common_tls_context.tls_certificates.0.certificate_chain'), { filename: '/srv/sg/pki/peer.crt' });
  t.same(at(tls, 'common_tls_context.validation_context.trusted_ca'), { filename: '/srv/sg/pki/peer-ca.crt' });
  t.same(at(tls, 'common_tls_context.validation_context.match_typed_subject_alt_names'), [
    { san_type: 'DNS', matcher: { exact: 'skewgate-peer' } },
  ]);
  t.equal(c.transport_socket, undefined, 'no default transport socket: the local endpoint stays plaintext');
  t.equal(at(c, 'outlier_detection.consecutive_local_origin_failure'), 1);
  t.equal(at(c, 'outlier_detection.enforcing_consecutive_5xx'), 0, 'a gRPC error is an answer, not a dead skewgate');
  t.equal(at(c, 'common_lb_config.healthy_panic_threshold.value'), 0);
  const retry = obj(at(extproc(b), 'grpc_service.retry_policy'));
  t.equal(
    retry.retry_on,
    'connect-failure,refused-stream,reset-before-request,reset',
    'a stream that never opened, or was cut before its answer',
  );
  t.equal(at(retry, 'retry_host_predicate.0.name'), 'envoy.retry_host_predicates.previous_hosts', 'on another skewgate');
  t.equal(at(extproc(renderBootstrap(config())), 'grpc_service.retry_policy'), undefined, 'no peers, no retry');
  t.same(
    arr(at(cluster(renderBootstrap(config()), 'skewgate-extproc'), 'load_assignment.endpoints')).length,
    1,
    'without peers, one priority',
  );
});

t.test('the health listener: /ready answered by Envoy from the pool and, where needed, the processors', async (t) => {
  const listeners = (b: unknown): Obj[] => arr(at(b, 'static_resources.listeners')).map((l) => obj(l));
  t.equal(listeners(renderBootstrap(config())).length, 1, 'off unless configured');
  const check = (o: Opts): Obj => {
    const l = listeners(renderBootstrap(config(o))).find((x) => x.name === HEALTH_LISTENER);
    if (!l) throw new Error('no health listener');
    const f = arr(at(l, 'filter_chains.0.filters.0.typed_config.http_filters')).map((x) => obj(x));
    t.equal(f[0]?.name, 'envoy.filters.http.health_check');
    t.same(at(l, 'address.socket_address'), { address: '0.0.0.0', port_value: 16444 });
    return obj(f[0]?.typed_config);
  };
  const tokens = check({ health: 16444 });
  t.equal(tokens.pass_through_mode, false, 'Envoy answers it itself');
  t.same(tokens.headers, [{ name: ':path', string_match: { exact: HEALTH_PATH } }]);
  t.same(tokens.cluster_min_healthy_percentages, { default: { value: 1 } }, 'tokens only, failing open: a ready apiserver is enough');
  t.same(
    check({ health: 16444, clientCa: true }).cluster_min_healthy_percentages,
    { default: { value: 1 }, 'skewgate-extproc': { value: 1 } },
    'client certificates: a healthy skewgate too (local or peer)',
  );
  t.same(
    check({ health: 16444, failureMode: 'closed' }).cluster_min_healthy_percentages,
    { default: { value: 1 }, 'skewgate-extproc': { value: 1 } },
    'failing closed: a healthy skewgate too',
  );
});

t.test("request headers: as many as kube-apiserver takes; Envoy's own refusals as a Status", async (t) => {
  const h = hcm(renderBootstrap(config({ clientCa: true })));
  t.equal(h.max_request_headers_kb, MAX_REQUEST_HEADERS_KB, "1 MiB, Go's http.DefaultMaxHeaderBytes");
  t.equal(MAX_REQUEST_HEADERS_KB, 1024);
  t.equal(at(h, 'common_http_protocol_options.max_headers_count'), MAX_REQUEST_HEADERS_COUNT);
  t.ok(MAX_REQUEST_HEADERS_COUNT >= 1000, 'room for a front-proxy identity with hundreds of groups');
  const mappers = arr(at(h, 'local_reply_config.mappers')).map((m) => obj(m));
  t.ok(mappers.length > 1);
  // Envoy's own replies are told by their details: skewgate's (skewgate_*) and the backstop's
  // (direct_response) keep their bodies; the codec answers before it flags, so no flag filter.
  const OWN = `!response.code_details.startsWith('${DETAILS_PREFIX}') && response.code_details != 'direct_response'`;
  for (const m of mappers) {
    const filter = JSON.stringify(m.filter);
    t.ok(filter.includes(JSON.stringify(OWN)), `only replies Envoy makes itself: ${filter.slice(0, 80)}`);
    t.notOk(filter.includes('response_flag_filter'), 'not told by a flag (set after the codec answers)');
    t.match(at(m, 'body_format_override.json_format'), { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: '%RESPONSE_CODE%' });
  }
  const byCode = (code: number): Obj | undefined => mappers.find((m) => JSON.stringify(m.filter).includes(`"default_value":${code}`));
  t.equal(at(byCode(431), 'body_format_override.json_format.reason'), 'BadRequest');
  t.equal(at(byCode(503), 'body_format_override.json_format.reason'), 'ServiceUnavailable');
  t.same(
    at(byCode(503), 'headers_to_add'),
    [{ header: { key: 'retry-after', value: '1' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }],
    "Envoy's own 503s carry skewgate's Retry-After (routing.retryAfterSeconds)",
  );
  t.equal(at(byCode(504), 'headers_to_add'), undefined, 'a timeout does not ask to retry');
  t.equal(at(mappers[mappers.length - 1], 'body_format_override.json_format.reason'), 'InternalError', 'any other code');
});
