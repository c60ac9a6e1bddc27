// `npm run build`: tsc into dist.next, then dist.next takes dist's place, so that another shell's
// `node dist/...` (a running demo's CLI lines, say) never finds dist half-deleted while tsc runs
// (issue 30: `rm -rf dist && tsc` left it broken for ~20 s). A fresh folder each time: files of
// deleted sources do not linger. The swap is two renames: a few milliseconds, not the compile.
import { execFileSync } from 'node:child_process';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const at = (p) => join(root, p);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(at('dist.next'), { recursive: true, force: true });
try {
  execFileSync(process.execPath, [tsc, '-p', at('tsconfig.json'), '--outDir', at('dist.next')], { stdio: 'inherit' });
} catch {
  rmSync(at('dist.next'), { recursive: true, force: true });
  process.exit(1);
}
rmSync(at('dist.old'), { recursive: true, force: true });
if (existsSync(at('dist'))) renameSync(at('dist'), at('dist.old'));
renameSync(at('dist.next'), at('dist'));
rmSync(at('dist.old'), { recursive: true, force: true });
