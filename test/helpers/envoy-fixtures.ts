// Shared by the envoy-* integration tests: throwaway PKI, HTTPS echo upstreams, a minimal
// ext_proc server, and an HTTPS client. Not a test file itself.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer, request as httpsRequest, type Server } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { parseConfig, type Config } from '../../src/config.js';
import type { JsonObject } from '../../src/envoy/bootstrap.js';

export interface Pki {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  cleanup(): void;
}

function openssl(args: readonly string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, a serving certificate for localhost/127.0.0.1 and a client certificate (openssl CLI). */
export function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'skewgate-pki-'));
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=skewgate-test-ca'], dir);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, subj, ext] of [['server', '/CN=localhost', 'server.ext'], ['client', '/CN=skewgate-envoy', 'client.ext']] as const) {
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', ext], dir);
  }
  return {
    dir,
    caCert: join(dir, 'ca.crt'),
    serverCert: join(dir, 'server.crt'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.crt'),
    clientKey: join(dir, 'client.key'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
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
  const server: Server = createHttpsServer({ cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey) }, (req, res) => {
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
  readonly healthCheckIntervalMs?: number;
}

/** A validated skewgate Config pointing at the throwaway PKI. */
export function testConfig(pki: Pki, o: TestConfigOptions): Config {
  return parseConfig(
    {
      apiservers: o.apiservers.map((s) => ({ name: s.name, url: s.url, caFile: pki.caCert })),
      extproc: { listen: o.extprocListen, failureMode: o.failureMode, messageTimeout: '1s' },
      envoy: {
        listen: { address: '127.0.0.1', port: 6443 },
        admin: { address: '127.0.0.1', port: 0 },
        tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
        ...(o.clientCert === true ? { upstreamClientCert: { certFile: pki.clientCert, keyFile: pki.clientKey } } : {}),
        ...(o.healthCheckIntervalMs === undefined ? {} : { healthCheck: { interval: o.healthCheckIntervalMs, timeout: 1000 } }),
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

/** One HTTPS/1.1 request through Envoy, trusting the test CA. */
export function send(port: number, pki: Pki, method: string, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port, path, method, ca: readFileSync(pki.caCert), servername: 'localhost', headers, agent: false },
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
    const s = tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(pki.caCert), servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () => {
      s.write(`GET /api/v1/namespaces/default/pods/p/exec?command=sh HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: ${protocol}\r\n\r\n`);
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

// A minimal wire-compatible subset of envoy.service.ext_proc.v3 and grpc.health.v1, for a
// stand-in processor (field numbers: shared/reference/envoy-extproc.md).
const TEST_PROTO = `
syntax = "proto3";
package envoy.service.ext_proc.v3;
message HeaderValue { string key = 1; string value = 2; bytes raw_value = 3; }
message HeaderMap { repeated HeaderValue headers = 1; }
message HttpHeaders { HeaderMap headers = 1; bool end_of_stream = 3; }
message ProcessingRequest { oneof request { HttpHeaders request_headers = 2; HttpHeaders response_headers = 3; } }
message HeaderValueOption { HeaderValue header = 1; }
message HeaderMutation { repeated HeaderValueOption set_headers = 1; repeated string remove_headers = 2; }
message CommonResponse { int32 status = 1; HeaderMutation header_mutation = 2; bool clear_route_cache = 5; }
message HeadersResponse { CommonResponse response = 1; }
message HttpStatus { int32 code = 1; }
message ImmediateResponse { HttpStatus status = 1; HeaderMutation headers = 2; bytes body = 3; string details = 5; }
message ProcessingResponse { oneof response { HeadersResponse request_headers = 1; ImmediateResponse immediate_response = 7; } }
service ExternalProcessor { rpc Process(stream ProcessingRequest) returns (stream ProcessingResponse); }
`;
const HEALTH_PROTO = `
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse { enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; } ServingStatus status = 1; }
service Health { rpc Check(HealthCheckRequest) returns (HealthCheckResponse); }
`;

/** What the stand-in processor does with one request's headers. */
export type StubAnswer =
  | { readonly kind: 'continue' }
  | { readonly kind: 'route'; readonly header: string; readonly upstream: string }
  | { readonly kind: 'immediate'; readonly code: number; readonly headers: Record<string, string>; readonly body: string };

export interface StubProcessor {
  /** Header maps received, one per request. */
  readonly seen: Record<string, string>[];
  readonly healthChecks: string[];
  close(): Promise<void>;
}

interface WireHeaders {
  headers?: { headers?: { key: string; value?: string; raw_value?: Buffer }[] };
}

/** A stand-in ext_proc server with grpc.health.v1, listening on `address` (grpc-js form). */
export async function startStubProcessor(address: string, answer: (headers: Record<string, string>) => StubAnswer): Promise<StubProcessor> {
  const dir = mkdtempSync(join(tmpdir(), 'skewgate-proto-'));
  writeFileSync(join(dir, 'extproc.proto'), TEST_PROTO);
  writeFileSync(join(dir, 'health.proto'), HEALTH_PROTO);
  const opts = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true } as const;
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync([join(dir, 'extproc.proto'), join(dir, 'health.proto')], opts)) as unknown as {
    envoy: { service: { ext_proc: { v3: { ExternalProcessor: { service: grpc.ServiceDefinition } } } } };
    grpc: { health: { v1: { Health: { service: grpc.ServiceDefinition } } } };
  };
  rmSync(dir, { recursive: true, force: true });
  const seen: Record<string, string>[] = [];
  const healthChecks: string[] = [];
  const server = new grpc.Server();
  server.addService(pkg.envoy.service.ext_proc.v3.ExternalProcessor.service, {
    Process: (call: grpc.ServerDuplexStream<{ request?: string; request_headers?: WireHeaders }, unknown>) => {
      call.on('data', (msg: { request?: string; request_headers?: WireHeaders }) => {
        if (msg.request !== 'request_headers') return;
        const headers: Record<string, string> = {};
        for (const h of msg.request_headers?.headers?.headers ?? []) headers[h.key] = h.raw_value && h.raw_value.length > 0 ? h.raw_value.toString('utf8') : (h.value ?? '');
        seen.push(headers);
        const a = answer(headers);
        const mutation = (set: Record<string, string>): object => ({
          set_headers: Object.entries(set).map(([key, v]) => ({ header: { key, raw_value: Buffer.from(v) } })),
        });
        if (a.kind === 'continue') call.write({ request_headers: { response: {} } });
        else if (a.kind === 'route') call.write({ request_headers: { response: { header_mutation: mutation({ [a.header]: a.upstream }), clear_route_cache: true } } });
        else call.write({ immediate_response: { status: { code: a.code }, headers: mutation(a.headers), body: Buffer.from(a.body), details: 'stub_immediate' } });
      });
      call.on('end', () => call.end());
      call.on('error', () => undefined);
    },
  });
  server.addService(pkg.grpc.health.v1.Health.service, {
    Check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      healthChecks.push(call.request.service);
      cb(null, { status: 'SERVING' });
    },
  });
  await new Promise<void>((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  return {
    seen,
    healthChecks,
    close: () =>
      new Promise<void>((r) => {
        server.forceShutdown();
        r();
      }),
  };
}
