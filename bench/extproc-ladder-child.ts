// (b) child process: one rung of the ladder that says where a decided request's server CPU goes
// (extproc-ladder.ts). Each rung answers a Process stream as skewgate's server does on the wire,
// with skewgate's own gRPC call (src/extproc/grpc-call.ts), and does one more part of skewgate's
// work than the rung below it (LADDER_RUNG):
//   codec    the request decoded, a fixed reply sent (codec.ts)
//   headers  and Envoy's header list read into a map (core/headers.ts)
//   route    and the request classified and routed (router.ts), a fixed reply
//   routing  and the reply built from the decision (core/responses.ts)
// Below them is bare node:http2 (http2-floor-child.ts); above, skewgate's server as it ships
// (extproc-child.ts: the stream handler's limits and decision log, health, keepalive).
import * as http2 from 'node:http2';
import { EXTPROC_LIMIT_DEFAULTS } from '../src/constants.js';
import { PROCESS_CODEC } from '../src/extproc/codec.js';
import { headerMapToMap } from '../src/extproc/core/headers.js';
import type { ProcessingRequestMsg, ProcessingResponseOut } from '../src/extproc/core/messages.js';
import { continueRequestHeaders, responseFor } from '../src/extproc/core/responses.js';
import { Http2ServerCall } from '../src/extproc/grpc-call.js';
import { createRouter } from '../src/routing/router.js';
import { serveHttp2Child } from './child-ipc.js';
import type { LadderRung } from './protocol.js';
import { syntheticPlane } from './synthetic.js';

const rung = (process.env['LADDER_RUNG'] ?? 'handler') as LadderRung;
const snap = syntheticPlane().snapshot;
const router = createRouter({ current: () => snap }, { staleAfterMs: 180_000, retryAfterSeconds: 1 });
// As extproc-child.ts: the config's log level, lines written to /dev/null.
const FIXED = continueRequestHeaders();

/** The part of the work this rung does for one request. */
function answer(call: Http2ServerCall<ProcessingRequestMsg, ProcessingResponseOut>, msg: ProcessingRequestMsg): void {
  if (rung === 'codec') {
    call.write(FIXED);
    return;
  }
  const headers = headerMapToMap(msg.request_headers?.headers);
  if (rung === 'headers') {
    call.write(FIXED);
    return;
  }
  const result = router.route(headers.get(':method') ?? '', headers.get(':path') ?? '', headers);
  call.write(rung === 'route' ? FIXED : responseFor(result, 1, undefined, true));
}

const server = http2.createServer();
server.on('stream', (stream, headers) => {
  const call = new Http2ServerCall(stream, headers, PROCESS_CODEC, EXTPROC_LIMIT_DEFAULTS.maxMessageBytes, null);
  call.on('data', (msg: ProcessingRequestMsg) => answer(call, msg));
  call.on('end', () => call.end());
});

serveHttp2Child(server, 'info');
