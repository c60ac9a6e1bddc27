// Discovery I/O for one apiserver: aggregated v2 (/api, /apis) with conditional GETs, a legacy
// fallback for servers without aggregated discovery, and the /readyz probe. Errors name the URL,
// the status or the TLS failure, never a credential.
import { STATUS_CODES } from 'node:http';
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import { DISCOVERY_ACCEPT } from '../constants.js';
import type { ResourceCapability, ServerView } from './types.js';
import type { ServerCredentials } from './credentials.js';
import { parseJsonSteps } from './json-items.js';
import { runSliced, type SliceOptions } from './slice-runner.js';
import { runToEnd, type Sliced } from './sliced.js';
import {
  DiscoveryDocumentError,
  type LegacyGroupVersion,
  groupVersionResources,
  isAggregatedDiscoveryMediaType,
  legacyGroupVersionPath,
  legacyView,
  parseAggregatedDiscoverySteps,
  parseApiGroupList,
  parseApiResourceList,
  parseApiVersions,
  parseOpenApiV3Index,
  sameOpenApiIndex,
  sameViewSteps,
} from './parse.js';

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

export class DiscoveryFetchError extends Error {
  readonly code = 'SKEWGATE_ERR_DISCOVERY_FETCH';
  constructor(
    message: string,
    /** The URL (without userinfo) that failed. */
    readonly url: string,
    readonly details: { readonly status?: number; readonly tls?: boolean; readonly timeout?: boolean; readonly aborted?: boolean } = {},
  ) {
    super(message);
    this.name = 'DiscoveryFetchError';
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
  readonly fetchImpl?: FetchLike;
}

/** base URL + absolute path, keeping a path prefix of the base; userinfo dropped. */
export function joinUrl(base: string, path: string): string {
  const u = new URL(base);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}${path}`;
}

// Node/OpenSSL certificate verification codes and TLS error codes.
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|HOSTNAME_MISMATCH|ERR_OSSL)/;

/** Walks undici's "fetch failed" → cause chain to the error that says what really happened. */
function rootCause(err: unknown): { message: string; code: string | undefined } {
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

class DeadlineSignal {
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

function statusLine(status: number, statusText: string): string {
  return `HTTP ${status} ${statusText || STATUS_CODES[status] || ''}`.trimEnd();
}

/** Pulls a Kubernetes Status message out of an error body (bounded, single line). */
function bodyHint(text: string): string {
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

interface GetOptions {
  readonly accept: string;
  readonly signal: AbortSignal;
  readonly ifNoneMatch?: string;
}

function translate(err: unknown, url: string, deadline: DeadlineSignal, parent: AbortSignal, timeoutMs: number, method = 'GET'): Error {
  if (err instanceof DiscoveryFetchError || err instanceof DiscoveryDocumentError) return err;
  if (err && (err as { code?: unknown }).code === 'SKEWGATE_ERR_CREDENTIALS') return err as Error;
  if (parent.aborted) return new DiscoveryFetchError(`${method} ${url}: aborted`, url, { aborted: true });
  if (deadline.timedOut) return new DiscoveryFetchError(`${method} ${url}: timed out after ${timeoutMs}ms`, url, { timeout: true });
  const { message, code } = rootCause(err);
  const tls = code !== undefined && TLS_CODE.test(code);
  return new DiscoveryFetchError(`${method} ${url}: ${tls ? 'TLS verification failed: ' : ''}${message}${code ? ` (${code})` : ''}`, url, {
    tls,
  });
}

async function send(target: ServerTarget, path: string, opts: GetOptions, deadline: DeadlineSignal): Promise<FetchResponseLike> {
  const { dispatcher, authorization } = await target.credentials.current();
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
  const deadline = new DeadlineSignal(signal, target.timeoutMs);
  try {
    const { dispatcher, authorization } = await target.credentials.current();
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
}

/**
 * GET with the whole body read inside the timeout. Non-2xx answers (except an expected 304)
 * become DiscoveryFetchError with the status and the Status message.
 */
export async function getText(target: ServerTarget, path: string, opts: GetOptions): Promise<TextResponse> {
  const url = joinUrl(target.url, path);
  const deadline = new DeadlineSignal(opts.signal, target.timeoutMs);
  try {
    const res = await send(target, path, opts, deadline);
    const text = await res.text();
    if (res.status === 304 && opts.ifNoneMatch) return { status: 304, contentType: null, etag: res.headers.get('etag'), text: '' };
    if (res.status < 200 || res.status > 299) {
      const hint = bodyHint(text);
      throw new DiscoveryFetchError(`GET ${url}: ${statusLine(res.status, res.statusText)}${hint ? `: ${hint}` : ''}`, url, {
        status: res.status,
      });
    }
    return { status: res.status, contentType: res.headers.get('content-type'), etag: res.headers.get('etag'), text };
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
  const deadline = new DeadlineSignal(opts.signal, target.timeoutMs);
  try {
    const res = await send(target, path, opts, deadline);
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

/** JSON text → value in pieces (json-items.ts); invalid JSON is a DiscoveryDocumentError naming the document. */
function* parseJsonDocument(text: string, document: string): Sliced<unknown> {
  try {
    return yield* parseJsonSteps(text);
  } catch (err) {
    throw new DiscoveryDocumentError(document, '', `not valid JSON (${(err as Error).message})`);
  }
}

function parseJson(text: string, document: string): unknown {
  return runToEnd(parseJsonDocument(text, document));
}

/** Both aggregated roots → the view, from JSON text to the frozen view in one sliced computation. */
function* aggregatedViewSteps(apiText: string, apisText: string): Sliced<ServerView> {
  const api = yield* parseJsonDocument(apiText, '/api');
  const apis = yield* parseJsonDocument(apisText, '/apis');
  return yield* parseAggregatedDiscoverySteps(api, apis);
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

interface CachedRoot {
  readonly etag: string;
  readonly text: string;
  readonly contentType: string | null;
}

interface RootDoc {
  readonly path: '/api' | '/apis';
  readonly text: string;
  readonly aggregated: boolean;
  /** What to cache for a later If-None-Match, once the document has parsed. */
  readonly entry: CachedRoot | null;
}

const OPENAPI_V3_PATH = '/openapi/v3';

/** The view with the server's OpenAPI v3 index beside it (none: the view as it is). */
function withOpenApi(view: ServerView, openapi: ReadonlyMap<string, string> | undefined): ServerView {
  return openapi === undefined ? view : Object.freeze({ ...view, openapiV3: openapi });
}

export interface DiscoveryClientOptions extends ServerTarget {
  /** Parallel group/version fetches on a legacy server. */
  readonly legacyConcurrency?: number;
  /** Longest piece of parsing between two turns of the event loop (slice-runner.ts). */
  readonly sliceBudgetMs?: number;
}

/**
 * Stateful per-server client: keeps the ETags of /api and /apis and the last view it built, so
 * that an unchanged server costs two 304s and yields the very same ServerView object.
 */
export class DiscoveryClient {
  private readonly cache = new Map<string, CachedRoot>();
  private last: { view: ServerView; api: string; apis: string } | null = null;
  private openapi: { readonly etag: string | null; readonly index: ReadonlyMap<string, string> } | null = null;
  private openapiError: string | null = null;

  constructor(private readonly opts: DiscoveryClientOptions) {}

  /** Fetches and parses discovery. Returns the previous object itself when nothing changed. */
  async fetchView(signal: AbortSignal): Promise<ServerView> {
    const [api, apis, openapi] = await Promise.all([this.root('/api', signal), this.root('/apis', signal), this.openapiIndex(signal)]);
    if (api.aggregated && apis.aggregated) {
      const last = this.last;
      if (
        last &&
        last.view.source === 'aggregated' &&
        last.api === api.text &&
        last.apis === apis.text &&
        sameOpenApiIndex(last.view.openapiV3, openapi)
      ) {
        this.commit(api, apis);
        return last.view;
      }
      // In slices: a large cluster's documents take hundreds of milliseconds to parse.
      const view = await runSliced(aggregatedViewSteps(api.text, apis.text), { ...this.sliceOptions(), signal });
      this.commit(api, apis);
      return this.remember(withOpenApi(view, openapi), api.text, apis.text);
    }
    return this.fetchLegacy(api, apis, openapi, signal);
  }

  /**
   * Why the OpenAPI v3 index could not be read at the last round (null when it was, or when the
   * server has none). Not a discovery failure: the view keeps the last good index.
   */
  openapiProblem(): string | null {
    return this.openapiError;
  }

  /**
   * GET /openapi/v3 with If-None-Match: the index whose hashes pin each OpenAPI document
   * (routing/document-route.ts). A server without one (404) has none; any other failure keeps the
   * last good index, so that OpenAPI trouble never blanks discovery.
   */
  private async openapiIndex(signal: AbortSignal): Promise<ReadonlyMap<string, string> | undefined> {
    const cached = this.openapi;
    try {
      const res = await getText(this.opts, OPENAPI_V3_PATH, {
        accept: 'application/json',
        signal,
        ...(cached?.etag ? { ifNoneMatch: cached.etag } : {}),
      });
      this.openapiError = null;
      if (res.status === 304 && cached) return cached.index;
      const index = parseOpenApiV3Index(parseJson(res.text, OPENAPI_V3_PATH));
      // The very same map object while nothing changed: the view (and the snapshot's indexes) are reused.
      const kept = cached && sameOpenApiIndex(cached.index, index) ? cached.index : index;
      this.openapi = { etag: res.etag, index: kept };
      return kept;
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof DiscoveryFetchError && err.status === 404) {
        this.openapi = null;
        this.openapiError = null;
        return undefined;
      }
      this.openapiError = (err as Error).message;
      return cached?.index;
    }
  }

  private sliceOptions(): SliceOptions {
    return this.opts.sliceBudgetMs === undefined ? {} : { budgetMs: this.opts.sliceBudgetMs };
  }

  /** GET /readyz → true on 200; any other answer or error → false. */
  async probeReady(signal: AbortSignal): Promise<boolean> {
    try {
      await getText(this.opts, '/readyz', { accept: 'text/plain, */*', signal });
      return true;
    } catch {
      return false;
    }
  }

  private async remember(view: ServerView, api: string, apis: string): Promise<ServerView> {
    const prev = this.last?.view;
    // Same routing content and same /apis bytes: keep the old object so the snapshot index is reused.
    const same = prev !== undefined && this.last?.apis === apis && (await runSliced(sameViewSteps(prev, view), this.sliceOptions()));
    const kept = same ? prev : view;
    this.last = { view: kept, api, apis };
    return kept;
  }

  /** GET /api or /apis with the discovery Accept; a 304 answers from the last good body. */
  private async root(path: '/api' | '/apis', signal: AbortSignal): Promise<RootDoc> {
    const cached = this.cache.get(path);
    const res = await getText(this.opts, path, { accept: DISCOVERY_ACCEPT, signal, ...(cached ? { ifNoneMatch: cached.etag } : {}) });
    if (res.status === 304 && cached)
      return { path, text: cached.text, aggregated: isAggregatedDiscoveryMediaType(cached.contentType), entry: cached };
    const aggregated = isAggregatedDiscoveryMediaType(res.contentType);
    const entry = aggregated && res.etag ? { etag: res.etag, text: res.text, contentType: res.contentType } : null;
    return { path, text: res.text, aggregated, entry };
  }

  /** ETags are remembered only for bodies that parsed: a 304 must always lead back to a good document. */
  private commit(...docs: readonly RootDoc[]): void {
    for (const d of docs) {
      if (d.entry) this.cache.set(d.path, d.entry);
      else this.cache.delete(d.path);
    }
  }

  private async fetchLegacy(
    api: RootDoc,
    apis: RootDoc,
    openapi: ReadonlyMap<string, string> | undefined,
    signal: AbortSignal,
  ): Promise<ServerView> {
    // A server answering one root aggregated and the other not is odd; ask that one for legacy JSON.
    const legacyText = async (doc: RootDoc, path: string): Promise<string> =>
      doc.aggregated ? (await getText(this.opts, path, { accept: 'application/json', signal })).text : doc.text;
    const versions = parseApiVersions(parseJson(await legacyText(api, '/api'), '/api'));
    const groups = parseApiGroupList(parseJson(await legacyText(apis, '/apis'), '/apis'));
    const wanted = [
      ...versions.map((version) => ({ group: '', version })),
      ...groups.flatMap((g) => g.versions.map((version) => ({ group: g.group, version }))),
    ];

    const previous = this.last?.view ?? null;
    const failures: string[] = [];
    const parts = await mapLimit(
      wanted,
      this.opts.legacyConcurrency ?? 8,
      async ({ group, version }): Promise<LegacyGroupVersion | null> => {
        const path = legacyGroupVersionPath(group, version);
        try {
          const res = await getText(this.opts, path, { accept: 'application/json', signal });
          return { group, version, resources: parseApiResourceList(parseJson(res.text, path), group, version) };
        } catch (err) {
          if (signal.aborted) throw err;
          // One broken group/version (e.g. an unavailable aggregated APIService) must not blank the
          // whole server: keep what we last knew of it. With nothing known, the round fails.
          const carried: ReadonlyMap<string, ResourceCapability> | null = previous ? groupVersionResources(previous, group, version) : null;
          if (carried) return { group, version, resources: carried };
          failures.push((err as Error).message);
          return null;
        }
      },
    );
    if (failures.length > 0) {
      throw new DiscoveryFetchError(
        `legacy discovery of ${failures.length} group/version${failures.length === 1 ? '' : 's'} failed; first: ${failures[0]}`,
        joinUrl(this.opts.url, '/apis'),
      );
    }
    this.commit(api, apis);
    return this.remember(withOpenApi(legacyView(parts.filter((p): p is LegacyGroupVersion => p !== null)), openapi), api.text, apis.text);
  }
}
