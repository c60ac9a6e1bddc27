// Identity at the edge through a REAL Envoy: tokens pass untouched, client certificates are
// re-stated as front-proxy identity (X-Remote-*), forged identity never reaches an apiserver, and
// with skewgate down a certificate fails authentication instead of passing unstated.
// Envoy missing → startStack throws and the test fails (it never skips).
import t, { type Test } from 'tap';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect as h2connect } from 'node:http2';
import { join } from 'node:path';
import { CLIENT_CERT_HEADER, IDENTITY_UNSTATED_REASON, PEER_PROXIED_HEADER, REASON_HEADER, UPSTREAM_HEADER } from '../../src/constants.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { renderBootstrap, type JsonObject } from '../../src/envoy/bootstrap.js';
import { startEnvoy, validateBootstrap } from '../../src/envoy-runtime/process.js';
import { BUILTINS_NEW, BUILTINS_OLD, type FakeApiServer, type KeyPairFiles, type RecordedRequest } from '../../harness/fake/index.js';
import { send, type Reply } from '../helpers/envoy-fixtures.js';
import { stackFixture } from '../helpers/stack-fixture.js';
import { eventually } from '../helpers/http.js';

const COMMON = '/api/v1/namespaces/default/configmaps';
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const CREDENTIAL_ID = 'x-remote-extra-authentication.kubernetes.io%2fcredential-id';

const fixture = stackFixture(t, 'identity', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_OLD },
    { name: 'apiserver-b', builtins: BUILTINS_NEW },
  ],
  failureMode: 'open',
});
const dir = fixture.dir;
let stack: Stack;
t.before(() => {
  stack = fixture.stack();
});

const port = (s: Stack): number => Number(new URL(s.gatewayUrl).port);
const admin = (): KeyPairFiles => ({ certFile: stack.pki.clientCertFile, keyFile: stack.pki.clientKeyFile });
const bearer = (): Record<string, string> => ({ authorization: `Bearer ${stack.pki.token}` });

interface Seen {
  readonly reply: Reply;
  /** What the fake apiservers recorded for this request (the /readyz checks left out). */
  readonly arrived: RecordedRequest[];
}

/** One request through the gateway, and what every fake apiserver saw of it. */
async function through(
  s: Stack,
  path: string,
  headers: Record<string, string | string[]>,
  cert?: KeyPairFiles,
  method = 'GET',
): Promise<Seen> {
  for (const a of s.apiservers) a.clearRequests();
  const reply = await send(port(s), s.pki, method, path, headers, cert);
  return { reply, arrived: arrivals(s.apiservers, path) };
}

function arrivals(servers: readonly FakeApiServer[], path: string): RecordedRequest[] {
  return servers.flatMap((a) => a.requests.filter((r) => r.path === path));
}

/** The header lines named `name` (any case), in arrival order. */
const lines = (r: RecordedRequest, name: string): string[] => r.rawHeaders.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
const names = (r: RecordedRequest): string[] => r.rawHeaders.map(([k]) => k.toLowerCase());

const certSha256 = (file: string): string =>
  createHash('sha256')
    .update(new X509Certificate(readFileSync(file)).raw)
    .digest('hex');

/** Headers a client must never get through: each names what it would try. */
const FORGED: Record<string, string | string[]> = {
  'x-remote-user': 'system:admin',
  'x-remote-group': ['system:masters', 'system:nodes'],
  'x-remote-uid': 'forged-uid',
  'x-remote-extra-scopes': 'all',
  'x-remote-extra-authentication.kubernetes.io%2fcredential-id': 'X509SHA256=00',
  [PEER_PROXIED_HEADER]: 'true',
  [UPSTREAM_HEADER]: 'apiserver-a',
};

function assertNoForgery(t: Test, r: RecordedRequest, except: readonly string[] = []): void {
  for (const n of names(r)) {
    if (except.includes(n)) continue;
    t.notOk(n.startsWith('x-remote-'), `no ${n} reached ${r.path}`);
    t.notOk(n.startsWith('x-skewgate-'), `no ${n} reached ${r.path}`);
    t.not(n, CLIENT_CERT_HEADER, 'no x-forwarded-client-cert reached the apiserver');
    t.not(n, PEER_PROXIED_HEADER, `no ${PEER_PROXIED_HEADER} reached the apiserver`);
  }
}

/** A forged XFCC naming the admin certificate, as a client might send it. */
function forgedXfcc(): string {
  const pem = readFileSync(stack.pki.clientCertFile, 'utf8');
  return `By=spiffe://forged;Hash=${certSha256(stack.pki.clientCertFile)};Cert="${encodeURIComponent(pem)}";Subject="O=system:masters,CN=skewgate-admin"`;
}

// --- Envoy itself -----------------------------------------------------------------------------

t.test('the identity bootstrap passes envoy --mode validate', async (t) => {
  t.ok(stack.config.envoy.tls.clientCaFile, 'the stack verifies client certificates');
  const res = await validateBootstrap(renderBootstrap(stack.config));
  t.ok(res.ok, res.output);
});

t.test('Envoy 1.40: the early mutation runs before Envoy writes its own XFCC (SANITIZE_SET)', async (t) => {
  // A probe bootstrap: the same listener, but no ext_proc, no backstop and XFCC not removed by the
  // routes, so that the apiserver shows which x-forwarded-client-cert survived the early mutation.
  const probe = structuredClone(renderBootstrap(stack.config)) as unknown as ProbeBootstrap;
  probe.static_resources.listeners[0]!.address.socket_address.port_value = 0;
  const hcm = probe.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config;
  hcm.http_filters = hcm.http_filters.filter((f) => f.name !== 'envoy.filters.http.ext_proc');
  hcm.route_config.request_headers_to_remove = [UPSTREAM_HEADER];
  hcm.route_config.virtual_hosts[0]!.routes = hcm.route_config.virtual_hosts[0]!.routes.filter(
    (r) => r.name !== 'client-identity-unstated',
  );
  const envoy = await startEnvoy({ bootstrap: probe as unknown as JsonObject, logFile: join(dir, 'probe-envoy.log') });
  t.teardown(() => envoy.stop());
  const probePort = envoy.listenPort ?? 0;
  for (const a of stack.apiservers) a.clearRequests();
  const jane = stack.pki.clients.limited;
  await eventually(
    'the probe Envoy to reach an apiserver',
    async () => (await send(probePort, stack.pki, 'GET', '/version', {}, jane)).status === 200,
  );
  for (const a of stack.apiservers) a.clearRequests();
  const reply = await send(probePort, stack.pki, 'GET', COMMON, { [CLIENT_CERT_HEADER]: forgedXfcc() }, jane);
  t.equal(reply.status, 401, 'no X-Remote-User without skewgate: the request reaches the apiserver with no credential at all');
  const [r] = arrivals(stack.apiservers, COMMON);
  if (r === undefined) throw new Error('the probe request reached no apiserver');
  const xfcc = lines(r, CLIENT_CERT_HEADER);
  t.equal(xfcc.length, 1, "one XFCC line: Envoy's");
  t.notMatch(xfcc[0], /forged/, "the client's XFCC is gone");
  t.match(xfcc[0], new RegExp(`(^|;)Hash=${certSha256(jane.certFile)}(;|$)`), "Envoy's XFCC names the certificate the client presented");
  t.match(xfcc[0], /;Cert="-----BEGIN%20CERTIFICATE-----/, 'cert: true');
  t.match(xfcc[0], /;Chain="-----BEGIN%20CERTIFICATE-----/, 'chain: true');
  t.equal(r.peerCn, null, 'without X-Remote-User the request takes a direct connection: no front-proxy certificate');
  t.equal(r.user, null, 'and is nobody');
});

interface ProbeBootstrap {
  static_resources: {
    listeners: {
      address: { socket_address: { port_value: number } };
      filter_chains: {
        filters: {
          typed_config: {
            http_filters: { name: string }[];
            route_config: { request_headers_to_remove: string[]; virtual_hosts: { routes: { name: string }[] }[] };
          };
        }[];
      }[];
    }[];
  };
}

// --- TLS --------------------------------------------------------------------------------------

const handshakeFails = async (t: Test, cert: KeyPairFiles, code: RegExp): Promise<void> => {
  for (const a of stack.apiservers) a.clearRequests();
  const err = await send(port(stack), stack.pki, 'GET', COMMON, bearer(), cert).then(
    () => null,
    (e: unknown) => e as NodeJS.ErrnoException,
  );
  t.ok(err, 'the request fails');
  t.match(err?.code, code);
  t.same(arrivals(stack.apiservers, COMMON), [], 'nothing reached an apiserver');
};

t.test('a certificate from an unrelated CA fails the TLS handshake', async (t) => {
  await handshakeFails(t, stack.pki.clients.foreign, /UNKNOWN_CA/);
});

t.test('a serverAuth-only certificate from the client CA fails the TLS handshake (Envoy checks the clientAuth usage)', async (t) => {
  // BoringSSL verifies client certificates for the client purpose; skewgate's own usage check
  // (like Go's x509) is then a second line that Envoy never lets such a certificate reach.
  await handshakeFails(t, stack.pki.clients.serverOnly, /UNSUPPORTED_CERTIFICATE/);
});

// --- tokens -----------------------------------------------------------------------------------

t.test('token client: Authorization untouched, no X-Remote-*, forged identity stripped', async (t) => {
  const { reply, arrived } = await through(stack, COMMON, { ...bearer(), ...FORGED, [CLIENT_CERT_HEADER]: forgedXfcc() });
  t.equal(reply.status, 200, reply.body);
  t.equal(arrived.length, 1);
  const r = arrived[0] as RecordedRequest;
  t.same(lines(r, 'authorization'), [`Bearer ${stack.pki.token}`], 'the bearer token passes through untouched');
  assertNoForgery(t, r);
  t.match(r.user, { via: 'token' }, 'the apiserver authenticated the token');
  t.equal(r.peerCn, null, 'a token request takes a direct connection: no client certificate, as if the client had connected itself');
});

t.test('anonymous client: forged identity stripped, the apiserver sees nobody', async (t) => {
  const { reply, arrived } = await through(stack, COMMON, { ...FORGED, [CLIENT_CERT_HEADER]: forgedXfcc() });
  t.equal(reply.status, 401, "the apiserver's own 401");
  t.equal(arrived.length, 1);
  assertNoForgery(t, arrived[0] as RecordedRequest);
  t.equal(arrived[0]?.user, null);
  t.equal(arrived[0]?.peerCn, null, 'over a direct connection: the apiserver applies its own anonymous rules');
});

t.test('token client: Impersonate-* pass through for the apiserver to authorise', async (t) => {
  const { reply, arrived } = await through(stack, COMMON, {
    ...bearer(),
    'impersonate-user': 'jane',
    'impersonate-group': ['dev-viewers', 'team-b'],
    'impersonate-extra-scopes': 'view',
  });
  t.equal(reply.status, 200);
  const r = arrived[0] as RecordedRequest;
  t.same(lines(r, 'impersonate-user'), ['jane']);
  t.same(lines(r, 'impersonate-group'), ['dev-viewers', 'team-b']);
  t.same(lines(r, 'impersonate-extra-scopes'), ['view']);
});

// --- client certificates: identity stated by skewgate ------------------------------------------

function assertStated(t: Test, r: RecordedRequest, cert: KeyPairFiles, user: string, groups: readonly string[]): void {
  t.same(lines(r, 'x-remote-user'), [user], 'X-Remote-User: the CN');
  t.same(lines(r, 'x-remote-group'), groups, 'X-Remote-Group: one header line per O, in order');
  t.same(
    lines(r, CREDENTIAL_ID),
    [`X509SHA256=${certSha256(cert.certFile)}`],
    "the credential id kube-apiserver's x509 authenticator would set",
  );
  t.same(lines(r, 'x-remote-uid'), [], 'no UID attribute in the certificate: no X-Remote-Uid');
  t.same(lines(r, CLIENT_CERT_HEADER), [], 'no x-forwarded-client-cert');
  t.equal(r.peerCn, 'front-proxy-client', 'over a connection authenticated by the front-proxy certificate');
  t.same(r.user, { name: user, groups, via: 'front-proxy' }, 'the apiserver sees the same user and groups as with a direct connection');
  assertNoForgery(t, r, ['x-remote-user', 'x-remote-group', CREDENTIAL_ID]);
}

t.test('stated: admin certificate → X-Remote-User/Group/Extra from the certificate', async (t) => {
  const { reply, arrived } = await through(stack, COMMON, {}, admin());
  t.equal(reply.status, 200, reply.body);
  t.equal(arrived.length, 1);
  assertStated(t, arrived[0] as RecordedRequest, admin(), 'skewgate-admin', ['system:masters']);
});

t.test('stated: a limited user with two groups; a comma in a CN stays one user name', async (t) => {
  const jane = stack.pki.clients.limited;
  const a = await through(stack, COMMON, {}, jane);
  t.equal(a.reply.status, 200, a.reply.body);
  assertStated(t, a.arrived[0] as RecordedRequest, jane, 'jane', ['dev-viewers', 'team-b']);
  const comma = stack.pki.clients.comma;
  const b = await through(stack, COMMON, {}, comma);
  t.equal(b.reply.status, 200, b.reply.body);
  assertStated(t, b.arrived[0] as RecordedRequest, comma, 'doe, jane', ['team-c']);
});

t.test('stated: a routed request (one capable apiserver) carries the identity too', async (t) => {
  const jane = stack.pki.clients.limited;
  const { reply, arrived } = await through(stack, SKEWED, {}, jane);
  t.equal(reply.status, 200, reply.body);
  t.equal(reply.headers['x-fake-apiserver'], 'apiserver-b', 'routed to the only apiserver that serves it');
  assertStated(t, arrived[0] as RecordedRequest, jane, 'jane', ['dev-viewers', 'team-b']);
});

t.test('stated: forged identity headers from a certificate client change nothing', async (t) => {
  const jane = stack.pki.clients.limited;
  const { reply, arrived } = await through(stack, COMMON, { ...FORGED, [CLIENT_CERT_HEADER]: forgedXfcc() }, jane);
  t.equal(reply.status, 200, reply.body);
  t.equal(arrived.length, 1);
  assertStated(t, arrived[0] as RecordedRequest, jane, 'jane', ['dev-viewers', 'team-b']);
});

t.test('stated: Impersonate-* pass through beside the stated identity', async (t) => {
  const jane = stack.pki.clients.limited;
  const { reply, arrived } = await through(stack, COMMON, { 'impersonate-user': 'bob', 'impersonate-group': ['g1', 'g2'] }, jane);
  t.equal(reply.status, 200, reply.body);
  const r = arrived[0] as RecordedRequest;
  assertStated(t, r, jane, 'jane', ['dev-viewers', 'team-b']);
  t.same(lines(r, 'impersonate-user'), ['bob']);
  t.same(lines(r, 'impersonate-group'), ['g1', 'g2']);
});

t.test('stated: a certificate and a bearer token: the identity is stated, the token passes too', async (t) => {
  const jane = stack.pki.clients.limited;
  const { reply, arrived } = await through(stack, COMMON, bearer(), jane);
  t.equal(reply.status, 200, reply.body);
  const r = arrived[0] as RecordedRequest;
  t.same(lines(r, 'authorization'), [`Bearer ${stack.pki.token}`]);
  t.same(lines(r, 'x-remote-user'), ['jane']);
});

t.test('stated: over HTTP/2 as over HTTP/1.1', async (t) => {
  const jane = stack.pki.clients.limited;
  for (const a of stack.apiservers) a.clearRequests();
  const session = h2connect(stack.gatewayUrl, {
    ca: readFileSync(stack.pki.caFile),
    servername: 'localhost',
    cert: readFileSync(jane.certFile),
    key: readFileSync(jane.keyFile),
  });
  t.teardown(() => session.close());
  const status = await new Promise<number>((resolve, reject) => {
    const req = session.request({ ':method': 'GET', ':path': COMMON, 'x-remote-user': 'system:admin' });
    req.on('response', (h) => resolve(Number(h[':status'])));
    req.on('error', reject);
    req.resume();
    req.end();
  });
  t.equal(status, 200);
  assertStated(t, arrivals(stack.apiservers, COMMON)[0] as RecordedRequest, jane, 'jane', ['dev-viewers', 'team-b']);
});

t.test('stated: a certificate whose identity cannot be stated → 401 Status from skewgate, no upstream hop', async (t) => {
  const { reply, arrived } = await through(stack, COMMON, {}, stack.pki.clients.noCommonName);
  t.equal(reply.status, 401);
  t.equal(reply.headers[REASON_HEADER], IDENTITY_UNSTATED_REASON);
  t.match(reply.headers['content-type'], /application\/json/);
  t.match(JSON.parse(reply.body), { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', code: 401 });
  t.equal(reply.headers['x-fake-apiserver'], undefined);
  t.same(arrived, [], 'no apiserver saw it');
});

// --- skewgate down ------------------------------------------------------------------------------

const backstop = (t: Test, s: Seen): void => {
  t.equal(s.reply.status, 401, s.reply.body);
  t.equal(s.reply.headers[REASON_HEADER], IDENTITY_UNSTATED_REASON);
  t.match(s.reply.headers['content-type'], /^application\/json/);
  t.match(JSON.parse(s.reply.body), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    reason: 'Unauthorized',
    code: 401,
  });
  t.same(s.arrived, [], 'no apiserver saw it');
};

t.test('skewgate down, fail open: a certificate gets the backstop 401, a token still reaches an apiserver', async (t) => {
  await stack.stopSkewgate();
  t.teardown(async () => {
    await stack.startSkewgate();
    await eventually(
      'skewgate routing again',
      async () => (await through(stack, SKEWED, bearer())).reply.headers['x-fake-apiserver'] === 'apiserver-b',
    );
  });
  backstop(t, await through(stack, COMMON, {}, admin()));
  backstop(t, await through(stack, COMMON, { ...FORGED, [CLIENT_CERT_HEADER]: forgedXfcc() }, stack.pki.clients.limited));
  backstop(t, await through(stack, COMMON, bearer(), admin()));
  backstop(t, await through(stack, COMMON, {}, admin(), 'POST'));
  const token = await through(stack, COMMON, { ...bearer(), ...FORGED });
  t.equal(token.reply.status, 200, 'fail open: Envoy balances on');
  t.equal(token.arrived.length, 1);
  assertNoForgery(t, token.arrived[0] as RecordedRequest);
  t.same(lines(token.arrived[0] as RecordedRequest, 'authorization'), [`Bearer ${stack.pki.token}`]);
});

t.test('skewgate down, fail closed: 503 for everyone', async (t) => {
  const closed = await startStack({
    dir: join(dir, 'closed'),
    servers: [{ name: 'apiserver-a', builtins: BUILTINS_NEW }],
    failureMode: 'closed',
  });
  t.teardown(() => closed.close());
  await closed.stopSkewgate();
  for (const [what, headers, cert] of [
    ['certificate', {}, { certFile: closed.pki.clientCertFile, keyFile: closed.pki.clientKeyFile }],
    ['token', { authorization: `Bearer ${closed.pki.token}` }, undefined],
  ] as const) {
    const s = await through(closed, COMMON, headers, cert);
    t.equal(s.reply.status, 503, `${what}: ${s.reply.body}`);
    t.same(s.arrived, [], `${what}: no apiserver saw it`);
  }
});
