// The ext_proc server's connections (src/extproc/server.ts): the peer listener's mutual TLS, with
// its certificate re-read in place (a renewed certificate is served to new connections without a
// restart), and the server's own keepalive pings on every connection.
import t from 'tap';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as http2Connect } from 'node:http2';
import { X509Certificate } from 'node:crypto';
import { issueCert } from '../../harness/openssl.js';
import { createExtProcServer } from '../../src/extproc/server.js';
import { captureLogs, resultOf, stubRouter } from '../helpers/extproc-client.js';
import { eventually } from '../helpers/http.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-peer-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const ca = await issueCert({ dir, name: 'peer-ca', subject: '/CN=peer-ca', usage: 'ca' });
const serving = (name: string): ReturnType<typeof issueCert> =>
  issueCert({ dir, name, subject: '/CN=skewgate-peer', usage: 'server', ca, sans: ['DNS:skewgate-peer', 'IP:127.0.0.1'] });
const first = await serving('serving-1');
const renewed = await serving('serving-2');
const client = await issueCert({ dir, name: 'envoy', subject: '/CN=envoy', usage: 'client', ca });
// The files the listener is configured with; the renewal is copied over them.
const certFile = join(dir, 'peer.crt');
const keyFile = join(dir, 'peer.key');
copyFileSync(first.certFile, certFile);
copyFileSync(first.keyFile, keyFile);

const router = stubRouter({ '/api/v1/pods': resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }) });
const logs = captureLogs('info');
const server = createExtProcServer({ router, logger: logs.logger, keepalive: { intervalMs: 100, timeoutMs: 1000 } });
const { port, peerPort } = await server.start('127.0.0.1:0', {
  listen: '127.0.0.1:0',
  certFile,
  keyFile,
  clientCaFile: ca.certFile,
  refreshMs: 100,
});
t.teardown(() => server.close(500));

const fingerprint = (file: string): string => new X509Certificate(readFileSync(file)).fingerprint256;
/**
 * The certificate the peer listener presents to a new connection, once the server has taken the
 * connection (its HTTP/2 SETTINGS arrive only after it has checked the client's certificate), or
 * "refused" when it closes the connection instead.
 */
function presented(withClientCert: boolean): Promise<string> {
  return new Promise((resolve) => {
    const session = http2Connect(`https://127.0.0.1:${peerPort as number}`, {
      servername: 'skewgate-peer',
      ca: readFileSync(ca.certFile),
      ...(withClientCert ? { cert: readFileSync(client.certFile), key: readFileSync(client.keyFile) } : {}),
    });
    session.once('remoteSettings', () => {
      const socket = session.socket as unknown as { getPeerX509Certificate(): X509Certificate | undefined };
      resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? 'none');
      session.destroy();
    });
    session.on('error', () => undefined);
    // A refused connection is torn down without a 'close' event on the session (Node 20): watch for it.
    const watch = setInterval(() => {
      if (!session.destroyed) return;
      clearInterval(watch);
      resolve('refused');
    }, 10);
    session.once('remoteSettings', () => clearInterval(watch));
  });
}

t.test('the peer listener: mutual TLS, and a renewed certificate served without a restart', async (t) => {
  t.equal(await presented(true), fingerprint(first.certFile), 'a client with a certificate from the CA: the first serving certificate');
  t.equal(await presented(false), 'refused', 'a client without one is refused');
  copyFileSync(renewed.keyFile, keyFile);
  copyFileSync(renewed.certFile, certFile);
  await eventually('the renewed certificate served', async () => (await presented(true)) === fingerprint(renewed.certFile), 10_000, 50);
  t.pass('a new connection gets the renewed certificate');
  t.ok(
    logs.lines.some((l) => String(l['msg']).includes('re-read')),
    'and a log line says so',
  );
});

t.test('the server pings every connection (keepalive), and the connection stays up', async (t) => {
  const session = http2Connect(`http://127.0.0.1:${port as number}`);
  t.teardown(() => session.destroy());
  let pings = 0;
  session.on('ping', () => pings++);
  await eventually('three pings from the server', () => pings >= 3, 10_000, 20);
  t.ok(pings >= 3, `${pings} pings received`);
  t.equal(session.destroyed, false, 'answered (node answers pings itself): the connection is kept');
});
