// `skewgate-lab compose --out DIR`: writes docker-compose.yml and deploy/compose/*.yaml (the docker
// compose demo) under DIR, rendered from harness/compose/ with the versions pinned in the repository.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { EXIT_OK } from '../../src/constants.js';
import { packageRoot } from '../../src/util/package-root.js';
import { renderComposeFiles } from '../compose/render.js';
import { readComposeVersions } from '../compose/versions.js';

export async function runCompose(outDir: string): Promise<number> {
  const out = resolve(outDir);
  const files = renderComposeFiles(readComposeVersions(packageRoot()));
  for (const [rel, text] of files) {
    const file = join(out, rel);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, text);
    process.stdout.write(`wrote ${rel}\n`);
  }
  return EXIT_OK;
}
