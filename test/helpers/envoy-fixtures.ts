// Shared by the envoy-* integration tests: the fake PKI, HTTPS echo upstreams, the REAL skewgate
// ext_proc server behind a stub router, and an HTTPS client. Not a test file itself.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, request as httpsRequest, type Server } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import type { JsonObject } from '../../src/envoy/bootstrap.js';
import { packageRoot } from '../../src/util/package-root.js';
import { createExtProcServer } from '../../src/extproc/server.js';
import { createPki, type Pki } from '../../harness/fake/pki.js';
import type { RequestRouter } from '../../src/routing/router.js';
import { captureLogs, type LogCapture } from './extproc-client.js';

export type { Pki };

/** The PKI shared with the other integration tests (createPki reuses a complete set, locks while generating). */
export function sharedPki(): Promise<Pki> {
  return createPki(join(packageRoot(), '.cache/fake-pki'));
}

/** A scratch folder (unix sockets), removed by the returned cleanup. */
export function scratchDir(): { readonly dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'skewgate-envoy-test-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const pemCache = new Map<string, Buffer>();
function pem(file: string): Buffer {
  let b = pemCache.get(file);
  if (b === undefined) {
    b = readFileSync(file);
    pemCache.set(file, b);
  }
  return b;
}

export interface SeenRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

export interface EchoServer {
  readonly name: string;
  readonly port: number;
  readonly url: string;
  readonly requests: SeenRequest[];
  close(): Promise<void>;
}

/** An HTTPS "apiserver": answers its name, records what arrived, echoes upgraded streams. */
export async function startEcho(name: string, pki: Pki): Promise<EchoServer> {
  const requests: SeenRequest[] = [];
  const server: Server = createHttpsServer({ cert: pem(pki.serverCertFile), key: pem(pki.serverKeyFile) }, (req, res) => {
    if (req.url !== '/readyz') requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'text/plain');
      res.end(name);
    });
  });
  server.on('upgrade', (req, socket) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${String(req.headers.upgrade)}\r\n\r\n`);
    socket.on('data', (b: Buffer) => socket.write(b));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    name,
    port,
    url: `https://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** A loopback port nothing listens on (bound, then released). */
export async function unusedPort(): Promise<number> {
  const srv = createNetServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

export interface TestConfigOptions {
  readonly apiservers: readonly { name: string; url: string }[];
  readonly extprocListen: string;
  readonly failureMode: 'open' | 'closed';
  readonly clientCert?: boolean;
  /**
   * Client certificates verified against the fake CA (envoy.tls.clientCaFile) and re-stated with the
   * fake front-proxy client certificate (which then replaces clientCert's admin certificate).
   */
  readonly clientCa?: boolean;
  readonly healthCheckIntervalMs?: number;
  /** Filesystem xDS in this folder (envoy.xds.directory). */
  readonly xdsDir?: string;
  /** Other nodes' skewgates behind the local one (envoy.extprocPeers, the fake PKI's files). */
  readonly extprocPeers?: readonly string[];
  /** The gateway health listener on this port (envoy.health). */
  readonly healthPort?: number;
}

/** A validated skewgate Config over the fake PKI: apiservers use its server cert, Envoy its gateway cert. */
export function testConfig(pki: Pki, o: TestConfigOptions): Config {
  return parseConfig(
    {
      apiservers: o.apiservers.map((s) => ({ name: s.name, url: s.url, caFile: pki.caFile, credentials: { tokenFile: 'token' } })),
      extproc: { listen: o.extprocListen, failureMode: o.failureMode, messageTimeout: '1s' },
      envoy: {
        listen: { address: '127.0.0.1', port: 6443 },
        admin: { address: '127.0.0.1', port: 0 },
        tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile, ...(o.clientCa === true ? { clientCaFile: pki.caFile } : {}) },
        ...(o.clientCa === true
          ? { upstreamClientCert: { certFile: pki.frontProxyClientCertFile, keyFile: pki.frontProxyClientKeyFile } }
          : o.clientCert === true
            ? { upstreamClientCert: { certFile: pki.clientCertFile, keyFile: pki.clientKeyFile } }
            : {}),
        ...(o.healthCheckIntervalMs === undefined ? {} : { healthCheck: { interval: `${o.healthCheckIntervalMs}ms`, timeout: '1s' } }),
        ...(o.xdsDir === undefined ? {} : { xds: { directory: o.xdsDir } }),
        ...(o.extprocPeers === undefined
          ? {}
          : {
              extprocPeers: {
                endpoints: o.extprocPeers,
                certFile: pki.clientCertFile,
                keyFile: pki.clientKeyFile,
                caFile: pki.caFile,
                serverName: 'localhost',
              },
            }),
        ...(o.healthPort === undefined ? {} : { health: { address: '127.0.0.1', port: o.healthPort } }),
      },
    },
    join(pki.dir, 'skewgate.yaml'),
    pki.dir,
  );
}

/** The rendered bootstrap with the gateway listener on an ephemeral port (tests bind port 0). */
export function onEphemeralPort(bootstrap: JsonObject): JsonObject {
  const copy = structuredClone(bootstrap) as { static_resources: { listeners: { address: { socket_address: { port_value: number } } }[] } };
  for (const l of copy.static_resources.listeners) l.address.socket_address.port_value = 0;
  return copy as unknown as JsonObject;
}

export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** One HTTPS/1.1 request through Envoy, trusting the test CA; with `cert`, presenting that client certificate. */
export function send(
  port: number,
  pki: Pki,
  method: string,
  path: string,
  headers: Record<string, string | string[]> = {},
  cert?: { readonly certFile: string; readonly keyFile: string },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        ca: pem(pki.caFile),
        servername: 'localhost',
        headers,
        agent: false,
        ...(cert === undefined ? {} : { cert: pem(cert.certFile), key: pem(cert.keyFile) }),
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(method === 'GET' || method === 'HEAD' ? undefined : '{}');
  });
}

/** Raw HTTP/1.1 Upgrade through Envoy; resolves with the response head and the echoed payload. */
export function upgrade(port: number, pki: Pki, protocol: string, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca: pem(pki.caFile), servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () => {
      s.write(
        `GET /api/v1/namespaces/default/pods/p/exec?command=sh HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: ${protocol}\r\n\r\n`,
      );
    });
    let buf = '';
    let sent = false;
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`upgrade timed out; got ${JSON.stringify(buf)}`));
    }, 5000);
    s.setEncoding('utf8');
    s.on('data', (c: string) => {
      buf += c;
      if (!sent && buf.includes('\r\n\r\n')) {
        sent = true;
        s.write(payload);
      }
      if (sent && buf.endsWith(payload)) {
        clearTimeout(timer);
        s.destroy();
        resolve(buf);
      }
    });
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export interface LiveProcessor {
  /** Service names of the health checks received, in order. */
  readonly healthChecks: string[];
  readonly logs: LogCapture;
  close(): Promise<void>;
}

/** The real skewgate ext_proc server (real protos, real responses) on `listen`, asking `router`. */
export async function startProcessor(listen: string, router: RequestRouter): Promise<LiveProcessor> {
  const healthChecks: string[] = [];
  const logs = captureLogs('info');
  const server = createExtProcServer({ router, logger: logs.logger, onHealthCheck: (service) => healthChecks.push(service) });
  await server.start(listen);
  return { healthChecks, logs, close: () => server.close(200) };
}

/** One of Envoy's counters by its exact name; a name Envoy does not have is an error, not a zero. */
export async function envoyCounter(adminUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/stats?filter=${encodeURIComponent(`^${name.replaceAll('.', '\\.')}$`)}`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}: `));
  if (line === undefined) throw new Error(`Envoy has no stat ${name}`);
  return Number(line.slice(name.length + 2));
}

/** A watch through the gateway; `ended` settles when the gateway or the apiserver ends it. */
export function openWatch(
  port: number,
  pki: Pki,
  path: string,
  headers: Readonly<Record<string, string>>,
): Promise<{ status: number; ended: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port, path, method: 'GET', ca: readFileSync(pki.caFile), servername: 'localhost', headers, agent: false },
      (res) => {
        res.resume();
        const ended = new Promise<void>((done) => {
          res.once('end', done);
          res.once('close', done);
          res.once('error', () => done());
        });
        resolve({ status: res.statusCode ?? 0, ended });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
