// DiscoveryClient + credentials against fake apiservers over real TLS.
import t, { type Test } from 'tap';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { BUILTINS_NEW } from '../../harness/fake/index.js';
import { DISCOVERY_ACCEPT } from '../../src/constants.js';
import { probeReady } from '../../src/discovery/probes.js';
import { DiscoveryClient, type DiscoveryClientOptions } from '../../src/discovery/fetcher.js';
import { DiscoveryFetchError } from '../../src/kube/transport.js';
import { type ApiServerSettings, CredentialsError, createCredentials } from '../../src/kube/credentials.js';
import { sameView } from '../../src/discovery/core/view-compare.js';
import { FakeCluster, otherPki, startFake, testPki, tokenServer } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';

const pki = await testPki();
const cluster = new FakeCluster();
const agg = await startFake(t, { name: 'agg', pki, cluster, builtins: BUILTINS_NEW });
const legacy = await startFake(t, { name: 'legacy', pki, cluster, builtins: BUILTINS_NEW, discovery: 'legacy' });
const signal = new AbortController().signal;

function client(t: Test, s: ApiServerSettings, timeoutMs = 2000, extra: Partial<DiscoveryClientOptions> = {}): DiscoveryClient {
  const credentials = createCredentials(s);
  t.teardown(() => credentials.close());
  return new DiscoveryClient({ name: s.name, url: s.url, credentials, timeoutMs, ...extra });
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a failure');
}

t.test('aggregated discovery, then conditional GETs keep the very same view', async (t) => {
  agg.clearRequests();
  const c = client(t, tokenServer(agg, pki));
  const v1 = await c.fetchView(signal);
  t.equal(v1.source, 'aggregated');
  t.ok(v1.resources.has('/v1/pods'));
  t.same([...(v1.resources.get('apps/v1/deployments')?.subresources.keys() ?? [])].sort(), ['scale', 'status']);
  t.ok(v1.resources.has('admissionregistration.k8s.io/v1/mutatingadmissionpolicies'));
  t.ok(v1.groupVersions.has('resource.k8s.io/v1beta2'));
  t.ok(v1.apisDocument, 'the /apis document is kept');
  const first = agg.requests.filter((r) => r.path === '/api' || r.path === '/apis');
  t.equal(first.length, 2);
  for (const r of first) {
    t.equal(r.headers.accept, DISCOVERY_ACCEPT, `${r.path} asks nopeer first`);
    t.equal(r.headers['if-none-match'], undefined);
    t.equal(r.headers.authorization, `Bearer ${pki.token}`);
  }

  agg.clearRequests();
  const v2 = await c.fetchView(signal);
  t.equal(v2, v1, 'unchanged server → same object');
  const second = agg.requests.filter((r) => r.path === '/api' || r.path === '/apis');
  t.equal(second.length, 2);
  for (const r of second) t.match(r.headers['if-none-match'], /^"[0-9A-F]{128}"$/, `${r.path} revalidated with its ETag`);

  // A change on the server: 200 with a new ETag, a new view.
  agg.addBuiltin({ group: 'example.com', version: 'v1', resource: 'widgets', kind: 'Widget', namespaced: true });
  t.teardown(() => agg.removeBuiltin('example.com', 'v1', 'widgets'));
  const v3 = await c.fetchView(signal);
  t.not(v3, v1);
  t.ok(v3.resources.has('example.com/v1/widgets'));
});

t.test('legacy-only server: per group/version documents give the same content', async (t) => {
  legacy.clearRequests();
  const lv = await client(t, tokenServer(legacy, pki)).fetchView(signal);
  t.equal(lv.source, 'legacy');
  t.equal(lv.apisDocument, undefined);
  const paths = legacy.requests.map((r) => r.path);
  t.ok(paths.includes('/api/v1'), 'fetched /api/v1');
  t.ok(paths.includes('/apis/apps/v1'), 'fetched /apis/apps/v1');
  t.ok(paths.includes('/apis/resource.k8s.io/v1beta2') && paths.includes('/apis/resource.k8s.io/v1'), 'every version of a group');
  // Same builtins through aggregated discovery: the same routing content.
  const cluster2 = new FakeCluster();
  const twin = await startFake(t, { name: 'twin', pki, cluster: cluster2, builtins: BUILTINS_NEW });
  const av = await client(t, tokenServer(twin, pki)).fetchView(signal);
  t.ok(sameView({ ...av, source: 'legacy' }, lv), 'legacy and aggregated views agree');
  t.same([...(lv.resources.get('/v1/pods')?.subresources.keys() ?? [])].sort(), ['eviction', 'exec', 'log', 'status']);
});

t.test('client certificate auth, and a clear 401 without credentials', async (t) => {
  const cert = client(t, {
    name: 'agg',
    url: agg.url,
    caFile: pki.caFile,
    credentials: { clientCertFile: pki.clientCertFile, clientKeyFile: pki.clientKeyFile },
  });
  agg.clearRequests();
  const v = await cert.fetchView(signal);
  t.ok(v.resources.has('/v1/pods'));
  t.equal(agg.requests[0]?.headers.authorization, undefined, 'no bearer token sent');

  const none = client(t, { name: 'agg', url: agg.url, caFile: pki.caFile });
  const err = await failure(none.fetchView(signal));
  t.type(err, DiscoveryFetchError);
  t.match(err.message, new RegExp(`GET ${agg.url}/apis?: HTTP 401 Unauthorized: Unauthorized`));
  t.equal((err as DiscoveryFetchError).status, 401);
});

t.test('kubeconfig contexts', async (t) => {
  for (const context of ['token', 'cert']) {
    const c = client(t, { name: 'agg', url: agg.url, credentials: { kubeconfig: pki.kubeconfigFile, context } });
    const v = await c.fetchView(signal);
    t.ok(v.resources.has('/v1/pods'), `context ${context}`);
  }
  // Inline data (certificate-authority-data etc.) and the current-context default.
  const dir = await mkdtemp(join(tmpdir(), 'skewgate-kc-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const { readFile } = await import('node:fs/promises');
  const b64 = async (f: string): Promise<string> => (await readFile(f)).toString('base64');
  const inline = join(dir, 'kubeconfig');
  await writeFile(
    inline,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'c',
          cluster: { server: 'https://127.0.0.1:1', 'certificate-authority-data': await b64(pki.caFile), 'tls-server-name': 'kubernetes' },
        },
      ],
      users: [
        { name: 'u', user: { 'client-certificate-data': await b64(pki.clientCertFile), 'client-key-data': await b64(pki.clientKeyFile) } },
      ],
      contexts: [{ name: 'inline', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'inline',
    }),
  );
  const c = client(t, { name: 'agg', url: agg.url, credentials: { kubeconfig: inline } });
  t.ok((await c.fetchView(signal)).resources.has('/v1/pods'), 'inline data, current-context');

  const bad = client(t, { name: 'agg', url: agg.url, credentials: { kubeconfig: pki.kubeconfigFile, context: 'nope' } });
  const err = await failure(bad.fetchView(signal));
  t.type(err, CredentialsError);
  t.match(err.message, /has no context "nope" \(it has: token, cert\)/);
});

t.test('TLS: a CA mismatch and a wrong server name give clear errors; serverName works', async (t) => {
  const other = await otherPki();
  const wrongCa = client(t, { name: 'agg', url: agg.url, caFile: other.caFile, credentials: { tokenFile: pki.tokenFile } });
  const err = await failure(wrongCa.fetchView(signal));
  t.type(err, DiscoveryFetchError);
  t.ok((err as DiscoveryFetchError).details.tls, 'flagged as TLS');
  t.match(
    err.message,
    new RegExp(`^GET ${agg.url}/apis?: TLS verification failed: .+\\((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN)\\)$`),
  );
  t.notMatch(err.message, pki.token, 'no token in the message');

  const sni = client(t, tokenServer(agg, pki, { serverName: 'kubernetes.default.svc' }));
  t.ok((await sni.fetchView(signal)).resources.has('/v1/pods'), 'serverName in the SANs verifies');
  const wrongName = client(t, tokenServer(agg, pki, { serverName: 'not-the-apiserver.example' }));
  const err2 = await failure(wrongName.fetchView(signal));
  t.match(err2.message, /TLS verification failed: .*not-the-apiserver\.example.*\(ERR_TLS_CERT_ALTNAME_INVALID\)/);
});

t.test('probeReady follows /readyz', async (t) => {
  const s = tokenServer(agg, pki);
  const credentials = createCredentials(s);
  t.teardown(() => credentials.close());
  const target = { name: s.name, url: s.url, credentials, timeoutMs: 2000 };
  t.equal(await probeReady(target, signal), true);
  agg.setReady(false);
  t.teardown(() => agg.setReady(true));
  t.equal(await probeReady(target, signal), false);
});

t.test('timeouts, server errors and a caller abort', async (t) => {
  const c = client(t, tokenServer(agg, pki), 300);
  agg.setDiscoveryFault('hang');
  t.teardown(() => agg.setDiscoveryFault('none'));
  // The server never answers: only the timeout can end the fetch.
  const err = await failure(c.fetchView(signal));
  t.match(err.message, /timed out after 300ms/);
  t.equal((err as DiscoveryFetchError).details.timeout, true, 'the timeout is honoured');

  agg.setDiscoveryFault('error500');
  const err500 = await failure(c.fetchView(signal));
  t.match(err500.message, /HTTP 500 Internal Server Error: fake discovery failure/);

  agg.setDiscoveryFault('hang');
  const ctrl = new AbortController();
  // Abort once the request hangs at the server, with a timeout that cannot end it first.
  agg.clearRequests();
  const pending = failure(client(t, tokenServer(agg, pki), 3_600_000).fetchView(ctrl.signal));
  await eventually('the request to hang at the server', () => agg.requests.some((r) => r.path === '/api' || r.path === '/apis'));
  ctrl.abort();
  const aborted = await pending;
  t.match(aborted.message, /aborted/);
  t.ok((aborted as DiscoveryFetchError).details.aborted);

  agg.setDiscoveryFault('malformed');
  const bad = await failure(client(t, tokenServer(agg, pki)).fetchView(signal));
  t.match(bad.message, /malformed discovery document \/apis?: not valid JSON/);
});

t.test('the OpenAPI v3 index rides along: a hash per document, revalidated by ETag, never fatal', async (t) => {
  const c = client(t, tokenServer(agg, pki));
  t.teardown(() => agg.setOpenApiV3Index({}));
  agg.setOpenApiV3Index({ 'api/v1': 'AA', 'apis/apps/v1': 'BB' });
  const v1 = await c.fetchView(signal);
  t.same(
    [...(v1.openapiV3 ?? [])],
    [
      ['api/v1', 'AA'],
      ['apis/apps/v1', 'BB'],
    ],
  );
  agg.clearRequests();
  t.equal(await c.fetchView(signal), v1, 'unchanged: the very same view');
  t.match(agg.requests.find((r) => r.path === '/openapi/v3')?.headers['if-none-match'], /^"[0-9A-F]{128}"$/, 'revalidated');

  agg.setOpenApiV3Index({ 'api/v1': 'CC', 'apis/apps/v1': 'BB' });
  const v3 = await c.fetchView(signal);
  t.not(v3, v1, 'a new hash is a new view');
  t.equal(v3.openapiV3?.get('api/v1'), 'CC');
  t.ok(v3.resources.has('apps/v1/deployments'), 'with its discovery');

  agg.setOpenApiV3Index('error500');
  t.equal(await c.fetchView(signal), v3, 'a failing index keeps the last good one, and the view');
  t.match(c.openapiProblem(), /\/openapi\/v3: HTTP 500/);

  agg.setOpenApiV3Index('missing');
  const v5 = await c.fetchView(signal);
  t.equal(v5.openapiV3, undefined, 'a server without an index has none');
  t.equal(c.openapiProblem(), null);
});

t.test('a missing token file is a clear credentials error', async (t) => {
  const c = client(t, tokenServer(agg, pki, { credentials: { tokenFile: '/nonexistent/skewgate/token' } }));
  const err = await failure(c.fetchView(signal));
  t.type(err, CredentialsError);
  t.match(err.message, /apiserver "agg": cannot read token file \/nonexistent\/skewgate\/token: ENOENT/);
});

// Documents without bounds (issue 14): the cap, the kept ETag of a bad document, the backoff.
const MiB = 1024 * 1024;
const answers = (): { path: string; status: number; bytes: number }[] =>
  agg.discoveryResponses.map(({ path, status, bytes }) => ({ path, status, bytes }));

t.test('a body past discovery.maxDocumentBytes is stopped as it streams: bounded bytes, a clear error, then 304s', async (t) => {
  t.teardown(() => agg.setOversizedApis(null));
  agg.setOversizedApis({ bytes: 64 * MiB, contentLength: false, etag: true });
  agg.clearDiscoveryResponses();
  agg.clearRequests();
  const c = client(t, tokenServer(agg, pki), 10_000, { maxDocumentBytes: 1 * MiB });
  const err = await failure(c.fetchView(signal));
  t.type(err, DiscoveryFetchError);
  t.equal(
    err.message.split(': the download')[0],
    `GET ${agg.url}/apis: the body is larger than discovery.maxDocumentBytes (${MiB} bytes)`,
    'the URL, the key and the cap',
  );
  t.match(err.message, /the download was stopped after \d+ bytes; raise discovery\.maxDocumentBytes/);
  const tooLarge = (err as DiscoveryFetchError).details.tooLarge;
  const read = tooLarge && 'read' in tooLarge.seen ? tooLarge.seen.read : -1;
  t.ok(read > MiB && read <= MiB + 256 * 1024, `read just past the cap: ${read} bytes`);
  t.equal(c.documentSizes().get('/apis'), read, 'the size as far as it was read');
  // The connection was closed, not drained: what it took is the cap plus what the kernel's socket
  // buffers held (on loopback they grow to tcp_rmem's 32 MiB + tcp_wmem's 4 MiB at most).
  await eventually('the fake to see the connection closed', () => agg.discoveryResponses.some((r) => r.path === '/apis' && r.closed));
  const answer = agg.discoveryResponses.find((r) => r.path === '/apis');
  t.equal(answer?.complete, false, 'the body was not sent to its end');
  const sent = answer?.bytes ?? -1;
  t.ok(sent >= MiB && sent < 40 * MiB, `the fake sent ${sent} of ${64 * MiB} bytes`);

  // The next round asks with its ETag: a 304 re-states the failure, nothing is downloaded.
  agg.clearDiscoveryResponses();
  agg.clearRequests();
  const again = await failure(c.fetchView(signal));
  t.equal(again.message, err.message, 'the same failure');
  t.equal(agg.requests.find((r) => r.path === '/apis')?.headers['if-none-match'], `"oversized-${64 * MiB}"`);
  t.same(
    answers().filter((r) => r.path === '/apis'),
    [{ path: '/apis', status: 304, bytes: 0 }],
    'one 304, no body',
  );
  t.notOk(
    agg.requests.some((r) => r.path === '/api'),
    '/api is not even asked while /apis is known bad',
  );
});

t.test('a Content-Length past the cap is refused at the headers: not a byte read', async (t) => {
  t.teardown(() => agg.setOversizedApis(null));
  agg.setOversizedApis({ bytes: 50 * MiB, contentLength: true, etag: false });
  agg.clearDiscoveryResponses();
  const c = client(t, tokenServer(agg, pki), 10_000, { maxDocumentBytes: 1 * MiB });
  const err = await failure(c.fetchView(signal));
  t.equal(
    err.message,
    `GET ${agg.url}/apis: the body is larger than discovery.maxDocumentBytes (${MiB} bytes): its Content-Length is ${50 * MiB} bytes, not read; raise discovery.maxDocumentBytes if the document is genuine`,
  );
  t.same((err as DiscoveryFetchError).details.tooLarge?.seen, { contentLength: 50 * MiB });
  t.equal(c.documentSizes().get('/apis'), 50 * MiB, 'the declared size');
  await eventually('the fake to see the connection closed', () => agg.discoveryResponses.some((r) => r.path === '/apis' && r.closed));
  const sent = agg.discoveryResponses.find((r) => r.path === '/apis')?.bytes ?? -1;
  t.ok(sent >= 0 && sent < 1 * MiB, `the fake sent ${sent} bytes (its body starts 100 ms after the headers)`);
});

t.test('an invalid document with an ETag is parsed once: later rounds are 304s that re-state its error', async (t) => {
  t.teardown(() => agg.setDiscoveryFault('none'));
  const clock = { now: 1_000_000 };
  const c = client(t, tokenServer(agg, pki), 2000, { intervalMs: 1000, maxBackoffMs: 8000, now: () => clock.now });
  const good = await c.fetchView(signal);
  agg.setDiscoveryFault('malformed');
  agg.clearDiscoveryResponses();
  const err = await failure(c.fetchView(signal));
  t.match(err.message, /malformed discovery document \/apis?: not valid JSON/);
  const full = agg.discoveryResponses.filter((r) => r.status === 200).length;
  t.ok(full >= 1, 'downloaded once');
  for (let i = 0; i < 5; i++) {
    clock.now += 5000; // past any backoff: each round may download, but a 304 needs none
    agg.clearRequests();
    const again = await failure(c.fetchView(signal));
    t.equal(again.message, err.message, `round ${i + 2}: the same error`);
    const asked = agg.requests.filter((r) => r.path === '/api' || r.path === '/apis');
    t.ok(
      asked.length > 0 && asked.every((r) => typeof r.headers['if-none-match'] === 'string'),
      `asked again (${asked.length} requests), each with If-None-Match`,
    );
  }
  t.equal(agg.discoveryResponses.filter((r) => r.status === 200).length, full, 'no full answer since: never parsed again');
  t.equal(agg.discoveryResponses.filter((r) => r.status === 304).length, 5, 'five 304s');

  // The good document back (the very bytes of before): the good ETag is not asked, the bad one
  // is, so the document comes in full and parses.
  agg.setDiscoveryFault('none');
  const back = await c.fetchView(signal);
  t.ok(sameView(back, good), 'the good view again');
  agg.clearDiscoveryResponses();
  t.equal(await c.fetchView(signal), back, 'then 304s on the good ETag');
  t.same(
    agg.discoveryResponses.map((r) => r.status),
    [304, 304],
  );
});

t.test('downloads of a failed document back off: interval doubling up to the maximum; conditional GETs go on', async (t) => {
  t.teardown(() => agg.setOversizedApis(null));
  // No ETag: every request would be a full download, so within the backoff none is sent.
  agg.setOversizedApis({ bytes: 2 * MiB, contentLength: false, etag: false });
  const clock = { now: 0 };
  const c = client(t, tokenServer(agg, pki), 5000, { maxDocumentBytes: 1 * MiB, intervalMs: 100, maxBackoffMs: 800, now: () => clock.now });
  agg.clearRequests();
  const asked: number[] = [];
  for (clock.now = 0; clock.now <= 4000; clock.now += 50) {
    const before = agg.requests.filter((r) => r.path === '/apis').length;
    const err = await failure(c.fetchView(signal));
    t.match(err.message, /larger than discovery\.maxDocumentBytes/, `at ${clock.now} ms`, { diagnostic: false });
    if (agg.requests.filter((r) => r.path === '/apis').length > before) asked.push(clock.now);
  }
  // The first failure puts nothing off (the next round downloads); then 100, 200, 400, 800, 800, …
  t.same(asked, [0, 50, 150, 350, 750, 1550, 2350, 3150, 3950], `downloads at ${asked.join(', ')} ms`);

  // With an ETag, the rounds inside the backoff still ask: an unchanged document is a 304, a
  // changed one's body is left unread until the backoff ends. (Under the cap, but not JSON that ends.)
  const e = client(t, tokenServer(agg, pki), 5000, {
    maxDocumentBytes: 8 * MiB,
    intervalMs: 1000,
    maxBackoffMs: 8000,
    now: () => clock.now,
  });
  for (const [at, bytes] of [
    [0, 2 * MiB],
    [100, 3 * MiB],
  ] as const) {
    agg.setOversizedApis({ bytes, contentLength: true, etag: true });
    clock.now = at;
    // Past 1 MiB and not splittable, it is not parsed whole for JSON.parse's message (json-items.ts).
    t.match(
      (await failure(e.fetchView(signal))).message,
      /malformed discovery document \/apis: the document, which does not split at "items" \(malformed, or no such list\), is [\d,]+ characters of JSON, more than the 1,048,576 parsed at once/,
    );
  }
  // Two failed downloads in a row: the next waits the interval (until 1100).
  agg.clearDiscoveryResponses();
  clock.now = 500;
  await failure(e.fetchView(signal));
  t.same(answers(), [{ path: '/apis', status: 304, bytes: 0 }], 'inside the backoff, unchanged: a 304');
  agg.setOversizedApis({ bytes: 4 * MiB, contentLength: true, etag: true });
  agg.clearDiscoveryResponses();
  clock.now = 900;
  await failure(e.fetchView(signal));
  await eventually('the fake to see the connection closed', () => agg.discoveryResponses.some((r) => r.closed));
  t.same(answers(), [{ path: '/apis', status: 200, bytes: 0 }], 'inside the backoff, changed: asked, its body not read');
  agg.clearDiscoveryResponses();
  clock.now = 1100;
  await failure(e.fetchView(signal));
  t.same(
    answers().filter((r) => r.path === '/apis'),
    [{ path: '/apis', status: 200, bytes: 4 * MiB }],
    'read in full once the backoff ended',
  );
});
