// One request to one apiserver, on the transport (transport.ts): a bounded GET whose body is read
// inside the deadline, a stream whose deadline covers its headers only (a watch), and a JSON write
// whose answer the caller judges.
import { isErrorCode } from '../errors/catalog.js';
import { DEFAULT_MAX_DOCUMENT_BYTES } from '../constants.js';
import { ERROR_BODY_BYTES, contentLength, tooLargeMessage, type Oversize } from './core/bounds.js';
import type { RequestCredentials } from './credentials.js';
import {
  DeadlineSignal,
  DiscoveryFetchError,
  TLS_CODE,
  CONNECTION_CODE,
  abandon,
  bodyHint,
  defaultFetch,
  joinUrl,
  readBounded,
  rootCause,
  statusLine,
  type FetchInit,
  type FetchResponseLike,
  type GetOptions,
  type ServerTarget,
} from './transport.js';

function translate(err: unknown, url: string, deadline: DeadlineSignal, parent: AbortSignal, timeoutMs: number, method = 'GET'): Error {
  // Already one of skewgate's own (a fetch error, a credentials error): passed on as it is.
  if (isSkewgateError(err)) return err;
  if (parent.aborted) return new DiscoveryFetchError(`${method} ${url}: aborted`, url, { aborted: true });
  if (deadline.timedOut) return new DiscoveryFetchError(`${method} ${url}: timed out after ${timeoutMs}ms`, url, { timeout: true });
  const { message, code } = rootCause(err);
  const tls = code !== undefined && TLS_CODE.test(code);
  return new DiscoveryFetchError(`${method} ${url}: ${tls ? 'TLS verification failed: ' : ''}${message}${code ? ` (${code})` : ''}`, url, {
    tls,
    connection: code !== undefined && CONNECTION_CODE.test(code),
  });
}

async function send(
  target: ServerTarget,
  path: string,
  opts: GetOptions,
  deadline: DeadlineSignal,
  { dispatcher, authorization }: RequestCredentials,
): Promise<FetchResponseLike> {
  const headers: Record<string, string> = { accept: opts.accept, 'user-agent': 'skewgate-discovery' };
  if (authorization) headers.authorization = authorization;
  if (opts.ifNoneMatch) headers['if-none-match'] = opts.ifNoneMatch;
  return (target.fetchImpl ?? defaultFetch)(joinUrl(target.url, path), { method: 'GET', headers, signal: deadline.signal, dispatcher });
}

/**
 * One JSON write (or read) whose answer the caller judges: any status comes back, 404 and 409
 * included; only a failure to get an answer throws (DiscoveryFetchError).
 */
export async function sendJson(
  target: ServerTarget,
  method: FetchInit['method'],
  path: string,
  body: unknown,
  signal: AbortSignal,
): Promise<{ readonly status: number; readonly text: string }> {
  const url = joinUrl(target.url, path);
  // Before the clock starts: the timeout is the apiserver's, not the time to read local files.
  const { dispatcher, authorization } = await target.credentials.current();
  const deadline = new DeadlineSignal(signal, target.timeoutMs);
  try {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'skewgate-publisher' };
    if (authorization) headers.authorization = authorization;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await (target.fetchImpl ?? defaultFetch)(url, {
      method,
      headers,
      signal: deadline.signal,
      dispatcher,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, text: await res.text() };
  } catch (err) {
    throw translate(err, url, deadline, signal, target.timeoutMs, method);
  } finally {
    deadline.dispose();
  }
}

export interface TextResponse {
  readonly status: number;
  readonly contentType: string | null;
  readonly etag: string | null;
  readonly text: string;
  /** Body bytes read (0 for a 304). */
  readonly bytes: number;
  /** A 2xx whose body was not read (readBody: false). */
  readonly unread?: true;
}

/**
 * GET with the body read inside the timeout, counted as it arrives and never past the target's
 * maxDocumentBytes: a larger body (by its Content-Length, or once that many bytes came) ends the
 * request and throws a DiscoveryFetchError (details.tooLarge). Non-2xx answers (except an
 * expected 304) become DiscoveryFetchError with the status and the Status message.
 */
export async function getText(target: ServerTarget, path: string, opts: GetOptions): Promise<TextResponse> {
  const url = joinUrl(target.url, path);
  const limit = target.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES;
  const credentials = await target.credentials.current();
  const deadline = new DeadlineSignal(opts.signal, target.timeoutMs);
  try {
    const res = await send(target, path, opts, deadline, credentials);
    const etag = res.headers.get('etag');
    if (res.status === 304 && opts.ifNoneMatch) {
      if ((await readBounded(res, ERROR_BODY_BYTES)).over) deadline.cancel();
      return { status: 304, contentType: null, etag, text: '', bytes: 0 };
    }
    if (res.status < 200 || res.status > 299) {
      const body = await readBounded(res, ERROR_BODY_BYTES, true);
      if (body.over) deadline.cancel();
      const hint = bodyHint(body.text);
      throw new DiscoveryFetchError(`GET ${url}: ${statusLine(res.status, res.statusText)}${hint ? `: ${hint}` : ''}`, url, {
        status: res.status,
      });
    }
    const contentType = res.headers.get('content-type');
    if (opts.readBody === false) {
      await abandon(res, deadline);
      return { status: res.status, contentType, etag, text: '', bytes: 0, unread: true };
    }
    const declared = contentLength(res.headers.get('content-length'));
    const seen: Oversize | null = declared !== null && declared > limit ? { contentLength: declared } : null;
    const body = seen ? null : await readBounded(res, limit);
    if (seen || body?.over) {
      if (seen) await abandon(res, deadline);
      else deadline.cancel();
      const why = seen ?? { read: body?.bytes ?? 0 };
      throw new DiscoveryFetchError(tooLargeMessage('GET', url, limit, why), url, {
        status: res.status,
        tooLarge: { limit, seen: why, etag },
      });
    }
    return { status: res.status, contentType, etag, text: body?.text ?? '', bytes: body?.bytes ?? 0 };
  } catch (err) {
    throw translate(err, url, deadline, opts.signal, target.timeoutMs);
  } finally {
    deadline.dispose();
  }
}

/**
 * GET whose body is a long-lived stream (a watch): the timeout covers the headers only; the
 * body ends when opts.signal aborts. The caller must consume or abandon the body.
 */
export async function openStream(target: ServerTarget, path: string, opts: GetOptions): Promise<FetchResponseLike> {
  const url = joinUrl(target.url, path);
  const credentials = await target.credentials.current();
  const deadline = new DeadlineSignal(opts.signal, target.timeoutMs);
  try {
    const res = await send(target, path, opts, deadline, credentials);
    deadline.stopClock();
    if (res.status < 200 || res.status > 299) {
      const text = await res.text().catch(() => '');
      const hint = bodyHint(text);
      deadline.dispose();
      throw new DiscoveryFetchError(`GET ${url}: ${statusLine(res.status, res.statusText)}${hint ? `: ${hint}` : ''}`, url, {
        status: res.status,
      });
    }
    // The parent link is kept for the stream's life; it goes when the parent aborts (once: true).
    return res;
  } catch (err) {
    deadline.dispose();
    throw translate(err, url, deadline, opts.signal, target.timeoutMs);
  }
}

function isSkewgateError(err: unknown): err is Error {
  return err instanceof Error && isErrorCode((err as { code?: unknown }).code);
}
