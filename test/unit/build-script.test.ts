// scripts/build.mjs (npm run build): dist stays whole while the compiler runs, and is replaced only
// by a build that succeeded (issue 30, item 6: `rm -rf dist && tsc` broke another shell's
// `node dist/...` for the whole compile). Run on a folder of its own whose "tsc" records what it
// saw: no timing, no real compile.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../../src/util/package-root.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-build-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'scripts'));
cpSync(join(packageRoot(), 'scripts', 'build.mjs'), join(dir, 'scripts', 'build.mjs'));
writeFileSync(join(dir, 'tsconfig.json'), '{}\n');
mkdirSync(join(dir, 'node_modules', 'typescript', 'bin'), { recursive: true });
writeFileSync(join(dir, 'node_modules', 'typescript', 'package.json'), '{"name":"typescript","version":"0.0.0"}\n');
// The stand-in compiler: notes whether dist still holds the previous build, then writes its outDir.
writeFileSync(
  join(dir, 'node_modules', 'typescript', 'bin', 'tsc'),
  `const fs = require('node:fs'), path = require('node:path');
const out = process.argv[process.argv.indexOf('--outDir') + 1];
fs.appendFileSync(path.join(${JSON.stringify(dir)}, 'seen.txt'), (fs.existsSync(path.join(${JSON.stringify(dir)}, 'dist', 'main.js')) ? 'dist whole' : 'dist missing') + '\\n');
if (process.env.FAIL_COMPILE) process.exit(2);
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, 'main.js'), 'build ' + process.env.BUILD + '\\n');
`,
);
const build = (env: Record<string, string>): number | null =>
  spawnSync(process.execPath, [join(dir, 'scripts', 'build.mjs')], { env: { ...process.env, ...env }, encoding: 'utf8' }).status;

t.test('dist is whole while the compiler runs, replaced by a build that succeeded, kept by one that failed', async (t) => {
  mkdirSync(join(dir, 'dist'));
  writeFileSync(join(dir, 'dist', 'main.js'), 'build 0\n');
  writeFileSync(join(dir, 'dist', 'stale.js'), 'a deleted source\n');
  t.equal(build({ BUILD: '1' }), 0, 'a build: exit 0');
  t.equal(readFileSync(join(dir, 'seen.txt'), 'utf8'), 'dist whole\n', 'the previous dist was there while it compiled');
  t.equal(readFileSync(join(dir, 'dist', 'main.js'), 'utf8'), 'build 1\n', 'then the new build is dist');
  t.notOk(existsSync(join(dir, 'dist', 'stale.js')), 'a fresh folder: nothing of a deleted source lingers');
  t.notOk(existsSync(join(dir, 'dist.next')) || existsSync(join(dir, 'dist.old')), 'no folder left beside it');
  t.not(build({ BUILD: '2', FAIL_COMPILE: '1' }), 0, 'a failed compile: a failed build');
  t.equal(readFileSync(join(dir, 'dist', 'main.js'), 'utf8'), 'build 1\n', 'and dist is the last good build');
  t.notOk(existsSync(join(dir, 'dist.next')), 'its half-written output removed');
});
