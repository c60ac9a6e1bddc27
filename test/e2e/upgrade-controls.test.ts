// The operator's controls in a REAL Envoy (docs/design.md, "The gate" and "Cordon"): three fake
// apiservers, the newest serving one API the others lack, behind Envoy on filesystem xDS and
// `skewgate serve`'s parts in this process, asked and told with the real `skewgate` command
// through the admin endpoint. The gate proceeds on a calm plane, holds on a member down (and
// `--wait` proceeds once it is back), on a member it was told to expect and has not seen, and on
// the removal of the only apiserver serving something a client still uses, which `skew
// --if-removed` names with the client. A cordon: once the command returns, no request another member can serve reaches the cordoned
// apiserver (Envoy's balanced and fast pools leave it out; skewgate routes past it), what only
// it serves still does, and, drained, nothing new does. The cordon is kept across a restart and
// a reload, shown in status, explain and the history, and traced with who asked.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer, FakeCluster } from '../../harness/fake/index.js';
import { createSkewgate } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { REASON_HEADER } from '../../src/constants.js';
import { CORDON_FILE } from '../../src/cordon/core/cordons.js';
import type { HistoryAnswer } from '../../src/history/recorder.js';
import type { Explanation } from '../../src/inspect/explanation.js';
import type { GatewayStatus } from '../../src/inspect/status.js';
import { ATTR_CORDON, EVENT_CORDON_CHANGED, SPAN_OPERATOR } from '../../src/telemetry/core/names.js';
import { createLogger } from '../../src/util/log.js';
import { CLI, runCli } from '../helpers/cli.js';
import { send, sharedPki } from '../helpers/envoy-fixtures.js';
import { waitMs } from '../helpers/waits.js';
import { xdsGateway } from '../helpers/xds-gateway.js';

const root = t;
const pki = await sharedPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-cordon-e2e-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const auth = { authorization: `Bearer ${pki.token}` };
const DEPLOYMENTS = '/apis/apps/v1/namespaces/default/deployments';
/** Served by kas-c alone (BUILTINS_NEW). */
const POLICIES = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/** Discovery rounds (300 ms, 2 s timeout) and Envoy's health checks (500 ms) bound what is awaited. */
const WAIT_MS = waitMs(300, 2000, 500);

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const cluster = new FakeCluster();
const fakes = await Promise.all(
  [
    ['kas-a', BUILTINS_OLD],
    ['kas-b', BUILTINS_OLD],
    ['kas-c', BUILTINS_NEW],
  ].map(async ([name, builtins]) => {
    const s = new FakeApiServer({ name: name as string, pki, cluster, builtins: builtins as typeof BUILTINS_OLD, host: '127.0.0.1' });
    await s.start();
    t.teardown(() => s.close());
    return s;
  }),
);
const kasC = fakes[2] as FakeApiServer;
const xdsDir = join(dir, 'xds');
const adminSocket = join(dir, 'admin.sock');
const ADMIN = ['--admin', `unix:${adminSocket}`];
const configInput = {
  apiservers: fakes.map((f) => ({ name: f.name, url: f.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } })),
  discovery: { interval: '300ms', timeout: '2s', staleAfter: '3s' },
  extproc: { listen: `unix:${join(dir, 'extproc.sock')}`, messageTimeout: '1s' },
  envoy: {
    listen: { address: '127.0.0.1', port: 0 },
    admin: { address: '127.0.0.1', port: 0 },
    tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile, clientCaFile: pki.caFile },
    upstreamClientCert: { certFile: pki.frontProxyClientCertFile, keyFile: pki.frontProxyClientKeyFile },
    xds: { directory: xdsDir },
    healthCheck: { interval: '500ms', timeout: '1s' },
  },
  admin: { listen: `unix:${adminSocket}` },
  // A short window, so that a young gateway covers it within the test.
  gate: { window: '3s', usageWindow: '1m', minDecisions: 5 },
  log: { level: 'warn' },
};
const configFile = join(dir, 'skewgate.yaml');
writeFileSync(configFile, stringify(configInput));
const config = parseConfig(configInput, configFile, dir);
const spans = new InMemorySpanExporter();
const { envoy, skewgate } = await xdsGateway(t, config, { skewgate: { telemetry: { spanExporter: spans } } });
await skewgate.start();
const port = envoy.listenPort as number;

/** Requests to kas-c for `path` since `from` (its request log's length then). */
const toC = (path: string, from: number): number => kasC.requests.slice(from).filter((r) => r.path.startsWith(path)).length;
const status = async (): Promise<GatewayStatus> => JSON.parse((await runCli(['status', ...ADMIN, '-o', 'json'])).stdout) as GatewayStatus;
const explain = async (path: string): Promise<Explanation> =>
  JSON.parse((await runCli(['explain', ...ADMIN, '-o', 'json', 'GET', path])).stdout) as Explanation;
const lists = (n: number): Promise<{ status: number }[]> =>
  Promise.all(Array.from({ length: n }, () => send(port, pki, 'GET', DEPLOYMENTS, auth)));

await t.test('before: balanced over the three', async (t) => {
  await until('every member ready and current', async () => (await status()).problems.length === 0);
  await until('kas-c answering lists', async () => {
    const from = kasC.requests.length;
    await lists(12);
    return toC(DEPLOYMENTS, from) > 0;
  });
  t.pass('kas-c takes its share of lists');
});

type Gate = {
  verdict: string;
  holds: { reason: string; detail: string }[];
  passed: string[];
  unchecked: string[];
  window: { extprocFailures: unknown };
};
const gate = async (...args: string[]): Promise<{ code: number; g: Gate; stderr: string }> => {
  const r = await runCli(['gate', ...ADMIN, '-o', 'json', ...args]);
  return { code: r.code, g: JSON.parse(r.stdout) as Gate, stderr: r.stderr };
};

await t.test('the gate: proceeds on a calm plane once its window is covered; the expected member reached, by Envoy', async (t) => {
  const r = await runCli(['gate', ...ADMIN, '--wait', '--wait-timeout', '30s', '--interval', '500ms']);
  t.equal(r.code, 0, `proceeds (exit 0): ${r.stdout}${r.stderr}`);
  t.match(r.stdout, /^proceed\n/);
  // Balanced over three: 60 lists all missing kas-c has a chance of (2/3)^60.
  await lists(60);
  const e = await gate('--expect', 'kas-c');
  t.equal(e.code, 0, JSON.stringify(e.g.holds));
  t.match(e.g.passed.join('\n'), /kas-c joined, discovered and sent \d+ request/);
  t.not(e.g.window.extprocFailures, null, "Envoy's counters were read");
  const future = await gate('--kubernetes-version', 'v9.9.9');
  t.equal(future.code, 1, 'a version no member runs: hold');
  t.match(future.g.holds, [{ reason: 'version_not_reached', detail: /not every member runs v9\.9\.9: kas-a / }]);
  const z = await gate('--expect', 'kas-z');
  t.equal(z.code, 1, 'an apiserver it has never seen: hold, exit 1');
  t.match(z.g.holds, [{ reason: 'expected_member_missing' }]);
});

await t.test(
  'the gate: a removal holds while a client uses what only that apiserver serves; skew --if-removed names the client',
  async (t) => {
    for (let i = 0; i < 3; i++)
      t.equal((await send(port, pki, 'GET', POLICIES, { ...auth, 'user-agent': 'policy-client/1.0' })).status, 200);
    const removed = await runCli(['skew', ...ADMIN, '--if-removed', 'kas-c']);
    t.equal(removed.code, 1, 'something only kas-c serves is in use: exit 1');
    t.match(removed.stdout, /admissionregistration\.k8s\.io\/v1\/mutatingadmissionpolicies +\S.* +policy-client\/1\.0 +3 +\S+/);
    t.match(removed.stderr, /gate --removing kas-c` holds/);
    const c = await gate('--removing', 'kas-c');
    t.equal(c.code, 1);
    t.match(c.g.holds, [{ reason: 'removal_in_use', detail: /mutatingadmissionpolicies/ }]);
    const a = await gate('--removing', 'kas-a');
    t.equal(a.code, 0, `kas-a serves nothing the others do not: ${JSON.stringify(a.g.holds)}`);
    t.equal((await runCli(['skew', ...ADMIN, '--if-removed', 'kas-a'])).code, 0);
  },
);

await t.test('the gate: a member down holds; --wait proceeds once it is back, saying why it waited', async (t) => {
  const kasB = fakes[1] as FakeApiServer;
  await kasB.close();
  await until('the gate to hold on kas-b', async () => (await gate()).g.holds.some((h) => h.reason === 'member_not_ready'));
  // kas-b comes back only once the waiting command has said it holds (its own stderr line), not after a sleep.
  const child = spawn(process.execPath, [CLI, 'gate', ...ADMIN, '--wait', '--wait-timeout', '60s', '--interval', '500ms']);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((res) => child.once('close', (code) => res(code)));
  await until('the waiting gate to say it holds', () => stderr.includes('member_not_ready'));
  await kasB.start();
  const r = { code: await exited, stdout, stderr };
  t.equal(r.code, 0, `proceeds once kas-b is back: ${r.stdout}${r.stderr}`);
  t.match(r.stderr, /hold; asking again every 0\.5s:\n {2}- member_not_ready: kas-b is not ready/, 'progress names the reason');
});

await t.test('cordon: what others serve never reaches it once the command returns; what only it serves still does', async (t) => {
  const r = await runCli(['cordon', 'kas-c', ...ADMIN, '--reason', 'bad build', '--by', 'tester']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^kas-c cordoned \(was not cordoned\): it gets only what no other member serves/);
  const from = kasC.requests.length;
  const replies = await lists(60);
  t.ok(
    replies.every((x) => x.status === 200),
    'every list answered',
  );
  t.equal(toC(DEPLOYMENTS, from), 0, '60 lists after the cordon: none on kas-c');
  const only = await send(port, pki, 'GET', POLICIES, auth);
  t.equal(only.status, 200, 'what only kas-c serves: answered');
  t.equal(toC(POLICIES, from), 1, '… by kas-c');
  const ex = await explain(POLICIES);
  t.match(ex.decision, { outcome: 'routed', reason: 'served_by_cordoned', upstream: 'kas-c' });
  t.match(
    ex.servers.find((s) => s.name === 'kas-c'),
    { cordon: 'cordon', healthy: true },
  );
  t.match((await explain(DEPLOYMENTS)).decision, { outcome: 'routed', reason: 'served_by_subset' });
  const s = await status();
  t.equal(s.members.find((m) => m.name === 'kas-c')?.cordon, 'cordon', 'status: kas-c cordoned');
  t.match(s.cordons, [{ apiserver: 'kas-c', mode: 'cordon', by: 'tester', reason: 'bad build' }]);
  t.same(s.problems, [], 'a cordon is no problem');
  const table = await runCli(['status', ...ADMIN]);
  t.match(table.stderr, /note: kas-c cordoned \(it gets only what no other member serves\) by tester at \S+: bad build/);
  const file = JSON.parse(readFileSync(join(xdsDir, CORDON_FILE), 'utf8')) as { cordons: { apiserver: string }[] };
  t.same(
    file.cordons.map((c) => c.apiserver),
    ['kas-c'],
    'kept in the xds directory',
  );
  const again = await runCli(['cordon', 'kas-c', ...ADMIN]);
  t.match(again.stdout, /kas-c was already cordoned: nothing changed/, 'idempotent');
});

await t.test('drain: nothing new reaches it, not even what only it serves (503 at once)', async (t) => {
  const r = await runCli(['cordon', 'kas-c', '--drain', ...ADMIN, '--by', 'tester']);
  t.equal(r.code, 0, r.stderr);
  const from = kasC.requests.length;
  await lists(30);
  const only = await send(port, pki, 'GET', POLICIES, auth);
  t.equal(only.status, 503, 'what only kas-c serves: 503');
  t.equal(only.headers[REASON_HEADER], 'no_healthy_capable_server');
  t.equal(toC(DEPLOYMENTS, from) + toC(POLICIES, from), 0, 'nothing reached kas-c');
});

await t.test('refusals: an unknown apiserver (exit 2, the members named); the first process traced who asked', async (t) => {
  // A cordon it cannot keep (the file's place taken by a folder): refused whole, said as such.
  const kept = readFileSync(join(xdsDir, CORDON_FILE), 'utf8');
  rmSync(join(xdsDir, CORDON_FILE));
  mkdirSync(join(xdsDir, CORDON_FILE));
  const unkept = await runCli(['cordon', 'kas-a', ...ADMIN]);
  rmSync(join(xdsDir, CORDON_FILE), { recursive: true });
  writeFileSync(join(xdsDir, CORDON_FILE), kept);
  t.equal(unkept.code, 1, 'a cordon that cannot be kept: exit 1');
  t.match(unkept.stderr, /could not do it: .*answered 500: cannot keep the cordon in .*cordons\.json.*nothing changed/);
  t.equal((await status()).members.find((m) => m.name === 'kas-a')?.cordon, null, 'kas-a not cordoned: nothing changed');
  const r = await runCli(['cordon', 'kas-z', ...ADMIN]);
  t.equal(r.code, 2);
  t.match(r.stderr, /kas-z is not an apiserver of this gateway; they are: kas-a, kas-b, kas-c/);
  const events = spans
    .getFinishedSpans()
    .filter((s) => s.name === SPAN_OPERATOR)
    .flatMap((s) => s.events.filter((e) => e.name === EVENT_CORDON_CHANGED).map((e) => e.attributes ?? {}));
  t.same(
    events.map((e) => [e[ATTR_CORDON.apiserver], e[ATTR_CORDON.modeBefore], e[ATTR_CORDON.mode], e[ATTR_CORDON.by], e[ATTR_CORDON.peer]]),
    [
      ['kas-c', 'none', 'cordon', 'tester', 'unix socket'],
      ['kas-c', 'cordon', 'drain', 'tester', 'unix socket'],
    ],
    'a span per change, naming who asked and from where (the idempotent repeat changed nothing)',
  );
});

await t.test('kept across a restart of skewgate and a reload', async (t) => {
  await skewgate.close({ drainMs: 0 });
  const next = createSkewgate(config, createLogger('warn'), { envoyAdminUrl: envoy.adminUrl });
  // Closed before Envoy stops (teardowns run last first).
  root.teardown(() => next.close({ drainMs: 0 }));
  await next.start();
  await until('the restarted gateway ready', async () => (await status()).problems.length === 0);
  t.equal((await status()).members.find((m) => m.name === 'kas-c')?.cordon, 'drain', 'drained after the restart');
  const from = kasC.requests.length;
  await lists(30);
  t.equal((await send(port, pki, 'GET', POLICIES, auth)).status, 503, 'what only kas-c serves: still 503');
  t.equal(toC(DEPLOYMENTS, from) + toC(POLICIES, from), 0, 'nothing reached kas-c after the restart');
  const reloaded = await next.reload(
    parseConfig({ ...configInput, discovery: { ...configInput.discovery, interval: '250ms' } }, configFile, dir),
  );
  t.equal(reloaded.result, 'applied', 'a reload applied');
  t.equal((await status()).members.find((m) => m.name === 'kas-c')?.cordon, 'drain', 'drained after the reload');

  // Uncordon: Envoy gets its routes back first, then routing; it is balanced to again.
  const r = await runCli(['uncordon', 'kas-c', ...ADMIN, '--by', 'tester']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /kas-c not cordoned \(was drained\): it is balanced to again/);
  t.equal((await send(port, pki, 'GET', POLICIES, auth)).status, 200, 'what only kas-c serves: answered again');
  await until('kas-c taking lists again', async () => {
    const f = kasC.requests.length;
    await lists(12);
    return toC(DEPLOYMENTS, f) > 0;
  });
  t.same(JSON.parse(readFileSync(join(xdsDir, CORDON_FILE), 'utf8')).cordons, [], 'the file keeps no cordon');
  const h = JSON.parse((await runCli(['history', ...ADMIN, '-o', 'json'])).stdout) as HistoryAnswer;
  t.match(
    h.events.filter((e) => e.kind === 'uncordoned'),
    [{ apiserver: 'kas-c', mode: 'drain', by: 'tester' }],
    'the history (of this process) has the uncordon with who asked',
  );
});
