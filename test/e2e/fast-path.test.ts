// The fast path in a REAL Envoy (docs/design.md, "The fast path"): three fake apiservers serving
// the same APIs behind Envoy on filesystem xDS and `skewgate serve`'s parts in this process. What
// every apiserver serves identically goes straight to the pool with no ext_proc stream (a watch of
// a collection too), and its access-log line names the decision; a client certificate Envoy does
// not state, an odd watch value, the merged /apis still meet skewgate. When one apiserver stops serving a resource, Envoy runs routes without it before
// skewgate publishes the snapshot that says so, and no request sent after that reaches it there.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeApiServer, FakeCluster, BUILTINS_OLD } from '../../harness/fake/index.js';
import { parseConfig } from '../../src/config/load.js';
import type { Snapshot } from '../../src/discovery/core/types.js';
import { adminRoutesConfirm, runningRoutesVersion } from '../../src/envoy-runtime/admin-routes.js';
import { FAST_PATH_ROUTE_PREFIX } from '../../src/envoy/fast-routes.js';
import { RDS_FILE } from '../../src/envoy/xds.js';
import { packageRoot } from '../../src/util/package-root.js';
import { send, sharedPki } from '../helpers/envoy-fixtures.js';
import { xdsGateway } from '../helpers/xds-gateway.js';
import { waitMs } from '../helpers/waits.js';

const pki = await sharedPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-fast-e2e-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const auth = { authorization: `Bearer ${pki.token}` };
const DEPLOYMENTS = '/apis/apps/v1/namespaces/default/deployments';

/** Discovery rounds (300 ms, 2 s timeout) and Envoy's health checks (500 ms) bound what is awaited. */
const WAIT_MS = waitMs(300, 2000, 500);

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const cluster = new FakeCluster();
const fakes = await Promise.all(
  ['kas-a', 'kas-b', 'kas-c'].map(async (name) => {
    const s = new FakeApiServer({ name, pki, cluster, builtins: BUILTINS_OLD, host: '127.0.0.1' });
    await s.start();
    t.teardown(() => s.close());
    return s;
  }),
);
const [, , kasC] = fakes as [FakeApiServer, FakeApiServer, FakeApiServer];
const xdsDir = join(dir, 'xds');
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
  log: { level: 'warn' },
};
// On disk too, for `skewgate explain --config`.
const configFile = join(dir, 'skewgate.yaml');
writeFileSync(configFile, stringify(configInput));
const config = parseConfig(configInput, configFile, dir);
const { envoy, skewgate } = await xdsGateway(t, config);
await skewgate.start();
const port = envoy.listenPort as number;

const stat = async (name: string): Promise<number> => {
  const text = await (await fetch(`${envoy.adminUrl}/stats?filter=${encodeURIComponent(`^${name}$`)}`)).text();
  const m = /: (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
};
const streams = (): Promise<number> => stat('http.skewgate.ext_proc.streams_started');
const rds = (): { version_info: string; text: string } => {
  const text = readFileSync(join(xdsDir, RDS_FILE), 'utf8');
  return { version_info: (JSON.parse(text) as { version_info: string }).version_info, text };
};
/** Envoy's running fast-path read expression, from its own config dump. */
async function runningFastRead(): Promise<RegExp | null> {
  const dump = (await (await fetch(`${envoy.adminUrl}/config_dump?resource=dynamic_route_configs`)).json()) as {
    configs: { route_config: { virtual_hosts: { routes: { name: string; match: { safe_regex?: { regex: string } } }[] }[] } }[];
  };
  const route = dump.configs[0]?.route_config.virtual_hosts[0]?.routes.find((r) => r.name === `${FAST_PATH_ROUTE_PREFIX}read`);
  return route?.match.safe_regex ? new RegExp(route.match.safe_regex.regex) : null;
}

await t.test('unskewed requests skip ext_proc; what needs judgement does not', async (t) => {
  t.ok(config.routing.fastPath, 'routing.fastPath is on by default');
  await until('fast-path routes in Envoy', async () => {
    const file = rds();
    return (
      file.text.includes(FAST_PATH_ROUTE_PREFIX) &&
      (await runningRoutesVersion(envoy.adminUrl, AbortSignal.timeout(1000))) === file.version_info
    );
  });
  // What skewgate asks before it publishes a withdrawal: Envoy's admin confirms the version it runs.
  t.equal(await adminRoutesConfirm(envoy.adminUrl)(rds().version_info), true, "Envoy's admin confirms the routes file it runs");
  t.equal(await adminRoutesConfirm(envoy.adminUrl, 200)('not-a-version'), false, 'and not one it does not');
  // Envoy started before skewgate: its health check must have found skewgate since.
  await until('skewgate healthy in Envoy', async () =>
    /skewgate-extproc::[^\n]*::health_flags::healthy/.test(await (await fetch(`${envoy.adminUrl}/clusters`)).text()),
  );
  const before = await streams();
  const replies = await Promise.all(
    Array.from({ length: 60 }, (_, i) => send(port, pki, 'GET', i % 2 === 0 ? DEPLOYMENTS : `${DEPLOYMENTS}/web-${i}`, auth)),
  );
  t.ok(
    replies.every((r) => r.status === 200 || r.status === 404),
    `lists 200, gets of absent objects 404 from the apiserver: ${[...new Set(replies.map((r) => r.status))].join(', ')}`,
  );
  t.equal((await streams()) - before, 0, '60 unskewed requests: 0 ext_proc streams');
  const answeredBy = new Set(fakes.filter((f) => f.requests.some((r) => r.path.startsWith(DEPLOYMENTS))).map((f) => f.name));
  t.equal(answeredBy.size, 3, 'balanced over the three apiservers');

  // A watch of a fast resource takes the watch route: no stream, answered, unbounded by Envoy.
  const beforeWatch = await streams();
  const watched = await send(port, pki, 'GET', `${DEPLOYMENTS}?watch=true&timeoutSeconds=1`, auth);
  t.equal(watched.status, 200, 'a watch (timeoutSeconds=1) answered 200');
  t.equal((await streams()) - beforeWatch, 0, 'a watch of a fast resource: 0 ext_proc streams');
  const judged: [string, () => Promise<unknown>][] = [
    // No CN: Envoy's Lua leaves it to skewgate (test/e2e/cert-fast-path.test.ts: the certificates it states).
    ['a client certificate Envoy does not state', () => send(port, pki, 'GET', DEPLOYMENTS, {}, pki.clients.noCommonName)],
    [
      'a watch=false before a watch=true (Go reads the first: a list)',
      () => send(port, pki, 'GET', `${DEPLOYMENTS}?watch=false&watch=true`, auth),
    ],
    ['a watch=True', () => send(port, pki, 'GET', `${DEPLOYMENTS}?watch=True&timeoutSeconds=1`, auth)],
    [
      'the merged /apis',
      () => send(port, pki, 'GET', '/apis', { ...auth, accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList' }),
    ],
    ['a %-escaped name', () => send(port, pki, 'GET', `${DEPLOYMENTS}/a%2Fb`, auth)],
  ];
  for (const [what, call] of judged) {
    const n = await streams();
    await call();
    let delta = 0;
    // The stream is counted before the reply; waited for only in case the counter lags it.
    await until(`${what}: an ext_proc stream`, async () => (delta = (await streams()) - n) >= 1).catch(() => undefined);
    t.equal(delta, 1, `${what}: one ext_proc stream (${delta})`);
  }
  // Envoy writes its access log as it goes: the fast-path lines carry the decision.
  await until('access-log lines', () => envoy.logTail().includes(`"route":"${FAST_PATH_ROUTE_PREFIX}read"`));
  // The last such line: the tail's first line may be cut.
  const line = envoy
    .logTail()
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes(`"route":"${FAST_PATH_ROUTE_PREFIX}read"`))
    .pop();
  const fields = JSON.parse(line ?? '{}') as Record<string, unknown>;
  t.equal(fields.skewgate_outcome, 'default', 'access log: outcome');
  t.equal(fields.skewgate_reason, 'served_by_all', 'access log: reason');
  t.match(String(fields.skewgate_generation), /^\d+$/, `access log: the snapshot generation (${String(fields.skewgate_generation)})`);
});

const SEQ_HEADER = 'x-skewgate-test-seq';
/**
 * Requests sent after publication that must all avoid kas-c: balanced round robin over the three
 * apiservers, about a third of 20 would reach kas-c were its route not withdrawn.
 */
const AFTER_PUBLICATION = 20;

await t.test(
  'one apiserver stops serving a resource: Envoy withdraws its route before skewgate publishes, and nothing sent after reaches that apiserver',
  async (t) => {
    const lacksDeployments = (s: Snapshot): boolean => s.resources.get('apps/v1/deployments')?.has('kas-c') === false;
    let publishedAt = 0;
    const seen: { envoyAtPublish: Promise<RegExp | null> | null } = { envoyAtPublish: null };
    const off = skewgate.discovery.onChange((s) => {
      if (publishedAt !== 0 || !lacksDeployments(s)) return;
      publishedAt = performance.now();
      // Asked at once: what Envoy runs the moment routing sees the new snapshot.
      seen.envoyAtPublish = runningFastRead();
    });
    t.teardown(off);
    // Each request numbered (a header the fakes record): the one in flight at publication may
    // still reach kas-c after it; only those sent after publication must not. The load runs until
    // AFTER_PUBLICATION of them have been answered, however long that takes.
    const sent: { seq: string; start: number; status: number }[] = [];
    const sentAfter = (): typeof sent => (publishedAt === 0 ? [] : sent.filter((s) => s.start > publishedAt));
    let loading = true;
    const load = (async () => {
      for (let i = 0; loading; i++) {
        const start = performance.now();
        const r = await send(port, pki, 'GET', DEPLOYMENTS, { ...auth, [SEQ_HEADER]: String(i) });
        sent.push({ seq: String(i), start, status: r.status });
      }
    })();
    await until('the load under way', () => sent.length > 0);
    kasC.removeBuiltin('apps', 'v1', 'deployments');
    await until('the snapshot without deployments on kas-c', () => publishedAt !== 0, WAIT_MS);
    await until(`${AFTER_PUBLICATION} requests answered after publication`, () => sentAfter().length >= AFTER_PUBLICATION, WAIT_MS);
    loading = false;
    await load;
    const running = await seen.envoyAtPublish;
    t.ok(running, "Envoy's fast-path read route exists at publication (other resources stay fast)");
    t.notOk(running?.test(DEPLOYMENTS), 'and no longer matches deployments: withdrawn before publication');
    // Fast by group/version: apps/v1 as a whole now meets skewgate, batch/v1 does not.
    t.notOk(running?.test('/apis/apps/v1/namespaces/default/replicasets'), 'nor the rest of apps/v1 (no longer served identically)');
    t.ok(running?.test('/apis/batch/v1/namespaces/default/jobs'), 'batch/v1, served alike, still fast');
    const after = sentAfter();
    t.ok(after.length >= AFTER_PUBLICATION, `${after.length} requests sent after publication`);
    t.same(
      after.filter((s) => s.status !== 200).map((s) => s.status),
      [],
      'every one answered 200',
    );
    const afterSeqs = new Set(after.map((s) => s.seq));
    t.same(
      kasC.requests
        .filter((r) => r.path.startsWith(DEPLOYMENTS) && afterSeqs.has(String(r.headers[SEQ_HEADER])))
        .map((r) => r.headers[SEQ_HEADER]),
      [],
      'none of them reached kas-c',
    );

    const deployments = BUILTINS_OLD.find((r) => r.group === 'apps' && r.resource === 'deployments');
    if (deployments === undefined) throw new Error('BUILTINS_OLD serves deployments');
    kasC.addBuiltin(deployments);
    await until('deployments fast again', async () => (await runningFastRead())?.test(DEPLOYMENTS) === true);
    t.pass('kas-c serves it again: deployments fast again');
  },
);

await t.test('skewgate explain says whether Envoy decides a request alone', async (t) => {
  const explain = async (...args: string[]): Promise<{ fastPath: { takes: boolean; why: string } }> => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(packageRoot(), 'dist/src/cli/main.js'), 'explain', '--config', configFile, '--discover', '--json', ...args],
      { timeout: 60_000 },
    );
    return JSON.parse(stdout) as { fastPath: { takes: boolean; why: string } };
  };
  const token = ['-H', `Authorization: Bearer ${pki.token}`];
  const jobs = await explain(...token, 'GET', '/apis/batch/v1/namespaces/default/jobs');
  t.equal(jobs.fastPath.takes, true, `a list of jobs: ${jobs.fastPath.why}`);
  const watch = await explain(...token, 'GET', '/apis/batch/v1/namespaces/default/jobs?watch=1');
  t.equal(watch.fastPath.takes, true, `a watch: ${watch.fastPath.why}`);
  const odd = await explain(...token, 'GET', '/apis/batch/v1/namespaces/default/jobs?watch=True');
  t.equal(odd.fastPath.takes, false, `a watch=True: ${odd.fastPath.why}`);
  const cert = await explain('--client-cert', pki.clients.limited.certFile, 'GET', '/apis/batch/v1/namespaces/default/jobs');
  // Envoy verifies client certificates here (envoy.tls.clientCaFile): its Lua may state this one.
  t.equal(cert.fastPath.takes, true, `a client certificate: ${cert.fastPath.why}`);
  t.match(
    cert.fastPath.why,
    /^if Envoy's Lua states the certificate .*; if not, skewgate states it and judges the request$/,
    'with the condition said',
  );
});
