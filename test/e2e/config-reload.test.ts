// `skewgate serve` as an operator runs it, reloading its config without a restart: an invalid
// file and SIGHUP keep the running config (an error line, the metrics say so), and so does a file
// whose TLS material the start would refuse (the same check runs at start and on reload); a valid file
// written in place of it, with no signal, is picked up by the file watch; SIGTERM still drains
// and exits 0, a second signal during the drain only logged.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { FakeCluster, startFake, testPki, tokenServer } from '../helpers/discovery-fixtures.js';
import { createExtProcClient, replyHeader } from '../helpers/extproc-client.js';
import { eventually } from '../helpers/http.js';

const CLI = join(packageRoot(), 'dist/src/cli/main.js');
/** Served by BUILTINS_NEW only. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

t.test('SIGHUP with an invalid file, then a valid file with no signal, then SIGTERM', async (t) => {
  const pki = await testPki();
  const cluster = new FakeCluster();
  const a = await startFake(t, { name: 'apiserver-a', pki, cluster, builtins: BUILTINS_OLD });
  const c = await startFake(t, { name: 'apiserver-c', pki, cluster, builtins: BUILTINS_NEW });
  const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-reload-'));
  const socket = join(dir, 'sg.sock');
  const file = join(dir, 'skewgate.yaml');
  const doc = (servers: object[]): object => ({
    apiservers: servers,
    discovery: { interval: '60s', watch: false },
    extproc: { listen: `unix:${socket}`, shutdownGrace: '3s' },
    // The drain lasts interval × unhealthyThreshold + timeout = 2 × 1 s + 1 s = 3 s (the grace):
    // the window in which a second signal must be only logged. The test sends it as soon as the
    // first is logged, which takes a small part of that on the slowest machine.
    envoy: { tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile }, healthCheck: { interval: '1s', timeout: '1s' } },
    log: { level: 'info' },
    telemetry: { metrics: { prometheus: { listen: '127.0.0.1:0' } } },
  });
  writeFileSync(file, stringify(doc([tokenServer(a, pki)])));

  const child = spawn(process.execPath, [CLI, 'serve', '--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const lines: Record<string, unknown>[] = [];
  let partial = '';
  child.stderr.on('data', (chunk: Buffer) => {
    const parts = (partial + chunk.toString()).split('\n');
    partial = parts.pop() ?? '';
    for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as Record<string, unknown>);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const logged = (pred: (l: Record<string, unknown>) => boolean): Record<string, unknown> | undefined => lines.find(pred);
  const byMsg = (msg: string) => (l: Record<string, unknown>) => l['msg'] === msg;

  await eventually('serve to start', () => logged(byMsg('skewgate serving ext_proc')) !== undefined, 15_000);
  const promPort = logged(byMsg('telemetry started'))?.['prometheusPort'];
  t.ok(typeof promPort === 'number' && promPort > 0, 'the Prometheus port is in the log');
  const metrics = async (): Promise<string> => (await request(`http://127.0.0.1:${String(promPort)}/metrics`)).body.text();
  const client = createExtProcClient(`unix:${socket}`);
  t.teardown(() => client.close());
  const decide = async (): Promise<string> => {
    const { response } = await client.process({ path: SKEWED });
    const code = response?.immediate_response?.status?.code;
    return code !== undefined ? String(code) : `routed ${replyHeader(response, 'x-skewgate-upstream')?.raw ?? '(none)'}`;
  };
  t.equal(await decide(), '404', 'only apiserver-a, which lacks it');
  t.match(await metrics(), /skewgate_config_generation 1/);
  t.match(await metrics(), /skewgate_config_last_reload_success 1/, '1 before any reload');

  // An invalid file, then SIGHUP at once.
  writeFileSync(file, stringify({ ...doc([{ name: 'Bad Name', url: 'http://x' }]), discovery: { interval: 'often' } }));
  child.kill('SIGHUP');
  await eventually(
    'the refusal to be logged',
    () => logged((l) => l['msg'] === 'config reload refused' && l['trigger'] === 'SIGHUP') !== undefined,
  );
  const refusal = logged((l) => l['msg'] === 'config reload refused' && l['trigger'] === 'SIGHUP');
  t.match(refusal, { level: 'error', result: 'invalid', generation: 1 });
  const problems = (refusal?.['problems'] ?? []) as string[];
  for (const p of ['apiservers[0].name', 'apiservers[0].url', 'discovery.interval'])
    t.ok(
      problems.some((x) => x.startsWith(`${p}:`)),
      `the line names ${p}`,
    );
  t.equal(child.exitCode, null, 'still running');
  t.equal(await decide(), '404', 'the old config still decides');
  let text = await metrics();
  t.match(text, /skewgate_config_reloads_total\{[^}]*result="invalid"[^}]*\} [1-9]/);
  t.match(text, /skewgate_config_last_reload_success 0/);
  t.match(text, /skewgate_config_generation 1/);

  // Fields that pass, TLS material that does not: a reload runs the same check as the start, so a
  // front-proxy certificate that is not one is refused before any identity could be stated with it.
  const tlsRefused = (l: Record<string, unknown>): boolean => l['msg'] === 'config reload refused' && l['generation'] === 1;
  const firstRefusals = lines.filter(tlsRefused).length;
  const front = doc([tokenServer(a, pki)]) as { envoy: Record<string, unknown> };
  writeFileSync(
    file,
    stringify({
      ...front,
      envoy: {
        ...front.envoy,
        tls: { ...(front.envoy['tls'] as object), clientCaFile: pki.caFile },
        upstreamClientCert: { certFile: pki.tokenFile, keyFile: pki.tokenFile },
      },
    }),
  );
  child.kill('SIGHUP');
  await eventually('the TLS refusal to be logged', () => lines.filter(tlsRefused).length > firstRefusals);
  const tlsProblems = (lines.filter(tlsRefused).at(-1)?.['problems'] ?? []) as string[];
  t.ok(
    tlsProblems.some((x) => x.startsWith('envoy.upstreamClientCert.certFile:')),
    `a reload is checked as the start is: the front-proxy certificate refused (${tlsProblems.join('; ')})`,
  );
  t.equal(await decide(), '404', 'the old config still decides');

  // A valid, changed file written the way editors do (a new file renamed over the old), no signal.
  const tmp = join(dir, '.skewgate.yaml.swp');
  writeFileSync(tmp, stringify(doc([tokenServer(a, pki), tokenServer(c, pki)])));
  renameSync(tmp, file);
  await eventually('the file change to be applied', () => logged(byMsg('config reloaded')) !== undefined, 10_000);
  t.match(logged(byMsg('config reloaded')), { level: 'info', trigger: 'file changed', generation: 2, changed: ['apiservers'] });
  t.equal(await decide(), 'routed apiserver-c', 'the new apiserver serves it');
  text = await metrics();
  t.match(text, /skewgate_config_generation 2/);
  t.match(text, /skewgate_config_reloads_total\{[^}]*result="applied"[^}]*\} 1/);
  t.match(text, /skewgate_config_last_reload_success 1/);

  // SIGTERM drains; a second signal meanwhile is logged, not obeyed.
  child.kill('SIGTERM');
  await eventually('the drain to begin', () => logged(byMsg('shutting down: no new streams, finishing open ones')) !== undefined);
  child.kill('SIGQUIT');
  await eventually('the second signal to be logged', () => logged(byMsg('already shutting down: the drain goes on')) !== undefined);
  t.equal(await exited, 0, 'exit 0 after the drain');
  t.match(logged(byMsg('already shutting down: the drain goes on')), { signal: 'SIGQUIT' });
  t.ok(logged(byMsg('stopped')), 'stopped cleanly');
  t.notOk(JSON.stringify(lines).includes(pki.token), 'the token never reaches a log line');
});
