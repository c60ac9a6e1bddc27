// An open watch through a gateway that reconnects whenever it drops, resuming from the last
// resourceVersion it saw (from scratch after 410 Gone). Every connect attempt is a request
// record; every event and every end of a stream is a watch record.
import { request } from 'undici';
import type { Clock } from './clock.js';
import { REASON_HEADER } from '../../src/constants.js';
import { answerDetail, errorCode, headerValue, type LoadHttp } from './http.js';
import type { LoadLog } from './log.js';
import type { ResourceKind } from './types.js';
import { armSelector, collectionPath, type Workload } from './workload.js';

export interface WatchLoopOptions {
  readonly arm: string;
  readonly kind: ResourceKind;
  readonly baseUrl: string;
  readonly http: LoadHttp;
  readonly workload: Workload;
  readonly clock: Clock;
  readonly log: LoadLog;
  /** Pause before reconnecting after a failed connect or a dropped stream. */
  readonly retryMs?: number;
  readonly headers?: Record<string, string>;
}

interface WatchEvent {
  readonly type?: string;
  readonly object?: {
    readonly metadata?: { readonly name?: string; readonly resourceVersion?: string };
    readonly code?: number;
    readonly message?: string;
  };
}

export class WatchLoop {
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;
  private stopped = false;
  private resourceVersion: string | undefined;

  constructor(private readonly o: WatchLoopOptions) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.running;
  }

  private url(): string {
    const spec = this.o.kind === 'skewed' ? this.o.workload.skewed : this.o.workload.common;
    const q = new URLSearchParams({ watch: 'true', allowWatchBookmarks: 'true', labelSelector: armSelector(this.o.arm) });
    if (this.resourceVersion !== undefined) q.set('resourceVersion', this.resourceVersion);
    return `${this.o.baseUrl}${collectionPath(spec, this.o.workload.namespace(this.o.arm))}?${q.toString()}`;
  }

  private async loop(): Promise<void> {
    const retryMs = this.o.retryMs ?? 500;
    while (!this.stopped) {
      await this.once();
      if (this.stopped) break;
      await new Promise<void>((r) => {
        const onAbort = (): void => {
          clearTimeout(timer);
          r();
        };
        const timer = setTimeout(() => {
          this.abort.signal.removeEventListener('abort', onAbort);
          r();
        }, retryMs);
        this.abort.signal.addEventListener('abort', onAbort, { once: true });
      });
    }
  }

  private async once(): Promise<void> {
    const { arm, kind, clock, log } = this.o;
    const startMs = clock();
    let res;
    try {
      res = await request(this.url(), {
        method: 'GET',
        dispatcher: this.o.http.agent,
        headers: this.o.http.headers(this.o.headers),
        signal: this.abort.signal,
      });
    } catch (err) {
      if (!this.stopped) log.request({ arm, kind, op: 'watch', startMs, endMs: clock(), status: null, error: errorCode(err) });
      return;
    }
    const auditId = headerValue(res.headers, 'audit-id');
    const audit = auditId !== undefined ? { auditId } : {};
    if (res.statusCode !== 200) {
      const text = await res.body.text().catch(() => '');
      const reason = headerValue(res.headers, REASON_HEADER);
      const detail = res.statusCode !== 404 ? answerDetail(text, reason) : undefined;
      const retryAfter = headerValue(res.headers, 'retry-after');
      log.request({
        arm,
        kind,
        op: 'watch',
        startMs,
        endMs: clock(),
        status: res.statusCode,
        ...audit,
        ...(reason !== undefined ? { reason } : {}),
        ...(detail !== undefined ? { detail } : {}),
        ...(retryAfter !== undefined ? { retryAfter } : {}),
      });
      return;
    }
    log.request({ arm, kind, op: 'watch', startMs, endMs: clock(), status: res.statusCode, ...audit });
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString('utf8');
        for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line !== '') this.event(line);
        }
      }
      if (!this.stopped) log.watchEvent({ arm, kind, atMs: clock(), type: 'END', detail: 'stream ended' });
    } catch (err) {
      if (!this.stopped) log.watchEvent({ arm, kind, atMs: clock(), type: 'END', detail: errorCode(err) });
    }
  }

  private event(line: string): void {
    const { arm, kind, clock, log } = this.o;
    let ev: WatchEvent;
    try {
      ev = JSON.parse(line) as WatchEvent;
    } catch {
      log.watchEvent({ arm, kind, atMs: clock(), type: 'ERROR', detail: `unparseable: ${line.slice(0, 80)}` });
      return;
    }
    const type = ev.type ?? 'UNKNOWN';
    if (type === 'ERROR') {
      // 410 Gone: the resourceVersion is too old; start again from the current state.
      if (ev.object?.code === 410) this.resourceVersion = undefined;
      log.watchEvent({ arm, kind, atMs: clock(), type, detail: `${ev.object?.code ?? '?'} ${ev.object?.message ?? ''}` });
      return;
    }
    const rv = ev.object?.metadata?.resourceVersion;
    if (rv !== undefined) this.resourceVersion = rv;
    const name = ev.object?.metadata?.name;
    log.watchEvent({ arm, kind, atMs: clock(), type, ...(name !== undefined && type !== 'BOOKMARK' ? { name } : {}) });
  }
}
