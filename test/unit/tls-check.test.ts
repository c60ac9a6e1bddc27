// The front-proxy certificate check (skewgate validate / serve), on certificates made with openssl.
import t from 'tap';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { ConfigError } from '../../src/config/core/problems.js';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import { packageRoot } from '../../src/util/package-root.js';
import { checkConfig } from '../../src/config/check.js';
import { checkFrontProxyTls, checkServingTls, frontProxyProblems, servingCertProblems, tlsProblems } from '../../src/config/tls.js';
import { issueCert, type KeyPairFiles } from '../../harness/openssl.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-tls-check-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const clientCa = await issueCert({ dir, name: 'client-ca', subject: '/CN=client-ca', usage: 'ca' });
const otherClientCa = await issueCert({ dir, name: 'other-client-ca', subject: '/CN=other-client-ca', usage: 'ca' });
const frontProxyCa = await issueCert({ dir, name: 'front-proxy-ca', subject: '/CN=front-proxy-ca', usage: 'ca' });
const intermediate = await issueCert({ dir, name: 'intermediate', subject: '/CN=intermediate-under-client-ca', usage: 'ca', ca: clientCa });
const certs = {
  good: await issueCert({ dir, name: 'good', subject: '/CN=front-proxy-client', usage: 'client', ca: frontProxyCa }),
  fromClientCa: await issueCert({ dir, name: 'from-client-ca', subject: '/CN=front-proxy-client', usage: 'client', ca: clientCa }),
  fromSecondCa: await issueCert({ dir, name: 'from-second-ca', subject: '/CN=front-proxy-client', usage: 'client', ca: otherClientCa }),
  serverOnly: await issueCert({ dir, name: 'server-only', subject: '/CN=front-proxy-client', usage: 'server', ca: frontProxyCa }),
  serverOnlyFromClientCa: await issueCert({
    dir,
    name: 'server-only-client-ca',
    subject: '/CN=front-proxy-client',
    usage: 'server',
    ca: clientCa,
  }),
  viaIntermediate: await issueCert({ dir, name: 'via-intermediate', subject: '/CN=front-proxy-client', usage: 'client', ca: intermediate }),
  serving: await issueCert({
    dir,
    name: 'serving',
    subject: '/CN=skewgate-gateway',
    usage: 'server',
    ca: frontProxyCa,
    sans: ['DNS:cp.example.internal', 'IP:127.0.0.1'],
  }),
  servingNoSan: await issueCert({ dir, name: 'serving-no-san', subject: '/CN=cp.example.internal', usage: 'server', ca: frontProxyCa }),
};
// Envoy presents the whole certificate_chain file: leaf, then the intermediate under the client CA.
const chainFile = join(dir, 'via-intermediate-chain.crt');
writeFileSync(chainFile, readFileSync(certs.viaIntermediate.certFile, 'utf8') + readFileSync(intermediate.certFile, 'utf8'));
const bundle = join(dir, 'client-bundle.crt');
writeFileSync(bundle, readFileSync(clientCa.certFile, 'utf8') + readFileSync(otherClientCa.certFile, 'utf8'));
const notPem = join(dir, 'not-pem.txt');
writeFileSync(notPem, 'hello\n');
const brokenPem = join(dir, 'broken.crt');
writeFileSync(brokenPem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');

function config(clientCaFile: string | undefined, front: KeyPairFiles | undefined, serving: KeyPairFiles = certs.serving): Config {
  return parseConfig(
    {
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', credentials: { tokenFile: 'token' } }],
      envoy: {
        tls: { certFile: serving.certFile, keyFile: serving.keyFile, ...(clientCaFile === undefined ? {} : { clientCaFile }) },
        ...(front === undefined ? {} : { upstreamClientCert: front }),
      },
    },
    join(dir, 'skewgate.yaml'),
    dir,
  );
}

const CERT = 'envoy.upstreamClientCert.certFile';
const KEY = 'envoy.upstreamClientCert.keyFile';
const CA = 'envoy.tls.clientCaFile';

const table: { name: string; ca: string; front: KeyPairFiles; want: { path: string; message: RegExp }[] }[] = [
  { name: 'a certificate from a separate front-proxy CA is fine', ca: bundle, front: certs.good, want: [] },
  {
    name: 'issued by the client CA: would authenticate as the front proxy',
    ca: clientCa.certFile,
    front: certs.fromClientCa,
    want: [
      {
        path: CERT,
        message:
          /issued by "CN=client-ca", a CA in envoy\.tls\.clientCaFile.*would authenticate as the front proxy's own user "front-proxy-client" instead of failing/,
      },
    ],
  },
  {
    name: 'issued by the second CA of the bundle',
    ca: bundle,
    front: certs.fromSecondCa,
    want: [{ path: CERT, message: /issued by "CN=other-client-ca"/ }],
  },
  {
    name: 'an intermediate presented with it chains to the client CA',
    ca: bundle,
    front: { certFile: chainFile, keyFile: certs.viaIntermediate.keyFile },
    want: [{ path: CERT, message: /the intermediate "CN=intermediate-under-client-ca" presented with it is issued by "CN=client-ca"/ }],
  },
  {
    name: 'serverAuth only: no clientAuth usage',
    ca: bundle,
    front: certs.serverOnly,
    want: [{ path: CERT, message: /lacks the clientAuth extended key usage \(it has 1\.3\.6\.1\.5\.5\.7\.3\.1\)/ }],
  },
  {
    name: 'every problem of one certificate is listed',
    ca: bundle,
    front: certs.serverOnlyFromClientCa,
    want: [
      { path: CERT, message: /issued by "CN=client-ca"/ },
      { path: CERT, message: /clientAuth/ },
    ],
  },
  {
    name: 'an unreadable client CA bundle',
    ca: join(dir, 'missing.crt'),
    front: certs.good,
    want: [{ path: CA, message: /cannot read .*missing\.crt: ENOENT/ }],
  },
  { name: 'a client CA bundle without PEM', ca: notPem, front: certs.good, want: [{ path: CA, message: /holds no PEM certificate/ }] },
  { name: 'a client CA bundle that does not parse', ca: brokenPem, front: certs.good, want: [{ path: CA, message: /does not parse/ }] },
  {
    name: 'unreadable certificate and key files',
    ca: bundle,
    front: { certFile: join(dir, 'nope.crt'), keyFile: join(dir, 'nope.key') },
    want: [
      { path: CERT, message: /cannot read/ },
      { path: KEY, message: /cannot read/ },
    ],
  },
  {
    name: 'a key that is not PEM',
    ca: bundle,
    front: { certFile: certs.good.certFile, keyFile: notPem },
    want: [{ path: KEY, message: /not a PEM private key/ }],
  },
  {
    name: 'the key of another certificate',
    ca: bundle,
    front: { certFile: certs.good.certFile, keyFile: certs.serverOnly.keyFile },
    want: [{ path: KEY, message: /is not the private key of/ }],
  },
];

for (const c of table) {
  t.test(c.name, async (t) => {
    const got = await checkFrontProxyTls(config(c.ca, c.front));
    t.equal(got.length, c.want.length, JSON.stringify(got, null, 1));
    t.match(got, c.want);
  });
}

t.test('validity is judged at the given time', async (t) => {
  const leaf = new X509Certificate(readFileSync(certs.good.certFile));
  const material = { clientCas: [new X509Certificate(readFileSync(clientCa.certFile))], chain: [leaf] };
  t.same(frontProxyProblems(material, Date.now()), []);
  t.match(frontProxyProblems(material, Date.parse(leaf.validTo) + 1000), [{ path: CERT, message: /expired on \d{4}-/ }]);
  t.match(frontProxyProblems(material, Date.parse(leaf.validFrom) - 1000), [{ path: CERT, message: /not valid before/ }]);
  const expired = await checkFrontProxyTls(config(bundle, certs.fromClientCa), Date.parse(leaf.validTo) + 86_400_000 * 400);
  t.equal(expired.length, 2, 'issued by the client CA and expired: both listed');
  t.same(frontProxyProblems({ clientCas: [], chain: [] }, 0), [{ path: CERT, message: 'holds no certificate' }]);
});

t.test('nothing to check without clientCaFile', async (t) => {
  t.same(await checkFrontProxyTls(config(undefined, { certFile: join(dir, 'nope.crt'), keyFile: join(dir, 'nope.key') })), []);
  t.same(await checkFrontProxyTls(config(undefined, undefined)), []);
});

t.test("the gateway's serving certificate", async (t) => {
  t.same(await checkServingTls(config(undefined, undefined)), [], 'serverAuth, SANs, valid, its key');
  t.match(
    await checkServingTls(config(undefined, undefined, certs.good)),
    [
      { path: 'envoy.tls.certFile', message: /lacks the serverAuth extended key usage/ },
      { path: 'envoy.tls.certFile', message: /no subjectAltName/ },
    ],
    'a client certificate without SANs',
  );
  t.match(await checkServingTls(config(undefined, undefined, certs.servingNoSan)), [
    { path: 'envoy.tls.certFile', message: /no subjectAltName: kubectl and client-go/ },
  ]);
  t.match(await checkServingTls(config(undefined, undefined, { certFile: certs.serving.certFile, keyFile: certs.good.keyFile })), [
    { path: 'envoy.tls.keyFile', message: /is not the private key of envoy\.tls\.certFile/ },
  ]);
  t.match(await checkServingTls(config(undefined, undefined, { certFile: join(dir, 'nope.crt'), keyFile: 'x' })), [
    { path: 'envoy.tls.certFile', message: /cannot read/ },
  ]);
  const leaf = new X509Certificate(readFileSync(certs.serving.certFile));
  t.match(servingCertProblems([leaf], Date.parse(leaf.validTo) + 1000), [{ message: /expired on/ }]);
  t.match(servingCertProblems([], 0), [{ message: 'holds no certificate' }]);
});

t.test('serve checks only public files: the front-proxy certificate against the client CA, no key', async (t) => {
  const noKeys = config(
    bundle,
    { certFile: certs.good.certFile, keyFile: join(dir, 'not-here.key') },
    { certFile: certs.serving.certFile, keyFile: join(dir, 'not-here.key') },
  );
  t.same(await tlsProblems(noKeys, 'serve'), [], "skewgate may run where Envoy's keys are not");
  t.same(await tlsProblems(noKeys, 'envoy-config'), [], 'envoy-config renders where the files may not be yet');
  t.match(await tlsProblems(noKeys, 'validate'), [{ path: 'envoy.tls.keyFile' }, { path: KEY }], 'validate reads them');
  t.match(await tlsProblems(config(bundle, certs.fromClientCa), 'serve'), [{ path: CERT, message: /issued by/ }]);
});

t.test('checkConfig for validate: a ConfigError listing every problem of the files at once (exit code 2)', async (t) => {
  const write = (name: string, c: Config): string => {
    const file = join(dir, name);
    writeFileSync(
      file,
      stringify({
        apiservers: [
          {
            name: 'a',
            url: 'https://127.0.0.1:6443',
            caFile: c.envoy.tls.clientCaFile ?? clientCa.certFile,
            credentials: { tokenFile: 'token' },
          },
        ],
        envoy: { tls: c.envoy.tls, upstreamClientCert: c.envoy.upstreamClientCert },
      }),
    );
    return file;
  };
  await t.resolves(checkConfig(write('good.yaml', config(bundle, certs.good)), 'validate'));
  const missing = write('missing.yaml', config(join(dir, 'missing.crt'), certs.serverOnly));
  const err = await checkConfig(missing, 'validate').then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(err instanceof ConfigError);
  t.equal((err as ConfigError).code, 'SKEWGATE_ERR_CONFIG');
  t.same(
    (err as ConfigError).problems.map((p) => p.path),
    [CA, CERT],
  );
  t.match((err as ConfigError).message, /missing\.yaml: 2 problems/);
  // A bad field, a CA file that holds a key, and a front-proxy certificate a client could also
  // present: one list, though the fields are not valid.
  const both = join(dir, 'both.yaml');
  writeFileSync(
    both,
    stringify({
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', caFile: certs.serving.keyFile, credentials: { tokenFile: 'token' } }],
      envoy: { tls: { ...config(bundle, certs.fromClientCa).envoy.tls }, upstreamClientCert: certs.fromClientCa },
      discovery: { interval: 'often' },
    }),
  );
  const mixed = await checkConfig(both, 'serve').then(
    () => [],
    (e: unknown) => (e instanceof ConfigError ? e.problems.map((p) => p.path) : e),
  );
  t.same(mixed, ['discovery.interval', 'apiservers[0].caFile', CERT], 'the fields, the CA files and the TLS material in one ConfigError');
});

t.test('skewgate validate and serve refuse an unsafe front-proxy certificate with exit code 2, before any discovery', async (t) => {
  const file = join(dir, 'unsafe.yaml');
  writeFileSync(
    file,
    stringify({
      // Nothing listens there: the check must come first.
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:1', caFile: clientCa.certFile, credentials: { tokenFile: 'token' } }],
      envoy: {
        tls: { certFile: certs.serving.certFile, keyFile: certs.serving.keyFile, clientCaFile: bundle },
        upstreamClientCert: certs.serverOnlyFromClientCa,
      },
    }),
  );
  const cli = join(packageRoot(), 'dist/src/cli/main.js');
  for (const command of ['validate', 'serve']) {
    const res = await promisify(execFile)(process.execPath, [cli, command, '--config', file], { timeout: 20_000 }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code?: number; stderr?: string }) => ({ code: e.code, stderr: e.stderr ?? '' }),
    );
    t.equal(res.code, 2, `${command}: exit code 2`);
    t.match(res.stderr, /2 problems:/, command);
    t.match(res.stderr, /envoy\.upstreamClientCert\.certFile: the front-proxy client certificate is issued by "CN=client-ca"/, command);
    t.match(res.stderr, /clientAuth/, command);
  }
});

t.test("the Runtime Extension's pair: serve and validate read it (skewgate serves it itself); every problem named", async (t) => {
  const { checkRuntimeExtensionTls } = await import('../../src/config/tls.js');
  const fields = (certFile: string, keyFile: string) => ({
    ...config(undefined, undefined),
    gate: { runtimeExtension: { certFile, keyFile } },
  });
  t.same(await checkRuntimeExtensionTls(fields(certs.serving.certFile, certs.serving.keyFile)), [], 'a good pair');
  t.match(await checkRuntimeExtensionTls(fields(join(dir, 'absent.crt'), certs.serving.keyFile)), [
    { path: 'gate.runtimeExtension.certFile' },
  ]);
  t.match(await checkRuntimeExtensionTls(fields(certs.serving.certFile, certs.good.keyFile)), [
    { path: 'gate.runtimeExtension.keyFile', message: /is not the private key of gate\.runtimeExtension\.certFile/ },
  ]);
  t.match(
    await checkRuntimeExtensionTls(fields(certs.serving.certFile, certs.serving.keyFile), Date.parse('2200-01-01')),
    [{ path: 'gate.runtimeExtension.certFile', message: /expired on/ }],
    'expiry judged at the given time',
  );
  const serve = await tlsProblems(fields(notPem, certs.serving.keyFile), 'serve');
  t.ok(
    serve.some((p) => p.path === 'gate.runtimeExtension.certFile'),
    'serve checks it',
  );
});
