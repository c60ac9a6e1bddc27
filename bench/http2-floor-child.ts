// (b) child process: the transport floor. Bare node:http2 answering each Process stream the way
// skewgate's server does on the wire (response headers and one framed reply when the request
// arrives, grpc-status trailers when the client half-closes), with no gRPC library, no decoding and
// no routing: what one exchange costs before grpc-js or skewgate do anything.
import * as http2 from 'node:http2';
import { continueRequestHeaders } from '../src/extproc/core/responses.js';
import { encodeProcessingResponse } from '../src/extproc/codec.js';
import { serveHttp2Child } from './child-ipc.js';

const body = encodeProcessingResponse(continueRequestHeaders());
const frame = Buffer.alloc(5 + body.length);
frame.writeUInt32BE(body.length, 1);
body.copy(frame, 5);

const server = http2.createServer();
server.on('stream', (stream) => {
  let answered = false;
  stream.on('data', () => {
    if (answered) return;
    answered = true;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true });
    stream.write(frame);
  });
  stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.on('end', () => stream.end());
  stream.on('error', () => undefined);
});

serveHttp2Child(server, 'none');
