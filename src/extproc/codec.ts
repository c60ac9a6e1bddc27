// The codec of the methods skewgate serves (Process, and grpc.health.v1's): protobufjs's own,
// compiled from the .proto files at first use, on plain objects both ways. Not proto-loader's
// path, whose toObject/fromObject conversions cost as much again (bench/wire-codec-bench.ts: the
// codec alone is as fast as the hand-written one skewgate had, so the library does it). A request
// reads as proto-loader gives it (keepCase, `request` names the phase); a response is written from
// the shapes of messages.ts.
import { join } from 'node:path';
import protobuf from 'protobufjs';
import type { ProcessingRequestMsg, ProcessingResponseOut } from './core/messages.js';
import { EXTPROC_PROTO_FILE, findProtoRoot, HEALTH_PROTO_FILE } from './proto.js';
import type { HealthResponse } from './health.js';
import type { CallCodec } from './grpc-call.js';

interface ProcessTypes {
  readonly request: protobuf.Type;
  readonly response: protobuf.Type;
  readonly healthRequest: protobuf.Type;
  readonly healthResponse: protobuf.Type;
}

let types: ProcessTypes | undefined;

function processTypes(): ProcessTypes {
  if (types !== undefined) return types;
  const dir = findProtoRoot();
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(dir, target);
  root.loadSync([EXTPROC_PROTO_FILE, HEALTH_PROTO_FILE], { keepCase: true });
  types = {
    request: root.lookupType('envoy.service.ext_proc.v3.ProcessingRequest'),
    response: root.lookupType('envoy.service.ext_proc.v3.ProcessingResponse'),
    healthRequest: root.lookupType('grpc.health.v1.HealthCheckRequest'),
    healthResponse: root.lookupType('grpc.health.v1.HealthCheckResponse'),
  };
  return types;
}

/** A ProcessingRequest; a truncated or malformed one throws (grpc-js answers INTERNAL). */
export function decodeProcessingRequest(buf: Buffer): ProcessingRequestMsg {
  return processTypes().request.decode(buf) as unknown as ProcessingRequestMsg;
}

/**
 * A ProcessingResponse; one without a response member is a defect of skewgate's and throws. A
 * frozen one is a reply handed out again (core/responses.ts): encoded once, the bytes kept with it
 * (each frame copies them: grpc-wire.ts's frameMessage).
 */
export function encodeProcessingResponse(msg: ProcessingResponseOut): Buffer {
  const frozen = Object.isFrozen(msg);
  if (frozen) {
    const known = encodedReplies.get(msg);
    if (known !== undefined) return known;
  }
  if (!hasMember(msg)) throw new Error('a ProcessingResponse without a response member');
  const bytes = processTypes()
    .response.encode(msg as unknown as protobuf.Message)
    .finish();
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (frozen) encodedReplies.set(msg, buf);
  return buf;
}

const encodedReplies = new WeakMap<ProcessingResponseOut, Buffer>();

/** Whether the object has an own enumerable key, without building the list of keys (once per reply). */
function hasMember(msg: object): boolean {
  for (const key in msg) if (Object.hasOwn(msg, key)) return true;
  return false;
}

/** A grpc.health.v1 HealthCheckRequest's service name ("" when unset). */
export function decodeHealthRequest(buf: Buffer): string {
  const msg = processTypes().healthRequest.decode(buf) as unknown as { service?: string };
  return msg.service ?? '';
}

export function encodeHealthResponse(res: HealthResponse): Uint8Array {
  const t = processTypes().healthResponse;
  return t.encode(t.fromObject(res)).finish();
}

/** The served methods' codecs, as a call (grpc-call.ts) takes them. */
export const PROCESS_CODEC: CallCodec<ProcessingRequestMsg, ProcessingResponseOut> = {
  decode: decodeProcessingRequest,
  encode: encodeProcessingResponse,
};
export const HEALTH_CODEC: CallCodec<string, HealthResponse> = { decode: decodeHealthRequest, encode: encodeHealthResponse };
