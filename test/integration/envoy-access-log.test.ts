// envoy.accessLog in a REAL Envoy: the default writes a line per request; minStatus keeps only the
// responses at or above it; sample keeps a share; enabled: false writes none. One fake apiserver
// behind Envoy, skewgate absent (fail open: every request balanced), a 200 and a 404 per run.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeApiServer, FakeCluster, BUILTINS_OLD } from '../../harness/fake/index.js';
import type { Config } from '../../src/config/core/schema.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, validateBootstrap } from '../../src/envoy-runtime/process.js';
import { onEphemeralPort, scratchDir, send, sharedPki, testConfig } from '../helpers/envoy-fixtures.js';

const pki = await sharedPki();
const scratch = scratchDir();
t.teardown(() => scratch.cleanup());
const fake = new FakeApiServer({ name: 'kas-a', pki, cluster: new FakeCluster(), builtins: BUILTINS_OLD });
await fake.start();
t.teardown(() => fake.close());
const base = testConfig(pki, {
  apiservers: [{ name: 'kas-a', url: fake.url }],
  extprocListen: `unix:${join(scratch.dir, 'absent.sock')}`,
  failureMode: 'open',
});
const auth = { authorization: `Bearer ${pki.token}` };
const OK = '/api/v1/namespaces/default/configmaps';
const MISSING = '/apis/nowhere.example/v1/things';

/** Runs Envoy with this access log setting; the access-log lines for `count` rounds of a 200 and a 404. */
async function linesWith(t: Test, accessLog: Config['envoy']['accessLog'], rounds = 1): Promise<{ path: string; status: string }[]> {
  const config: Config = { ...base, envoy: { ...base.envoy, accessLog } };
  const logFile = join(scratch.dir, `envoy-${JSON.stringify(accessLog).replace(/\W+/g, '-')}.log`);
  const envoy = await startEnvoy({ bootstrap: onEphemeralPort(renderBootstrap(config)), logFile });
  try {
    for (let i = 0; i < rounds; i++) {
      t.equal((await send(envoy.listenPort as number, pki, 'GET', OK, auth)).status, 200);
      t.equal((await send(envoy.listenPort as number, pki, 'GET', MISSING, auth)).status, 404);
    }
  } finally {
    // Stopping flushes the access log.
    await envoy.stop();
  }
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes('"route"'))
    .map((l) => JSON.parse(l) as { path: string; status: string });
}

t.test('the default: a line per request', async (t) => {
  const lines = await linesWith(t, { enabled: true, minStatus: 0, sample: 1 });
  t.same(lines.map((l) => `${l.path} ${l.status}`).sort(), [`${OK} 200`, `${MISSING} 404`]);
});

t.test('minStatus 400: failures only', async (t) => {
  const lines = await linesWith(t, { enabled: true, minStatus: 400, sample: 1 });
  t.same(
    lines.map((l) => `${l.path} ${l.status}`),
    [`${MISSING} 404`],
  );
});

t.test('enabled: false: no line', async (t) => {
  t.same(await linesWith(t, { enabled: false, minStatus: 0, sample: 1 }), []);
});

t.test('sample: a share of the requests, each drawn on its own', async (t) => {
  const rounds = 40;
  const lines = await linesWith(t, { enabled: true, minStatus: 0, sample: 0.5 }, rounds);
  // 80 requests at 1/2: fewer than all, more than none (the chance of either bound failing is 2 × 2^-80).
  t.ok(lines.length > 0 && lines.length < 2 * rounds, `${lines.length} of ${2 * rounds} written`);
});

t.test('both filters together: envoy --mode validate', async (t) => {
  const both = await validateBootstrap(
    renderBootstrap({ ...base, envoy: { ...base.envoy, accessLog: { enabled: true, minStatus: 500, sample: 0.01 } } }),
  );
  t.ok(both.ok, both.output);
});

t.test("Audit-ID: Envoy's request id sent upstream and written in the access log; a client's own kept", async (t) => {
  const logFile = join(scratch.dir, 'envoy-audit-id.log');
  const envoy = await startEnvoy({ bootstrap: onEphemeralPort(renderBootstrap(base)), logFile });
  fake.clearRequests();
  try {
    t.equal((await send(envoy.listenPort as number, pki, 'GET', `${OK}?mine=0`, auth)).status, 200);
    t.equal((await send(envoy.listenPort as number, pki, 'GET', `${OK}?mine=1`, { ...auth, 'audit-id': 'client-chosen-1' })).status, 200);
  } finally {
    await envoy.stop();
  }
  const upstream = (q: string): Record<string, unknown> => fake.requests.find((r) => r.path.endsWith(q))?.headers ?? {};
  const lines = readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes('"route"'))
    .map((l) => JSON.parse(l) as { path: string; request_id: string; audit_id: string });
  const line = (q: string): { request_id: string; audit_id: string } | undefined => lines.find((l) => l.path.endsWith(q));
  const ours = upstream('mine=0');
  t.match(ours['audit-id'], /^[0-9a-f-]{36}$/, 'a request id went upstream as Audit-ID');
  t.equal(ours['audit-id'], ours['x-request-id'], "the same as Envoy's x-request-id");
  t.equal(line('mine=0')?.audit_id, ours['audit-id'], 'and the access log says so');
  t.equal(line('mine=0')?.request_id, ours['audit-id']);
  t.equal(upstream('mine=1')['audit-id'], 'client-chosen-1', "a client's own Audit-ID is kept");
  t.equal(line('mine=1')?.audit_id, 'client-chosen-1');
});
