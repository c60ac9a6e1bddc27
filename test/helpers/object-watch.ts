// One open watch, kept as a record: every event the apiserver sends (the current object first, as
// ADDED, then every change), and whether the stream ended before the test stopped it. A watch
// misses no state in between, which a poll would: a verdict over its record holds of every state
// the object went through.
import { request } from 'undici';
import type { LoadHttp } from '../load/http.js';

export interface WatchedEvent {
  /** ADDED, MODIFIED, DELETED, BOOKMARK, ERROR. */
  readonly type: string;
  readonly object: unknown;
}

export class ObjectWatch {
  readonly events: WatchedEvent[] = [];
  /** Why the stream ended before stop() (null: it ran until then). */
  endedEarly: string | null = null;
  private readonly abort = new AbortController();
  private stopped = false;
  private running: Promise<void> | null = null;

  /** `url`: a collection's watch URL (watch=1, a fieldSelector naming the object). */
  constructor(
    private readonly http: LoadHttp,
    private readonly url: string,
  ) {}

  /** Resolves once the apiserver answered 200 (events follow); throws on anything else. */
  async start(): Promise<void> {
    const res = await request(this.url, {
      method: 'GET',
      dispatcher: this.http.agent,
      headers: this.http.headers(),
      signal: this.abort.signal,
    });
    if (res.statusCode !== 200) throw new Error(`watch ${this.url}: ${res.statusCode} ${(await res.body.text()).slice(0, 200)}`);
    this.running = (async () => {
      let buf = '';
      try {
        for await (const chunk of res.body) {
          buf += (chunk as Buffer).toString('utf8');
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line !== '') this.events.push(JSON.parse(line) as WatchedEvent);
          }
        }
        if (!this.stopped) this.endedEarly = 'the apiserver ended the stream';
      } catch (err) {
        if (!this.stopped) this.endedEarly = (err as Error).message;
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.running;
  }
}
