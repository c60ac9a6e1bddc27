// A PKI set on disk, made as a whole: generated into a scratch folder inside its directory and moved
// in file by file (the last file marks the set complete), under a lock directory so that concurrent
// processes never interleave two half-written sets; reused while complete and its CA valid for
// another day. The one builder behind the fake PKI (fake/pki.ts) and the lab's (lab/pki.ts).
import { mkdir, mkdtemp, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { certValidFor } from './openssl.js';

export interface PkiSetSpec {
  /** Every file of a complete set, relative to its directory; the last one is moved in last. */
  readonly files: readonly string[];
  /** The set's CA certificate, relative: a set whose CA expires within a day is made again. */
  readonly caFile: string;
  /** A further condition for reusing a complete set (e.g. its marker names the same layout). */
  readonly reusable?: (dir: string) => Promise<boolean>;
  /** Writes every file of `files` into `tmp`; `dir` is where they will be (for paths inside them). */
  readonly generate: (tmp: string, dir: string) => Promise<void>;
  /** Names the caller in the error when the lock is never released. */
  readonly label: string;
}

/** Makes the set in `dir` (an absolute path) unless a complete, reusable one is there. */
export async function ensurePkiSet(dir: string, spec: PkiSetSpec): Promise<void> {
  await ensureGenerated(
    dir,
    () => complete(dir, spec),
    async () => {
      await rm(join(dir, spec.files.at(-1) ?? ''), { force: true });
      await generate(dir, spec);
    },
    spec.label,
  );
}

async function complete(dir: string, spec: PkiSetSpec): Promise<boolean> {
  return (
    (await filesPresent(spec.files.map((name) => join(dir, name)))) &&
    (spec.reusable === undefined || (await spec.reusable(dir))) &&
    certValidFor(join(dir, spec.caFile), 86_400)
  );
}

async function generate(dir: string, spec: PkiSetSpec): Promise<void> {
  const tmp = await mkdtemp(join(dir, '.gen-'));
  try {
    await spec.generate(tmp, dir);
    for (const name of spec.files) await rename(join(tmp, name), join(dir, name));
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Runs `generate` under a lock directory in `dir` unless `complete()` already holds; waits while
 * another process holds the lock. A lock older than a minute was left by a killed process.
 */
async function ensureGenerated(dir: string, complete: () => Promise<boolean>, generate: () => Promise<void>, label = 'pki'): Promise<void> {
  await mkdir(dir, { recursive: true });
  const lock = join(dir, '.lock');
  for (const started = Date.now(); ;) {
    if (await complete()) return;
    try {
      await mkdir(lock);
    } catch {
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > 60_000) await rmdir(lock).catch(() => undefined);
      if (Date.now() - started > 120_000) throw new Error(`${label}: ${lock} stays locked`);
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    try {
      if (!(await complete())) await generate();
    } finally {
      await rmdir(lock).catch(() => undefined);
    }
  }
}

/** True when every file exists and is not empty. */
async function filesPresent(files: readonly string[]): Promise<boolean> {
  try {
    for (const file of files) if ((await stat(file)).size === 0) return false;
    return true;
  } catch {
    return false;
  }
}
