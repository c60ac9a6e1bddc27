// Rotation without a restart, as `kubeadm certs renew` does it: new certificates written in place
// of the old files. With envoy.xds, Envoy reads its serving certificate, the client CA bundle, the
// front-proxy client certificate and the apiservers' CA through SDS files that skewgate rewrites
// when the files change. Under a steady token and client-certificate load through a real Envoy:
// the gateway's serving certificate, the front-proxy certificate and the client CA bundle are
// replaced in place; each is served by the same Envoy process soon after, and no request fails.
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { Agent, request } from 'undici';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer, FakeCluster, createPki } from '../../harness/fake/index.js';
import { createSkewgate } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy } from '../../src/envoy-runtime/process.js';
import { writeSeedXds } from '../../src/envoy-runtime/xds-disk.js';
import { createLogger } from '../../src/util/log.js';
import { issueCert } from '../../harness/openssl.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/** Requests of each kind (token, certificate) the load must carry through each state of a rotation. */
const MIN_EACH = 5;
/** Discovery (1 s) and Envoy's health checks (1 s, 500 ms) bound the waits; file reloads take no set time. */
const WAIT_MS = waitMs(1000, 1000, 500);
t.setTimeout(8 * WAIT_MS);

const dir = mkdtempSync(join(tmpdir(), 'sg-e2e-rotation-'));
// A PKI of this file's own: its files are rewritten below.
const pki = await createPki(join(dir, 'pki'));
const live = (name: string): string => join(dir, 'live', name);
mkdirSync(join(dir, 'live'));
copyFileSync(pki.gatewayCertFile, live('gateway.crt'));
copyFileSync(pki.gatewayKeyFile, live('gateway.key'));
copyFileSync(pki.frontProxyClientCertFile, live('front-proxy-client.crt'));
copyFileSync(pki.frontProxyClientKeyFile, live('front-proxy-client.key'));
copyFileSync(pki.caFile, live('client-ca.crt'));

// What the renewal writes: the same CAs, new leaves; and a second client CA added to the bundle.
const ca = { certFile: pki.caFile, keyFile: join(pki.dir, 'ca.key') };
const frontProxyCa = { certFile: pki.frontProxyCaFile, keyFile: join(pki.dir, 'front-proxy-ca.key') };
const renewedGateway = await issueCert({
  dir,
  name: 'gateway-renewed',
  subject: '/CN=skewgate-gateway',
  usage: 'server',
  ca,
  sans: ['DNS:localhost', 'IP:127.0.0.1'],
});
const renewedFrontProxy = await issueCert({
  dir,
  name: 'front-proxy-renewed',
  subject: '/CN=front-proxy-client',
  usage: 'client',
  ca: frontProxyCa,
});
const secondCa = await issueCert({ dir, name: 'client-ca-2', subject: '/CN=skewgate-second-client-ca', usage: 'ca' });
const fromSecondCa = await issueCert({ dir, name: 'kim', subject: '/O=dev-viewers/CN=kim', usage: 'client', ca: secondCa });

const cluster = new FakeCluster();
const servers = [
  new FakeApiServer({ name: 'apiserver-old', cluster, pki, builtins: BUILTINS_OLD }),
  new FakeApiServer({ name: 'apiserver-new', cluster, pki, builtins: BUILTINS_NEW }),
];
for (const s of servers) {
  await s.start();
  t.teardown(() => s.close());
}

const config = parseConfig(
  {
    apiservers: servers.map((s) => ({ name: s.name, url: s.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } })),
    discovery: { interval: '1s' },
    extproc: { listen: `unix:${join(dir, 'sg.sock')}`, shutdownGrace: '1s' },
    envoy: {
      listen: { address: '127.0.0.1', port: 0 },
      admin: { address: '127.0.0.1', port: 0 },
      tls: { certFile: live('gateway.crt'), keyFile: live('gateway.key'), clientCaFile: live('client-ca.crt') },
      upstreamClientCert: { certFile: live('front-proxy-client.crt'), keyFile: live('front-proxy-client.key') },
      healthCheck: { interval: '1s', timeout: '500ms' },
      xds: { directory: join(dir, 'xds') },
    },
    log: { level: 'warn' },
  },
  join(dir, 'skewgate.yaml'),
  dir,
);
const written = writeSeedXds(config).written;
const app = createSkewgate(config, createLogger('warn'));
await app.start();
t.teardown(() => app.close());
const envoy = await startEnvoy({ bootstrap: renderBootstrap(config), logFile: join(dir, 'envoy.log') });
t.teardown(() => envoy.stop());
const port = envoy.listenPort ?? 0;
const gateway = `https://127.0.0.1:${port}`;
const envoyPid = envoy.process.pid;

const caPem = readFileSync(pki.caFile);
const tokenAgent = new Agent({ connect: { ca: caPem, servername: 'localhost' } });
const certAgent = (c: { certFile: string; keyFile: string }): Agent =>
  new Agent({ connect: { ca: caPem, servername: 'localhost', cert: readFileSync(c.certFile), key: readFileSync(c.keyFile) } });
const jane = certAgent(pki.clients.limited);
t.teardown(async () => {
  await tokenAgent.close();
  await jane.close();
});

async function status(agent: Agent, token: boolean): Promise<number> {
  try {
    const res = await request(`${gateway}${SKEWED}`, {
      dispatcher: agent,
      headers: token ? { authorization: `Bearer ${pki.token}` } : {},
      // A hang guard: a request not answered by then counts as failed.
      signal: AbortSignal.timeout(15_000),
    });
    await res.body.dump();
    return res.statusCode;
  } catch {
    return 0;
  }
}

/** The serial of the certificate a new TLS connection to the gateway is shown. */
function servedSerial(): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port, servername: 'localhost', ca: caPem }, () => {
      resolve(s.getPeerCertificate().serialNumber.toUpperCase());
      s.end();
    });
    s.once('error', reject);
  });
}

const serialOf = (file: string): string => new X509Certificate(readFileSync(file)).serialNumber.toUpperCase();

await eventually('the gateway to route the skewed API by certificate', async () => (await status(jane, false)) === 200, WAIT_MS);

// A steady load for the whole test: every request must succeed.
const failures: string[] = [];
const started: { token: boolean; at: number }[] = [];
let loading = true;
const load = Promise.all(
  [true, false].map(async (token) => {
    while (loading) {
      started.push({ token, at: performance.now() });
      const s = await status(token ? tokenAgent : jane, token);
      if (s !== 200) failures.push(`${token ? 'token' : 'cert'} ${s}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }),
);
/**
 * Waits until MIN_EACH token and MIN_EACH certificate requests sent since `from` have been answered
 * (each loop sends one at a time: one more started means the one before it ended), so that every
 * state a rotation goes through carries load, however slow the machine. None may fail (checked last).
 */
async function loadSince(what: string, from: number): Promise<void> {
  const since = (token: boolean): number => started.filter((s) => s.token === token && s.at > from).length;
  await eventually(`${MIN_EACH} requests of each kind ${what}`, () => since(true) > MIN_EACH && since(false) > MIN_EACH, WAIT_MS);
}

await t.test("envoy-config's seed: one SDS file per certificate and CA bundle", async (t) => {
  const sds = written.filter((w) => w.startsWith('sds/'));
  t.equal(sds.length, 4, `serving, client CA, front-proxy, apiserver CA: ${sds.join(', ')}`);
  for (const f of sds) {
    const text = readFileSync(join(dir, 'xds', f), 'utf8');
    t.notMatch(text, /PRIVATE KEY/, `${f}: file names only, no key material`);
    t.match(text, /"watched_directory"/, `${f}: with the folder that makes Envoy read them again`);
  }
});

await t.test('the serving certificate, renewed in place (cert first, then key)', async (t) => {
  const before = await servedSerial();
  t.equal(before, serialOf(pki.gatewayCertFile));
  writeFileSync(live('gateway.crt'), readFileSync(renewedGateway.certFile));
  // kubeadm writes the pair one file after the other: for a moment they do not match, and the
  // load goes on through that moment.
  await loadSince('while the pair on disk does not match', performance.now());
  writeFileSync(live('gateway.key'), readFileSync(renewedGateway.keyFile));
  const ms = await eventually(
    'Envoy to serve the renewed certificate',
    async () => (await servedSerial()) === serialOf(renewedGateway.certFile),
    WAIT_MS,
  );
  t.comment(`renewed serving certificate served ${ms} ms after the key was written`);
  t.pass('served without a restart');
  await loadSince('on the renewed certificate', performance.now());
});

await t.test('the front-proxy client certificate, renewed in place', async (t) => {
  writeFileSync(live('front-proxy-client.crt'), readFileSync(renewedFrontProxy.certFile));
  writeFileSync(live('front-proxy-client.key'), readFileSync(renewedFrontProxy.keyFile));
  const want = serialOf(renewedFrontProxy.certFile);
  const ms = await eventually(
    "Envoy's /certs to list the renewed front-proxy certificate",
    async () => {
      const certs = await (await request(`${envoy.adminUrl}/certs`)).body.text();
      return certs.toUpperCase().includes(want);
    },
    WAIT_MS,
  );
  t.comment(`renewed front-proxy certificate loaded ${ms} ms after it was written`);
  t.equal(await status(jane, false), 200, 'certificates are still re-stated with it');
  await loadSince('with the renewed front-proxy certificate', performance.now());
});

await t.test('the client CA bundle, a second CA added in place', async (t) => {
  const kim = certAgent(fromSecondCa);
  t.teardown(() => kim.close());
  t.not(await status(kim, false), 200, 'before: a certificate of the second CA is refused');
  writeFileSync(live('client-ca.crt'), Buffer.concat([readFileSync(pki.caFile), readFileSync(secondCa.certFile)]));
  const ms = await eventually(
    'a certificate of the second CA to be accepted and stated',
    async () => {
      const k = certAgent(fromSecondCa);
      try {
        return (await status(k, false)) === 200;
      } finally {
        await k.close();
      }
    },
    WAIT_MS,
  );
  t.comment(`second client CA accepted ${ms} ms after the bundle was written`);
  await loadSince('with the new bundle', performance.now());
});

await t.test('one Envoy process throughout, and not one failed request', async (t) => {
  loading = false;
  await load;
  t.equal(envoy.process.pid, envoyPid);
  t.equal(envoy.process.exitCode, null, 'Envoy still running');
  // Each rotation's states carried at least MIN_EACH of each kind (waited for above).
  t.comment(`${started.length} requests during the rotations`);
  t.same(failures, [], 'no request failed');
});
