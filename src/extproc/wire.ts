// The Process method's protobuf wire format, by hand, for the fields skewgate reads and writes. Pure.
// proto-loader decodes into protobufjs messages and then copies them into plain objects
// (toObject), and on the way out copies plain objects into messages (fromObject) before encoding:
// about a tenth of the server's JavaScript time per ext_proc exchange (bench (b) profile). These
// read and write the same shapes (messages.ts) directly. Field numbers: proto/envoy/... .proto.
import type {
  CommonResponseOut,
  HeaderMutationOut,
  HeaderValueMsg,
  HeaderValueOptionOut,
  HttpHeadersMsg,
  ImmediateResponseOut,
  ProcessingRequestMsg,
  ProcessingResponseOut,
  RequestPhase,
} from './messages.js';

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

/** ProcessingRequest's `request` oneof, in field order: fields 2 to 7. */
export const REQUEST_PHASES: readonly RequestPhase[] = [
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_trailers',
  'response_trailers',
];
const FIRST_PHASE_FIELD = 2;
const OBSERVABILITY_MODE = 10;

const EMPTY = Buffer.alloc(0);

/** A cursor over one message's bytes; every read checks the bounds (a short message throws). */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.buf[this.pos++] as number;
      // Beyond 2^53 precision is lost, which only matters for fields skewgate skips or reads as bool.
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw new Error('varint longer than 10 bytes');
  }

  /** The [start, end) of a length-delimited field's payload; the cursor moves past it. */
  span(): [number, number] {
    const len = this.varint();
    const start = this.pos;
    if (len > this.end - start) throw new Error('length-delimited field past the end of its message');
    this.pos = start + len;
    return [start, this.pos];
  }

  skip(wireType: number): void {
    if (wireType === VARINT) this.varint();
    else if (wireType === LEN) this.span();
    else if (wireType === FIXED64) this.advance(8);
    else if (wireType === FIXED32) this.advance(4);
    else throw new Error(`unsupported wire type ${wireType}`);
  }

  private advance(n: number): void {
    if (n > this.end - this.pos) throw new Error('fixed-width field past the end of its message');
    this.pos += n;
  }
}

function decodeHeaderValue(r: Reader, start: number, end: number): HeaderValueMsg {
  const m = new Reader(r.buf, start, end);
  let key = '';
  let value = '';
  let raw: Buffer = EMPTY;
  while (m.pos < end) {
    const tag = m.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (wt === LEN && field >= 1 && field <= 3) {
      const [s, e] = m.span();
      if (field === 1) key = m.buf.toString('utf8', s, e);
      else if (field === 2) value = m.buf.toString('utf8', s, e);
      else raw = m.buf.subarray(s, e);
    } else {
      m.skip(wt);
    }
  }
  return { key, value, raw_value: raw };
}

/** HttpHeaders: headers (1, a HeaderMap of repeated HeaderValue at 1), end_of_stream (3). */
function decodeHttpHeaders(r: Reader, start: number, end: number): HttpHeadersMsg {
  const m = new Reader(r.buf, start, end);
  let headers: HeaderValueMsg[] | undefined;
  let endOfStream = false;
  while (m.pos < end) {
    const tag = m.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 1 && wt === LEN) {
      const [ms, me] = m.span();
      const map = new Reader(m.buf, ms, me);
      headers ??= [];
      while (map.pos < me) {
        const t = map.varint();
        if (t === ((1 << 3) | LEN)) {
          const [hs, he] = map.span();
          headers.push(decodeHeaderValue(map, hs, he));
        } else {
          map.skip(t & 7);
        }
      }
    } else if (field === 3 && wt === VARINT) {
      endOfStream = m.varint() !== 0;
    } else {
      m.skip(wt);
    }
  }
  return { headers: headers === undefined ? null : { headers }, end_of_stream: endOfStream };
}

/**
 * A ProcessingRequest in the shape proto-loader gives (keepCase, oneofs): `request` names the
 * phase; request_headers/response_headers are decoded, the body and trailer phases only named.
 */
export function decodeProcessingRequest(buf: Buffer): ProcessingRequestMsg {
  const r = new Reader(buf, 0, buf.length);
  let request: RequestPhase | undefined;
  let headers: HttpHeadersMsg | null = null;
  let observability = false;
  while (r.pos < buf.length) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    const phase = REQUEST_PHASES[field - FIRST_PHASE_FIELD];
    if (phase !== undefined && wt === LEN) {
      // A oneof: the last member on the wire wins, as in every protobuf decoder.
      const [s, e] = r.span();
      request = phase;
      headers = phase === 'request_headers' || phase === 'response_headers' ? decodeHttpHeaders(r, s, e) : null;
    } else if (field === OBSERVABILITY_MODE && wt === VARINT) {
      observability = r.varint() !== 0;
    } else {
      r.skip(wt);
    }
  }
  const msg: { -readonly [K in keyof ProcessingRequestMsg]: ProcessingRequestMsg[K] } = { observability_mode: observability };
  if (request !== undefined) {
    msg.request = request;
    if (request === 'request_headers') msg.request_headers = headers;
    else if (request === 'response_headers') msg.response_headers = headers;
  }
  return msg;
}

// ---- encoding: sizes first, then one buffer written front to back.

function varintSize(n: number): number {
  if (n < 0) return 10; // a negative int32 is sign-extended to 64 bits
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Tag + length prefix + payload of a length-delimited field. */
function lenFieldSize(field: number, payload: number): number {
  return varintSize(field << 3) + varintSize(payload) + payload;
}

class Writer {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  varint(n: number): void {
    if (n < 0) {
      let v = BigInt.asUintN(64, BigInt(n));
      for (let i = 0; i < 9; i++) {
        this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
        v >>= 7n;
      }
      this.buf[this.pos++] = Number(v);
      return;
    }
    while (n >= 128) {
      this.buf[this.pos++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
  }

  tag(field: number, wireType: number): void {
    this.varint((field << 3) | wireType);
  }

  bytes(field: number, b: Uint8Array): void {
    this.tag(field, LEN);
    this.varint(b.byteLength);
    this.buf.set(b, this.pos);
    this.pos += b.byteLength;
  }

  string(field: number, s: string, byteLength: number): void {
    this.tag(field, LEN);
    this.varint(byteLength);
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  bool(field: number, v: boolean): void {
    this.tag(field, VARINT);
    this.buf[this.pos++] = v ? 1 : 0;
  }
}

// HeaderValueOption: header (1: HeaderValue key 1, raw_value 3), append (2: BoolValue value 1).
function headerValueSize(h: HeaderValueOptionOut['header']): number {
  return lenFieldSize(1, Buffer.byteLength(h.key)) + lenFieldSize(3, h.raw_value.byteLength);
}
function optionSize(o: HeaderValueOptionOut): number {
  return lenFieldSize(1, headerValueSize(o.header)) + (o.append ? lenFieldSize(2, o.append.value ? 2 : 0) : 0);
}
function writeOption(w: Writer, o: HeaderValueOptionOut): void {
  w.tag(1, LEN);
  w.varint(headerValueSize(o.header));
  w.string(1, o.header.key, Buffer.byteLength(o.header.key));
  w.bytes(3, o.header.raw_value);
  if (o.append) {
    w.tag(2, LEN);
    w.varint(o.append.value ? 2 : 0);
    if (o.append.value) w.bool(1, true);
  }
}

// HeaderMutation: set_headers (1, repeated), remove_headers (2, repeated string).
function mutationSize(m: HeaderMutationOut): number {
  let size = 0;
  for (const o of m.set_headers ?? []) size += lenFieldSize(1, optionSize(o));
  for (const name of m.remove_headers ?? []) size += lenFieldSize(2, Buffer.byteLength(name));
  return size;
}
function writeMutation(w: Writer, field: number, m: HeaderMutationOut): void {
  w.tag(field, LEN);
  w.varint(mutationSize(m));
  for (const o of m.set_headers ?? []) {
    w.tag(1, LEN);
    w.varint(optionSize(o));
    writeOption(w, o);
  }
  for (const name of m.remove_headers ?? []) w.string(2, name, Buffer.byteLength(name));
}

// CommonResponse: header_mutation (2), clear_route_cache (5). Default values are left off the wire.
function commonSize(c: CommonResponseOut): number {
  return (c.header_mutation ? lenFieldSize(2, mutationSize(c.header_mutation)) : 0) + (c.clear_route_cache ? 2 : 0);
}
function writeCommon(w: Writer, field: number, c: CommonResponseOut): void {
  w.tag(field, LEN);
  w.varint(commonSize(c));
  if (c.header_mutation) writeMutation(w, 2, c.header_mutation);
  if (c.clear_route_cache) w.bool(5, true);
}

// ImmediateResponse: status (1: HttpStatus code 1), headers (2), body (3), details (5).
function statusSize(code: number): number {
  return code === 0 ? 0 : 1 + varintSize(code);
}
function immediateSize(i: ImmediateResponseOut): number {
  return (
    lenFieldSize(1, statusSize(i.status.code)) +
    (i.headers ? lenFieldSize(2, mutationSize(i.headers)) : 0) +
    (i.body && i.body.byteLength > 0 ? lenFieldSize(3, i.body.byteLength) : 0) +
    (i.details ? lenFieldSize(5, Buffer.byteLength(i.details)) : 0)
  );
}
function writeImmediate(w: Writer, i: ImmediateResponseOut): void {
  w.tag(1, LEN);
  w.varint(statusSize(i.status.code));
  if (i.status.code !== 0) {
    w.tag(1, VARINT);
    w.varint(i.status.code);
  }
  if (i.headers) writeMutation(w, 2, i.headers);
  if (i.body && i.body.byteLength > 0) w.bytes(3, i.body);
  if (i.details) w.string(5, i.details, Buffer.byteLength(i.details));
}

/** ProcessingResponse `response` oneof: member → field number. */
const RESPONSE_FIELDS = {
  request_headers: 1,
  response_headers: 2,
  request_body: 3,
  response_body: 4,
  request_trailers: 5,
  response_trailers: 6,
  immediate_response: 7,
} as const;

/** The one member of the `response` oneof that is set, and its payload. */
function member(msg: ProcessingResponseOut): [keyof typeof RESPONSE_FIELDS, unknown] {
  for (const k in msg) {
    if (k in RESPONSE_FIELDS) return [k as keyof typeof RESPONSE_FIELDS, (msg as Record<string, unknown>)[k]];
  }
  throw new Error('ProcessingResponse without a response member');
}

/** Encodes a reply skewgate built (responses.ts); the bytes proto-loader would decode back to it. */
export function encodeProcessingResponse(msg: ProcessingResponseOut): Buffer {
  const [name, body] = member(msg);
  const field = RESPONSE_FIELDS[name];
  let inner: number;
  if (name === 'immediate_response') {
    inner = immediateSize(body as ImmediateResponseOut);
  } else if (name === 'request_trailers' || name === 'response_trailers') {
    const m = (body as { header_mutation?: HeaderMutationOut }).header_mutation;
    inner = m ? lenFieldSize(1, mutationSize(m)) : 0;
  } else {
    const c = (body as { response?: CommonResponseOut }).response;
    inner = c ? lenFieldSize(1, commonSize(c)) : 0;
  }
  const w = new Writer(Buffer.allocUnsafe(lenFieldSize(field, inner)));
  w.tag(field, LEN);
  w.varint(inner);
  if (name === 'immediate_response') {
    writeImmediate(w, body as ImmediateResponseOut);
  } else if (name === 'request_trailers' || name === 'response_trailers') {
    const m = (body as { header_mutation?: HeaderMutationOut }).header_mutation;
    if (m) writeMutation(w, 1, m);
  } else {
    const c = (body as { response?: CommonResponseOut }).response;
    if (c) writeCommon(w, 1, c);
  }
  if (w.pos !== w.buf.length) throw new Error(`ProcessingResponse encoding: wrote ${w.pos} of ${w.buf.length} bytes`);
  return w.buf;
}
