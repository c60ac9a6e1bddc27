// extproc.workers through a REAL Envoy: one skewgate with two ext_proc endpoints (the main thread
// and a worker thread). Envoy balances the streams over both; both decide alike; a worker killed
// under load costs no request (Envoy retries a stream that cannot open on the other endpoint)
// and comes back.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { createClient, eventually, type Client } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';
/** Answers the kill test needs before the kill and after the worker is back. */
const MIN_ANSWERS = 20;
/** The stack's health checks (1 s, 1 s timeout, 2 to mark) bound each wait, with a worker's restart. */
const WAIT_MS = waitMs(2 * 1000 + 1000);

let stack: Stack;
let client: Client;

t.before(async () => {
  stack = await startStack({
    dir: mkdtempSync(join(tmpdir(), 'sg-e2e-workers-')),
    servers: [
      { name: 'apiserver-a', builtins: BUILTINS_OLD },
      { name: 'apiserver-b', builtins: BUILTINS_OLD },
      { name: 'apiserver-c', builtins: BUILTINS_NEW },
    ],
    clientCertificates: false,
    extproc: { workers: 2 },
  });
  client = createClient(stack.pki.caFile, stack.pki.token);
});
t.teardown(async () => {
  await client?.close();
  await stack?.close();
});

/** Envoy's per-endpoint request totals of the ext_proc cluster (admin /clusters). */
async function streamsPerEndpoint(): Promise<Map<string, number>> {
  const text = await (await fetch(`${stack.envoy.adminUrl}/clusters`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^skewgate-extproc::([^:]+:\d+)::rq_total::(\d+)$/.exec(line.trim());
    if (m) out.set(m[1] as string, Number(m[2]));
  }
  return out;
}

type Answer = { path: string; status: number; server: string | undefined; error?: string };
async function send(path: string): Promise<Answer> {
  try {
    const a = await client.send('GET', stack.gatewayUrl + path);
    return { path, status: a.status, server: a.server };
  } catch (err) {
    return { path, status: 0, server: undefined, error: String(err) };
  }
}
const wrong = (answers: readonly Answer[]): Answer[] =>
  answers.filter((a) => a.status !== 200 || (a.path === SKEWED && a.server !== 'apiserver-c'));

t.test('Envoy lists both endpoints and balances streams over them; both decide alike', async (t) => {
  const ports = [stack.config.extproc.listen, ...(stack.skewgate()?.workers?.ports() ?? []).map((p) => `127.0.0.1:${p}`)];
  t.equal(ports.length, 2);
  await eventually(
    'Envoy sees both endpoints healthy',
    async () => {
      const text = await (await fetch(`${stack.envoy.adminUrl}/clusters`)).text();
      return text.split('\n').filter((l) => /^skewgate-extproc::.*::health_flags::healthy$/.test(l)).length === 2;
    },
    WAIT_MS,
  );
  const before = await streamsPerEndpoint();
  const answers: Answer[] = [];
  for (let i = 0; i < 100; i++) answers.push(await send(i % 2 === 0 ? SKEWED : COMMON));
  t.same(wrong(answers), [], 'every skewed request answered by apiserver-c, every common one 200');
  const after = await streamsPerEndpoint();
  const per = [...after].map(([ep, n]) => [ep, n - (before.get(ep) ?? 0)] as const);
  t.equal(per.length, 2, `two endpoints in the ext_proc cluster (${per.map(([e, n]) => `${e}: ${n}`).join(', ')})`);
  for (const [ep, n] of per) t.ok(n >= 25, `endpoint ${ep} took a share of the 100 streams (${n})`);
  t.equal(
    per.reduce((s, [, n]) => s + n, 0),
    100,
    'one stream per request',
  );
});

t.test('a worker killed under load: no request fails, and it comes back', async (t) => {
  const workers = stack.skewgate()?.workers;
  if (!workers) throw new Error('no workers');
  const answers: (Answer & { start: number; end: number })[] = [];
  let stop = false;
  const clients = Array.from({ length: 4 }, async (_, c) => {
    for (let i = 0; !stop; i++) {
      const start = performance.now();
      const a = await send((i + c) % 2 === 0 ? SKEWED : COMMON);
      answers.push({ ...a, start, end: performance.now() });
    }
  });
  await eventually('the load under way', () => answers.length >= MIN_ANSWERS, WAIT_MS);
  const killAt = performance.now();
  await workers.killWorker(1);
  const deadAt = performance.now();
  await eventually('worker 1 serving again', () => workers.ports()[0] !== undefined, WAIT_MS);
  const backAt = performance.now();
  const after = (): number => answers.filter((a) => a.start > backAt).length;
  await eventually(`${MIN_ANSWERS} answers sent after it came back`, () => after() >= MIN_ANSWERS, WAIT_MS).catch(() => undefined);
  stop = true;
  await Promise.all(clients);
  // Four clients send back to back: some request is always in flight.
  const inFlight = answers.filter((a) => a.start <= deadAt && a.end >= killAt).length;
  t.ok(inFlight > 0, `${inFlight} requests in flight at the kill`);
  t.ok(after() >= MIN_ANSWERS, `${after()} sent after it came back (of ${answers.length})`);
  t.same(wrong(answers), [], 'no request failed or went to the wrong apiserver');
  const streams = await streamsPerEndpoint();
  t.equal(streams.size, 2);
  await eventually(
    'the restarted worker takes streams again',
    async () => {
      const b = await streamsPerEndpoint();
      for (let i = 0; i < 10; i++) await send(SKEWED);
      const a = await streamsPerEndpoint();
      return a.size === 2 && [...a].every(([ep, n]) => n > (b.get(ep) ?? 0));
    },
    WAIT_MS,
  );
});
