// A file replaced whole or not at all: written beside its final name, then renamed over it. A
// reader (Envoy's file watch, skewgate at its next start) never sees half of one.
import { renameSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

function tmpOf(dir: string, name: string): string {
  return join(dir, `.${name}.${process.pid}.tmp`);
}

export function writeAtomicSync(dir: string, name: string, text: string): void {
  const tmp = tmpOf(dir, name);
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, join(dir, name));
}

export async function writeAtomic(dir: string, name: string, text: string): Promise<void> {
  const tmp = tmpOf(dir, name);
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, join(dir, name));
}
