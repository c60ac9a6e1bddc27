// The Kubernetes HTTP transport every part of skewgate that talks to an apiserver uses (discovery,
// membership's watches, the kubernetes Service's writes): one request to one apiserver with its
// own credentials, a deadline that covers the body, bodies read bounded and counted as they
// stream, and errors that name the URL, the status or the TLS failure, never a credential.
import { STATUS_CODES } from 'node:http';
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import type { ErrorCode, FailureKind } from '../errors/catalog.js';
import type { Oversize } from './core/bounds.js';
import type { ServerCredentials } from './credentials.js';

export interface FetchInit {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly headers: Record<string, string>;
  readonly signal: AbortSignal;
  readonly dispatcher: Dispatcher;
  /** JSON text (the kubernetes Service publisher's writes); discovery sends none. */
  readonly body?: string;
}

/** The part of a fetch Response that discovery uses; undici's Response satisfies it. */
export interface FetchResponseLike {
  readonly status: number;
  readonly statusText: string;
  readonly headers: { get(name: string): string | null };
  readonly body: AsyncIterable<Uint8Array> | null;
  text(): Promise<string>;
}

export type FetchLike = (url: string, init: FetchInit) => Promise<FetchResponseLike>;

/**
 * undici's request() rather than fetch(): no WHATWG "bad port" list (an apiserver may listen on
 * any port), no web-stream overhead, and bodies are plain async iterables.
 */
export const defaultFetch: FetchLike = async (url, init) => {
  const res = await request(url, {
    method: init.method,
    headers: init.headers,
    signal: init.signal,
    dispatcher: init.dispatcher,
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  return {
    status: res.statusCode,
    statusText: STATUS_CODES[res.statusCode] ?? '',
    headers: {
      get(name: string): string | null {
        const v = res.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
      },
    },
    body: res.body,
    text: () => res.body.text(),
  };
};

/**
 * The response with its body bytes counted as they are read: `done` is called once, however the
 * body ends (read to the end, failed, or left early: too large, or not read at all).
 */
export function countedResponse(res: FetchResponseLike, done: (bytes: number) => void): FetchResponseLike {
  let bytes = 0;
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    done(bytes);
  };
  const body = res.body;
  return {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
    body:
      body === null
        ? null
        : {
            [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
              const it = body[Symbol.asyncIterator]();
              return {
                async next() {
                  try {
                    const r = await it.next();
                    if (r.done) end();
                    else bytes += r.value.byteLength;
                    return r;
                  } catch (err) {
                    end();
                    throw err;
                  }
                },
                async return(value?: unknown) {
                  end();
                  return (await it.return?.(value)) ?? { done: true, value: undefined };
                },
              };
            },
          },
    async text() {
      try {
        const text = await res.text();
        bytes = Buffer.byteLength(text);
        return text;
      } finally {
        end();
      }
    },
  };
}

export class DiscoveryFetchError extends Error {
  readonly code = 'SKEWGATE_ERR_DISCOVERY_FETCH' satisfies ErrorCode;
  /** How it failed (the fetch-errors metric's reason, the status): from the details unless given. */
  readonly kind: FailureKind;
  constructor(
    message: string,
    /** The URL (without userinfo) that failed. */
    readonly url: string,
    readonly details: {
      readonly status?: number;
      readonly tls?: boolean;
      readonly timeout?: boolean;
      readonly aborted?: boolean;
      /** No connection, or it broke (refused, reset, unreachable, no such host). */
      readonly connection?: boolean;
      readonly kind?: FailureKind;
      /** The body passed discovery.maxDocumentBytes: the cap, what showed it, and the answer's ETag. */
      readonly tooLarge?: { readonly limit: number; readonly seen: Oversize; readonly etag: string | null };
    } = {},
  ) {
    super(message);
    this.name = 'DiscoveryFetchError';
    const d = details;
    this.kind =
      d.kind ??
      (d.aborted
        ? 'aborted'
        : d.timeout
          ? 'timeout'
          : d.tls
            ? 'tls'
            : d.tooLarge
              ? 'too_large'
              : d.status !== undefined
                ? 'http'
                : d.connection
                  ? 'connection'
                  : 'other');
  }
  get status(): number | undefined {
    return this.details.status;
  }
}

/** Everything needed to send one request to one apiserver. */
export interface ServerTarget {
  readonly name: string;
  readonly url: string;
  readonly credentials: ServerCredentials;
  /** Per-request timeout (connect + headers + body; headers only for streams). */
  readonly timeoutMs: number;
  /** The largest body read (discovery.maxDocumentBytes); default DEFAULT_MAX_DOCUMENT_BYTES. */
  readonly maxDocumentBytes?: number;
  readonly fetchImpl?: FetchLike;
}

/** base URL + absolute path, keeping a path prefix of the base; userinfo dropped. */
export function joinUrl(base: string, path: string): string {
  const u = new URL(base);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}${path}`;
}

// Node/OpenSSL certificate verification codes and TLS error codes.
/** Error codes of a connection that could not be made or broke (Node's and undici's). */
export const CONNECTION_CODE =
  /^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|UND_ERR_SOCKET|UND_ERR_CONNECT_TIMEOUT)$/;
export const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|HOSTNAME_MISMATCH|ERR_OSSL)/;

/** Walks undici's "fetch failed" → cause chain to the error that says what really happened. */
export function rootCause(err: unknown): { message: string; code: string | undefined } {
  let e: unknown = err;
  let best: { message: string; code: string | undefined } = { message: String((err as Error)?.message ?? err), code: undefined };
  for (let depth = 0; e && depth < 6; depth++) {
    const cur = e as { message?: unknown; code?: unknown; cause?: unknown };
    if (typeof cur.message === 'string' && cur.message !== '' && cur.message !== 'fetch failed') {
      best = { message: cur.message, code: typeof cur.code === 'string' ? cur.code : undefined };
    }
    if (typeof cur.code === 'string' && cur.code !== 'UND_ERR' && typeof cur.message === 'string') {
      best = { message: cur.message, code: cur.code };
    }
    e = cur.cause;
  }
  return best;
}

export class DeadlineSignal {
  readonly controller = new AbortController();
  timedOut = false;
  private timer: NodeJS.Timeout | null;
  private readonly onAbort: () => void;

  constructor(
    private readonly parent: AbortSignal,
    timeoutMs: number,
  ) {
    this.onAbort = () => this.controller.abort(parent.reason);
    if (parent.aborted) this.controller.abort(parent.reason);
    else parent.addEventListener('abort', this.onAbort, { once: true });
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new Error('timeout'));
    }, timeoutMs);
  }
  get signal(): AbortSignal {
    return this.controller.signal;
  }
  /** Ends the request now (a body not to be read): undici closes the connection rather than drain it. */
  cancel(): void {
    this.stopClock();
    this.controller.abort(new Error('body not read'));
  }
  /** Stop the clock but stay linked to the parent (a stream runs on after its headers). */
  stopClock(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
  dispose(): void {
    this.stopClock();
    this.parent.removeEventListener('abort', this.onAbort);
  }
}

export function statusLine(status: number, statusText: string): string {
  return `HTTP ${status} ${statusText || STATUS_CODES[status] || ''}`.trimEnd();
}

/** Pulls a Kubernetes Status message out of an error body (bounded, single line). */
export function bodyHint(text: string): string {
  let msg = '';
  try {
    const doc = JSON.parse(text) as { kind?: unknown; message?: unknown };
    if (doc && doc.kind === 'Status' && typeof doc.message === 'string') msg = doc.message;
  } catch {
    msg = text;
  }
  msg = msg.replace(/\s+/g, ' ').trim();
  return msg.length > 200 ? `${msg.slice(0, 200)}…` : msg;
}

export interface GetOptions {
  readonly accept: string;
  readonly signal: AbortSignal;
  readonly ifNoneMatch?: string;
  /** false: a 2xx body is not read (the request is ended at its headers); the answer has `unread`. */
  readonly readBody?: boolean;
}

/** A body read up to `limit` bytes, counted as it streams in: never more than one chunk past it is held. */
export interface BoundedBody {
  readonly text: string;
  readonly bytes: number;
  /** More than `limit` bytes came and the rest was not read; `text` is then empty (with `partial`: the first `limit` bytes). */
  readonly over: boolean;
}

/**
 * Ends a request whose body is not read: the signal's abort makes undici close the connection
 * (never drain it), and the body's iterator is told it is done (a recording wrapper counts it).
 */
export async function abandon(res: FetchResponseLike, deadline: DeadlineSignal): Promise<void> {
  deadline.cancel();
  await res.body?.[Symbol.asyncIterator]().return?.();
}

export async function readBounded(res: FetchResponseLike, limit: number, partial = false): Promise<BoundedBody> {
  const cut = (data: () => Buffer): string => (partial ? data().subarray(0, limit).toString('utf8') : '');
  if (res.body === null) {
    // A fetch without a stream (a test's fake): only the size can be checked, after the fact.
    const text = await res.text();
    const bytes = Buffer.byteLength(text);
    return bytes > limit ? { text: cut(() => Buffer.from(text)), bytes, over: true } : { text, bytes, over: false };
  }
  // Decoded chunk by chunk, never joined as bytes: one large Buffer is one large malloc, which
  // glibc puts in its main heap once a first one has been freed, and that heap is not given back
  // (docs/discovery.md "bounds"). ignoreBOM keeps a BOM in the text, as Buffer#toString does.
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const parts: string[] = [];
  const kept: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of res.body) {
    bytes += chunk.byteLength;
    // Leaving the loop ends the stream: nothing more is read.
    if (bytes > limit) return { text: cut(() => Buffer.concat([...kept, chunk])), bytes, over: true };
    if (partial) kept.push(chunk);
    parts.push(decoder.decode(chunk, { stream: true }));
  }
  parts.push(decoder.decode());
  return { text: parts.join(''), bytes, over: false };
}
