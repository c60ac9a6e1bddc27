// Where skewgate is installed: the folder holding its package.json (and proto/, .tools/, lab/).
// Modules run from src/ (tsx) or dist/src/ (built), so the root is found by walking up.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder holding skewgate's package.json, found upwards from this module (src or dist). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'skewgate') return dir;
      } catch {
        // not ours; keep climbing
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the skewgate package root');
    dir = up;
  }
}
