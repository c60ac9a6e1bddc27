// The ext_proc bounds as a client sees them through a real Envoy: skewgate takes one stream
// (extproc.limits.maxStreams 1, so Envoy's breaker on the ext_proc cluster is 2) and its event loop
// stalls while 30 requests arrive. Envoy opens two streams; the other requests overflow the breaker
// and fail open (balanced unprocessed: what only apiserver-a serves gets apiserver-b's 404, the
// fail-open failure of invariant 4; Envoy answers the overflowing gRPC stream 503 itself, which the
// ext_proc filter treats as a failed stream); the two reach skewgate at once when it resumes: it
// routes one and answers the other 429 with Retry-After.
import { execFileSync, spawn } from 'node:child_process';
import t from 'tap';
import { TOO_MANY_STREAMS_REASON } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { envoyCounter } from '../helpers/envoy-fixtures.js';
import { createClient } from '../helpers/http.js';
import { stackFixture } from '../helpers/stack-fixture.js';
import { waitMs } from '../helpers/waits.js';

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const N = 30;
const fixture = stackFixture(t, 'extproc-overload', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_NEW },
    { name: 'apiserver-b', builtins: BUILTINS_OLD },
  ],
  failureMode: 'open',
  clientCertificates: false,
  extproc: { limits: { maxStreams: 1 } },
});

const port = (stack: ReturnType<typeof fixture.stack>): string => new URL(stack.gatewayUrl).port;

/** The burst, run as its own process: one HTTP/2 connection, a warm-up, "go", then N requests at once. */
const BURST = `
import { connect } from 'node:http2';
import { readFileSync } from 'node:fs';
const [port, caFile, token, path, n] = process.argv.slice(1);
const s = connect('https://127.0.0.1:' + port, { ca: readFileSync(caFile), servername: 'localhost' });
const get = () => new Promise((resolve) => {
  const r = s.request({ ':path': path, authorization: 'Bearer ' + token });
  let head = {}; let body = '';
  r.on('response', (h) => (head = h));
  r.setEncoding('utf8');
  r.on('data', (c) => (body += c));
  r.on('end', () => resolve({ status: head[':status'], server: head['x-fake-apiserver'], reason: head['x-skewgate-reason'], retryAfter: head['retry-after'], body }));
});
await get();
process.stdout.write('go\\n');
const all = await Promise.all(Array.from({ length: Number(n) }, get));
process.stdout.write(JSON.stringify(all));
s.close();
`;

const stat = (name: string): Promise<number> => envoyCounter(fixture.stack().envoy.adminUrl, name);
/** Requests Envoy's listener has taken in (counted as their headers arrive, before ext_proc). */
const RECEIVED = 'http.skewgate.downstream_rq_total';

/** RECEIVED, read by a child process: this one's event loop may be blocked. */
function receivedSync(adminUrl: string): number {
  const url = `${adminUrl}/stats?filter=${encodeURIComponent(`^${RECEIVED.replaceAll('.', '\\.')}$`)}`;
  const text = execFileSync(
    process.execPath,
    ['--input-type=module', '-e', `process.stdout.write(await (await fetch(${JSON.stringify(url)})).text())`],
    {
      encoding: 'utf8',
      timeout: 10_000,
    },
  );
  const m = new RegExp(`^${RECEIVED.replaceAll('.', '\\.')}: (\\d+)$`, 'm').exec(text);
  if (!m) throw new Error(`Envoy has no stat ${RECEIVED}: ${text}`);
  return Number(m[1]);
}

/** Blocks this thread (no event loop turn) until done() or the timeout; whether done() came true. */
function stalledUntil(done: () => boolean, timeoutMs: number): boolean {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) if (done()) return true;
  return false;
}

t.test("a burst beyond Envoy's breaker fails open, counted; every other answer is routed (or skewgate's 429)", async (t) => {
  const stack = fixture.stack();
  const breaker = (await (await fetch(`${stack.envoy.adminUrl}/clusters`)).text())
    .split('\n')
    .filter((l) => l.startsWith('skewgate-extproc::default_priority::max_requests'));
  t.same(breaker, ['skewgate-extproc::default_priority::max_requests::2'], 'Envoy runs the breaker at 2 × maxStreams');
  // max_requests overflows count as active, max_pending ones as pending (no connection yet).
  const overflows = async (): Promise<number> =>
    (await stat('cluster.skewgate-extproc.upstream_rq_active_overflow')) +
    (await stat('cluster.skewgate-extproc.upstream_rq_pending_overflow'));
  const overflowBefore = await overflows();
  const failOpenBefore = await stat('http.skewgate.ext_proc.failure_mode_allowed');
  const receivedBefore = await stat(RECEIVED);
  // The burst comes from another process, so that it keeps coming while skewgate (this process)
  // stalls: it says "go" once its connection works, then sends N requests at once.
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', BURST, port(stack), stack.pki.caFile, stack.pki.token, SKEWED, String(N)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.setEncoding('utf8');
  await new Promise<void>((resolve) =>
    child.stdout.on('data', (c: string) => {
      out += c;
      if (out.startsWith('go\n')) resolve();
    }),
  );
  // Busy: the event loop that answers Envoy stays blocked until Envoy has taken in the whole burst
  // (its own count, read by another process), however long the burst takes to arrive.
  const arrived = stalledUntil(() => receivedSync(stack.envoy.adminUrl) - receivedBefore >= N + 1, waitMs());
  t.ok(arrived, `Envoy took in the warm-up and all ${N} requests while skewgate was stalled`);
  await new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const got = JSON.parse(out.slice('go\n'.length)) as {
    status: number;
    server?: string;
    reason?: string;
    retryAfter?: string;
    body: string;
  }[];
  t.equal(got.length, N, `${N} answers`);
  const kinds = new Map<string, number>();
  for (const a of got) {
    const kind = a.status === 429 ? `429 ${String(a.reason)}` : `${a.status} ${a.server ?? 'edge'}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (a.status === 429) {
      t.equal(a.retryAfter, '1', '429: Retry-After');
      t.match(JSON.parse(a.body), { kind: 'Status', reason: 'TooManyRequests', code: 429 }, '429: a Status body');
    }
  }
  t.comment(`answers: ${JSON.stringify([...kinds])}`);
  t.same(
    [...kinds.keys()].filter((k) => !['200 apiserver-a', '404 apiserver-b', `429 ${TOO_MANY_STREAMS_REASON}`].includes(k)),
    [],
    'each answer is routed (200 from apiserver-a), balanced unprocessed (either apiserver), or skewgate’s 429',
  );
  const overflow = (await overflows()) - overflowBefore;
  const failOpen = (await stat('http.skewgate.ext_proc.failure_mode_allowed')) - failOpenBefore;
  t.ok(overflow > 0, `Envoy's breaker overflowed ${overflow} times`);
  t.ok(failOpen >= overflow, `and each overflow failed open (failure_mode_allowed +${failOpen})`);
  t.ok(
    (kinds.get('404 apiserver-b') ?? 0) > 0,
    'so some reached apiserver-b unprocessed: the fail-open 404 a client sees beyond the breaker',
  );
  const client = createClient(stack.pki.caFile, stack.pki.token);
  t.teardown(() => client.close());
  t.equal((await client.send('GET', stack.gatewayUrl + SKEWED)).status, 200, 'after the burst: routed again');
});
