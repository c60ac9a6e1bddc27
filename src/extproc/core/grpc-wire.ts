// gRPC over HTTP/2 as far as skewgate's server speaks it (grpc/grpc's PROTOCOL-HTTP2.md): status
// codes, length-prefixed messages in and out, the grpc-message and grpc-timeout header values.
// Pure: bytes in, messages or a status out.

/** The status codes skewgate sends (the gRPC spec's numbering). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;
export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

/** A status that ends a call. */
export interface GrpcEnd {
  readonly code: GrpcStatusCode;
  readonly details: string;
}

const PREFIX = 5;

/** One message with its 5-byte prefix (uncompressed). */
export function frameMessage(body: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(PREFIX + body.byteLength);
  frame[0] = 0;
  frame.writeUInt32BE(body.byteLength, 1);
  frame.set(body, PREFIX);
  return frame;
}

/**
 * Reads length-prefixed messages from a call's DATA chunks, however they are cut. A message longer
 * than maxBytes is refused as its prefix arrives (nothing of it is buffered), and a compressed one
 * (no grpc-encoding is accepted) too: the call then ends with the status returned.
 */
export class MessageReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** The body length of the message being read; -1 while its prefix is incomplete. */
  private want = -1;

  constructor(private readonly maxBytes: number) {}

  /** Whether part of a message has arrived but not all of it. */
  get partial(): boolean {
    return this.buffered > 0 || this.want >= 0;
  }

  /** The messages completed by this chunk, in order, or the status that ends the call. */
  push(chunk: Buffer): Buffer[] | GrpcEnd {
    const out: Buffer[] = [];
    // The common case: a whole message in one chunk, nothing held before it (not even a prefix
    // whose chunk ended right after it: then this chunk starts with its body).
    if (this.buffered === 0 && this.want < 0 && chunk.length >= PREFIX) {
      let at = 0;
      while (chunk.length - at >= PREFIX) {
        const refused = this.check(chunk, at);
        if (refused !== null) return refused;
        const len = chunk.readUInt32BE(at + 1);
        if (chunk.length - at - PREFIX < len) break;
        out.push(chunk.subarray(at + PREFIX, at + PREFIX + len));
        at += PREFIX + len;
      }
      if (at === chunk.length) return out;
      chunk = chunk.subarray(at);
    }
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (this.want < 0) {
        if (this.buffered < PREFIX) return out;
        const head = this.take(PREFIX);
        const refused = this.check(head, 0);
        if (refused !== null) return refused;
        this.want = head.readUInt32BE(1);
      }
      if (this.buffered < this.want) return out;
      out.push(this.take(this.want));
      this.want = -1;
    }
  }

  /** Drops whatever part of a message is held (a call that ends before it completes). */
  drop(): void {
    this.chunks = [];
    this.buffered = 0;
    this.want = -1;
  }

  private check(buf: Buffer, at: number): GrpcEnd | null {
    if (buf[at] !== 0)
      return { code: GrpcStatus.UNIMPLEMENTED, details: 'skewgate: compressed messages are not accepted (no grpc-encoding)' };
    const len = buf.readUInt32BE(at + 1);
    if (len > this.maxBytes) {
      return {
        code: GrpcStatus.RESOURCE_EXHAUSTED,
        details: `skewgate: received message larger than max (${len} vs. ${this.maxBytes})`,
      };
    }
    return null;
  }

  /** The next n buffered bytes (n ≤ buffered), as one buffer. */
  private take(n: number): Buffer {
    const first = this.chunks[0] as Buffer;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let filled = 0;
      while (filled < n) {
        const c = this.chunks[0] as Buffer;
        const part = Math.min(c.length, n - filled);
        c.copy(out, filled, 0, part);
        filled += part;
        if (part === c.length) this.chunks.shift();
        else this.chunks[0] = c.subarray(part);
      }
    }
    this.buffered -= n;
    return out;
  }
}

/** grpc-message: percent-encoded outside printable ASCII, and "%" itself (PROTOCOL-HTTP2.md). */
export function encodeGrpcMessage(details: string): string {
  let plain = true;
  for (let i = 0; i < details.length; i++) {
    const c = details.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return details;
  let out = '';
  for (const byte of Buffer.from(details, 'utf8')) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x25 ? `%${byte.toString(16).toUpperCase().padStart(2, '0')}` : String.fromCharCode(byte);
  }
  return out;
}

const TIMEOUT_UNITS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

/** grpc-timeout ("100m", "5S"): milliseconds, or null when absent or malformed (then no deadline). */
export function parseGrpcTimeout(value: string | undefined): number | null {
  if (value === undefined) return null;
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (m === null) return null;
  return Number(m[1]) * (TIMEOUT_UNITS[m[2] as string] as number);
}
