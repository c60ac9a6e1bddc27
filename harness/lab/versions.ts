// The lab's pinned versions (lab/versions.env, the one source of truth) and where lab/build.sh
// puts the binaries built from them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { requireExecutable } from '../../src/util/find-binary.js';
import { packageRoot } from '../../src/util/package-root.js';
import { TOOLS_DIR_ENV, toolsDir } from '../../src/util/tools-dir.js';

export interface LabVersions {
  readonly kubeOld: string;
  readonly kubeNew: string;
  readonly etcd: string;
  /** crictl's (cri-tools) version. */
  readonly criTools: string;
  /** The node's sandbox image tag, registry.k8s.io/pause:<this>. */
  readonly pauseImageTag: string;
}

export type LabBinaryName =
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kubectl'
  | 'etcd'
  // The node's (lab/build.sh --node).
  | 'kubelet'
  | 'kube-proxy'
  | 'kube-scheduler'
  | 'crictl';

const NODE_BINARIES: ReadonlySet<LabBinaryName> = new Set(['kubelet', 'kube-proxy', 'kube-scheduler', 'crictl']);

export const VERSIONS_FILE_RELATIVE = 'lab/versions.env';

export class LabBinaryMissingError extends Error {
  readonly code = 'SKEWGATE_ERR_LAB_BINARY';
  constructor(
    readonly path: string,
    node = false,
  ) {
    super(
      node
        ? `lab binary not found or not executable: ${path}: run \`bash lab/build.sh --node\` (builds kubelet, kube-proxy, kube-scheduler and crictl from the Go module proxy into $${TOOLS_DIR_ENV}/lab/bin, default .tools/lab/bin)`
        : `lab binary not found or not executable: ${path}: run \`npm run lab:build\` (builds kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module proxy into $${TOOLS_DIR_ENV}/lab/bin, default .tools/lab/bin)`,
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
  const tag = env.get('PAUSE_IMAGE_TAG');
  if (tag === undefined || !/^\d+\.\d+(\.\d+)?$/.test(tag))
    throw new Error(`${file}: PAUSE_IMAGE_TAG must be a tag like 3.10.1 (got ${tag ?? 'nothing'})`);
  return {
    kubeOld: get('KUBE_OLD'),
    kubeNew: get('KUBE_NEW'),
    etcd: get('ETCD_VERSION'),
    criTools: get('CRI_TOOLS_VERSION'),
    pauseImageTag: tag,
  };
}

/** The lab's run dir (PKI, pid files, logs, configs) unless --dir names another. */
export function defaultLabDir(): string {
  return join(packageRoot(), '.cache', 'lab');
}

/** The tools directory's lab/bin: lab/*.sh's Go-built binaries, each named NAME-VERSION. */
export function labBinDir(): string {
  return join(toolsDir(), 'lab', 'bin');
}

/** `<bin dir>/<name>-<version>`; throws LabBinaryMissingError when it is not an executable. */
export function labBinary(name: LabBinaryName, version: string): string {
  return requireExecutable(join(labBinDir(), `${name}-${version}`), (bin) => new LabBinaryMissingError(bin, NODE_BINARIES.has(name)));
}

export class CapiHookCheckNotFoundError extends Error {
  readonly code = 'SKEWGATE_ERR_CAPI_HOOK_CHECK_NOT_FOUND';
  constructor(readonly path: string) {
    super(
      `capi-hook-check not found at ${path}: build it with \`bash lab/build-capi-hooks.sh\` (into $${TOOLS_DIR_ENV}/lab/bin, default .tools/lab/bin)`,
    );
    this.name = 'CapiHookCheckNotFoundError';
  }
}

/** The Runtime SDK's module version pinned in lab/versions.env (CAPI_API_VERSION=…), which capi-hook-check is built against. */
export function pinnedCapiApiVersion(root = packageRoot()): string {
  const version = parseEnvFile(readFileSync(join(root, VERSIONS_FILE_RELATIVE), 'utf8')).get('CAPI_API_VERSION');
  if (!version) throw new Error(`${VERSIONS_FILE_RELATIVE} has no CAPI_API_VERSION line`);
  return version;
}

/**
 * <tools>/lab/bin/capi-hook-check-<pinned version> (lab/build-capi-hooks.sh): checks a Runtime
 * Extension's HTTPS endpoint against Cluster API's published hook types. Throws
 * CapiHookCheckNotFoundError when it is missing: the test fails, it never skips.
 */
export function requireCapiHookCheck(): string {
  return requireExecutable(join(labBinDir(), `capi-hook-check-${pinnedCapiApiVersion()}`), (bin) => new CapiHookCheckNotFoundError(bin));
}
