// The real parts a cluster test needs. A missing one throws here, at load time, with the command
// that provides it: the test fails, it never skips.
import { findEnvoyBinary } from '../../src/envoy-runtime/process.js';
import { labBinary, labVersions, type LabVersions } from '../../harness/lab/versions.js';

export interface LabParts {
  readonly versions: LabVersions;
  /** kubectl at the newer Kubernetes version. */
  readonly kubectl: string;
  readonly envoy: string;
}

export function requireLabParts(): LabParts {
  const versions = labVersions();
  const kubectl = labBinary('kubectl', versions.kubeNew);
  labBinary('kube-apiserver', versions.kubeOld);
  labBinary('kube-apiserver', versions.kubeNew);
  labBinary('etcd', versions.etcd);
  return { versions, kubectl, envoy: findEnvoyBinary() };
}
