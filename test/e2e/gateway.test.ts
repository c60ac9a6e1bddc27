// End to end through a REAL Envoy: fake skewed apiservers behind Envoy + skewgate.
// Envoy missing → startStack throws and the test fails (it never skips).
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import { REASON_HEADER } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { createClient, eventually, type Client } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';
import { rawHttp, type RawAnswer } from '../helpers/raw-http.js';

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';

let stack: Stack;
let client: Client;

t.before(async () => {
  stack = await startStack({
    dir: mkdtempSync(join(tmpdir(), 'sg-e2e-')),
    servers: [
      // An old server that only speaks legacy discovery, an old one with aggregated discovery, a new one.
      { name: 'apiserver-a', builtins: BUILTINS_OLD, discovery: 'legacy' },
      { name: 'apiserver-b', builtins: BUILTINS_OLD },
      { name: 'apiserver-c', builtins: BUILTINS_NEW },
    ],
  });
  client = createClient(stack.pki.caFile, stack.pki.token);
});
t.teardown(async () => {
  await client?.close();
  await stack?.close();
});

const servedBy = async (
  method: string,
  path: string,
  n: number,
  headers: Record<string, string> = {},
  body?: (i: number) => unknown,
): Promise<Map<string, number>> => {
  const seen = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const a = await client.send(method, stack.gatewayUrl + path, { headers, ...(body ? { body: body(i) } : {}) });
    const key = `${a.status} ${a.server ?? 'edge'}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  return seen;
};

/** Envoy's admin counters whose names match `filter` (a regex, as /stats?filter= takes it). */
const envoyStats = async (filter: string): Promise<Map<string, number>> => {
  const text = await (await fetch(`${stack.envoy.adminUrl}/stats?filter=${encodeURIComponent(filter)}`)).text();
  return new Map(
    text
      .split('\n')
      .filter((l) => l.includes(': '))
      .map((l) => {
        const [k = '', v = ''] = l.split(': ');
        return [k, Number(v)];
      }),
  );
};
const statDelta = (before: Map<string, number>, after: Map<string, number>, name: string): number => {
  // A counter that is not there is a misspelt name, not a zero.
  if (!after.has(name)) throw new Error(`Envoy has no stat ${name}: ${[...after.keys()].join(', ')}`);
  return (after.get(name) ?? 0) - (before.get(name) ?? 0);
};

/** Requests for a path, as the fakes recorded them (skewgate's own discovery and Envoy's /readyz checks aside). */
const apiserverSaw = (pred: (path: string) => boolean): string[] =>
  stack.apiservers.flatMap((s) => s.requests.filter((r) => pred(r.path)).map((r) => `${s.name} ${r.method} ${r.path}`));

t.test('routed: a resource only the new apiserver serves always reaches it, reads and writes', async (t) => {
  t.same([...(await servedBy('GET', SKEWED, 15))], [['200 apiserver-c', 15]]);
  const created = await servedBy('POST', SKEWED, 5, {}, (i) => ({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: `map-${i}` },
    spec: {},
  }));
  t.same([...created], [['201 apiserver-c', 5]]);
  const list = await client.send('GET', stack.gatewayUrl + SKEWED);
  t.equal((list.json() as { items: unknown[] }).items.length, 5, 'every acknowledged create is readable');
});

t.test('default: a resource every apiserver serves is balanced over all of them', async (t) => {
  const seen = await servedBy('GET', COMMON, 18);
  t.equal([...seen.keys()].filter((k) => k.startsWith('200 ')).length, 3, `spread: ${JSON.stringify([...seen])}`);
});

t.test('HTTP/2 downstream works too', async (t) => {
  const h2 = createClient(stack.pki.caFile, stack.pki.token, { h2: true });
  t.teardown(() => h2.close());
  const a = await h2.send('GET', stack.gatewayUrl + SKEWED);
  t.equal(a.status, 200);
  t.equal(a.server, 'apiserver-c');
});

t.test('not_found: a resource nobody serves is a 404 Status from the edge, no upstream hop', async (t) => {
  for (const s of stack.apiservers) s.clearRequests();
  const a = await client.send('GET', stack.gatewayUrl + '/apis/nothing.example/v1/namespaces/x/widgets');
  t.equal(a.status, 404);
  t.equal(a.server, undefined, 'no apiserver answered');
  t.match(a.json(), { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 });
  t.match(a.headers['content-type'], /application\/json/);
  t.equal(
    stack.apiservers.reduce((n, s) => n + s.requests.filter((r) => r.path.includes('widgets')).length, 0),
    0,
  );
  const sub = await client.send('GET', stack.gatewayUrl + '/api/v1/namespaces/default/pods/p/frobnicate');
  t.equal(sub.status, 404);
  t.match(sub.json(), { kind: 'Status', code: 404 });
});

/** One HTTP/1.1 GET with the request line's path bytes exactly as given. */
function rawGet(path: Buffer): Promise<RawAnswer> {
  return rawHttp(
    stack.gatewayUrl,
    stack.pki.caFile,
    Buffer.concat([
      Buffer.from('GET '),
      path,
      Buffer.from(` HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${stack.pki.token}\r\nconnection: close\r\n\r\n`),
    ]),
  );
}

t.test("malformed paths: a 400 Status from skewgate, or Envoy's own 400 before it; never an apiserver", async (t) => {
  // Invariant 5. A namespace of their own, so that any trace of them at an apiserver is found.
  const base = '/api/v1/namespaces/malformed/pods/';
  const atApiservers = (): string[] => apiserverSaw((p) => p.includes('/namespaces/malformed/'));
  const stats = (): Promise<Map<string, number>> => envoyStats('^http\\.skewgate\\.');
  const STREAMS = 'http.skewgate.ext_proc.streams_started';
  const IMMEDIATE = 'http.skewgate.ext_proc.immediate_responses_sent';
  for (const s of stack.apiservers) s.clearRequests();

  // Reach skewgate: Envoy's normalisation leaves these escapes alone, skewgate cannot decode them.
  const bySkewgate: [string, RegExp][] = [
    ['%zz', /invalid URL escape "%zz"/],
    ['%ff', /percent-encoded bytes in the path are not valid UTF-8/],
    ['%E0%A4', /percent-encoded bytes in the path are not valid UTF-8/],
    ['nginx%', /invalid URL escape "%"/],
  ];
  for (const [tail, problem] of bySkewgate) {
    const before = await stats();
    const a = await client.send('GET', `${stack.gatewayUrl}${base}${tail}`);
    const after = await stats();
    t.equal(a.status, 400, `${tail}: 400`);
    t.equal(a.headers[REASON_HEADER], 'malformed_path', `${tail}: skewgate's reason`);
    t.match(a.headers['content-type'], /^application\/json/, `${tail}: JSON`);
    t.match(
      a.json(),
      { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 400 },
      `${tail}: a Kubernetes Status`,
    );
    t.match((a.json() as { message?: string }).message, problem, `${tail}: says why`);
    t.equal(a.server, undefined, `${tail}: no apiserver answered`);
    t.equal(statDelta(before, after, STREAMS), 1, `${tail}: went through ext_proc`);
    t.equal(statDelta(before, after, IMMEDIATE), 1, `${tail}: answered by skewgate itself`);
  }

  // %00: Envoy's path normalisation refuses it (no ext_proc stream), a 400 of its own, as a Status.
  {
    const before = await stats();
    const a = await client.send('GET', `${stack.gatewayUrl}${base}a%00b`);
    const after = await stats();
    t.equal(a.status, 400, '%00: 400');
    t.match(a.json(), { kind: 'Status', reason: 'BadRequest', code: 400 }, "%00: Envoy's 400 as a Kubernetes Status");
    t.match(
      (a.json() as { message?: string }).message,
      /the gateway could not pass this request on: .*path_normalization_failed/,
      '%00: naming why',
    );
    t.equal(a.headers[REASON_HEADER], undefined, '%00: not skewgate');
    t.equal(statDelta(before, after, 'http.skewgate.downstream_rq_failed_path_normalization'), 1, '%00: refused by path normalisation');
    t.equal(statDelta(before, after, STREAMS), 0, '%00: skewgate was not asked');
  }

  // Raw NUL and a raw non-UTF-8 byte on the request line: Envoy's HTTP/1 codec refuses them.
  for (const [what, tail] of [
    ['raw NUL', Buffer.from([0x61, 0x00, 0x62])],
    ['raw 0xff', Buffer.from([0xff])],
  ] as const) {
    const before = await stats();
    const a = await rawGet(Buffer.concat([Buffer.from(base), tail]));
    const after = await stats();
    t.equal(a.status, 400, `${what}: 400`);
    t.notMatch(a.head.toLowerCase(), REASON_HEADER, `${what}: not skewgate`);
    t.equal(statDelta(before, after, 'http.skewgate.downstream_cx_protocol_error'), 1, `${what}: a codec error`);
    t.equal(statDelta(before, after, STREAMS), 0, `${what}: skewgate was not asked`);
  }

  t.same(atApiservers(), [], 'no apiserver saw any of them');
});

t.test('passthrough: non-resource paths go to the balanced default', async (t) => {
  for (const p of ['/version', '/healthz', '/apis/apps/v1', '/api']) {
    const a = await client.send('GET', stack.gatewayUrl + p);
    t.equal(a.status, 200, p);
    t.ok(a.server, `${p} answered by an apiserver`);
  }
});

t.test('forged routing and identity headers are stripped before any apiserver sees them', async (t) => {
  for (const s of stack.apiservers) s.clearRequests();
  const forged = {
    'x-skewgate-upstream': 'apiserver-a',
    'x-remote-user': 'system:admin',
    'x-remote-group': 'system:masters',
    'x-remote-extra-scopes': 'all',
    'x-forwarded-client-cert': 'By=spiffe://x;Hash=1;Subject="CN=admin"',
    'x-kubernetes-peer-proxied': 'true',
  };
  t.same([...(await servedBy('GET', SKEWED, 6, forged))], [['200 apiserver-c', 6]], 'a forged upstream does not pin a skewed request');
  const common = await servedBy('GET', COMMON, 12, forged);
  t.ok(common.size > 1, `a forged upstream does not pin a common request either: ${JSON.stringify([...common])}`);
  const seen = stack.apiservers.flatMap((s) => s.requests.filter((r) => r.path.startsWith(SKEWED) || r.path.startsWith(COMMON)));
  t.ok(seen.length >= 18);
  for (const r of seen) {
    for (const h of Object.keys(forged))
      t.notOk(h in r.headers && !(h === 'x-skewgate-upstream' && r.headers[h] === 'apiserver-c'), `${h} did not reach ${r.path}`);
    t.notOk(
      'x-remote-user' in r.headers ||
        'x-remote-group' in r.headers ||
        'x-remote-extra-scopes' in r.headers ||
        'x-forwarded-client-cert' in r.headers ||
        'x-kubernetes-peer-proxied' in r.headers,
    );
    t.equal(r.headers['authorization'], `Bearer ${stack.pki.token}`, 'the bearer token passes through untouched');
  }
});

t.test('a watch is held open through Envoy past its default 15 s route timeout and delivers events', async (t) => {
  const ca = readFileSync(stack.pki.caFile, 'utf8');
  const dispatcher = new Agent({ connect: { ca }, bodyTimeout: 0, headersTimeout: 0 });
  t.teardown(() => dispatcher.destroy());
  const res = await request(`${stack.gatewayUrl}${COMMON}?watch=1&resourceVersion=0`, {
    dispatcher,
    headers: { authorization: `Bearer ${stack.pki.token}` },
  });
  t.equal(res.statusCode, 200);
  let buffered = '';
  const events: { type: string; object: { metadata: { name: string } } }[] = [];
  res.body.on('data', (c: Buffer) => {
    buffered += c.toString('utf8');
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (line) events.push(JSON.parse(line) as (typeof events)[number]);
    }
  });
  const create = async (name: string): Promise<void> => {
    const a = await client.send('POST', stack.gatewayUrl + COMMON, {
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default' }, data: {} },
    });
    t.equal(a.status, 201, `created ${name}`);
  };
  await create('early');
  await eventually('the first watch event', () => events.some((e) => e.object.metadata.name === 'early'));
  // Past Envoy's default route timeout (15 s): a slow machine only makes the wait longer.
  await new Promise((r) => setTimeout(r, 16_000));
  await create('late');
  await eventually('a watch event after 16 s', () => events.some((e) => e.object.metadata.name === 'late'), waitMs());
  t.match(
    events.find((e) => e.object.metadata.name === 'late'),
    { type: 'ADDED' },
  );
});

t.test('unavailable: the only capable apiserver unready → 503 Status with Retry-After, at once', async (t) => {
  const c = stack.apiservers[2];
  if (!c) throw new Error('no apiserver-c');
  c.setReady(false);
  t.teardown(() => c.setReady(true));
  await eventually('skewgate to see apiserver-c unready', () => stack.skewgate()?.discovery.current().servers[2]?.ready === false);
  for (const s of stack.apiservers) s.clearRequests();
  const a = await client.send('GET', stack.gatewayUrl + SKEWED);
  t.equal(a.status, 503);
  // "At once": skewgate's own answer, with no upstream hop that could time out.
  t.equal(a.headers[REASON_HEADER], 'no_healthy_capable_server', 'answered by skewgate');
  t.equal(a.server, undefined, 'no apiserver answered');
  t.same(
    apiserverSaw((p) => p.startsWith(SKEWED)),
    [],
    'no apiserver was asked',
  );
  t.equal(a.headers['retry-after'], '1');
  t.match(a.json(), { kind: 'Status', reason: 'ServiceUnavailable', code: 503 });
  c.setReady(true);
  await eventually('apiserver-c ready again', () => stack.skewgate()?.discovery.current().servers[2]?.ready === true);
  t.equal((await client.send('GET', stack.gatewayUrl + SKEWED)).status, 200);
});

t.test('skewgate down: Envoy keeps balancing (fail open), and routing resumes when it is back', async (t) => {
  const FAIL_OPEN = 'http.skewgate.ext_proc.failure_mode_allowed';
  const before = await envoyStats('ext_proc');
  for (const s of stack.apiservers) s.clearRequests();
  await stack.stopSkewgate();
  const common = await servedBy('GET', COMMON, 9);
  t.same(
    [...common.keys()].every((k) => k.startsWith('200 ')),
    true,
    `all 200: ${JSON.stringify([...common])}`,
  );
  t.ok(common.size >= 2, 'still balanced');
  // Only the new apiserver serves SKEWED: with skewgate up every one goes there (the routed test
  // above). Down, Envoy balances it like anything else, so the old ones get it and say 404 themselves.
  const skewed = await servedBy('GET', SKEWED, 9);
  t.ok(
    (skewed.get('404 apiserver-a') ?? 0) + (skewed.get('404 apiserver-b') ?? 0) > 0,
    `an old apiserver answered the skewed request: ${JSON.stringify([...skewed])}`,
  );
  t.notOk(
    [...skewed.keys()].some((k) => k.endsWith(' edge')),
    'nothing was answered at the edge',
  );
  t.ok(
    apiserverSaw((p) => p.startsWith(SKEWED)).some((r) => /^apiserver-[ab] /.test(r)),
    'the fakes logged it on an old apiserver',
  );
  // Envoy's own count of requests let through without the processor: every one sent while down.
  const down = await envoyStats('ext_proc');
  t.equal(statDelta(before, down, FAIL_OPEN), 18, `${FAIL_OPEN}: one per request sent while skewgate was down`);
  await stack.startSkewgate();
  await eventually('routing back', async () => (await client.send('GET', stack.gatewayUrl + SKEWED)).server === 'apiserver-c');
  t.same([...(await servedBy('GET', SKEWED, 6))], [['200 apiserver-c', 6]]);
});

t.test('a malformed discovery document keeps the last good view: routing goes on', async (t) => {
  const c = stack.apiservers[2];
  if (!c) throw new Error('no apiserver-c');
  c.setDiscoveryFault('malformed');
  t.teardown(() => c.setDiscoveryFault('none'));
  await eventually(
    'skewgate to count discovery failures',
    () => (stack.skewgate()?.discovery.current().servers[2]?.consecutiveFailures ?? 0) >= 2,
  );
  t.match(stack.skewgate()?.discovery.current().servers[2]?.lastError, /./, 'the failure is recorded with a reason');
  t.same([...(await servedBy('GET', SKEWED, 5))], [['200 apiserver-c', 5]], 'still routed on the last good view');
  const nf = await client.send('GET', stack.gatewayUrl + '/apis/nothing.example/v1/widgets');
  t.equal(nf.status, 404);
  t.ok(nf.server, "while a view is not fresh skewgate passes through: the 404 is an apiserver's own");
  c.setDiscoveryFault('none');
  await eventually('discovery recovered', () => stack.skewgate()?.discovery.current().servers[2]?.consecutiveFailures === 0);
});

t.test('2,000 requests: every ext_proc stream ends cleanly, the gRPC connection to skewgate is kept', async (t) => {
  const stats = (): Promise<Map<string, number>> => envoyStats('ext_proc|skewgate-extproc');
  const before = await stats();
  const parallel = 20;
  let routed = 0;
  for (let i = 0; i < 2000; i += parallel) {
    const answers = await Promise.all(Array.from({ length: parallel }, () => client.send('GET', stack.gatewayUrl + SKEWED)));
    routed += answers.filter((a) => a.status === 200 && a.server === 'apiserver-c').length;
  }
  t.equal(routed, 2000, 'every one routed');
  const after = await stats();
  const delta = (k: string): number => statDelta(before, after, k);
  t.equal(delta('http.skewgate.ext_proc.streams_started'), 2000);
  t.equal(delta('http.skewgate.ext_proc.streams_failed'), 0, 'no stream failed');
  t.equal(delta('http.skewgate.ext_proc.failure_mode_allowed'), 0, 'never fell through to fail-open');
  // Resetting streams would trip Node's HTTP/2 rapid-reset protection about every 1,000 streams.
  t.ok(
    delta('cluster.skewgate-extproc.upstream_cx_total') <= 1,
    `connections opened: ${delta('cluster.skewgate-extproc.upstream_cx_total')}`,
  );
});
