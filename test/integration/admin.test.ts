// The admin endpoint of a running `skewgate serve` (a real child process in front of fake
// apiservers), asked as an operator asks it: `skewgate status|skew|explain` finding it from the
// config, over a unix socket and loopback TCP, and plain HTTP for the endpoint's own errors. What
// it answers is the running process's belief: an apiserver that stops is seen by the gateway, and
// the answers say so, where a fresh discovery round would tell another story.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';
import { CLI, runCli } from '../helpers/cli.js';
import { ADMIN_PATHS } from '../../src/inspect/admin-paths.js';
import type { HistoryAnswer } from '../../src/history/recorder.js';
import type { GatewayStatus } from '../../src/inspect/status.js';
import type { SkewReport } from '../../src/inspect/skew-report.js';
import type { Explanation } from '../../src/inspect/explanation.js';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer, FakeCluster, createPki } from '../../harness/fake/index.js';
import { freePort } from '../../harness/lab/net.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-admin-'));
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

const run = runCli;

const pki = await createPki(join(packageRoot(), '.cache/fake-pki'));
const cluster = new FakeCluster();
const oldServer = new FakeApiServer({ name: 'old-1', cluster, pki, builtins: BUILTINS_OLD, gitVersion: 'v1.35.4' });
const newServer = new FakeApiServer({ name: 'new-1', cluster, pki, builtins: BUILTINS_NEW, gitVersion: 'v1.36.3' });
for (const s of [oldServer, newServer]) await s.start();
const children = new Set<ChildProcess>();
t.teardown(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const s of [oldServer, newServer]) await s.close();
});

const socket = join(dir, 'admin.sock');
const tcpPort = await freePort();
function writeConfig(name: string, admin: object | undefined): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    stringify({
      apiservers: [oldServer, newServer].map((s) => ({
        name: s.name,
        url: s.url,
        caFile: pki.caFile,
        serverName: 'localhost',
        credentials: { tokenFile: pki.tokenFile },
      })),
      discovery: { interval: '200ms' },
      extproc: { listen: `unix:${join(dir, `${name}.extproc.sock`)}` },
      // No envoy section: serve needs none (it is envoy-config's), and every gateway here serves.
      ...(admin === undefined ? {} : { admin }),
    }),
  );
  return file;
}
const unixConfig = writeConfig('unix.yaml', { listen: `unix:${socket}` });
const tcpConfig = writeConfig('tcp.yaml', { listen: `127.0.0.1:${tcpPort}` });
const noAdmin = writeConfig('none.yaml', undefined);

/** `skewgate serve` until it logs that the admin endpoint listens. */
async function serve(
  config: string,
): Promise<{ child: ChildProcess; stderr: () => string; exited: Promise<number | null>; spawnedAt: number }> {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [CLI, 'serve', '--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const deadline = Date.now() + 15_000;
  while (!stderr.includes('skewgate serving ext_proc')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`serve did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, stderr: () => stderr, exited, spawnedAt };
}

async function waitFor(what: string, cond: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test('no admin endpoint: status, skew and explain refuse to guess (exit 2), and say how to ask', async (t) => {
  for (const args of [['status'], ['skew'], ['explain', 'GET', '/api']]) {
    const r = await run([...args, '--config', noAdmin]);
    t.equal(r.code, 2, `${args[0]} without admin.listen: exit 2`);
    t.match(r.stderr, /no admin\.listen/, `${args[0]} names the missing setting`);
    t.match(r.stderr, /--discover/, `${args[0]} names the way to run a round of its own`);
    t.equal(r.stdout, '', `${args[0]}: nothing on stdout`);
  }
  const both = await run(['skew', '--config', unixConfig, '--discover', '--admin', `unix:${socket}`]);
  t.equal(both.code, 2, '--admin with --discover is a usage error');
  t.match(both.stderr, /exclude each other/);
  t.equal((await run(['status', '--config', unixConfig, '--discover'])).code, 2, 'status has no round of its own');
  // …and does not offer one: only skew and explain list --discover (issue 30).
  for (const c of ['status', 'history', 'gate', 'cordon', 'uncordon'])
    t.notMatch((await run([c, '--help'])).stdout, /--discover/, `${c} --help lists no --discover`);
  t.match((await run(['skew', '--help'])).stdout, /--discover/, 'skew --help lists --discover');
  t.equal((await run(['skew'])).code, 2, 'neither --config nor --admin: exit 2');
  t.equal((await run(['skew', '--config', unixConfig, '--timeout', 'soon'])).code, 2, 'a --timeout that is no duration: exit 2');
});

t.test('the gateway is not running: exit 1, naming the address, never a silent round of its own', async (t) => {
  const r = await run(['skew', '--config', unixConfig]);
  t.equal(r.code, 1);
  t.match(r.stderr, new RegExp(`did not answer: cannot reach unix:${socket}`));
  t.notMatch(r.stdout, /skew/, 'no skew table from elsewhere');
});

t.test("a unix socket: status, skew and explain are the running gateway's own, and follow what it sees", async (t) => {
  const gw = await serve(unixConfig);
  t.match(gw.stderr(), /admin endpoint listening/);
  t.equal(statSync(socket).mode & 0o777, 0o600, 'the socket is for its owner only');

  const status = await run(['status', '--config', unixConfig, '-o', 'json']);
  const alive = performance.now() - gw.spawnedAt;
  t.equal(status.code, 0, `every member ready: exit 0 (${status.stderr})`);
  const s = JSON.parse(status.stdout) as GatewayStatus;
  t.equal(s.skewgate.pid, gw.child.pid, "the serving process's own pid");
  t.equal(s.config.generation, 1, 'config generation 1 before any reload');
  t.ok(s.snapshot.generation >= 1, 'a snapshot generation');
  t.same(
    s.members.map((m) => [m.name, m.role, m.seed, m.healthy, m.viewSource, m.gitVersion]),
    [
      ['old-1', 'member', true, true, 'aggregated', 'v1.35.4'],
      ['new-1', 'member', true, true, 'aggregated', 'v1.36.3'],
    ],
    'each member with the version its /version answers',
  );
  // No view is older than the process that fetched it: a count in µs or ns would be, one in ms is not.
  t.same(
    s.members.filter((m) => !(m.viewAgeMs !== null && m.viewAgeMs >= 0 && m.viewAgeMs <= alive)).map((m) => [m.name, m.viewAgeMs]),
    [],
    `view ages in ms, none older than the gateway (${alive.toFixed(0)} ms)`,
  );
  t.equal(s.skew.verdict, 'skew', 'the skew between 1.35 and 1.36');
  t.same(s.problems, []);
  const table = await run(['status', '--config', unixConfig]);
  // As kubectl: the rows on stdout, whose view it is and the summary on stderr (issue 30, item 3).
  t.match(table.stderr, new RegExp(`gateway: +unix:${socket} +skewgate \\d+\\.\\d+\\.\\d+, pid ${gw.child.pid}`));
  t.match(
    table.stdout,
    /^APISERVER +URL +VERSION +ROLE +CORDON +READY +VIEW +AGE +SOURCES +ERROR\nold-1 +https:\/\/\S+ +v1\.35\.4 +member \(seed\) +- +yes +aggregated/,
  );
  t.equal(table.stdout.trim().split('\n').length, 3, 'stdout: the header and a row per member, nothing else');
  const wide = await run(['status', '--config', unixConfig, '-o', 'wide', '--no-headers']);
  t.equal(wide.code, 0, wide.stderr);
  t.match(
    wide.stdout,
    /^old-1 +https:\/\/\S+ +v1\.35\.4 +member \(seed\) +- +yes +aggregated +\S+ +\S+ +0 +-\s*$/m,
    '-o wide: the failure count and the error code; --no-headers: no header',
  );
  t.notMatch(wide.stdout, /APISERVER/);
  t.equal((await run(['status', '--config', unixConfig, '-o', 'name'])).stdout, 'old-1\nnew-1\n', '-o name: the members, one per line');
  const history = await run(['history', '--config', unixConfig, '-o', 'name']);
  t.match(history.stdout, /^old-1\/member_added$/m, 'history -o name: apiserver/event');
  t.match(
    (await run(['history', '--config', unixConfig, '--no-headers'])).stdout,
    /^\S+Z +old-1 +member_added +https:/m,
    'history --no-headers',
  );

  const skew = await run(['skew', '--config', unixConfig, '-o', 'json']);
  t.equal(skew.code, 1, 'a skew: exit 1');
  const asked = JSON.parse(skew.stdout) as SkewReport;
  const own = JSON.parse((await run(['skew', '--config', unixConfig, '--discover', '-o', 'json'])).stdout) as SkewReport;
  t.same(asked.skew, own.skew, "the gateway's skew rows equal a fresh round's while nothing changes");
  t.ok(asked.generation > 1, "the gateway's snapshot has moved on past its first");
  t.match((await run(['skew', '--config', unixConfig])).stderr, new RegExp(`^gateway: +unix:${socket} \\(snapshot generation \\d+\\)`));

  const e = await run(['explain', '--config', unixConfig, '-o', 'json', 'POST', SKEWED]);
  t.equal(e.code, 0, e.stderr);
  const ex = JSON.parse(e.stdout) as Explanation;
  t.match(ex.decision, { outcome: 'routed', reason: 'served_by_subset', upstream: 'new-1' });
  t.same(
    ex.servers.map((x) => [x.name, x.gitVersion]),
    [
      ['old-1', 'v1.35.4'],
      ['new-1', 'v1.36.3'],
    ],
    "explain names each apiserver's version",
  );
  const exOwn = JSON.parse(
    (await run(['explain', '--config', unixConfig, '--discover', '-o', 'json', 'POST', SKEWED])).stdout,
  ) as Explanation;
  t.same(exOwn.decision, ex.decision, 'the same decision from a round of its own');
  const bad = await run(['explain', '--config', unixConfig, '-H', 'no colon here', 'GET', '/api']);
  t.equal(bad.code, 2, 'a malformed -H: exit 2 before the gateway is asked');

  // Followed as it happens: status -w prints a document now and again only when what it shows
  // changes; skew -w, whose rows do not change below (new-1's view is kept), prints once.
  const follow = (args: string[]): { child: ChildProcess; out: () => string; exited: Promise<number | null> } => {
    const child = spawn(process.execPath, [CLI, ...args, '--config', unixConfig, '-w', '--interval', '200ms'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    return { child, out: () => out, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
  };
  const docs = (text: string): GatewayStatus[] =>
    text
      .split(/^(?=\{)/m)
      .filter((d) => d.trim() !== '')
      .map((d) => JSON.parse(d) as GatewayStatus);
  const statusWatch = follow(['status', '-o', 'json']);
  const skewWatch = follow(['skew']);
  await waitFor('the first answers of both watches', async () => docs(statusWatch.out()).length === 1 && skewWatch.out() !== '');
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(docs(statusWatch.out()).length, 1, 'status -w: nothing printed again while nothing changed (5 asks, ages moving)');

  // The gateway's belief moves: new-1 stops answering. The running gateway marks it not ready
  // (its /readyz fails); its answers say so and route nothing there.
  await newServer.close();
  await waitFor('status -w to print new-1 down', async () =>
    docs(statusWatch.out()).some((d) => d.members.some((m) => m.name === 'new-1' && !m.healthy)),
  );
  const [first, ...later] = docs(statusWatch.out());
  t.ok(
    first?.members.every((m) => m.healthy),
    'the first document: both members ready',
  );
  t.ok(later.length >= 1 && later.length <= 2, `one document per change (${later.length} after the first)`);
  statusWatch.child.kill('SIGINT');
  t.equal(await statusWatch.exited, 1, "Ctrl-C ends it with the last answer's exit code (a member not ready: 1)");
  skewWatch.child.kill('SIGINT');
  t.equal(await skewWatch.exited, 1, 'skew -w ends the same way (a skew: 1)');
  t.notMatch(skewWatch.out(), /--- changed at/, 'skew -w: the rows did not change, nothing printed again');
  await waitFor('the gateway to see new-1 down', async () => {
    const r = await run(['status', '--config', unixConfig, '-o', 'json']);
    return (JSON.parse(r.stdout) as GatewayStatus).members.some((m) => m.name === 'new-1' && !m.healthy);
  });
  const down = await run(['status', '--config', unixConfig]);
  t.equal(down.code, 1, 'a member not ready: exit 1');
  t.match(down.stderr, /problems?:\n {2}- new-1 is not ready/);
  const e2 = JSON.parse((await run(['explain', '--config', unixConfig, '-o', 'json', 'POST', SKEWED])).stdout) as Explanation;
  t.match(
    e2.decision,
    { outcome: 'unavailable', reason: 'no_healthy_capable_server' },
    'the last view kept, nobody healthy serves it: 503',
  );
  await newServer.start();
  // What happened, in order, from the gateway's own history.
  const kinds = async (): Promise<string[]> =>
    (JSON.parse((await run(['history', '--config', unixConfig, '-o', 'json'])).stdout) as HistoryAnswer).events.map(
      (e) => `${'apiserver' in e ? e.apiserver : '-'} ${e.kind}${e.kind === 'version' ? ` ${e.to}` : ''}`,
    );
  await waitFor(
    'the history to show new-1 back',
    async () => (await kinds()).filter((k) => k.startsWith('new-1 ')).at(-1) === 'new-1 ready',
  );
  const seen = await kinds();
  t.same(
    seen.filter((k) => k.startsWith('new-1 ')),
    ['new-1 member_added', 'new-1 version v1.36.3', 'new-1 ready', 'new-1 not_ready', 'new-1 ready'],
    'new-1: added with its version, ready, down, back',
  );
  t.ok(seen.includes('- skew'), 'the skew between 1.35 and 1.36 recorded once its views were in');
  const historyTable = await run(['history', '--config', unixConfig]);
  t.equal(historyTable.code, 0);
  t.match(historyTable.stdout, /^TIME +APISERVER +EVENT +DETAIL\n/);
  t.match(historyTable.stdout, /^\S+ +new-1 +not_ready +/m);

  // No envoy.xds here: a cordon has nowhere to be kept and no pool to leave. Refused, exit 2.
  const cordon = await run(['cordon', 'old-1', '--config', unixConfig]);
  t.equal(cordon.code, 2, 'cordon without envoy.xds: exit 2');
  t.match(cordon.stderr, /cordons need envoy\.xds/);
  t.equal((await run(['cordon', 'old-1', '--config', unixConfig, '--discover'])).code, 2, 'cordon has no round of its own');

  gw.child.kill('SIGTERM');
  t.equal(await gw.exited, 0, 'graceful exit');
  t.notOk(existsSync(socket), 'the socket file is gone after the shutdown');
});

t.test('loopback TCP, and the endpoint itself: JSON errors for what it cannot answer', async (t) => {
  const gw = await serve(tcpConfig);
  const base = `http://127.0.0.1:${tcpPort}`;
  const index = await request(`${base}/`);
  t.equal(index.statusCode, 200);
  t.same(await index.body.json(), { endpoints: ADMIN_PATHS });
  // The static pods' httpGet probe (host 127.0.0.1): what grpc.health.v1 says.
  const healthz = await request(`${base}${ADMIN_PATHS.healthz}`);
  t.equal(healthz.statusCode, 200, 'GET /healthz: 200 while ext_proc serves');
  t.same(await healthz.body.json(), { status: 'SERVING' });
  const cases: [string, string, object, number, RegExp][] = [
    ['POST', ADMIN_PATHS.healthz, {}, 405, /POST is not allowed/],
    ['GET', '/nope', {}, 404, /no such endpoint: \/nope/],
    ['GET', ADMIN_PATHS.explain, {}, 405, /GET is not allowed here: POST/],
    ['POST', ADMIN_PATHS.status, {}, 405, /POST is not allowed/],
    ['POST', ADMIN_PATHS.explain, { body: 'not json', headers: { 'content-type': 'application/json' } }, 400, /not JSON/],
    ['POST', ADMIN_PATHS.explain, { body: '{}', headers: { 'content-type': 'text/plain' } }, 415, /application\/json/],
    [
      'POST',
      ADMIN_PATHS.explain,
      { body: JSON.stringify({ method: 7, path: 'api', extra: 1 }), headers: { 'content-type': 'application/json' } },
      400,
      /unknown field "extra".*method: must be an HTTP method.*path: must be a request path/,
    ],
    [
      'POST',
      ADMIN_PATHS.explain,
      { body: JSON.stringify({ method: 'GET', path: '/api', headers: ['bad'] }), headers: { 'content-type': 'application/json' } },
      400,
      /not a header line/,
    ],
    [
      'POST',
      ADMIN_PATHS.explain,
      { body: JSON.stringify({ method: 'GET', path: '/api', clientCertificate: 'junk' }), headers: { 'content-type': 'application/json' } },
      400,
      /no PEM certificate/,
    ],
  ];
  for (const [method, path, opts, status, message] of cases) {
    const r = await request(`${base}${path}`, { method: method as 'GET' | 'POST', ...opts });
    t.equal(r.statusCode, status, `${method} ${path}: ${status}`);
    t.match(r.headers['content-type'], /application\/json/);
    t.match(((await r.body.json()) as { error: string }).error, message);
  }
  const explained = await request(`${base}${ADMIN_PATHS.explain}`, {
    method: 'POST',
    body: JSON.stringify({ method: 'get', path: '/apis/nope.example/v1/things', headers: ['Accept: application/json'] }),
    headers: { 'content-type': 'application/json' },
  });
  t.equal(explained.statusCode, 200);
  t.match(await explained.body.json(), {
    request: { method: 'GET' },
    decision: { outcome: 'not_found', reason: 'group_version_not_served' },
  });
  const skew = await run(['skew', '--admin', `127.0.0.1:${tcpPort}`, '-o', 'name']);
  t.equal(skew.code, 1, '--admin without a config: asked all the same');
  t.match(skew.stdout, /^admissionregistration\.k8s\.io\/v1\/mutatingadmissionpolicies$/m);
  t.match(gw.stderr(), /"admin":"127\.0\.0\.1:\d+".*"msg":"skewgate serving ext_proc"/, 'the serving line names the admin address');
  gw.child.kill('SIGTERM');
  t.equal(await gw.exited, 0);
});

t.test('an admin address a network could reach is refused at start, with the rule', async (t) => {
  const open = writeConfig('open.yaml', { listen: '0.0.0.0:9003' });
  const r = await run(['serve', '--config', open]);
  t.equal(r.code, 2);
  t.match(r.stderr, /admin\.listen: 0\.0\.0\.0 is not a loopback address/);
  const v = await run(['validate', '--config', open]);
  t.equal(v.code, 2, 'validate refuses it the same way');
  t.match(v.stderr, /admin\.listen/);
});
