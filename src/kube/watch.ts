// Watches CustomResourceDefinitions and APIServices through any healthy apiserver, so that a new
// API is learnt within a second (docs/design.md, invariant 1) instead of at the next poll. Every change
// only triggers a discovery refresh: discovery documents stay the single source of truth.
import type { Logger } from 'pino';
import { DEFAULT_MAX_DOCUMENT_BYTES } from '../constants.js';
import { type ServerTarget } from './transport.js';
import { getText, openStream } from './requests.js';
import { MAX_DOCUMENT_BYTES_KEY } from './core/bounds.js';

export interface WatchedKind {
  readonly kind: string;
  /** Collection path, e.g. /apis/apiextensions.k8s.io/v1/customresourcedefinitions */
  readonly path: string;
  /** Only the objects with these labels (a labelSelector). */
  readonly labelSelector?: string;
  /**
   * A kind whose objects skewgate keeps (identity Leases): the whole collection is listed and
   * every object handed here, instead of a discovery refresh per event (a Lease is renewed every
   * few seconds; discovery does not change with it).
   */
  readonly track?: (change: WatchChange) => void;
}

/** What a tracked kind is told: the whole list after a (re)list, or one event's object. */
export type WatchChange =
  | { readonly type: 'RELIST'; readonly items: readonly unknown[] }
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: unknown };

export const WATCHED_KINDS: readonly WatchedKind[] = Object.freeze([
  { kind: 'CustomResourceDefinition', path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions' },
  { kind: 'APIService', path: '/apis/apiregistration.k8s.io/v1/apiservices' },
]);

export interface WatchCandidate {
  readonly target: ServerTarget;
  /** healthy: ready and its last discovery round succeeded; unknown: not probed yet. */
  readonly health: 'healthy' | 'unknown' | 'unhealthy';
}

const RANK = { healthy: 0, unknown: 1, unhealthy: 2 } as const;

export interface ApiWatcherOptions {
  /** The servers to watch through, in preference order; asked again at every (re)connect. */
  readonly candidates: () => readonly WatchCandidate[];
  /** Something changed (or may have, after a relist): the service refreshes discovery. */
  readonly onChange: (kind: string, eventType: string) => void;
  readonly logger: Logger;
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Server-side watch timeout; the watch is then resumed from the last resourceVersion. */
  readonly watchTimeoutSeconds?: number;
}

/** Why one watch connection ended; events counts progress (changes and bookmarks). */
type Ended = { readonly relist: boolean; readonly resourceVersion: string | null; readonly events: number };

class Gone extends Error {}

/** A watch line (one event) longer than discovery.maxDocumentBytes: the stream is dropped, never buffered on. */
export class WatchLineTooLong extends Error {
  constructor(readonly limit: number) {
    super(`a watch event longer than ${MAX_DOCUMENT_BYTES_KEY} (${limit} bytes)`);
    this.name = 'WatchLineTooLong';
  }
}

/**
 * Splits a byte stream into newline-delimited JSON values, across chunk boundaries. A line that
 * grows past maxLineBytes throws WatchLineTooLong (the newline byte never occurs inside UTF-8).
 */
export async function* jsonLines(body: AsyncIterable<Uint8Array>, maxLineBytes = Infinity): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  let buf = '';
  /** Bytes since the last newline. */
  let lineBytes = 0;
  for await (const chunk of body) {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
      if (lineBytes + (nl - start) > maxLineBytes) throw new WatchLineTooLong(maxLineBytes);
      lineBytes = 0;
      start = nl + 1;
    }
    lineBytes += chunk.byteLength - start;
    if (lineBytes > maxLineBytes) throw new WatchLineTooLong(maxLineBytes);
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) yield line;
    }
  }
  buf += decoder.decode();
  if (buf.trim()) yield buf.trim();
}

function resourceVersionOf(o: unknown): string | null {
  const meta = (o as { metadata?: { resourceVersion?: unknown } } | null)?.metadata;
  return typeof meta?.resourceVersion === 'string' && meta.resourceVersion !== '' ? meta.resourceVersion : null;
}

class KindWatch {
  private attempt = 0;
  private backoff: number;
  private conn: { name: string; ctrl: AbortController } | null = null;
  private lastProblem: string | null = null;
  private sleeper: { timer: NodeJS.Timeout; resolve: () => void } | null = null;
  /** Lines that were not a watch event: logged and counted, never fatal. */
  skipped = 0;
  done: Promise<void> = Promise.resolve();

  constructor(
    private readonly kind: WatchedKind,
    private readonly opts: ApiWatcherOptions,
    private readonly signal: AbortSignal,
  ) {
    this.backoff = opts.minBackoffMs ?? 250;
  }

  start(): void {
    this.done = this.loop();
  }

  /** Leave the current server if it turned unhealthy or left the members while a healthy one exists. */
  reconsider(): void {
    const conn = this.conn;
    if (!conn) return;
    const cands = this.opts.candidates();
    const mine = cands.find((c) => c.target.name === conn.name);
    // Only a server known to be bad (or no longer a member) is left; "not probed yet" is no reason to move.
    if ((mine === undefined || mine.health === 'unhealthy') && cands.some((c) => c.health === 'healthy')) {
      this.opts.logger.info({ kind: this.kind.kind, server: conn.name }, 'watch server unhealthy; moving the watch');
      this.attempt = 0;
      conn.ctrl.abort();
    }
  }

  wake(): void {
    if (this.sleeper) {
      clearTimeout(this.sleeper.timer);
      this.sleeper.resolve();
      this.sleeper = null;
    }
  }

  private pick(): WatchCandidate | null {
    const cands = this.opts.candidates();
    if (cands.length === 0) return null;
    // Stable sort: config order within each health class.
    const ordered = [...cands].sort((x, y) => RANK[x.health] - RANK[y.health]);
    return ordered[this.attempt % ordered.length] ?? null;
  }

  private sleep(ms: number): Promise<void> {
    if (this.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.sleeper = null;
        resolve();
      }, ms);
      timer.unref();
      this.sleeper = { timer, resolve };
    });
  }

  private async pause(): Promise<void> {
    await this.sleep(this.backoff);
    this.backoff = Math.min(this.backoff * 2, this.opts.maxBackoffMs ?? 5000);
  }

  private async loop(): Promise<void> {
    const log = this.opts.logger;
    let rv: string | null = null;
    while (!this.signal.aborted) {
      const cand = this.pick();
      if (!cand) {
        await this.sleep(this.backoff);
        continue;
      }
      const ctrl = new AbortController();
      const onAbort = (): void => ctrl.abort();
      this.signal.addEventListener('abort', onAbort, { once: true });
      this.conn = { name: cand.target.name, ctrl };
      try {
        if (rv === null) {
          rv = await this.list(cand.target, ctrl.signal);
          // Changes may have happened while nobody watched.
          if (this.kind.track === undefined) this.opts.onChange(this.kind.kind, 'RELIST');
        }
        const opened = performance.now();
        const ended = await this.watch(cand.target, rv, ctrl.signal);
        // A quiet watch that stayed open a while was healthy too; its reconnect must be immediate.
        const lasted = performance.now() - opened >= 5000;
        rv = ended.relist ? null : ended.resourceVersion;
        if (this.lastProblem) log.info({ kind: this.kind.kind, server: cand.target.name }, 'watch recovered');
        this.lastProblem = null;
        if (ended.events > 0 || lasted) {
          this.backoff = this.opts.minBackoffMs ?? 250;
        } else if (!ctrl.signal.aborted) {
          // Closed (or expired) without progress: do not spin on a server that hangs up at once.
          await this.pause();
        }
      } catch (err) {
        if (this.signal.aborted) break;
        if (err instanceof Gone) {
          rv = null;
          await this.pause();
          continue;
        }
        const msg = (err as Error).message;
        if (!ctrl.signal.aborted) {
          // One warn per new problem; repeats at debug so a dead server does not flood the log.
          if (msg !== this.lastProblem)
            log.warn({ kind: this.kind.kind, server: cand.target.name, err: msg }, 'watch failed; trying the next apiserver');
          else log.debug({ kind: this.kind.kind, server: cand.target.name, err: msg }, 'watch failed again');
          this.lastProblem = msg;
          this.attempt++;
          await this.pause();
        }
      } finally {
        this.signal.removeEventListener('abort', onAbort);
        ctrl.abort();
        this.conn = null;
      }
    }
  }

  private query(extra: Record<string, string>): string {
    const q = new URLSearchParams(extra);
    if (this.kind.labelSelector !== undefined) q.set('labelSelector', this.kind.labelSelector);
    return `${this.kind.path}?${q}`;
  }

  private async list(target: ServerTarget, signal: AbortSignal): Promise<string | null> {
    // An untracked kind needs only the collection's resourceVersion: limit keeps the answer small.
    const track = this.kind.track;
    const res = await getText(target, this.query(track === undefined ? { limit: '1' } : {}), { accept: 'application/json', signal });
    let doc: unknown;
    try {
      doc = JSON.parse(res.text);
    } catch {
      throw new Error(`list ${this.kind.path} on ${target.name}: not JSON`);
    }
    if (track !== undefined) {
      const items = (doc as { items?: unknown } | null)?.items;
      if (!Array.isArray(items)) throw new Error(`list ${this.kind.path} on ${target.name}: no items`);
      track({ type: 'RELIST', items });
    }
    return resourceVersionOf(doc);
  }

  private async watch(target: ServerTarget, rv: string | null, signal: AbortSignal): Promise<Ended> {
    const params: Record<string, string> = {
      watch: '1',
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(this.opts.watchTimeoutSeconds ?? 290),
    };
    if (rv !== null) params['resourceVersion'] = rv;
    let res;
    try {
      res = await openStream(target, this.query(params), { accept: 'application/json', signal });
    } catch (err) {
      if ((err as { status?: unknown }).status === 410) throw new Gone();
      throw err;
    }
    if (!res.body) return { relist: false, resourceVersion: rv, events: 0 };
    this.opts.logger.debug({ kind: this.kind.kind, server: target.name, resourceVersion: rv }, 'watching');
    let events = 0;
    let current = rv;
    try {
      for await (const line of jsonLines(res.body, target.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES)) {
        let ev: { type?: unknown; object?: unknown };
        try {
          ev = JSON.parse(line) as typeof ev;
        } catch {
          this.skipped++;
          this.opts.logger.warn(
            { kind: this.kind.kind, server: target.name, skipped: this.skipped },
            'watch: skipped a line that is not JSON',
          );
          continue;
        }
        switch (ev?.type) {
          case 'ADDED':
          case 'MODIFIED':
          case 'DELETED':
            events++;
            current = resourceVersionOf(ev.object) ?? current;
            if (this.kind.track !== undefined) this.kind.track({ type: ev.type, object: ev.object });
            else this.opts.onChange(this.kind.kind, ev.type);
            break;
          case 'BOOKMARK':
            events++;
            current = resourceVersionOf(ev.object) ?? current;
            break;
          case 'ERROR': {
            const status = ev.object as { code?: unknown; message?: unknown } | undefined;
            this.opts.logger.info(
              { kind: this.kind.kind, server: target.name, code: status?.code, message: status?.message },
              'watch error event; relisting',
            );
            return { relist: true, resourceVersion: null, events };
          }
          default:
            this.skipped++;
            this.opts.logger.warn(
              { kind: this.kind.kind, server: target.name, skipped: this.skipped },
              'watch: skipped an event of unknown type',
            );
        }
      }
    } catch (err) {
      // Too long an event is the server's fault, not a cut: a failure, with its backoff.
      if (err instanceof WatchLineTooLong) throw new Error(`watch ${this.kind.path} on ${target.name}: ${err.message}`);
      // A stream cut after events arrived: resume from where it was (not an error worth a relist).
      if (signal.aborted || events > 0) return { relist: false, resourceVersion: current, events };
      throw err;
    }
    return { relist: false, resourceVersion: current, events };
  }
}

/** Both watches (CRDs and APIServices), their lifecycle and their switching between servers. */
export class ApiWatcher {
  private readonly controller = new AbortController();
  private readonly watches: KindWatch[];
  private started = false;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly opts: ApiWatcherOptions,
    kinds: readonly WatchedKind[] = WATCHED_KINDS,
  ) {
    this.watches = kinds.map((k) => new KindWatch(k, opts, this.controller.signal));
  }

  start(): void {
    if (this.started || this.closing) return;
    this.started = true;
    for (const w of this.watches) w.start();
  }

  /** Called when server health changed: a watch on an unhealthy server moves to a healthy one. */
  reconsider(): void {
    for (const w of this.watches) w.reconsider();
  }

  /** Lines or events skipped as malformed, across both watches. */
  get skipped(): number {
    return this.watches.reduce((n, w) => n + w.skipped, 0);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.controller.abort();
      for (const w of this.watches) w.wake();
      await Promise.all(this.watches.map((w) => w.done.catch(() => undefined)));
      this.opts.logger.debug('watches closed');
    })();
    return this.closing;
  }
}
