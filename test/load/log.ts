// Where the load writes what happened. Append-only arrays; the accounting reads them at the end.
import type { RequestRecord, WatchRecord } from './types.js';

export class LoadLog {
  readonly requests: RequestRecord[] = [];
  readonly watch: WatchRecord[] = [];

  request(r: RequestRecord): void {
    this.requests.push(r);
  }

  watchEvent(w: WatchRecord): void {
    this.watch.push(w);
  }
}
