// A config reload in a running skewgate (createSkewgate), over real gRPC streams and fake
// apiservers: an apiserver added by reload() makes a resource only it serves routable, while
// requests keep arriving, and no stream fails or sees a decision of neither config.
import t from 'tap';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { request } from 'undici';
import { createSkewgate } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { FakeCluster, startFake, testPki, tokenServer, type FakeApiServer, type Pki } from '../helpers/discovery-fixtures.js';
import { captureLogs, createExtProcClient, replyHeader, type ProcessExchange } from '../helpers/extproc-client.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

/** Served by BUILTINS_NEW only. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

let pki: Pki;
let oldServer: FakeApiServer;
let newServer: FakeApiServer;
t.before(async () => {
  pki = await testPki();
  const cluster = new FakeCluster();
  oldServer = await startFake(t, { name: 'apiserver-a', pki, cluster, builtins: BUILTINS_OLD });
  newServer = await startFake(t, { name: 'apiserver-c', pki, cluster, builtins: BUILTINS_NEW });
});

function config(servers: FakeApiServer[], extra: { listen?: string; level?: string } = {}): Config {
  return parseConfig(
    {
      apiservers: servers.map((s) => tokenServer(s, pki)),
      discovery: { interval: '60s', watch: false },
      extproc: { listen: extra.listen ?? '127.0.0.1:0', shutdownGrace: '1s' },
      envoy: { tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile } },
      telemetry: { metrics: { prometheus: { listen: '127.0.0.1:0' } } },
      log: { level: extra.level ?? 'info' },
    },
    join(pki.dir, 'skewgate.yaml'),
    pki.dir,
  );
}

/** What the client saw: 404 from skewgate, routed to an apiserver, or anything else. */
function seen(x: ProcessExchange): string {
  if (x.status.code !== grpc.status.CANCELLED || x.response === null) return `stream ${x.status.code} ${x.status.details}`;
  const code = x.response.immediate_response?.status?.code;
  if (code !== undefined) return String(code);
  return `routed ${replyHeader(x.response, 'x-skewgate-upstream')?.raw ?? '(none)'}`;
}

t.test('reload(next) with another apiserver: routed once swapped, never a failed stream', async (t) => {
  const logs = captureLogs('info');
  const app = createSkewgate(config([oldServer]), logs.logger, { env: {} });
  const { port } = await app.start();
  const client = createExtProcClient(`127.0.0.1:${port}`);
  t.teardown(async () => {
    client.close();
    await app.close();
  });
  t.equal(seen(await client.process({ path: SKEWED })), '404', 'one apiserver that lacks it: a proven 404');
  const before = app.discovery;

  // Two clients' worth of requests, back to back, for as long as the reload takes and a little after.
  const answers: string[] = [];
  let reloading = true;
  const load = async (): Promise<void> => {
    while (reloading) answers.push(seen(await client.process({ path: SKEWED })));
    for (let i = 0; i < 5; i++) answers.push(seen(await client.process({ path: SKEWED })));
  };
  const loaders = [load(), load()];
  await eventually('the load under way', () => answers.length > 0, waitMs());
  // Answers recorded between these two counts were decided while the reload ran (its new
  // discovery service's first round: TLS round trips to both apiservers, many stream round trips).
  const atReload = answers.length;
  const r = await app.reload(config([oldServer, newServer]), { trigger: 'test' });
  const atApplied = answers.length;
  reloading = false;
  await Promise.all(loaders);

  t.same(r, { result: 'applied', generation: 2, changed: ['apiservers'] });
  t.not(app.discovery, before, 'a new discovery service');
  t.same(
    answers.filter((a) => a !== '404' && a !== 'routed apiserver-c'),
    [],
    `every stream answered, by the old config or the new one (${answers.length} requests)`,
  );
  const firstRouted = answers.indexOf('routed apiserver-c');
  t.ok(atApplied > atReload, `streams were decided while the new service started (${atApplied - atReload})`);
  t.ok(firstRouted >= atReload, 'by the old config until the reload');
  t.notOk(answers.slice(firstRouted).includes('404'), 'once routed, never a 404 again');
  t.equal(answers.at(-1), 'routed apiserver-c');
  t.match(
    logs.lines.find((l) => l['msg'] === 'config reloaded'),
    { changed: ['apiservers'], generation: 2, unsynced: [], trigger: 'test' },
  );

  const metrics = async (): Promise<string> => (await request(`http://127.0.0.1:${app.telemetry?.prometheusPort()}/metrics`)).body.text();
  let text = await metrics();
  t.match(text, /skewgate_config_generation 2/);
  t.match(text, /skewgate_config_reloads_total\{[^}]*result="applied"[^}]*\} 1/);
  t.match(text, /skewgate_config_last_reload_success 1/);
  t.match(text, /skewgate_apiserver_ready\{[^}]*apiserver="apiserver-c"[^}]*\} 1/, "the gauges read the new service's snapshot");

  // A change that needs a restart: refused whole, the apiservers in the same file included.
  const refused = await app.reload(config([newServer], { listen: '127.0.0.1:1' }));
  t.same(refused, { result: 'restart_required', generation: 2, fields: ['extproc.listen'] });
  t.equal(seen(await client.process({ path: SKEWED })), 'routed apiserver-c');
  t.equal(app.discovery.current().servers.length, 2, 'still both apiservers');
  text = await metrics();
  t.match(text, /skewgate_config_generation 2/);
  t.match(text, /skewgate_config_reloads_total\{[^}]*result="restart_required"[^}]*\} 1/);
  t.match(text, /skewgate_config_last_reload_success 0/);

  // The log level alone: the same discovery service, every logger of the app at the new level.
  const running = app.discovery;
  t.same(await app.reload(config([oldServer, newServer], { level: 'debug' })), {
    result: 'applied',
    generation: 3,
    changed: ['log.level'],
  });
  t.equal(app.discovery, running, 'no new discovery service for a log level');
  const lines = logs.lines.length;
  await client.process({ path: '/healthz' });
  t.ok(
    logs.lines.slice(lines).some((l) => l['level'] === 20 && l['component'] === 'extproc'),
    'a debug line from a child logger made before the reload',
  );
  t.match(await metrics(), /skewgate_config_last_reload_success 1/);
});

t.test('close() during a reload: the reload fails, close completes, no stream is cut by it', async (t) => {
  const app = createSkewgate(config([oldServer]), captureLogs('silent').logger, { env: {} });
  const { port } = await app.start();
  const client = createExtProcClient(`127.0.0.1:${port}`);
  t.teardown(() => client.close());
  const reloading = app.reload(config([oldServer, newServer]));
  const answer = client.process({ path: SKEWED });
  const closed = Promise.all([app.close({ drainMs: 50 }), app.close()]);
  t.match(await reloading, { result: 'failed', error: 'skewgate is shutting down' });
  t.equal(seen(await answer), '404', 'decided by the running config');
  await closed;
  t.match(await app.reload(config([newServer])), { result: 'failed' });
});
