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

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';

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
  await eventually('Envoy sees both endpoints healthy', async () => {
    const text = await (await fetch(`${stack.envoy.adminUrl}/clusters`)).text();
    return text.split('\n').filter((l) => /^skewgate-extproc::.*::health_flags::healthy$/.test(l)).length === 2;
  });
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
  const answers: Answer[] = [];
  let stop = false;
  const clients = Array.from({ length: 4 }, async (_, c) => {
    for (let i = 0; !stop; i++) answers.push(await send((i + c) % 2 === 0 ? SKEWED : COMMON));
  });
  await new Promise((r) => setTimeout(r, 500));
  const atKill = answers.length;
  await workers.killWorker(1);
  await eventually('worker 1 serving again', () => workers.ports()[0] !== undefined, 20_000);
  await new Promise((r) => setTimeout(r, 1500));
  stop = true;
  await Promise.all(clients);
  t.ok(answers.length - atKill > 50, `requests went on during and after the kill (${answers.length - atKill} of ${answers.length})`);
  t.same(wrong(answers), [], 'no request failed or went to the wrong apiserver');
  const streams = await streamsPerEndpoint();
  t.equal(streams.size, 2);
  await eventually(
    'the restarted worker takes streams again',
    async () => {
      const b = await streamsPerEndpoint();
      for (let i = 0; i < 10; i++) await send(SKEWED);
      const a = await streamsPerEndpoint();
      return [...a].every(([ep, n]) => n > (b.get(ep) ?? 0));
    },
    20_000,
  );
});
