// The `skewgate` command as an operator runs it: a child process, its stdout and its exit code.
import t from 'tap';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';
import { CLI, runCli } from '../helpers/cli.js';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer, FakeCluster, createPki } from '../../harness/fake/index.js';
import { createExtProcClient, replyHeader } from '../helpers/extproc-client.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-cli-'));

const run = runCli;

const pki = await createPki(join(packageRoot(), '.cache/fake-pki'));
const cluster = new FakeCluster();
const servers = [
  new FakeApiServer({ name: 'old-1', cluster, pki, builtins: BUILTINS_OLD }),
  new FakeApiServer({ name: 'old-2', cluster, pki, builtins: BUILTINS_OLD, discovery: 'legacy' }),
  new FakeApiServer({ name: 'new-1', cluster, pki, builtins: BUILTINS_NEW }),
];
for (const s of servers) await s.start();
t.teardown(async () => {
  for (const s of servers) await s.close();
});

function writeConfig(name: string, doc: object): string {
  const file = join(dir, name);
  writeFileSync(file, stringify(doc));
  return file;
}
const base = {
  apiservers: servers.map((s) => ({
    name: s.name,
    url: s.url,
    caFile: pki.caFile,
    serverName: 'localhost',
    credentials: { tokenFile: pki.tokenFile },
  })),
  extproc: { listen: `unix:${join(dir, 'sg.sock')}` },
  envoy: { tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile }, healthCheck: { interval: '200ms', timeout: '200ms' } },
};
const good = writeConfig('good.yaml', base);

t.test('a bad config lists every problem with its path and exits 2', async (t) => {
  const bad = writeConfig('bad.yaml', { apiservers: [{ name: 'Bad Name', url: 'http://x' }], discovery: { interval: 'often' }, envoy: {} });
  for (const cmd of ['serve', 'validate', 'skew', 'envoy-config']) {
    const r = await run([cmd, '--config', bad]);
    t.equal(r.code, 2, `${cmd} exits 2`);
    for (const p of ['apiservers[0].name', 'apiservers[0].url', 'apiservers[0].credentials', 'discovery.interval'])
      t.match(r.stderr, p, `${cmd} names ${p}`);
    // What Envoy's bootstrap needs: envoy-config's and validate's problems, in the same list.
    for (const p of ['apiservers[0].caFile', 'envoy.tls.certFile', 'envoy.tls.keyFile'])
      if (cmd === 'validate' || cmd === 'envoy-config') t.match(r.stderr, p, `${cmd} names ${p}`);
      else t.notMatch(r.stderr, p, `${cmd} does not need ${p}`);
  }
  // A CA file that holds the CA's key: refused by every command that loads the config, before anything runs.
  const keyAsCa = writeConfig('key-as-ca.yaml', { ...base, apiservers: [{ ...base.apiservers[0], caFile: pki.serverKeyFile }] });
  for (const cmd of ['serve', 'validate', 'envoy-config']) {
    const r = await run([cmd, '--config', keyAsCa]);
    t.equal(r.code, 2, `${cmd}: a private key as caFile is a config problem`);
    t.match(r.stderr, /apiservers\[0\]\.caFile: .* holds a private key/, `${cmd} names the field`);
  }
  // What envoy-config refuses, validate refuses first, in the same words: one validation.
  const forEnvoy = writeConfig('for-envoy.yaml', {
    ...base,
    apiservers: [{ ...base.apiservers[0], caFile: undefined }],
    telemetry: { tracing: { enabled: true, endpoint: 'https://127.0.0.1:4317' } },
  });
  const problemLines = (text: string): string[] => text.split('\n').filter((l) => l.startsWith('  - '));
  const [validated, rendered] = [await run(['validate', '--config', forEnvoy]), await run(['envoy-config', '--config', forEnvoy])];
  t.equal(validated.code, 2, 'validate: exit 2');
  t.equal(rendered.code, 2, 'envoy-config: exit 2, no stack trace');
  t.notMatch(rendered.stderr, /\n\s+at /, 'envoy-config prints no stack');
  t.same(problemLines(validated.stderr), problemLines(rendered.stderr), 'the same problems');
  t.match(
    problemLines(rendered.stderr).join('\n'),
    /apiservers\[0\]\.caFile: required to render the Envoy bootstrap[^]*telemetry\.tracing\.caFile: required/,
  );
  t.equal((await run(['serve', '--config', join(dir, 'missing.yaml')])).code, 2, 'a missing file is a config problem');
  t.equal((await run(['serve'])).code, 2, 'a missing --config is a usage problem');
});

t.test('validate: all reachable → 0; one apiserver down → 1 naming it', async (t) => {
  const ok = await run(['validate', '--config', good]);
  t.equal(ok.code, 0, ok.stdout + ok.stderr);
  t.match(ok.stdout, /old-2 .*legacy/);
  const down = writeConfig('down.yaml', {
    ...base,
    apiservers: [
      ...base.apiservers,
      { name: 'gone', url: 'https://127.0.0.1:1', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } },
    ],
  });
  const r = await run(['validate', '--config', down]);
  t.equal(r.code, 1);
  t.match(r.stdout + r.stderr, /gone \(https:\/\/127\.0\.0\.1:1\): .*ECONNREFUSED|gone .*FAILED/);
  // Each failure said once, on stdout: no timestamped log line repeating it on stderr (issue 30).
  t.notMatch(r.stderr, /WARN|"level"/, `no log lines beside the report: ${r.stderr}`);
  const dead = writeConfig('all-dead.yaml', {
    ...base,
    apiservers: [{ name: 'gone', url: 'https://127.0.0.1:1', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } }],
  });
  const allDead = await run(['validate', '--config', dead]);
  t.equal(allDead.code, 1);
  t.notMatch(allDead.stderr, /grant get\/list\/watch/, 'every apiserver refusing connections: no RBAC advice for a network failure');
  t.match(allDead.stderr, /no apiserver answered/);
  const wrongToken = join(dir, 'wrong.token');
  writeFileSync(wrongToken, 'not-the-token');
  const denied = writeConfig('denied.yaml', { ...base, apiservers: [{ ...base.apiservers[0], credentials: { tokenFile: wrongToken } }] });
  const d = await run(['validate', '--config', denied]);
  t.equal(d.code, 1);
  t.match(d.stderr, /401/);
  t.match(d.stderr, /grant get\/list\/watch on leases/, 'credentials refused: the RBAC advice');
});

t.test('skew lists what not every apiserver serves, and exits 1 for it', async (t) => {
  const r = await run(['skew', '--config', good, '--discover']);
  t.equal(r.code, 1, `a skew is a finding: exit 1 (${r.stderr})`);
  t.match(r.stderr, /^skew: \d+ resources? not served by all 3 apiservers compared$/m, 'the summary: said to a person, on stderr');
  t.match(r.stdout, /^GROUP\s+VERSION\s+RESOURCE\s+SERVED BY\s+NOT SERVED BY\n/, 'stdout: the table alone, its header first');
  t.match(r.stdout, /admissionregistration\.k8s\.io\s+v1\s+mutatingadmissionpolicies\s+new-1\s+old-1,old-2/);
  t.notMatch(r.stdout, /configmaps/);
  const j = JSON.parse((await run(['skew', '--config', good, '--discover', '--json'])).stdout) as {
    skew: { resource: string; servedBy: string[] }[];
    compared: string[];
  };
  t.ok(j.skew.some((row) => row.resource === 'mutatingadmissionpolicies' && row.servedBy.join() === 'new-1'));
  t.same(j.compared, ['old-1', 'old-2', 'new-1']);

  const same = writeConfig('same.yaml', { ...base, apiservers: base.apiservers.slice(0, 2) });
  const none = await run(['skew', '--config', same, '--discover']);
  t.equal(none.code, 0, `no skew among every apiserver: exit 0 (${none.stdout}${none.stderr})`);
  t.match(none.stderr, /^no skew: every resource is served by all 2 apiservers$/m);
  t.equal(none.stdout, '', 'nothing skewed: no rows, no lone header');
});

t.test('skew -o: wide, name, json and yaml print the same findings', async (t) => {
  const wide = await run(['skew', '--config', good, '--discover', '-o', 'wide']);
  t.equal(wide.code, 1);
  t.match(wide.stdout, /^GROUP\s+VERSION\s+RESOURCE\s+OLD-1\s+OLD-2\s+NEW-1$/m, 'a column per apiserver compared');
  t.match(wide.stdout, /admissionregistration\.k8s\.io\s+v1\s+mutatingadmissionpolicies\s+-\s+-\s+yes/);
  const name = await run(['skew', '--config', good, '--discover', '-o', 'name']);
  t.equal(name.code, 1);
  const names = name.stdout.trim().split('\n');
  t.ok(names.includes('admissionregistration.k8s.io/v1/mutatingadmissionpolicies'), 'group/version/resource');
  t.ok(
    names.every((n) => /^[a-z0-9.-]+\/[a-z0-9]+\/[a-z0-9/]+$|^v1\/[a-z0-9/]+$/.test(n)),
    'nothing but names on stdout',
  );
  t.match(name.stderr, /^skew: /m, 'the summary on stderr');
  const json = JSON.parse((await run(['skew', '--config', good, '--discover', '-o', 'json'])).stdout) as { skew: unknown[] };
  const yaml = parseYaml((await run(['skew', '--config', good, '--discover', '-o', 'yaml'])).stdout) as { skew: unknown[] };
  t.same(yaml.skew, json.skew, 'yaml and json hold the same rows');
  t.equal(json.skew.length, names.length, 'as many as the names');
  t.equal((await run(['skew', '--config', good, '--discover', '-o', 'xml'])).code, 2, 'an unknown format: exit 2');
});

t.test('explain -o yaml is -o json in YAML; --json is -o json', async (t) => {
  const args = ['explain', '--config', good, '--discover', 'GET', '/apis/nope.example/v1/things'];
  const json = JSON.parse((await run([...args, '-o', 'json'])).stdout) as { decision: unknown };
  const legacy = JSON.parse((await run([...args, '--json'])).stdout) as { decision: unknown };
  const yaml = parseYaml((await run([...args, '-o', 'yaml'])).stdout) as { decision: unknown };
  t.same(yaml.decision, json.decision);
  t.same(legacy.decision, json.decision);
  t.equal((await run([...args, '-o', 'wide'])).code, 2, 'wide is not a format explain prints');
});

t.test('skew with apiservers it cannot reach: exit 1, naming them, never "no skew"', async (t) => {
  const unreachable = writeConfig('unreachable.yaml', {
    ...base,
    apiservers: [
      { name: 'gone-1', url: 'https://127.0.0.1:1', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } },
      { name: 'gone-2', url: 'https://127.0.0.1:2', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } },
    ],
  });
  const all = await run(['skew', '--config', unreachable, '--discover']);
  t.equal(all.code, 1, 'exit 1');
  t.match(all.stderr, /cannot compare: no apiserver answered discovery \(gone-1, gone-2\)/);
  t.notMatch(all.stdout + all.stderr, /no skew/);
  const one = writeConfig('one-down.yaml', {
    ...base,
    apiservers: [
      ...base.apiservers.slice(0, 2),
      { name: 'gone', url: 'https://127.0.0.1:1', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } },
    ],
  });
  const r = await run(['skew', '--config', one, '--discover']);
  t.equal(r.code, 1, 'exit 1 with one apiserver not compared');
  t.match(r.stderr, /warning: no discovery from gone: /);
  t.match(r.stderr, /no skew among the 2 apiservers compared, but not compared: gone/);
});

t.test('explain shows classification, candidates, decision and reason', async (t) => {
  const r = await run([
    'explain',
    '--config',
    good,
    '--discover',
    'POST',
    '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies',
  ]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /classification: resource .*resource=mutatingadmissionpolicies .*verb=create/);
  t.match(r.stdout, /candidates:\s+new-1/);
  t.match(r.stdout, /decision:\s+routed\s+reason=served_by_subset\s+upstream=new-1/);
  const nf = JSON.parse(
    (await run(['explain', '--config', good, '--discover', '--json', 'GET', '/apis/nope.example/v1/things'])).stdout,
  ) as {
    decision: { outcome: string; reason: string };
  };
  t.same(nf.decision, { outcome: 'not_found', reason: 'group_version_not_served', candidates: [] });
});

t.test('--version, and --log-format: text lines on stderr, never on stdout', async (t) => {
  const version = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  for (const flag of ['--version', '-V']) {
    const r = await run([flag]);
    t.equal(r.code, 0, `${flag}: exit 0`);
    t.equal(r.stdout.trim(), version, `${flag} prints ${version}`);
  }
  const down = writeConfig('down-text.yaml', {
    ...base,
    apiservers: [{ name: 'gone', url: 'https://127.0.0.1:1', caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } }],
  });
  // Their log lines are errors only by default (a failure is in the report already, said once);
  // SKEWGATE_LOG_LEVEL=warn shows discovery's warnings too.
  const quiet = await run(['skew', '--config', down, '--discover']);
  t.notMatch(quiet.stderr, /^\S+ (WARN|ERROR|INFO) /m, `by default no log line repeats what the report says: ${quiet.stderr}`);
  t.equal(
    quiet.stderr.match(/ECONNREFUSED 127\.0\.0\.1:1 \(ECONNREFUSED\) \(left out/g)?.length,
    1,
    'the failure said once, by the report (on stderr)',
  );
  t.equal(quiet.stdout, '', 'nothing compared: no rows');
  const warn = { SKEWGATE_LOG_LEVEL: 'warn' };
  for (const args of [
    ['--log-format', 'json', 'skew', '--discover', '--config', down],
    ['skew', '--config', down, '--discover', '--log-format', 'json'],
  ]) {
    const r = await run(args, warn);
    t.match(r.stderr, /"level":"warn"/, `${args.join(' ')}: discovery's warnings are logged`);
    t.notMatch(r.stdout, /"level"/, `${args.join(' ')}: no log line on stdout`);
    t.ok(
      r.stderr
        .split('\n')
        .filter(Boolean)
        .every((l) => l.startsWith('{')),
      `${args.join(' ')}: JSON lines on stderr (${r.stderr.split('\n')[0] ?? ''})`,
    );
  }
  const text = await run(['skew', '--config', down, '--discover'], warn);
  t.match(text.stderr, /^\S+ WARN {2}.*server=gone/m, 'the inspection commands log text lines by default');
  t.notMatch(text.stderr, /^\{/m, 'and no JSON');
  t.equal((await run(['--log-format', 'xml', 'skew', '--config', down])).code, 2, 'an unknown format is a usage error');
});

t.test('envoy-config prints a bootstrap naming every apiserver cluster', async (t) => {
  const r = await run(['envoy-config', '--config', good]);
  t.equal(r.code, 0, r.stderr);
  for (const s of servers) t.match(r.stdout, `name: ${s.name}`);
  t.match(r.stdout, /envoy\.filters\.http\.ext_proc/);
});

t.test('serve answers ext_proc, then SIGTERM finishes gracefully with exit 0', async (t) => {
  const child = spawn(process.execPath, [CLI, 'serve', '--config', good], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const deadline = Date.now() + 15_000;
  while (!stderr.includes('skewgate serving ext_proc')) {
    if (Date.now() > deadline) throw new Error(`serve did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const first = JSON.parse(stderr.split('\n')[0] ?? '{}') as { msg?: string; version?: string };
  t.match(first, { msg: 'skewgate starting', version: /^\d+\.\d+\.\d+/ }, "serve's first log line names the version");
  const client = createExtProcClient(`unix:${join(dir, 'sg.sock')}`);
  t.teardown(() => client.close());
  const { response } = await client.process({ method: 'GET', path: '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies' });
  t.equal(replyHeader(response, 'x-skewgate-upstream')?.raw, 'new-1', 'routed to the only capable apiserver');
  const health = await run(['health', '--config', good]);
  t.equal(health.code, 0, `skewgate health while serving: ${health.stderr}`);
  t.match(health.stdout, /ext_proc at unix:.*sg\.sock: SERVING/);
  // An exec probe written the natural way: a Go duration, not 2 ms (issue 30).
  const natural = await run(['health', '--config', good, '--timeout', '2s']);
  t.equal(natural.code, 0, `health --timeout 2s: ${natural.stderr}`);
  t.equal((await run(['health', '--config', good, '--timeout', 'soon'])).code, 2, 'a --timeout that is no duration: exit 2');
  const zeroConfig = writeConfig('admin-port-0.yaml', { ...base, envoy: { ...base.envoy, admin: { address: '127.0.0.1', port: 0 } } });
  const portZero = await run(['health', '--config', zeroConfig, '--envoy']);
  t.equal(portZero.code, 1, 'health --envoy with envoy.admin.port 0: exit 1');
  t.match(portZero.stderr, /envoy not checked: envoy\.admin\.port is 0/, 'says why, not "fetch failed"');
  // --envoy also asks Envoy's admin /ready: nothing listens on that port here.
  const closed = await new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
  const withEnvoy = writeConfig('with-envoy.yaml', { ...base, envoy: { ...base.envoy, admin: { address: '127.0.0.1', port: closed } } });
  const noEnvoy = await run(['health', '--config', withEnvoy, '--envoy', '--timeout', '1000']);
  t.equal(noEnvoy.code, 1, 'health --envoy without an Envoy: exit 1');
  t.match(noEnvoy.stderr, new RegExp(`envoy not ready: http://127\\.0\\.0\\.1:${closed}/ready`));
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exit 0 after SIGTERM');
  const gone = await run(['health', '--config', good, '--timeout', '500']);
  t.equal(gone.code, 1, 'skewgate health with nothing listening: exit 1');
  t.match(gone.stderr, /no answer/);
  t.match(stderr, /shutting down/);
  t.notMatch(stderr, new RegExp(pki.token), 'the token never reaches a log line');
});

t.test('health: the address a client dials for a listen address', async (t) => {
  const { healthTarget } = await import('../../src/cli/health.js');
  t.equal(healthTarget('unix:/run/skewgate/extproc.sock'), 'unix:/run/skewgate/extproc.sock');
  t.equal(healthTarget('0.0.0.0:9002'), '127.0.0.1:9002');
  t.equal(healthTarget('[::]:9002'), '[::1]:9002');
  t.equal(healthTarget('10.0.0.5:9002'), '10.0.0.5:9002');
  t.equal(healthTarget('[fd00::5]:9002'), '[fd00::5]:9002');
});
