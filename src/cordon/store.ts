// The cordons kept across restarts: read from envoy.xds.directory/cordons.json at start, written
// whole (atomically) on every change, one write at a time. A file that cannot be read is logged
// and set aside, never fatal: the gateway starts with no cordon rather than not at all.
import { readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { writeAtomic, writeAtomicSync } from '../util/atomic-file.js';
import { CORDON_FILE, cordonFileText, NO_CORDONS, parseCordonFile, type CordonTable } from './core/cordons.js';

export class CordonStore {
  private table: CordonTable;
  private writing: Promise<void> = Promise.resolve();

  /** dir null: no place to keep cordons (no envoy.xds); the table stays empty. */
  constructor(
    readonly dir: string | null,
    private readonly log: Logger,
  ) {
    this.table = dir === null ? NO_CORDONS : this.load(dir);
  }

  /** Where the cordons are kept, or null. */
  file(): string | null {
    return this.dir === null ? null : join(this.dir, CORDON_FILE);
  }

  current(): CordonTable {
    return this.table;
  }

  /** Writes `next` and then takes it as current; rejects (the table unchanged) when it cannot be written. */
  set(next: CordonTable): Promise<void> {
    const dir = this.dir;
    if (dir === null) return Promise.reject(new Error('cordons need envoy.xds.directory to be kept in'));
    const run = this.writing.then(async () => {
      await writeAtomic(dir, CORDON_FILE, cordonFileText(next));
      this.table = next;
    });
    this.writing = run.catch(() => undefined);
    return run;
  }

  private load(dir: string): CordonTable {
    const path = join(dir, CORDON_FILE);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log.error({ file: path, err: (err as Error).message }, 'cordons: cannot read the file; starting with no cordon');
      return NO_CORDONS;
    }
    const { table, problems } = parseCordonFile(text);
    if (problems.length > 0) {
      // Kept for the operator to look at: the next write would otherwise replace it.
      const aside = `${path}.unreadable`;
      try {
        renameSync(path, aside);
        // What could be read stays kept.
        writeAtomicSync(dir, CORDON_FILE, cordonFileText(table));
      } catch {
        // Left as it is: the next write replaces it; the log line says what it held.
      }
      this.log.error({ file: path, setAside: aside, problems }, 'cordons: the file has entries that cannot be read; those are dropped');
    }
    if (table.size > 0)
      this.log.warn(
        { cordons: [...table.values()].map((c) => `${c.apiserver} (${c.mode}, by ${c.by || '?'} at ${c.at})`) },
        'cordons kept from before the restart',
      );
    return table;
  }
}
