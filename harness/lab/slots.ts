// Hands out lab slots (addresses.ts) across every process on the machine: a slot is a directory
// under the system's temp dir held by one process (machine-lock.ts; a dead owner's is taken over).
// Released on release() and, at the latest, when the process exits.
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LAB_MAX_SLOT, labAddresses, type LabAddresses } from './addresses.js';
import { LabError } from './errors.js';
import { tryHold } from './machine-lock.js';

export const SLOTS_DIR = join(tmpdir(), 'skewgate-lab-slots');

export interface LabSlot extends LabAddresses {
  /** Frees the slot for another lab (idempotent). */
  release(): void;
}

/** The lowest free slot of 1…LAB_MAX_SLOT (slot 0 is `skewgate-lab lab up`'s), held by this process. */
export function claimLabSlot(slotsDir = SLOTS_DIR): LabSlot {
  mkdirSync(slotsDir, { recursive: true });
  for (let slot = 1; slot <= LAB_MAX_SLOT; slot++) {
    const release = tryHold(join(slotsDir, String(slot)));
    if (release === null) continue;
    return { ...labAddresses(slot), release };
  }
  throw new LabError(`every lab slot (1-${LAB_MAX_SLOT}) is held by a running process (${slotsDir})`);
}
