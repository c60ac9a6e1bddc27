// One arm of the load: an open loop of creates, gets and lists of the skewed and the common
// resource through one gateway, at a fixed rate whatever the answers (a stalled gateway shows
// up as late, failed requests, not as fewer requests). Never retries.
import { REASON_HEADER } from '../../src/constants.js';
import type { Clock } from './clock.js';
import { answerDetail, errorCode, headerValue, type LoadHttp } from './http.js';
import type { LoadLog } from './log.js';
import type { Op, ResourceKind } from './types.js';
import { armSelector, collectionPath, objectManifest, objectPath, opAt, type ResourceSpec, type Workload } from './workload.js';

export interface ArmLoadOptions {
  readonly arm: string;
  readonly baseUrl: string;
  readonly http: LoadHttp;
  readonly workload: Workload;
  readonly ratePerSec: number;
  readonly clock: Clock;
  /** [0, 1), injected so that runs can be reproduced. */
  readonly rng: () => number;
  readonly log: LoadLog;
  /** Extra request headers (e.g. a User-Agent per arm). */
  readonly headers?: Record<string, string>;
}

export class ArmLoad {
  private timer: NodeJS.Timeout | undefined;
  private readonly inflight = new Set<Promise<void>>();
  private readonly acked: Record<ResourceKind, string[]> = { skewed: [], common: [] };
  private seq = 0;
  private startMs = 0;

  constructor(private readonly o: ArmLoadOptions) {}

  start(): void {
    this.startMs = this.o.clock();
    const intervalMs = 1000 / this.o.ratePerSec;
    // A 50 ms tick fires every request that has fallen due (catching up after a slow tick).
    this.timer = setInterval(() => {
      const due = Math.floor((this.o.clock() - this.startMs) / intervalMs);
      while (this.seq <= due) {
        const i = this.seq++;
        const p = this.fire(i).finally(() => this.inflight.delete(p));
        this.inflight.add(p);
      }
    }, 50);
  }

  /** Stops sending and waits for every request in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all([...this.inflight]);
  }

  acknowledged(kind: ResourceKind): readonly string[] {
    return this.acked[kind];
  }

  private spec(kind: ResourceKind): ResourceSpec {
    return kind === 'skewed' ? this.o.workload.skewed : this.o.workload.common;
  }

  private async fire(i: number): Promise<void> {
    const { kind, op } = opAt(i);
    const spec = this.spec(kind);
    const ns = this.o.workload.namespace(this.o.arm);
    const names = this.acked[kind];
    if (op === 'create') {
      const token = `${this.o.arm}-${kind}-${i}`;
      await this.record(kind, 'create', 'POST', collectionPath(spec, ns), objectManifest(spec, { arm: this.o.arm, token, namespace: ns }), {
        token,
      });
    } else if (op === 'get' && names.length > 0) {
      const name = names[Math.floor(this.o.rng() * names.length)] as string;
      await this.record(kind, 'get', 'GET', objectPath(spec, ns, name), undefined, { name });
    } else {
      await this.record(
        kind,
        'list',
        'GET',
        `${collectionPath(spec, ns)}?labelSelector=${encodeURIComponent(armSelector(this.o.arm))}&limit=10`,
        undefined,
        {},
      );
    }
  }

  private async record(
    kind: ResourceKind,
    op: Op,
    method: string,
    path: string,
    body: unknown,
    extra: { token?: string; name?: string },
  ): Promise<void> {
    const startMs = this.o.clock();
    const base = { arm: this.o.arm, kind, op, startMs, ...extra };
    try {
      const res = await this.o.http.send(method, `${this.o.baseUrl}${path}`, body, this.o.headers);
      const endMs = this.o.clock();
      const reason = headerValue(res.headers, REASON_HEADER);
      let name = extra.name;
      if (op === 'create' && res.status >= 200 && res.status < 300) {
        name = (JSON.parse(res.text) as { metadata?: { name?: string } }).metadata?.name;
        if (name !== undefined) this.acked[kind].push(name);
      }
      const detail = res.status >= 300 && res.status !== 404 ? answerDetail(res.text, reason) : undefined;
      const auditId = headerValue(res.headers, 'audit-id');
      const retryAfter = res.status >= 300 ? headerValue(res.headers, 'retry-after') : undefined;
      this.o.log.request({
        ...base,
        endMs,
        status: res.status,
        ...(name !== undefined ? { name } : {}),
        ...(reason !== undefined ? { reason } : {}),
        ...(detail !== undefined ? { detail } : {}),
        ...(auditId !== undefined ? { auditId } : {}),
        ...(retryAfter !== undefined ? { retryAfter } : {}),
      });
    } catch (err) {
      this.o.log.request({ ...base, endMs: this.o.clock(), status: null, error: errorCode(err) });
    }
  }
}
