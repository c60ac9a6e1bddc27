// The real helm (lab/build-helm.sh, from the Go module proxy) and the chart in deploy/helm/skewgate,
// for test/integration/helm.test.ts and test/cluster/deploy-manifests.test.ts. A missing helm
// throws with the command that builds it: the test fails, it never skips.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { requireExecutable } from '../../src/util/find-binary.js';
import { packageRoot } from '../../src/util/package-root.js';
import { TOOLS_DIR_ENV } from '../../src/util/tools-dir.js';
import { labBinDir, parseEnvFile, VERSIONS_FILE_RELATIVE } from '../../harness/lab/versions.js';
import { obj, type Obj } from './json.js';

export const CHART = join(packageRoot(), 'deploy/helm/skewgate');
/** The values of deploy/kubernetes's example cluster. */
export const KUBEADM_VALUES = join(CHART, 'examples/kubeadm.yaml');

export class HelmNotFoundError extends Error {
  readonly code = 'SKEWGATE_ERR_HELM_NOT_FOUND';
  constructor(readonly path: string) {
    super(`helm not found at ${path}: build it with \`bash lab/build-helm.sh\` (into $${TOOLS_DIR_ENV}/lab/bin, default .tools/lab/bin)`);
    this.name = 'HelmNotFoundError';
  }
}

/** The version pinned in lab/versions.env (HELM_VERSION=…). */
export function pinnedHelmVersion(): string {
  const version = parseEnvFile(readFileSync(join(packageRoot(), VERSIONS_FILE_RELATIVE), 'utf8')).get('HELM_VERSION');
  if (!version) throw new Error(`${VERSIONS_FILE_RELATIVE} has no HELM_VERSION line`);
  return version;
}

/** <tools>/lab/bin/helm-<pinned version>; throws HelmNotFoundError. */
export function requireHelm(): string {
  return requireExecutable(join(labBinDir(), `helm-${pinnedHelmVersion()}`), (bin) => new HelmNotFoundError(bin));
}

export interface HelmRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** helm with these arguments, in the package root, with no kubeconfig of the machine's. */
export function runHelm(helm: string, args: readonly string[]): Promise<HelmRun> {
  return new Promise((resolve) => {
    execFile(helm, args, { cwd: packageRoot(), timeout: 60_000, env: { ...process.env, KUBECONFIG: '/dev/null' } }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** The documents of a YAML stream that are objects (helm's empty ones left out). */
export function yamlObjects(text: string, what: string): Obj[] {
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) throw new Error(`${what}: not a YAML stream`);
  for (const d of docs) if (d.errors.length > 0) throw new Error(`${what}: ${d.errors.map((e) => e.message).join('; ')}`);
  return docs
    .map((d) => d.toJS({ maxAliasCount: 100 }) as unknown)
    .filter((d) => d !== null)
    .map((d) => obj(d, what));
}

/**
 * `helm template skewgate <chart> --namespace <ns> -f examples/kubeadm.yaml --set
 * namespace.create=true <extra>`: the example cluster, Namespace included, as deploy/kubernetes
 * has it. Throws when helm fails.
 */
export async function renderKubeadmExample(helm: string, extra: readonly string[] = [], namespace = 'skewgate'): Promise<Obj[]> {
  const args = ['template', 'skewgate', CHART, '--namespace', namespace, '-f', KUBEADM_VALUES, '--set', 'namespace.create=true', ...extra];
  const r = await runHelm(helm, args);
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: exit ${r.code}: ${r.stderr.trim()}`);
  return yamlObjects(r.stdout, 'helm template');
}
