// Mutual exclusion across every process on the machine: a directory made with mkdir (atomic: one
// process wins) holding its owner's pid. A directory whose owner is gone (a test runner killed
// mid-run) is taken over. Lab slots (slots.ts) and the cluster tests' shared results file use it.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

function ownerAlive(dir: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir, 'owner'), 'utf8').trim());
  } catch {
    // Being written right now (mkdir and write are two steps): alive.
    return true;
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Holds `dir` for this process, or returns null when a live process holds it. The release function
 * is idempotent and also runs when the process exits.
 */
export function tryHold(dir: string): (() => void) | null {
  try {
    mkdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    if (ownerAlive(dir)) return null;
    rmSync(dir, { recursive: true, force: true });
    try {
      mkdirSync(dir);
    } catch {
      return null; // another process took it over first
    }
  }
  writeFileSync(join(dir, 'owner'), `${process.pid}\n`);
  let held = true;
  const release = (): void => {
    if (!held) return;
    held = false;
    process.removeListener('exit', release);
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', release);
  return release;
}

/** Runs `fn` while holding `dir`, waiting (polling every 20 ms) up to `waitMs` for its holder. */
export async function withMachineLock<T>(dir: string, fn: () => Promise<T>, waitMs = 60_000): Promise<T> {
  const deadline = Date.now() + waitMs;
  let release = tryHold(dir);
  while (release === null) {
    if (Date.now() > deadline) throw new Error(`${dir} is still held by a running process after ${waitMs} ms`);
    await sleep(20);
    release = tryHold(dir);
  }
  try {
    return await fn();
  } finally {
    release();
  }
}
