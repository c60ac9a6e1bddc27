// The lab's pinned versions (lab/versions.env, the one source of truth) and where lab/build.sh
// puts the binaries built from them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathFromEnv, requireExecutable } from '../../src/find-binary.js';
import { packageRoot } from '../../src/package-root.js';

export interface LabVersions {
  readonly kubeOld: string;
  readonly kubeNew: string;
  readonly etcd: string;
}

export type LabBinaryName = 'kube-apiserver' | 'kube-controller-manager' | 'kubectl' | 'etcd';

export const VERSIONS_FILE_RELATIVE = 'lab/versions.env';
export const LAB_BIN_RELATIVE = '.tools/lab/bin';
/** Another folder of binaries named like lab/build.sh names them (e.g. a CI cache). */
export const LAB_BIN_DIR_ENV = 'SKEWGATE_LAB_BIN_DIR';

export class LabBinaryMissingError extends Error {
  readonly code = 'SKEWGATE_ERR_LAB_BINARY';
  constructor(readonly path: string) {
    super(
      `lab binary not found or not executable: ${path}: run \`npm run lab:build\` (builds kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module proxy into ${LAB_BIN_RELATIVE}), or set ${LAB_BIN_DIR_ENV}`,
    );
    this.name = 'LabBinaryMissingError';
  }
}

/** Parses KEY=VALUE lines (comments and blank lines skipped; optional quotes). Pure. */
export function parseEnvFile(text: string): ReadonlyMap<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!m) continue;
    out.set(m[1] as string, (m[2] as string).trim().replace(/^(['"])(.*)\1$/, '$2'));
  }
  return out;
}

export function labVersions(): LabVersions {
  const file = join(packageRoot(), VERSIONS_FILE_RELATIVE);
  const env = parseEnvFile(readFileSync(file, 'utf8'));
  const get = (key: string): string => {
    const v = env.get(key);
    if (v === undefined || !/^\d+\.\d+\.\d+$/.test(v))
      throw new Error(`${file}: ${key} must be a version like 1.36.3 (got ${v ?? 'nothing'})`);
    return v;
  };
  return { kubeOld: get('KUBE_OLD'), kubeNew: get('KUBE_NEW'), etcd: get('ETCD_VERSION') };
}

/** The lab's run dir (PKI, pid files, logs, configs) unless --dir names another. */
export function defaultLabDir(): string {
  return join(packageRoot(), '.cache', 'lab');
}

export function labBinDir(): string {
  return pathFromEnv(LAB_BIN_DIR_ENV, () => join(packageRoot(), LAB_BIN_RELATIVE));
}

/** `<bin dir>/<name>-<version>`; throws LabBinaryMissingError when it is not an executable. */
export function labBinary(name: LabBinaryName, version: string): string {
  return requireExecutable(join(labBinDir(), `${name}-${version}`), (bin) => new LabBinaryMissingError(bin));
}
