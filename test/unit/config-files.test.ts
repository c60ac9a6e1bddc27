// The config's second stage (src/config-files.ts): a CA file holds certificates, never a key.
import t from 'tap';
import { parseConfig } from '../../src/config.js';
import { caFileProblems, caFiles } from '../../src/config-files.js';

const CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const config = parseConfig(
  {
    apiservers: [
      { name: 'a', url: 'https://10.0.0.1:6443', caFile: '/pki/ca.crt', credentials: { tokenFile: 'token' } },
      { name: 'b', url: 'https://10.0.0.2:6443', caFile: '/pki/ca.key', credentials: { tokenFile: 'token' } },
    ],
    envoy: {
      tls: { certFile: '/tls/gw.crt', keyFile: '/tls/gw.key', clientCaFile: '/pki/empty.pem' },
      upstreamClientCert: { certFile: '/f.crt', keyFile: '/f.key' },
    },
    telemetry: { tracing: { caFile: '/absent.crt' } },
  },
  '/etc/skewgate/skewgate.yaml',
  '/etc/skewgate',
);

t.test('every CA field is checked', async (t) => {
  t.same(
    caFiles(config).map((f) => f.path),
    ['apiservers[0].caFile', 'apiservers[1].caFile', 'envoy.tls.clientCaFile', 'telemetry.tracing.caFile'],
  );
});

t.test('a key, or no certificate, is a problem with its path; an unreadable file is left to where it is used', async (t) => {
  const files: Record<string, string> = {
    '/pki/ca.crt': CERT,
    '/pki/ca.key': '-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n',
    '/pki/empty.pem': 'not pem at all',
  };
  const problems = caFileProblems(config, (f) => files[f] ?? null);
  t.same(
    problems.map((p) => p.path),
    ['apiservers[1].caFile', 'envoy.tls.clientCaFile'],
  );
  t.match(problems[0]?.message, /\/pki\/ca\.key holds a private key/);
  t.match(problems[1]?.message, /holds no PEM certificate/);
  for (const key of ['PRIVATE KEY', 'EC PRIVATE KEY', 'ENCRYPTED PRIVATE KEY'])
    t.equal(
      caFileProblems(config, (f) => (f === '/pki/ca.crt' ? `${CERT}-----BEGIN ${key}-----\nx\n-----END ${key}-----\n` : null))[0]?.path,
      'apiservers[0].caFile',
      `a bundle with a ${key} appended is refused too`,
    );
});
