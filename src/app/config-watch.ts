// Notices that the config file changed, for `skewgate serve` to reload it. An editor that writes
// a new file and renames it over the old one, and a ConfigMap volume that swaps the `..data`
// symlink beside the file, both show up as events in the file's folder but not always under the
// file's own name: so the folder is watched, and the file's stamp (src/util/file-stamp.ts, which
// follows symlinks) decides whether it really changed.
import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../util/log.js';
import { fileStamp } from '../util/file-stamp.js';

/** A save is often several events (truncate, write, rename): look once they have settled. */
export const CONFIG_WATCH_DEBOUNCE_MS = 200;

export interface ConfigWatchOptions {
  /** The file's stamp when it was read at start: only a different one is a change. */
  readonly stamp: string;
  /** Called once per change of the stamp. */
  readonly onChange: () => void;
  readonly logger: Logger;
  readonly debounceMs?: number;
}

export interface ConfigWatch {
  /** Takes the file as it is now as seen: a reload that reads it is about to run (SIGHUP). */
  markSeen(): Promise<void>;
  /** Stops watching; idempotent. */
  close(): void;
}

export function watchConfigFile(file: string, opts: ConfigWatchOptions): ConfigWatch {
  const debounceMs = opts.debounceMs ?? CONFIG_WATCH_DEBOUNCE_MS;
  let stamp = opts.stamp;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  // Stamps are taken one at a time, so that two checks never both see the same change.
  let queue: Promise<void> = Promise.resolve();
  const serial = (step: () => Promise<void>): Promise<void> => (queue = queue.then(step, step));

  const check = (): Promise<void> =>
    serial(async () => {
      const now = await fileStamp(file);
      if (closed || now === stamp) return;
      // Once per change: a file that stays broken is reported once; the next write is seen again.
      stamp = now;
      opts.onChange();
    });

  let watcher: FSWatcher | null = null;
  try {
    // Not persistent: the watch never keeps the process alive on its own.
    watcher = watch(dirname(file), { persistent: false }, () => {
      if (closed) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = null;
        void check();
      }, debounceMs);
      timer.unref();
    });
    watcher.on('error', (err) => {
      opts.logger.warn({ err: err.message, file }, 'config file watch failed: only SIGHUP reloads the config now');
      watcher?.close();
      watcher = null;
    });
  } catch (err) {
    opts.logger.warn({ err: (err as Error).message, file }, 'cannot watch the config file: only SIGHUP reloads the config');
  }

  return {
    markSeen: () =>
      serial(async () => {
        stamp = await fileStamp(file);
      }),
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = null;
      watcher?.close();
      watcher = null;
    },
  };
}
