// The versions of the compose demo's images, from the files that already pin them:
// lab/versions.env (kube-apiserver, etcd and Jaeger images) and scripts/install-envoy.sh (the
// Envoy the tests run). Nothing is pinned twice.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnvFile, VERSIONS_FILE_RELATIVE } from '../lab/versions.js';

export interface ComposeVersions {
  /** "1.35.4": kas-1, kas-2. */
  readonly kubeOld: string;
  /** "1.36.3": kas-3 and kas-1-upgraded. */
  readonly kubeNew: string;
  /** registry.k8s.io/etcd tag, e.g. "3.6.8-0". */
  readonly etcdImageTag: string;
  /** jaegertracing/jaeger tag, e.g. "2.13.0". */
  readonly jaegerImageTag: string;
  /** "1.40.0": envoyproxy/envoy:v1.40.0. */
  readonly envoy: string;
}

export const INSTALL_ENVOY_RELATIVE = 'scripts/install-envoy.sh';

const SEMVER = /^\d+\.\d+\.\d+$/;

/** Pure: the two files' texts in, the versions out; throws naming the missing or malformed key. */
export function parseComposeVersions(versionsEnv: string, installEnvoySh: string): ComposeVersions {
  const env = parseEnvFile(versionsEnv);
  const get = (key: string, pattern: RegExp): string => {
    const v = env.get(key);
    if (v === undefined || !pattern.test(v))
      throw new Error(`${VERSIONS_FILE_RELATIVE}: ${key} must match ${String(pattern)} (got ${v ?? 'nothing'})`);
    return v;
  };
  const envoy = /^ENVOY_VERSION="\$\{SKEWGATE_ENVOY_VERSION:-([^}"]+)\}"$/m.exec(installEnvoySh)?.[1];
  if (envoy === undefined || !SEMVER.test(envoy))
    throw new Error(`${INSTALL_ENVOY_RELATIVE}: no ENVOY_VERSION="\${SKEWGATE_ENVOY_VERSION:-X.Y.Z}" line`);
  return {
    kubeOld: get('KUBE_OLD', SEMVER),
    kubeNew: get('KUBE_NEW', SEMVER),
    // registry.k8s.io/etcd tags carry an image revision: 3.6.8-0.
    etcdImageTag: get('ETCD_IMAGE_TAG', /^\d+\.\d+\.\d+-\d+$/),
    jaegerImageTag: get('JAEGER_IMAGE_TAG', SEMVER),
    envoy,
  };
}

/** Reads both files under the package root. */
export function readComposeVersions(root: string): ComposeVersions {
  return parseComposeVersions(
    readFileSync(join(root, VERSIONS_FILE_RELATIVE), 'utf8'),
    readFileSync(join(root, INSTALL_ENVOY_RELATIVE), 'utf8'),
  );
}
