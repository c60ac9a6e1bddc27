// The discovery fetcher of one apiserver: aggregated v2 (/api, /apis) with conditional GETs and an
// ETag cache, a legacy fallback for servers without aggregated discovery, the OpenAPI v3 index,
// and the backoff of a document whose download failed (its /readyz and /version: probes.ts). Text comes from the
// transport (src/kube/) and goes to the pure parsers (parse.ts), sliced so that a large document
// never holds the event loop.
import { DEFAULT_MAX_DOWNLOAD_BACKOFF_MS, DEFAULT_MAX_RESOURCES, DISCOVERY_ACCEPT } from '../constants.js';
import { failureOf } from '../errors/catalog.js';
import { getText, type TextResponse } from '../kube/requests.js';
import { DiscoveryFetchError, joinUrl, type ServerTarget } from '../kube/transport.js';
import { downloadBackoffMs } from './core/document-bounds.js';
import type { ResourceCapability, ServerView } from './core/types.js';
import { AGGREGATED_PATH, MAX_PIECE_CHARS, parseJsonSteps, PieceTooLargeError } from './core/json-items.js';
import { runSliced, sliceBudget, type SliceOptions } from '../util/slice-runner.js';
import { runToEnd, type Sliced } from '../util/core/sliced.js';
import { mapLimit, settled } from '../util/promises.js';
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
} from './core/parse.js';
import { sameViewSteps } from './core/view-compare.js';
import { sameOpenApiIndex } from './core/types.js';

/**
 * JSON text → value in pieces (json-items.ts), none parsed at once past MAX_PIECE_CHARS; invalid
 * JSON is a DiscoveryDocumentError naming the document, a piece too large one counted as too large.
 */
function* parseJsonDocument(text: string, document: string): Sliced<unknown> {
  try {
    return yield* parseJsonSteps(text, AGGREGATED_PATH, { maxPieceChars: MAX_PIECE_CHARS });
  } catch (err) {
    if (err instanceof PieceTooLargeError) throw new DiscoveryDocumentError(document, '', err.message, 'too_large');
    throw new DiscoveryDocumentError(document, '', `not valid JSON (${(err as Error).message})`);
  }
}

function parseJson(text: string, document: string): unknown {
  return runToEnd(parseJsonDocument(text, document));
}

/** Both aggregated roots → the view, from JSON text to the frozen view in one sliced computation. */
function* aggregatedViewSteps(apiText: string, apisText: string, maxEntries: number): Sliced<ServerView> {
  const api = yield* parseJsonDocument(apiText, '/api');
  const apis = yield* parseJsonDocument(apisText, '/apis');
  return yield* parseAggregatedDiscoverySteps(api, apis, { maxEntries });
}

interface CachedRoot {
  readonly etag: string;
  readonly text: string;
  readonly contentType: string | null;
}

/**
 * A document whose last full download could not be used (too large, or it did not parse), kept
 * apart from its last good body: a 304 on this ETag re-states this error, never the good body.
 */
interface FailedDocument {
  readonly etag: string | null;
  readonly error: Error;
  /** Consecutive failed downloads. */
  readonly failures: number;
  /** Epoch ms before which it is not downloaded again; conditional requests go on meanwhile. */
  readonly retryAt: number;
}

type RootPath = '/api' | '/apis';
const ROOT_PATHS: readonly RootPath[] = ['/api', '/apis'];

interface RootDoc {
  readonly path: RootPath;
  readonly text: string;
  readonly aggregated: boolean;
  /** What to cache for a later If-None-Match, once the document has parsed. */
  readonly entry: CachedRoot | null;
  /** The answer's ETag, and whether the body came in this round (not the cached good one). */
  readonly etag: string | null;
  readonly downloaded: boolean;
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
  /** The first wait after a failed download (discovery.interval); default 1 s. */
  readonly intervalMs?: number;
  /** The longest (discovery.maxDownloadBackoff); default DEFAULT_MAX_DOWNLOAD_BACKOFF_MS. */
  readonly maxBackoffMs?: number;
  /** discovery.maxResources: more resources and group/versions in one view are refused; default DEFAULT_MAX_RESOURCES. */
  readonly maxResources?: number;
  /** Epoch ms clock of the backoff. */
  readonly now?: () => number;
}

/**
 * Stateful per-server client: keeps the ETags of /api and /apis and the last view it built, so
 * that an unchanged server costs two 304s and yields the very same ServerView object. A document
 * that failed keeps its ETag and its error (apart from the last good body), so that an unchanged
 * bad document costs a 304 too, and is downloaded again only after a backoff.
 */
export class DiscoveryClient {
  private readonly cache = new Map<string, CachedRoot>();
  private readonly failed = new Map<string, FailedDocument>();
  /** The body size of each root document and the OpenAPI index as last answered (not 304). */
  private readonly sizes = new Map<string, number>();
  private last: { view: ServerView; api: string; apis: string } | null = null;
  private openapi: { readonly etag: string | null; readonly index: ReadonlyMap<string, string> } | null = null;
  private openapiError: string | null = null;
  private readonly now: () => number;

  constructor(private readonly opts: DiscoveryClientOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** Fetches and parses discovery. Returns the previous object itself when nothing changed. */
  async fetchView(signal: AbortSignal): Promise<ServerView> {
    const openapiIndex = this.openapiIndex(signal);
    // Observed at once (it may fail while the roots are awaited); its outcome is awaited below.
    openapiIndex.catch(() => undefined);
    // A document known to be bad is asked first: while it stays bad (a 304, or its backoff), the
    // round fails before the others are downloaded for nothing.
    const docs = new Map<RootPath, RootDoc>();
    const known = ROOT_PATHS.filter((p) => this.failed.has(p));
    try {
      for (const d of await settled(known.map((p) => this.root(p, signal)))) docs.set(d.path, d);
      const rest = ROOT_PATHS.filter((p) => !docs.has(p));
      for (const d of await settled(rest.map((p) => this.root(p, signal)))) docs.set(d.path, d);
    } catch (err) {
      // The round ends with its requests: none is left running into the next.
      await openapiIndex.catch(() => undefined);
      throw err;
    }
    const api = docs.get('/api') as RootDoc;
    const apis = docs.get('/apis') as RootDoc;
    const openapi = await openapiIndex;
    try {
      return await this.build(api, apis, openapi, signal);
    } catch (err) {
      // The document that did not parse keeps its ETag and error, if it was this round's download.
      const doc = err instanceof DiscoveryDocumentError ? [api, apis].find((d) => d.path === err.document && d.downloaded) : undefined;
      if (doc) this.noteFailure(doc.path, doc.etag, err as Error);
      throw err;
    }
  }

  /**
   * The size in bytes of /api, /apis and /openapi/v3 as last answered in full (or as far as it was
   * read, past the cap, when too large). A 304 keeps the size.
   */
  documentSizes(): ReadonlyMap<string, number> {
    return new Map(this.sizes);
  }

  private async build(
    api: RootDoc,
    apis: RootDoc,
    openapi: ReadonlyMap<string, string> | undefined,
    signal: AbortSignal,
  ): Promise<ServerView> {
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
      const view = await runSliced(aggregatedViewSteps(api.text, apis.text, this.maxResources()), { ...this.sliceOptions(), signal });
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
      const res = await this.download(OPENAPI_V3_PATH, 'application/json', signal, cached?.etag ?? undefined);
      if (res.status === 304 && cached) {
        this.openapiError = null;
        return cached.index;
      }
      let index: ReadonlyMap<string, string>;
      try {
        index = parseOpenApiV3Index(parseJson(res.text, OPENAPI_V3_PATH));
      } catch (err) {
        this.noteFailure(OPENAPI_V3_PATH, res.etag, err as Error);
        throw err;
      }
      this.failed.delete(OPENAPI_V3_PATH);
      this.openapiError = null;
      // The very same map object while nothing changed: the view (and the snapshot's indexes) are reused.
      const kept = cached && sameOpenApiIndex(cached.index, index) ? cached.index : index;
      this.openapi = { etag: res.etag, index: kept };
      return kept;
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof DiscoveryFetchError && err.status === 404) {
        this.openapi = null;
        this.openapiError = null;
        this.failed.delete(OPENAPI_V3_PATH);
        this.sizes.delete(OPENAPI_V3_PATH);
        return undefined;
      }
      this.openapiError = (err as Error).message;
      return cached?.index;
    }
  }

  private maxResources(): number {
    return this.opts.maxResources ?? DEFAULT_MAX_RESOURCES;
  }

  private sliceOptions(): SliceOptions {
    return sliceBudget(this.opts.sliceBudgetMs);
  }

  private async remember(view: ServerView, api: string, apis: string): Promise<ServerView> {
    const prev = this.last?.view;
    // Same routing content and same /apis bytes: keep the old object so the snapshot index is reused.
    const same = prev !== undefined && this.last?.apis === apis && (await runSliced(sameViewSteps(prev, view), this.sliceOptions()));
    const kept = same ? prev : view;
    this.last = { view: kept, api, apis };
    return kept;
  }

  /** GET /api or /apis with the discovery Accept; a 304 on the good ETag answers from the last good body. */
  private async root(path: RootPath, signal: AbortSignal): Promise<RootDoc> {
    const cached = this.cache.get(path);
    const res = await this.download(path, DISCOVERY_ACCEPT, signal, cached?.etag);
    if (res.status === 304 && cached)
      return {
        path,
        text: cached.text,
        aggregated: isAggregatedDiscoveryMediaType(cached.contentType),
        entry: cached,
        etag: cached.etag,
        downloaded: false,
      };
    const aggregated = isAggregatedDiscoveryMediaType(res.contentType);
    const entry = aggregated && res.etag ? { etag: res.etag, text: res.text, contentType: res.contentType } : null;
    return { path, text: res.text, aggregated, entry, etag: res.etag, downloaded: true };
  }

  /**
   * A conditional GET that minds a document's last failure. With one, If-None-Match carries the
   * failed ETag, and a 304 re-states that failure without a byte downloaded. Within its backoff a
   * changed document (200) is not read, and without an ETag to ask with nothing is sent: the
   * backoff bounds full downloads only, so an unchanged bad document is still checked each round,
   * and a fixed one is read as soon as the backoff ends (at most discovery.maxDownloadBackoff).
   * Too large a body is such a failure too. Other errors (connection, TLS, timeout, HTTP status)
   * download nothing and are retried at the service's pace.
   */
  private async download(path: string, accept: string, signal: AbortSignal, goodEtag: string | undefined): Promise<TextResponse> {
    const bad = this.failed.get(path);
    const backingOff = bad !== undefined && this.now() < bad.retryAt;
    if (bad && backingOff && bad.etag === null) throw bad.error;
    const ifNoneMatch = bad?.etag ?? goodEtag;
    let res: TextResponse;
    try {
      res = await getText(this.opts, path, { accept, signal, ...(ifNoneMatch ? { ifNoneMatch } : {}), readBody: !backingOff });
    } catch (err) {
      const tooLarge = err instanceof DiscoveryFetchError ? err.details.tooLarge : undefined;
      if (tooLarge) {
        this.sizes.set(path, 'contentLength' in tooLarge.seen ? tooLarge.seen.contentLength : tooLarge.seen.read);
        this.noteFailure(path, tooLarge.etag, err as Error);
      }
      throw err;
    }
    if (res.status === 304) {
      if (bad && bad.etag !== null) throw bad.error;
      return res;
    }
    if (res.unread && bad) throw bad.error;
    this.sizes.set(path, res.bytes);
    return res;
  }

  /** One more failed download of `path`: its ETag and error kept, its next download put off. */
  private noteFailure(path: string, etag: string | null, error: Error): void {
    const failures = (this.failed.get(path)?.failures ?? 0) + 1;
    const wait = downloadBackoffMs(failures, this.opts.intervalMs ?? 1000, this.opts.maxBackoffMs ?? DEFAULT_MAX_DOWNLOAD_BACKOFF_MS);
    this.failed.set(path, { etag, error, failures, retryAt: this.now() + wait });
  }

  /**
   * ETags of good bodies are remembered only once they parsed, apart from failed ones: a 304
   * must always lead back to a document that was parsed, good or bad.
   */
  private commit(...docs: readonly RootDoc[]): void {
    for (const d of docs) {
      this.failed.delete(d.path);
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
    const failures: unknown[] = [];
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
          failures.push(err);
          return null;
        }
      },
    );
    if (failures.length > 0) {
      throw new DiscoveryFetchError(
        `legacy discovery of ${failures.length} group/version${failures.length === 1 ? '' : 's'} failed; first: ${failureOf(failures[0]).message}`,
        joinUrl(this.opts.url, '/apis'),
        // The first failure's kind: what the round's metric counts it as.
        { kind: failureOf(failures[0]).kind },
      );
    }
    // Built before the commit: a view past discovery.maxResources fails the round as the document it came from.
    const view = legacyView(
      parts.filter((p): p is LegacyGroupVersion => p !== null),
      { maxEntries: this.maxResources() },
    );
    this.commit(api, apis);
    return this.remember(withOpenApi(view, openapi), api.text, apis.text);
  }
}
