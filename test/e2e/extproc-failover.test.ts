// No single skewgate between a client certificate and its apiserver: a real Envoy whose ext_proc
// cluster holds this node's skewgate first and another node's skewgate behind it (priority 1,
// mutual TLS), both `skewgate serve` processes. Under a mixed token and client-certificate load on
// an API only one fake apiserver serves, the local skewgate is SIGKILLed: no request may fail, not
// even one in flight at the kill (its stream is retried on the peer), and the gateway's health
// listener stays 200. With the peer
// killed too, /ready turns 503 and certificates get Envoy's 401 backstop. The peer listener
// refuses a client without a certificate from its CA.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { Agent, request } from 'undici';
import { stringify } from 'yaml';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { freePort } from '../../harness/lab/net.js';
import { parseConfig } from '../../src/config/load.js';
import { EXTPROC_SERVICE_NAME, HEALTH_PATH, REASON_HEADER } from '../../src/constants.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy } from '../../src/envoy-runtime/process.js';
import { loadProtos } from '../../src/extproc/proto.js';
import { packageRoot } from '../../src/util/package-root.js';
import { issueCert } from '../../harness/openssl.js';
import { FakeCluster, startFake, testPki, tokenServer } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

const CLI = join(packageRoot(), 'dist/src/cli/main.js');
/** Served by BUILTINS_NEW only: through a skewgate always 200; balanced without one, half 404. */
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/**
 * The killed skewgate is ejected at its first refused connection for base_ejection_time (5 s),
 * ended at the outlier detection's next 1 s tick (src/envoy/clusters.ts, PEER_EJECTION): after
 * that only its failing health checks hold it out. The load goes on past it.
 */
const EJECTION_MS = 5000 + 1000;
/** Answered requests of each kind (token, certificate) the load needs before the kill and after the ejection. */
const MIN_BEFORE = 5;
const MIN_AFTER_EJECTION = 25;
const WORKERS = 4;
/** A request or probe not answered by then counts as failed: a hang guard, not a latency bound. */
const HANG_GUARD_MS = 15_000;
/** Health checks (1 s, 500 ms timeout, 2 failures to mark) and the ejection bound each wait. */
const WAIT_MS = waitMs(EJECTION_MS, 2 * 1000 + 500);

t.setTimeout(4 * WAIT_MS);

const pki = await testPki();
const cluster = new FakeCluster();
const oldServer = await startFake(t, { name: 'apiserver-old', pki, cluster, builtins: BUILTINS_OLD });
const newServer = await startFake(t, { name: 'apiserver-new', pki, cluster, builtins: BUILTINS_NEW });
const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-failover-'));

// The peer channel's own CA: a skewgate's serving certificate and Envoy's client certificate.
const peerCa = await issueCert({ dir, name: 'peer-ca', subject: '/CN=skewgate-peer-ca', usage: 'ca' });
const peerServing = await issueCert({
  dir,
  name: 'skewgate-peer',
  subject: '/CN=skewgate-peer',
  usage: 'server',
  ca: peerCa,
  sans: ['DNS:skewgate-peer', 'IP:127.0.0.1'],
});
const envoyClient = await issueCert({ dir, name: 'envoy-peer-client', subject: '/CN=skewgate-envoy', usage: 'client', ca: peerCa });

const peerPort = await freePort();
const healthPort = await freePort();
const envoySection = {
  listen: { address: '127.0.0.1', port: 0 },
  admin: { address: '127.0.0.1', port: 0 },
  tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile, clientCaFile: pki.caFile },
  upstreamClientCert: { certFile: pki.frontProxyClientCertFile, keyFile: pki.frontProxyClientKeyFile },
  healthCheck: { interval: '1s', timeout: '500ms', unhealthyThreshold: 2, healthyThreshold: 1 },
  extprocPeers: {
    endpoints: [`127.0.0.1:${peerPort}`],
    certFile: envoyClient.certFile,
    keyFile: envoyClient.keyFile,
    caFile: peerCa.certFile,
    serverName: 'skewgate-peer',
  },
  health: { address: '127.0.0.1', port: healthPort },
};
const configOf = (name: string, extra: object): object => ({
  apiservers: [tokenServer(oldServer, pki), tokenServer(newServer, pki)],
  discovery: { interval: '1s' },
  extproc: { listen: `unix:${join(dir, `${name}.sock`)}`, shutdownGrace: '1s', ...extra },
  envoy: envoySection,
  log: { level: 'info' },
});
const localDoc = configOf('local', {});
const peerDoc = configOf('peer', {
  peer: { listen: `127.0.0.1:${peerPort}`, certFile: peerServing.certFile, keyFile: peerServing.keyFile, clientCaFile: peerCa.certFile },
});

function serve(name: string, doc: object): { child: ChildProcess; started: Promise<void> } {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(doc));
  const child = spawn(process.execPath, [CLI, 'serve', '--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let text = '';
  const started = new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('"skewgate serving ext_proc"')) resolve();
    });
    child.once('exit', (code, signal) => reject(new Error(`${name} exited (${code ?? signal}) before serving:\n${text.slice(-2000)}`)));
  });
  return { child, started };
}

const local = serve('local', localDoc);
const peer = serve('peer', peerDoc);
await Promise.all([local.started, peer.started]);

// Node 1's Envoy, rendered from node 1's config.
const envoy = await startEnvoy({
  bootstrap: renderBootstrap(parseConfig(localDoc, join(dir, 'local.yaml'), dir)),
  logFile: join(dir, 'envoy.log'),
});
t.teardown(() => envoy.stop());
const gateway = `https://127.0.0.1:${envoy.listenPort ?? 0}`;
const ca = readFileSync(pki.caFile);
const tokenAgent = new Agent({ connect: { ca, servername: 'localhost' }, pipelining: 0 });
const certAgent = new Agent({
  connect: {
    ca,
    servername: 'localhost',
    cert: readFileSync(pki.clients.limited.certFile),
    key: readFileSync(pki.clients.limited.keyFile),
  },
  pipelining: 0,
});
t.teardown(async () => {
  await tokenAgent.close();
  await certAgent.close();
});

async function ready(): Promise<number> {
  const res = await request(`http://127.0.0.1:${healthPort}${HEALTH_PATH}`, { signal: AbortSignal.timeout(HANG_GUARD_MS) });
  await res.body.dump();
  return res.statusCode;
}

interface Sent {
  readonly kind: 'token' | 'cert';
  readonly start: number;
  readonly end: number;
  readonly status: number;
  readonly reason: string | undefined;
}

async function once(kind: 'token' | 'cert'): Promise<Sent> {
  const start = performance.now();
  try {
    const res = await request(`${gateway}${SKEWED}`, {
      dispatcher: kind === 'token' ? tokenAgent : certAgent,
      headers: kind === 'token' ? { authorization: `Bearer ${pki.token}` } : {},
      signal: AbortSignal.timeout(HANG_GUARD_MS),
    });
    await res.body.dump();
    const reason = res.headers[REASON_HEADER];
    return { kind, start, end: performance.now(), status: res.statusCode, reason: typeof reason === 'string' ? reason : undefined };
  } catch {
    return { kind, start, end: performance.now(), status: 0, reason: undefined };
  }
}

await t.test('both skewgates serving: every request decided, /ready 200', async (t) => {
  await eventually('the gateway to route the skewed API', async () => (await once('cert')).status === 200, WAIT_MS);
  for (const kind of ['token', 'cert'] as const) t.equal((await once(kind)).status, 200, `${kind}: 200`);
  t.equal(await ready(), 200, `GET ${HEALTH_PATH} → 200`);
});

await t.test('the peer listener: mutual TLS, a client without a certificate from its CA refused', async (t) => {
  const { HealthClient } = loadProtos();
  const check = (creds: grpc.ChannelCredentials): Promise<string> =>
    new Promise((resolve) => {
      const c = new HealthClient(`127.0.0.1:${peerPort}`, creds, { 'grpc.ssl_target_name_override': 'skewgate-peer' });
      const call = c['Check'] as (
        req: object,
        o: grpc.CallOptions,
        cb: (err: grpc.ServiceError | null, res?: { status: string }) => void,
      ) => void;
      call.call(c, { service: EXTPROC_SERVICE_NAME }, { deadline: Date.now() + 3_000 }, (err, res) => {
        c.close();
        resolve(err ? `error ${grpc.status[err.code]}` : (res?.status ?? 'none'));
      });
    });
  const caPem = readFileSync(peerCa.certFile);
  t.equal(
    await check(grpc.credentials.createSsl(caPem, readFileSync(envoyClient.keyFile), readFileSync(envoyClient.certFile))),
    'SERVING',
    'with the peer client certificate: SERVING',
  );
  t.match(await check(grpc.credentials.createSsl(caPem)), /^error /, 'without a client certificate: refused');
  t.match(
    await check(grpc.credentials.createSsl(caPem, readFileSync(pki.clients.limited.keyFile), readFileSync(pki.clients.limited.certFile))),
    /^error /,
    'with a certificate from another CA: refused',
  );
});

await t.test(`SIGKILL of the local skewgate under load: nothing fails`, async (t) => {
  const sent: Sent[] = [];
  // The kill takes effect between the signal and the exit the parent sees: a request is in flight
  // at the kill when it started before the exit and ended after the signal.
  let killAt = Number.POSITIVE_INFINITY;
  let deadAt = Number.POSITIVE_INFINITY;
  const count = (kind: Sent['kind'], from: number): number => sent.filter((s) => s.kind === kind && s.start > from).length;
  const atLeast = (n: number, from: number): boolean => count('token', from) >= n && count('cert', from) >= n;
  let loading = true;
  const readies: number[] = [];
  const prober = (async () => {
    while (loading) {
      readies.push(await ready().catch(() => 0));
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const workers = Array.from({ length: WORKERS }, async (_, w) => {
    let i = w;
    while (loading) sent.push(await once(i++ % 2 === 0 ? 'token' : 'cert'));
  });
  await eventually(`${MIN_BEFORE} requests of each kind before the kill`, () => atLeast(MIN_BEFORE, 0), WAIT_MS);
  const dead = new Promise<void>((resolve) =>
    local.child.once('exit', () => {
      deadAt = performance.now();
      resolve();
    }),
  );
  killAt = performance.now();
  local.child.kill('SIGKILL');
  await dead;
  // Past the ejection, by requests sent after it: however slow the machine, the load covers it.
  await eventually(
    `${MIN_AFTER_EJECTION} requests of each kind after the ejection ended`,
    () => atLeast(MIN_AFTER_EJECTION, deadAt + EJECTION_MS),
    WAIT_MS,
  ).catch(() => undefined);
  loading = false;
  await Promise.all([prober, ...workers]);
  const failed = sent.filter((s) => s.status !== 200);
  const atKill = (s: Sent): boolean => s.start <= deadAt && s.end >= killAt;
  const inFlight = sent.filter(atKill);
  const afterEjection = sent.filter((s) => s.start > deadAt + EJECTION_MS);
  t.comment(
    `sent ${sent.length} (${sent.filter((s) => s.kind === 'cert').length} by certificate), ${sent.filter((s) => s.start > deadAt).length} after the kill; ` +
      `in flight at the kill ${inFlight.length} (signal to exit ${(deadAt - killAt).toFixed(1)} ms); failed ${failed.length} (${failed.map((s) => `${s.kind} ${s.status}${s.reason ? ` ${s.reason}` : ''}`).join(', ') || 'none'})`,
  );
  t.ok(
    atLeast(MIN_AFTER_EJECTION, deadAt + EJECTION_MS),
    `${afterEjection.length} requests after the ejection ended (at least ${MIN_AFTER_EJECTION} of each kind)`,
  );
  // WORKERS loops send back to back: one is always in flight.
  t.ok(inFlight.length > 0, `${inFlight.length} requests in flight at the kill`);
  // A stream cut before skewgate answered is retried on the peer (retry_on reset): not even the
  // requests in flight at the kill fail open.
  t.same(
    failed.map(
      (s) =>
        `${s.kind} ${s.status} ${s.reason ?? ''} at +${(s.start - killAt).toFixed(0)} ms${atKill(s) ? ' (in flight at the kill)' : ''}`,
    ),
    [],
    'no request failed, not even one in flight at the kill',
  );
  t.ok(readies.length > 0, `${readies.length} probes of ${HEALTH_PATH}`);
  t.same(
    readies.filter((r) => r !== 200),
    [],
    `${HEALTH_PATH} stayed 200 (${readies.length} probes): a peer skewgate can state certificates`,
  );
});

await t.test('no skewgate anywhere: /ready 503, certificates get the 401 backstop, tokens still balanced', async (t) => {
  peer.child.kill('SIGKILL');
  const ms = await eventually(`${HEALTH_PATH} to turn 503`, async () => (await ready()) === 503, WAIT_MS);
  t.comment(`${HEALTH_PATH} 503 ${ms} ms after the peer was killed`);
  const cert = await once('cert');
  t.equal(cert.status, 401, 'a client certificate: 401');
  t.equal(cert.reason, 'client_identity_unstated', 'the backstop says why');
  const token = await once('token');
  t.ok(token.status === 200 || token.status === 404, `a token: balanced (fail open), ${token.status}`);
});
