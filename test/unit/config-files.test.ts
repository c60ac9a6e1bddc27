// The config's second stage (src/config/core/files.ts): a CA file holds certificates, never a key.
import t from 'tap';
import { parseConfig } from '../../src/config/load.js';
import { caFileProblems, caFiles, looseFileFields } from '../../src/config/core/files.js';

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

t.test('looseFileFields: what a document with invalid fields names, resolved as parseConfig would', async (t) => {
  const doc = {
    apiservers: [{ name: 'Bad Name', caFile: 'pki/ca.crt' }, { caFile: 7 }, 'junk'],
    discovery: { interval: 'often' },
    envoy: { tls: { certFile: '/tls/gw.crt', clientCaFile: 'client-ca.crt' }, upstreamClientCert: { certFile: 'f.crt', keyFile: 'f.key' } },
    extproc: { peer: { clientCaFile: '/peer/ca.crt' } },
    telemetry: { tracing: { caFile: '' } },
  };
  const f = looseFileFields(doc, '/etc/skewgate');
  t.same(
    caFiles(f),
    [
      { path: 'apiservers[0].caFile', file: '/etc/skewgate/pki/ca.crt' },
      { path: 'envoy.tls.clientCaFile', file: '/etc/skewgate/client-ca.crt' },
      { path: 'extproc.peer.clientCaFile', file: '/peer/ca.crt' },
    ],
    'strings only, in the same order and with the same paths as a valid config',
  );
  t.same(f.envoy.upstreamClientCert, { certFile: '/etc/skewgate/f.crt', keyFile: '/etc/skewgate/f.key' });
  t.same(
    f.envoy.tls,
    { certFile: '/tls/gw.crt', keyFile: undefined, clientCaFile: '/etc/skewgate/client-ca.crt' },
    'a half pair stays half',
  );
  t.same(caFiles(looseFileFields('not a map', '/x')), [], 'not a document: nothing named');
  t.same(caFiles(looseFileFields(null, '/x')), []);
});
