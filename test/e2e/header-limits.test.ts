// Requests as large as kube-apiserver takes pass the gateway: 1 MiB of headers (Go's limit), and a
// client certificate with many groups, which skewgate re-states as one X-Remote-Group line each
// (Envoy's defaults, 60 KiB and 100 headers, refused both). What the gateway still cannot pass on
// gets a Kubernetes Status body from Envoy, never a bare error.
import t from 'tap';
import { join } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD, type RecordedRequest } from '../../harness/fake/index.js';
import { issueCert } from '../../harness/openssl.js';
import { send, type Reply } from '../helpers/envoy-fixtures.js';
import { eventually } from '../helpers/http.js';
import { stackFixture } from '../helpers/stack-fixture.js';
import { rawHttp } from '../helpers/raw-http.js';

const COMMON = '/api/v1/namespaces/default/configmaps';
const GROUPS = Array.from({ length: 150 }, (_, i) => `team-${String(i).padStart(3, '0')}`);

const fixture = stackFixture(t, 'header-limits', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_OLD },
    { name: 'apiserver-b', builtins: BUILTINS_NEW },
  ],
  failureMode: 'open',
});
const port = (): number => Number(new URL(fixture.stack().gatewayUrl).port);
const lines = (r: RecordedRequest | undefined, name: string): string[] =>
  (r?.rawHeaders ?? []).filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
const arrived = (): RecordedRequest | undefined =>
  fixture
    .stack()
    .apiservers.flatMap((a) => a.requests)
    .find((r) => r.path.startsWith(COMMON));

t.test(`a client certificate with ${GROUPS.length} groups: every group stated, as directly`, async (t) => {
  const s = fixture.stack();
  const ca = { certFile: s.pki.caFile, keyFile: join(s.pki.dir, 'ca.key') };
  const cert = await issueCert({
    dir: fixture.dir,
    name: 'many-groups',
    subject: `${GROUPS.map((g) => `/O=${g}`).join('')}/CN=many`,
    usage: 'client',
    ca,
  });
  for (const a of s.apiservers) a.clearRequests();
  const reply = await send(port(), s.pki, 'GET', COMMON, {}, cert);
  t.equal(reply.status, 200, reply.body.slice(0, 300));
  t.same(lines(arrived(), 'x-remote-group'), GROUPS, 'one X-Remote-Group line per O, all of them');
  t.same(lines(arrived(), 'x-remote-user'), ['many']);
});

t.test('headers up to what kube-apiserver takes pass; beyond, a Status from Envoy', async (t) => {
  const s = fixture.stack();
  for (const a of s.apiservers) a.clearRequests();
  const big = 'x'.repeat(200 * 1024);
  const ok = await send(port(), s.pki, 'GET', COMMON, { authorization: `Bearer ${s.pki.token}`, 'x-big': big });
  t.equal(ok.status, 200, `200 KiB of headers (Envoy's default limit: 60 KiB): ${ok.body.slice(0, 200)}`);
  t.equal(lines(arrived(), 'x-big')[0]?.length, big.length, 'passed on whole');
  const many = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`x-h${i}`, 'v']));
  const manyOk = await send(port(), s.pki, 'GET', COMMON, { authorization: `Bearer ${s.pki.token}`, ...many });
  t.equal(manyOk.status, 200, '500 headers (Envoy default: 100)');

  const tooBig = await send(port(), s.pki, 'GET', COMMON, {
    authorization: `Bearer ${s.pki.token}`,
    'x-big': 'x'.repeat(1100 * 1024),
  }).catch((err: Error): Reply => ({ status: -1, headers: {}, body: err.message }));
  t.equal(tooBig.status, 431, `more than 1 MiB: 431 (${tooBig.body.slice(0, 200)})`);
  const body = JSON.parse(tooBig.body) as Record<string, unknown>;
  t.match(body, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 431 }, 'a Kubernetes Status');
  t.match(String(body['message']), /the gateway could not pass this request on/);
  t.match(tooBig.headers['content-type'], /^application\/json/);
});

t.test("the HTTP/1 codec's own refusals: a Status too, naming Envoy's details (issue 31, item 5)", async (t) => {
  const s = fixture.stack();
  const auth = `authorization: Bearer ${s.pki.token}\r\n`;
  // Each refused by Envoy's codec before skewgate is asked; each was an 11-byte text/plain "Bad Request".
  const cases: [string, string, number, RegExp][] = [
    ['a malformed request line', 'GET\r\n\r\n', 400, /\(http1\.codec_error\)/],
    ['a space in a header name', `GET /api HTTP/1.1\r\nhost: x\r\nbad header: y\r\n\r\n`, 400, /\(http1\.codec_error\)/],
    ['a NUL in a header value', `GET /api HTTP/1.1\r\nhost: x\r\nx-a: a\u0000b\r\n\r\n`, 400, /\(http1\.invalid_characters\)/],
    [
      'Content-Length and chunked',
      `POST ${COMMON} HTTP/1.1\r\nhost: x\r\n${auth}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`,
      400,
      /\(http1\.content_length_and_chunked_not_allowed\)/,
    ],
    ['HTTP/1.0', 'GET /api HTTP/1.0\r\n\r\n', 426, /\(low_version\)/],
  ];
  for (const [what, request, status, details] of cases) {
    const a = await rawHttp(s.gatewayUrl, s.pki.caFile, Buffer.from(request, 'latin1'));
    t.equal(a.status, status, `${what}: ${status}`);
    t.match(a.head.toLowerCase(), /\r\ncontent-type: application\/json\r\n/, `${what}: JSON`);
    const body = JSON.parse(a.body) as Record<string, unknown>;
    t.match(
      body,
      { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: status },
      `${what}: a Kubernetes Status`,
    );
    t.match(String(body['message']), details, `${what}: Envoy's details in the message (${String(body['message'])})`);
  }
});

t.test("skewgate's own answers keep their bodies", async (t) => {
  const s = fixture.stack();
  const r = await send(port(), s.pki, 'GET', '/apis/nothing.example/v1/widgets', { authorization: `Bearer ${s.pki.token}` });
  t.equal(r.status, 404);
  t.match(JSON.parse(r.body), { kind: 'Status', reason: 'NotFound' });
  t.notMatch(r.body, /the gateway could not pass this request on/, 'not rewritten by Envoy');
});

t.test('no apiserver reachable: Envoy answers 503 itself, as a Status (last: it stops the apiservers)', async (t) => {
  const s = fixture.stack();
  for (const a of s.apiservers) await a.close();
  let r = await send(port(), s.pki, 'GET', '/version', { authorization: `Bearer ${s.pki.token}` });
  await eventually('Envoy to see no healthy apiserver', async () => {
    r = await send(port(), s.pki, 'GET', '/version', { authorization: `Bearer ${s.pki.token}` });
    return r.status === 503;
  });
  t.comment(`503: ${r.body}`);
  t.match(JSON.parse(r.body), { kind: 'Status', status: 'Failure', reason: 'ServiceUnavailable', code: 503 }, r.body);
});
