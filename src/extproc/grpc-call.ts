// One gRPC call on a node:http2 stream, as skewgate's handlers see it: messages in as events,
// replies out, one status at the end. What grpc-js's server stream did for skewgate, without its
// per-call machinery (bench (b), "Where a decided request's server CPU goes": about a third of the
// decided path's cost over bare node:http2 at 500 requests a second).
import { EventEmitter } from 'node:events';
import * as http2 from 'node:http2';
import { encodeGrpcMessage, frameMessage, GrpcStatus, MessageReader, type GrpcEnd, type GrpcStatusCode } from './core/grpc-wire.js';
import type { CallMetadata } from './observer.js';

/**
 * A server call: 'data' (a decoded message), 'end' (the client half-closed), 'cancelled' (the
 * client reset the stream before the status was sent), 'finish' (the status was sent), 'close'
 * (the stream is gone). Writes and the status after the end are ignored.
 */
export interface ServerCall<Res> extends EventEmitter {
  readonly metadata: CallMetadata;
  readonly cancelled: boolean;
  /** Whether the status has been sent (or the call is over). */
  readonly writableEnded: boolean;
  write(msg: Res): void;
  /** Ends the call with OK. */
  end(): void;
  /** Ends the call with a status other than OK. */
  fail(code: GrpcStatusCode, details: string): void;
  /** Resets the stream (RST_STREAM CANCEL): what the client sent and holds open is released. */
  reset(): void;
}

export interface CallCodec<Req, Res> {
  readonly decode: (bytes: Buffer) => Req;
  readonly encode: (msg: Res) => Uint8Array;
}

const { HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE } = http2.constants;
const CONTENT_TYPE = 'application/grpc+proto';

/** The HTTP/2 request headers as call metadata (pseudo-headers left out of the map). */
class HeaderMetadata implements CallMetadata {
  constructor(private readonly headers: http2.IncomingHttpHeaders) {}
  get(key: string): string[] {
    const v = this.headers[key];
    return v === undefined ? [] : Array.isArray(v) ? v : [v];
  }
  getMap(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.headers))
      if (!k.startsWith(':') && v !== undefined) out[k] = Array.isArray(v) ? v.join(',') : v;
    return out;
  }
}

export class Http2ServerCall<Req, Res> extends EventEmitter implements ServerCall<Res> {
  readonly metadata: CallMetadata;
  cancelled = false;
  writableEnded = false;
  private responded = false;
  private status: GrpcEnd = { code: GrpcStatus.OK, details: '' };
  private readonly reader: MessageReader;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    private readonly codec: CallCodec<Req, Res>,
    maxMessageBytes: number,
    timeoutMs: number | null,
  ) {
    super();
    this.metadata = new HeaderMetadata(headers);
    this.reader = new MessageReader(maxMessageBytes);
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('end', () => {
      if (!this.cancelled) this.emit('end');
    });
    // The client reset the stream: what it had not finished sending is dropped.
    stream.on('aborted', () => this.onCancel());
    stream.on('wantTrailers', () => this.sendTrailers());
    stream.on('close', () => {
      clearTimeout(this.deadline);
      this.reader.drop();
      if (!this.writableEnded) this.onCancel();
      this.emit('close');
    });
    // A stream error is followed by 'close'; the status, if any, is then moot.
    stream.on('error', () => undefined);
    if (timeoutMs !== null) {
      // The status, then a reset: the client may still be sending, and the call is over.
      this.deadline = setTimeout(() => {
        this.fail(GrpcStatus.DEADLINE_EXCEEDED, 'skewgate: the call deadline (grpc-timeout) passed');
        this.reset();
      }, timeoutMs);
      this.deadline.unref();
    }
  }

  write(msg: Res): void {
    if (this.writableEnded || this.stream.destroyed || this.stream.closed) return;
    this.respond();
    this.stream.write(frameMessage(this.codec.encode(msg)));
  }

  end(): void {
    this.finish({ code: GrpcStatus.OK, details: '' });
  }

  fail(code: GrpcStatusCode, details: string): void {
    this.finish({ code, details });
  }

  reset(): void {
    if (!this.stream.closed && !this.stream.destroyed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
  }

  private onData(chunk: Buffer): void {
    if (this.writableEnded) return;
    const read = this.reader.push(chunk);
    if (!Array.isArray(read)) {
      this.reader.drop();
      this.finish(read);
      return;
    }
    for (const bytes of read) {
      let msg: Req;
      try {
        msg = this.codec.decode(bytes);
      } catch (err) {
        this.finish({ code: GrpcStatus.INTERNAL, details: `skewgate: cannot decode the message: ${(err as Error).message}` });
        return;
      }
      this.emit('data', msg);
      if (this.writableEnded) return;
    }
  }

  private onCancel(): void {
    if (this.cancelled || this.writableEnded) return;
    this.cancelled = true;
    clearTimeout(this.deadline);
    this.emit('cancelled');
  }

  private respond(): void {
    if (this.responded) return;
    this.responded = true;
    this.stream.respond({ [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: CONTENT_TYPE }, { waitForTrailers: true });
  }

  /** Sends the status: in the trailers after replies, or as a trailers-only response. */
  private finish(status: GrpcEnd): void {
    if (this.writableEnded || this.cancelled) return;
    this.writableEnded = true;
    clearTimeout(this.deadline);
    this.status = status;
    if (this.stream.destroyed || this.stream.closed) return;
    if (this.responded) {
      this.stream.end();
    } else {
      this.responded = true;
      this.stream.respond(
        { [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: CONTENT_TYPE, ...statusHeaders(status) },
        { endStream: true },
      );
      this.emit('finish');
    }
  }

  private sendTrailers(): void {
    if (!this.stream.destroyed) this.stream.sendTrailers(statusHeaders(this.status));
    this.emit('finish');
  }
}

function statusHeaders(status: GrpcEnd): Record<string, string> {
  return status.details === ''
    ? { 'grpc-status': String(status.code) }
    : { 'grpc-status': String(status.code), 'grpc-message': encodeGrpcMessage(status.details) };
}
