// What skewgate's own gRPC server (src/extproc/server.ts, grpc-call.ts on node:http2) answers
// beyond the Process and health calls the other extproc tests make with grpc-js's client: a method
// it does not serve, a request that is not gRPC, a client's deadline, a message cut across frames.
import t from 'tap';
import { constants as h2, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { createExtProcServer } from '../../src/extproc/server.js';
import { frameMessage, GrpcStatus } from '../../src/extproc/core/grpc-wire.js';
import { captureLogs, rawProcess, rawSession, requestHeadersMessage, resultOf, stubRouter } from '../helpers/extproc-client.js';
import { loadProtos } from '../../src/extproc/proto.js';

const router = stubRouter({ '/api/v1/pods': resultOf({ outcome: 'default', reason: 'served_by_all', candidates: [] }) });
const logs = captureLogs('warn');
const server = createExtProcServer({ router, logger: logs.logger });
const { port } = await server.start('127.0.0.1:0');
const session = rawSession(port as number);
t.teardown(async () => {
  session.destroy();
  await server.close(500);
});

/** The response headers and trailers of a stream, once it is over. */
function outcome(
  stream: ClientHttp2Stream,
): Promise<{ headers: IncomingHttpHeaders; trailers: IncomingHttpHeaders; data: Buffer; rstCode: number }> {
  return new Promise((resolve) => {
    let headers: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    const data: Buffer[] = [];
    stream.on('response', (h) => (headers = h));
    stream.on('trailers', (h) => (trailers = h));
    stream.on('data', (c: Buffer) => data.push(c));
    stream.on('close', () => resolve({ headers, trailers, data: Buffer.concat(data), rstCode: stream.rstCode ?? 0 }));
    stream.resume();
  });
}
const grpcStatusOf = (o: { headers: IncomingHttpHeaders; trailers: IncomingHttpHeaders }): string | undefined =>
  String(o.trailers['grpc-status'] ?? o.headers['grpc-status']);

t.test('a method the server does not have: UNIMPLEMENTED, as a trailers-only response', async (t) => {
  const s = session.request({ ':method': 'POST', ':path': '/no.such.Service/Call', 'content-type': 'application/grpc', te: 'trailers' });
  s.end();
  const o = await outcome(s);
  t.equal(o.headers[':status'], 200);
  t.equal(o.headers['grpc-status'], String(GrpcStatus.UNIMPLEMENTED), 'grpc-status in the headers (trailers-only)');
  t.match(String(o.headers['grpc-message']), /no\.such\.Service\/Call/);
});

t.test('a request that is not gRPC: 415', async (t) => {
  const s = session.request({
    ':method': 'POST',
    ':path': '/envoy.service.ext_proc.v3.ExternalProcessor/Process',
    'content-type': 'application/json',
  });
  s.end('{}');
  t.equal((await outcome(s)).headers[':status'], 415);
  const get = session.request({
    ':method': 'GET',
    ':path': '/envoy.service.ext_proc.v3.ExternalProcessor/Process',
    'content-type': 'application/grpc',
  });
  get.end();
  t.equal((await outcome(get)).headers[':status'], 415, 'nor is a GET');
});

t.test("the client's deadline (grpc-timeout) ends a call that sends nothing, before the first-message timeout", async (t) => {
  const s = session.request({
    ':method': 'POST',
    ':path': '/envoy.service.ext_proc.v3.ExternalProcessor/Process',
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': '50m',
  });
  const o = await outcome(s);
  t.equal(grpcStatusOf(o), String(GrpcStatus.DEADLINE_EXCEEDED));
  t.match(
    String(o.headers['grpc-message'] ?? o.trailers['grpc-message']),
    /grpc-timeout/,
    'ended by the deadline, not the first-message timeout',
  );
  t.equal(o.rstCode, h2.NGHTTP2_CANCEL, 'and the stream reset, so that the client stops sending');
});

t.test('a request message cut across DATA frames and written byte by byte is routed whole', async (t) => {
  const process = loadProtos().extProc['Process'];
  if (!process) throw new Error('Process');
  const body = process.requestSerialize(requestHeadersMessage({ method: 'GET', path: '/api/v1/pods' })) as Buffer;
  const frame = frameMessage(body);
  const s = rawProcess(session);
  const done = outcome(s);
  for (const b of frame) await new Promise<void>((resolve) => s.write(Buffer.from([b]), () => resolve()));
  s.end();
  const o = await done;
  t.equal(grpcStatusOf(o), String(GrpcStatus.OK));
  const reply = process.responseDeserialize(o.data.subarray(5)) as { request_headers?: { response?: { status?: string } } };
  t.equal(o.data.readUInt32BE(1), o.data.length - 5, 'one reply, framed');
  t.equal(reply.request_headers?.response?.status, 'CONTINUE', 'answered as a whole request');
});
