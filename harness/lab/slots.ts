// Hands out lab slots (addresses.ts) across every process on the machine: a slot is a directory
// made with mkdir (atomic: one process wins) under the system's temp dir, holding its owner's pid.
// A slot whose owner is gone (a test runner killed mid-run) is taken over. Released on release()
// and, at the latest, when the process exits.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LAB_MAX_SLOT, labAddresses, type LabAddresses } from './addresses.js';
import { LabError } from './errors.js';

export const SLOTS_DIR = join(tmpdir(), 'skewgate-lab-slots');

export interface LabSlot extends LabAddresses {
  /** Frees the slot for another lab (idempotent). */
  release(): void;
}

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

/** The lowest free slot of 1…LAB_MAX_SLOT (slot 0 is `skewgate-lab lab up`'s), held by this process. */
export function claimLabSlot(slotsDir = SLOTS_DIR): LabSlot {
  mkdirSync(slotsDir, { recursive: true });
  for (let slot = 1; slot <= LAB_MAX_SLOT; slot++) {
    const dir = join(slotsDir, String(slot));
    try {
      mkdirSync(dir);
    } catch {
      if (ownerAlive(dir)) continue;
      rmSync(dir, { recursive: true, force: true });
      try {
        mkdirSync(dir);
      } catch {
        continue; // another process took it over first
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
    return { ...labAddresses(slot), release };
  }
  throw new LabError(`every lab slot (1-${LAB_MAX_SLOT}) is held by a running process (${slotsDir})`);
}
