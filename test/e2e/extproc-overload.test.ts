// The ext_proc bounds as a client sees them through a real Envoy: skewgate takes one stream
// (extproc.limits.maxStreams 1, so Envoy's breaker on the ext_proc cluster is 2) and its event loop
// stalls while 30 requests arrive. Envoy opens two streams; the other requests overflow the breaker
// and fail open (balanced unprocessed: what only apiserver-a serves gets apiserver-b's 404, the
// fail-open failure of invariant 4); of the two, skewgate routes one and may answer the other 429
// (seldom here: Envoy's two streams rarely overlap at skewgate; the 429 itself is proved on real
// streams in test/integration/extproc-limits.test.ts).
import t from 'tap';
import { REASON_HEADER, TOO_MANY_STREAMS_REASON } from '../../src/constants.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { createClient } from '../helpers/http.js';
import { stackFixture } from '../helpers/stack-fixture.js';

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

async function stat(name: string): Promise<number> {
  const text = await (
    await fetch(`${fixture.stack().envoy.adminUrl}/stats?filter=${encodeURIComponent(`^${name.replaceAll('.', '\\.')}$`)}`)
  ).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}: `));
  if (line === undefined) throw new Error(`Envoy has no stat ${name}`);
  return Number(line.slice(name.length + 2));
}

t.test("a burst beyond Envoy's breaker fails open, counted; every other answer is routed (or skewgate's 429)", async (t) => {
  const stack = fixture.stack();
  const breaker = (await (await fetch(`${stack.envoy.adminUrl}/clusters`)).text())
    .split('\n')
    .filter((l) => l.startsWith('skewgate-extproc::default_priority::max_requests'));
  t.same(breaker, ['skewgate-extproc::default_priority::max_requests::2'], 'Envoy runs the breaker at 2 × maxStreams');
  const client = createClient(stack.pki.caFile, stack.pki.token, { h2: true });
  t.teardown(() => client.close());
  t.equal((await client.send('GET', stack.gatewayUrl + SKEWED)).status, 200, 'warm: routed to apiserver-a');
  const overflowBefore = await stat('cluster.skewgate-extproc.upstream_rq_pending_overflow');
  const failOpenBefore = await stat('http.skewgate.ext_proc.failure_mode_allowed');

  const answers = Array.from({ length: N }, () => client.send('GET', stack.gatewayUrl + SKEWED));
  // skewgate (this process) stalls while Envoy takes the requests in.
  await new Promise<void>((resolve) =>
    setTimeout(() => {
      const until = Date.now() + 500;
      while (Date.now() < until) {
        // busy: the event loop that answers Envoy is blocked
      }
      resolve();
    }, 20),
  );
  const got = await Promise.all(answers);
  const kinds = new Map<string, number>();
  for (const a of got) {
    const kind = a.status === 429 ? `429 ${String(a.headers[REASON_HEADER])}` : `${a.status} ${a.server ?? 'edge'}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (a.status === 429) {
      t.equal(a.headers['retry-after'], '1', '429: Retry-After');
      t.match(a.json(), { kind: 'Status', reason: 'TooManyRequests', code: 429 }, '429: a Status body');
    }
  }
  t.comment(`answers: ${JSON.stringify([...kinds])}`);
  t.same(
    [...kinds.keys()].filter((k) => !['200 apiserver-a', '404 apiserver-b', `429 ${TOO_MANY_STREAMS_REASON}`].includes(k)),
    [],
    'each answer is routed (200 from apiserver-a), balanced unprocessed (either apiserver), or skewgate’s 429',
  );
  const overflow = (await stat('cluster.skewgate-extproc.upstream_rq_pending_overflow')) - overflowBefore;
  const failOpen = (await stat('http.skewgate.ext_proc.failure_mode_allowed')) - failOpenBefore;
  t.ok(overflow > 0, `Envoy's breaker overflowed ${overflow} times`);
  t.ok(failOpen >= overflow, `and each overflow failed open (failure_mode_allowed +${failOpen})`);
  t.ok(
    (kinds.get('404 apiserver-b') ?? 0) > 0,
    'so some reached apiserver-b unprocessed: the fail-open 404 a client sees beyond the breaker',
  );
  t.equal((await client.send('GET', stack.gatewayUrl + SKEWED)).status, 200, 'after the burst: routed again');
});
