import t from 'tap';
import type { ProcessingRequestMsg, ProcessingResponseOut } from '../../src/extproc/core/messages.js';
import { loadProtos } from '../../src/extproc/proto.js';
import {
  continueRequestHeaders,
  emptyResponseFor,
  internalErrorResponse,
  responseFor,
  routeTo,
  setHeader,
  tooManyStreamsResponse,
} from '../../src/extproc/core/responses.js';
import { decodeProcessingRequest, encodeProcessingResponse } from '../../src/extproc/codec.js';
import { REQUEST_PHASES } from '../../src/extproc/core/messages.js';
import type { Decision } from '../../src/routing/decision.js';
import { requestHeadersMessage, resourceInfo, resultOf, statedIdentity } from '../helpers/extproc-client.js';

const processMethod = loadProtos().extProc['Process'];
if (!processMethod) throw new Error('Process method missing');
const viaProtoLoader = (res: ProcessingResponseOut): unknown => processMethod.responseDeserialize(processMethod.responseSerialize(res));
const viaCodec = (res: ProcessingResponseOut): unknown => processMethod.responseDeserialize(encodeProcessingResponse(res));

// A node's certificate: several groups, a non-ASCII extra value (multi-byte lengths on the wire).
const stated = statedIdentity({
  user: 'system:node:n1',
  uid: '',
  groups: ['system:nodes', 'système'],
  extra: [['zone', ['é', 'b']]],
  fingerprint: 'cd',
});
const decisions: Decision[] = [
  { outcome: 'default', reason: 'served_by_all', candidates: ['a', 'b'] },
  { outcome: 'passthrough', reason: 'non_resource', candidates: [] },
  { outcome: 'routed', reason: 'served_by_subset', candidates: ['kas-new'], upstream: 'kas-new' },
  { outcome: 'not_found', reason: 'resource_not_served', candidates: [] },
  { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['a', 'b'] },
  { outcome: 'rejected', reason: 'malformed_path', candidates: [], problem: 'invalid percent-encoding' },
];

t.test('every reply skewgate builds decodes to what proto-loader encodes', async (t) => {
  const replies: [string, ProcessingResponseOut][] = [
    ['continue, nothing set', continueRequestHeaders()],
    ['continue, bounded with trace', continueRequestHeaders([['traceparent', '00-a-b-01']], undefined, true)],
    ['continue, stated identity', continueRequestHeaders([], stated, false)],
    [
      'routed',
      routeTo(
        'kas-ü',
        [
          ['traceparent', '00-a-b-01'],
          ['tracestate', 'k=v'],
        ],
        stated,
        true,
      ),
    ],
    ['internal error', internalErrorResponse()],
    ['too many streams', tooManyStreamsResponse(3, 1000)],
    ['status 0, empty body and details', { immediate_response: { status: { code: 0 }, body: Buffer.alloc(0), details: '' } }],
    [
      'append flags',
      {
        request_headers: {
          response: {
            header_mutation: {
              set_headers: [
                { ...setHeader('x', 'y'), append: { value: true } },
                { ...setHeader('z', ''), append: { value: false } },
              ],
            },
          },
        },
      },
    ],
    ['trailers mutation', { request_trailers: { header_mutation: { remove_headers: ['a', 'b'] } } }],
    ['a long header (multi-byte lengths)', routeTo('x'.repeat(70_000))],
  ];
  for (const phase of REQUEST_PHASES) {
    replies.push([`empty ${phase}`, emptyResponseFor(phase)]);
  }
  for (const d of decisions) {
    for (const bounded of [false, true])
      replies.push([`${d.outcome} bounded=${bounded}`, responseFor(resultOf(d, resourceInfo(), stated), 5, [], bounded)]);
  }
  for (const [name, res] of replies) t.same(viaCodec(res), viaProtoLoader(res), name);
  t.throws(() => encodeProcessingResponse({} as ProcessingResponseOut), /without a response member/);
});

/** The fields the stream handler reads, as proto-loader decodes them. */
function readFields(m: ProcessingRequestMsg): unknown {
  const hs = (h: ProcessingRequestMsg['request_headers']): unknown =>
    h && {
      end_of_stream: h.end_of_stream,
      headers:
        h.headers && h.headers.headers?.map((v) => ({ key: v.key, value: v.value, raw: Buffer.from(v.raw_value ?? []).toString('hex') })),
    };
  return {
    request: m.request,
    observability_mode: m.observability_mode,
    request_headers: m.request === 'request_headers' ? hs(m.request_headers) : undefined,
    response_headers: m.request === 'response_headers' ? hs(m.response_headers) : undefined,
  };
}

t.test('requests decode to the fields proto-loader gives', async (t) => {
  const headers = requestHeadersMessage({
    method: 'PATCH',
    path: '/api/v1/namespaces/ä/pods/p',
    headers: { cookie: ['a=1', 'b=2'], authorization: 'Bearer x'.repeat(200), empty: '' },
  });
  const requests: [string, Record<string, unknown>][] = [
    ['request_headers, raw_value', headers],
    ['request_headers, value (an old sender)', requestHeadersMessage({ path: '/apis', encoding: 'value' })],
    ['observability mode', { ...headers, observability_mode: true }],
    ['no headers field', { request_headers: { end_of_stream: true } }],
    ['response_headers', { response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] } } }],
    ['request_body', { request_body: { body: Buffer.from('{}'), end_of_stream: true } }],
    ['request_trailers', { request_trailers: { trailers: { headers: [{ key: 'x', raw_value: Buffer.from('y') }] } } }],
    [
      'fields skewgate ignores',
      {
        ...headers,
        metadata_context: { filter_metadata: { a: { fields: { b: { number_value: 1.5 } } } } },
        protocol_config: { request_body_mode: 'BUFFERED' },
      },
    ],
    ['no phase at all', {}],
  ];
  for (const [name, req] of requests) {
    const bytes = processMethod.requestSerialize(req);
    t.same(readFields(decodeProcessingRequest(bytes)), readFields(processMethod.requestDeserialize(bytes) as ProcessingRequestMsg), name);
  }
  // A oneof decoded twice: the last member on the wire wins.
  const two = Buffer.concat([
    processMethod.requestSerialize(headers),
    processMethod.requestSerialize({ request_body: { body: Buffer.from('x') } }),
  ]);
  t.equal(decodeProcessingRequest(two).request, 'request_body');
  t.equal(decodeProcessingRequest(two).request, (processMethod.requestDeserialize(two) as ProcessingRequestMsg).request);
});

t.test('a truncated or malformed request throws (grpc-js answers INTERNAL)', async (t) => {
  const bytes = processMethod.requestSerialize(requestHeadersMessage({ path: '/api/v1/pods' }));
  for (const cut of [1, 2, 5, bytes.length - 1]) t.throws(() => decodeProcessingRequest(bytes.subarray(0, cut)), `cut at ${cut}`);
  t.throws(() => decodeProcessingRequest(Buffer.from([(12 << 3) | 3])), 'a group opened and never closed');
  // An over-long varint tag: protobufjs reads it as a field it skips; what it gives names no phase,
  // which the stream answers as a message it cannot use (never a routing decision).
  const long = (() => {
    try {
      return decodeProcessingRequest(Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]));
    } catch {
      return null;
    }
  })();
  t.ok(long === null || long.request === undefined, 'an over-long varint: refused, or no phase read');
});

t.test('a reply without trace headers is built once per identity, bound and upstream, and encoded once', async (t) => {
  const other = statedIdentity({ user: 'system:node:n2', uid: '', groups: ['system:nodes'], extra: [], fingerprint: 'ef' });
  const rows: [string, () => ProcessingResponseOut, () => ProcessingResponseOut, boolean][] = [
    ['continue, no identity', () => continueRequestHeaders(), () => continueRequestHeaders([], undefined, true), true],
    ['continue, a stated certificate', () => continueRequestHeaders([], stated, true), () => continueRequestHeaders([], other, true), true],
    ['routed', () => routeTo('kas-1', [], stated), () => routeTo('kas-2', [], stated), true],
    // A trace context differs from request to request: built every time.
    [
      'with trace headers',
      () => continueRequestHeaders([['traceparent', 'x']]),
      () => continueRequestHeaders([['traceparent', 'x']]),
      false,
    ],
  ];
  for (const [name, make, differ, sharedOne] of rows) {
    const a = make();
    t.equal(make() === a, sharedOne, `${name}: ${sharedOne ? 'the same reply object again' : 'a new reply each time'}`);
    t.equal(Object.isFrozen(a), sharedOne, `${name}: ${sharedOne ? 'frozen (never mutated)' : 'not frozen'}`);
    if (sharedOne) t.not(differ(), a, `${name}: another bound, identity or upstream is another reply`);
    t.equal(encodeProcessingResponse(make()).equals(encodeProcessingResponse(a)), true, `${name}: the same bytes`);
    // The bytes kept for a shared reply are what a fresh encoding gives.
    t.same(viaCodec(a), viaProtoLoader({ ...a }), `${name}: what proto-loader reads from a fresh encoding`);
  }
  const reply = continueRequestHeaders([], stated);
  t.equal(encodeProcessingResponse(reply), encodeProcessingResponse(reply), 'a shared reply is encoded once (the same bytes object)');
});
