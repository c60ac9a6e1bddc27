// Certificates on the fast path, as rendered (src/envoy/cert-identity.ts, cert-identity-lua.ts and
// where routes.ts, fast-routes.ts, clusters.ts and responses.ts take part): which CAs the Lua
// trusts and for how long, where its script and the routes it enables stand, and what skewgate
// takes away when it states the identity again. The Lua itself runs in a real Envoy:
// test/e2e/cert-fast-path.test.ts.
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load.js';
import { type ApiServerConfig } from '../../src/config/core/schema.js';
import { CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER, REMOTE_GROUP_HEADER } from '../../src/constants.js';
import { certIdentityLua } from '../../src/envoy/cert-identity-lua.js';
import { certIdentityScript, envoyStatesCertificates, issuerWindows, LUA_FILTER } from '../../src/envoy/cert-identity.js';
import { fastClusterName, FRONT_PROXY_SUFFIX } from '../../src/envoy/clusters.js';
import { FAST_PATH_X509, fastPathRoutes } from '../../src/envoy/fast-routes.js';
import { ENVOY_IDENTITY_BACKSTOP_ROUTE, IDENTITY_BACKSTOP_ROUTE } from '../../src/envoy/routes.js';
import { renderClusters, renderRoutes } from '../../src/envoy/xds.js';
import { listener } from '../../src/envoy/listener.js';
import { upstreamOf } from '../../src/envoy/upstreams.js';
import { continueRequestHeaders } from '../../src/extproc/core/responses.js';
import type { ClientIdentity } from '../../src/identity/core/client-identity.js';
import type { FastTable } from '../../src/routing/fast-path.js';
import { FIXTURES } from '../helpers/x509-fixtures.js';

const cert = (name: string): X509Certificate => new X509Certificate(readFileSync(join(FIXTURES, 'certs', `${name}.crt`)));
const subjectHex = (c: X509Certificate): string => {
  // The subject Name's DER: what the Lua keys a CA by (the leaf's issuer bytes).
  const w = issuerWindows({ cas: [c], source: 'x' })[0];
  return w?.subjectHex ?? '';
};
/** A CA as the windows read it, with another validity or usage. */
const variant = (c: X509Certificate, o: { validFrom?: string; validTo?: string; keyUsage?: string[] }): X509Certificate =>
  ({
    raw: c.raw,
    validFrom: o.validFrom ?? c.validFrom,
    validTo: o.validTo ?? c.validTo,
    keyUsage: o.keyUsage ?? c.keyUsage,
  }) as X509Certificate;

t.test('the CAs the Lua trusts: by subject, validity intersected to whole seconds, none that refuses client auth', async (t) => {
  const ca = cert('client-ca');
  const other = cert('other-ca');
  const [w] = issuerWindows({ cas: [ca], source: 'x' });
  t.match(w?.subjectHex, /^30/, "a subject Name's DER (a SEQUENCE)");
  t.equal(w?.notBefore, Date.parse(ca.validFrom) / 1000, 'from its notBefore');
  t.equal(w?.notAfter, Date.parse(ca.validTo) / 1000, 'to its notAfter');
  t.same(
    issuerWindows({ cas: [ca, variant(ca, { validFrom: 'Jan  1 00:00:00 2030 GMT', validTo: 'Jan  1 00:00:00 2031 GMT' })], source: 'x' }),
    [
      {
        subjectHex: subjectHex(ca),
        notBefore: Date.parse('Jan  1 00:00:00 2030 GMT') / 1000,
        notAfter: Math.min(Date.parse(ca.validTo), Date.parse('Jan  1 00:00:00 2031 GMT')) / 1000,
      },
    ],
    'two CAs of one subject (a rotation keeping the name): the Lua holds a leaf to both',
  );
  t.same(
    issuerWindows({ cas: [ca, variant(ca, { validFrom: 'Jan  1 00:00:00 2200 GMT', validTo: 'Jan  1 00:00:00 2201 GMT' })], source: 'x' }),
    [],
    'windows that do not meet: that subject is left to skewgate',
  );
  t.same(
    issuerWindows({ cas: [variant(ca, { keyUsage: ['1.3.6.1.5.5.7.3.1'] }), other], source: 'x' }).map((x) => x.subjectHex),
    [subjectHex(other)],
    'a CA whose extended key usage leaves out client auth is not trusted, by its subject',
  );
  t.same(
    issuerWindows({ cas: [variant(ca, { keyUsage: ['2.5.29.37.0'] })], source: 'x' }).map((x) => x.subjectHex),
    [subjectHex(ca)],
    'any extended key usage allows it',
  );
});

t.test("the script's constants: Lua string literals whatever the bytes", async (t) => {
  const lua = certIdentityLua(
    [{ subjectHex: '3000', notBefore: 1, notAfter: 2 }],
    ['30820101'],
    {
      user: 'x-remote-user',
      group: 'x-remote-group',
      credentialId: 'a"b\\c',
      marker: 'm',
      markerValue: 'é',
    },
    { commonName: '2.5.4.3', organization: '2.5.4.10', kubernetesUid: '1.3.6.1.4.1.57683.2' },
  );
  t.match(lua, '["3000"] = { 1, 2 },', 'an issuer and its window');
  t.match(lua, '["30820101"] = true,', 'a bundle CA a client may send along');
  t.match(lua, '"a\\34b\\92c"', 'quotes and backslashes as decimal escapes');
  t.match(lua, '"\\195\\169"', 'UTF-8 bytes as decimal escapes');
  t.notMatch(lua, '${', 'no template left unfilled');
});

const spec = (name: string, ip: string): ApiServerConfig =>
  ({ name, url: `https://${ip}:6443`, caFile: '/etc/skewgate/ca.crt' }) as ApiServerConfig;
const configOf = (over: { clientCa?: boolean; fastPath?: boolean; xds?: boolean }) =>
  parseConfig(
    {
      apiservers: [{ name: 'kas-1', url: 'https://10.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } }],
      envoy: {
        tls: { certFile: 'gw.crt', keyFile: 'gw.key', ...(over.clientCa === false ? {} : { clientCaFile: 'client-ca.crt' }) },
        upstreamClientCert: { certFile: 'fp.crt', keyFile: 'fp.key' },
        ...(over.xds === false ? {} : { xds: { directory: 'xds' } }),
      },
      routing: { fastPath: over.fastPath ?? true },
    },
    '/etc/skewgate/skewgate.yaml',
    '/etc/skewgate',
  );

t.test('when Envoy states certificates: client CA, fast path and filesystem xDS, all three', async (t) => {
  t.equal(envoyStatesCertificates(configOf({})), true, 'all three');
  t.equal(envoyStatesCertificates(configOf({ clientCa: false })), false, 'no client CA: no certificate at all');
  t.equal(envoyStatesCertificates(configOf({ fastPath: false })), false, 'routing.fastPath off');
  t.equal(envoyStatesCertificates(configOf({ xds: false })), false, 'static routes: no bundle to follow');
});

const table: FastTable = Object.freeze({
  generation: 7,
  members: Object.freeze(['kas-1', 'kas-2']),
  servesAll: true,
  why: '',
  groupVersions: Object.freeze([
    Object.freeze({
      group: 'apps',
      version: 'v1',
      resources: Object.freeze([
        Object.freeze({
          resource: 'deployments',
          namespaced: true,
          verbs: Object.freeze(['get', 'list', 'watch']),
          subresources: Object.freeze([]),
        }),
      ]),
    }),
  ]),
}) as unknown as FastTable;

interface Route {
  name: string;
  match: { tls_context?: { presented: boolean }; headers?: { name: string; present_match?: boolean; string_match?: unknown }[] };
  route?: { cluster: string };
  typed_per_filter_config?: Record<string, { source_code?: { inline_string: string } }>;
}

t.test(
  'the routes: the Lua on the identity backstop, the certificate twins to the front-proxy pool, then the backstop for what no one judged',
  async (t) => {
    const config = configOf({});
    const fast = fastPathRoutes(table, 60_000, true);
    const rds = renderRoutes(
      config,
      { routable: [spec('kas-1', '10.0.0.1'), spec('kas-2', '10.0.0.2')], draining: [] },
      fast,
      'LUA SCRIPT',
    );
    const routes = (rds.virtual_hosts as unknown as { routes: Route[] }[])[0]?.routes ?? [];
    const at = (name: string): number => routes.findIndex((r) => r.name === name);
    t.equal(routes[0]?.name, IDENTITY_BACKSTOP_ROUTE, 'every certificate request without an identity selects the backstop first');
    t.equal(
      routes[0]?.typed_per_filter_config?.[LUA_FILTER]?.source_code?.inline_string,
      'LUA SCRIPT',
      'so the Lua runs there, and only there',
    );
    t.equal(routes.filter((r) => r.typed_per_filter_config?.[LUA_FILTER]?.source_code !== undefined).length, 1, 'on no other route');
    const twin = routes.find((r) => r.name === `fast-path-${FAST_PATH_X509}read`);
    t.same(twin?.match.tls_context, { presented: true }, 'the twin takes certificates');
    t.same(
      twin?.match.headers?.find((h) => h.name === ENVOY_IDENTITY_HEADER),
      { name: ENVOY_IDENTITY_HEADER, string_match: { exact: 'x509' } },
      "only those Envoy's Lua stated",
    );
    t.equal(twin?.route?.cluster, `${fastClusterName(['kas-1', 'kas-2'])}${FRONT_PROXY_SUFFIX}`, "over the pool's front-proxy connections");
    t.same(routes.find((r) => r.name === 'fast-path-read')?.match.tls_context, { presented: false }, 'its sibling takes no certificate');
    t.ok(at('upstream-unknown_front-proxy') < at('fast-path-read'), "after every route skewgate's headers select");
    t.ok(
      at(`fast-path-${FAST_PATH_X509}read`) < at(ENVOY_IDENTITY_BACKSTOP_ROUTE),
      'then the backstop for a Lua-stated request no fast route took',
    );
    t.ok(at(ENVOY_IDENTITY_BACKSTOP_ROUTE) < at('default_front-proxy-read'), 'before any balanced route');
    t.same(
      routes[at(ENVOY_IDENTITY_BACKSTOP_ROUTE)]?.match,
      { prefix: '/', tls_context: { presented: true }, headers: [{ name: ENVOY_IDENTITY_HEADER, present_match: true }] },
      'it matches the marker skewgate removes when it judges',
    );
    t.ok((rds.request_headers_to_remove as string[]).includes(ENVOY_IDENTITY_HEADER), 'the marker never reaches an apiserver');
    t.equal(
      fastPathRoutes(table, 60_000, false).filter((r) => String(r.name).includes(FAST_PATH_X509)).length,
      0,
      'no twins when Envoy states none',
    );
    const noScript = renderRoutes(config, { routable: [spec('kas-1', '10.0.0.1')], draining: [] }, []);
    t.equal(
      (noScript.virtual_hosts as unknown as { routes: Route[] }[])[0]?.routes[0]?.typed_per_filter_config,
      undefined,
      'no bundle loaded yet: no Lua',
    );
  },
);

t.test(
  'where the Lua runs: no TLS session resumed, and x-forwarded-client-cert written by the connection manager as elsewhere',
  async (t) => {
    type Tls = { disable_stateless_session_resumption?: boolean; disable_stateful_session_resumption?: boolean };
    type Hcm = { forward_client_cert_details?: string; set_current_client_cert_details?: unknown };
    const chainOf = (
      c: ReturnType<typeof configOf>,
    ): { transport_socket: { typed_config: Tls }; filters: { typed_config: Hcm }[] } | undefined =>
      (
        listener(c, [upstreamOf(spec('kas-1', '10.0.0.1'))], (p) => p) as {
          filter_chains: { transport_socket: { typed_config: Tls }; filters: { typed_config: Hcm }[] }[];
        }
      ).filter_chains[0];
    const tls = chainOf(configOf({}))?.transport_socket.typed_config;
    t.same(
      [tls?.disable_stateless_session_resumption, tls?.disable_stateful_session_resumption],
      [true, true],
      'with the Lua: no session resumed (Envoy reports a resumed session unvalidated, and the Lua then states nothing)',
    );
    t.equal(
      chainOf(configOf({ xds: false }))?.transport_socket.typed_config.disable_stateless_session_resumption,
      undefined,
      'elsewhere: resumption as Envoy does it',
    );
    for (const over of [{}, { xds: false }]) {
      const hcm = chainOf(configOf(over))?.filters[0]?.typed_config;
      t.same(
        [hcm?.forward_client_cert_details, hcm?.set_current_client_cert_details],
        ['SANITIZE_SET', { cert: true, chain: true }],
        `${JSON.stringify(over)}: the connection manager writes it (skewgate states a Lua-stated request again from it when no fast route takes it)`,
      );
    }
  },
);

t.test("the fast pools' clusters: a front-proxy twin each where Envoy states certificates", async (t) => {
  const members = { routable: [spec('kas-1', '10.0.0.1'), spec('kas-2', '10.0.0.2')], draining: [] };
  const name = fastClusterName(['kas-1', 'kas-2']);
  const names = (c: ReturnType<typeof configOf>): string[] =>
    renderClusters(c, members, (p) => p, [['kas-1', 'kas-2']]).map((x) => String(x.name));
  t.ok(names(configOf({})).includes(`${name}${FRONT_PROXY_SUFFIX}`), 'with');
  t.notOk(names(configOf({ fastPath: false })).includes(`${name}${FRONT_PROXY_SUFFIX}`), 'without');
  t.ok(names(configOf({ fastPath: false })).includes(name), 'the pool itself either way');
});

t.test('when skewgate states the identity again it removes the marker, and the Lua’s groups where it states none', async (t) => {
  const identity = (groups: string[]): ClientIdentity => ({ user: 'u', uid: null, groups, extra: [], fingerprint: 'f' });
  const removed = (groups: string[]): readonly string[] | undefined => {
    const reply = continueRequestHeaders([], { kind: 'stated', identity: identity(groups) });
    return 'request_headers' in reply ? reply.request_headers.response?.header_mutation?.remove_headers : undefined;
  };
  t.same(removed(['g']), [CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER], 'XFCC and the marker (its X-Remote-Group lines replace the Lua’s)');
  t.same(removed([]), [CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER, REMOTE_GROUP_HEADER], 'no group: the lines go too');
});

t.test('the script for a bundle: its CAs in, as issuers and as certificates a client may send along', async (t) => {
  const ca = cert('client-ca');
  const lua = certIdentityScript({ cas: [ca], source: 'x' });
  t.match(lua, `["${subjectHex(ca)}"] = {`, 'the issuer');
  t.match(lua, `["${ca.raw.toString('hex')}"] = true`, 'the certificate');
});
