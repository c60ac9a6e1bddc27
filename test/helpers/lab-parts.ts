// The real parts a cluster test needs. A missing one throws here, at load time, with the command
// that provides it: the test fails, it never skips.
import { accessSync, constants as fsConstants } from 'node:fs';
import { join } from 'node:path';
import { findEnvoyBinary } from '../../src/envoy/process.js';
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

export interface NodeParts {
  readonly kubelet: string;
  readonly kubeProxy: string;
  readonly crictl: string;
  readonly containerd: string;
  readonly ctr: string;
  readonly cniBinDir: string;
  /** registry.k8s.io/pause:<tag>, in the local Docker engine (scripts/demo-images.sh). */
  readonly pauseImage: string;
}

/** What a lab node needs on this machine; throws, naming the command that provides what is missing. */
export function requireNodeParts(): NodeParts {
  const versions = labVersions();
  const debian = (bin: string, pkg: string): string => {
    try {
      accessSync(bin, fsConstants.X_OK);
      return bin;
    } catch {
      throw new Error(`${bin} is missing: apt-get install ${pkg}`);
    }
  };
  const cniBinDir = '/usr/lib/cni';
  for (const plugin of ['bridge', 'host-local', 'loopback', 'portmap']) debian(join(cniBinDir, plugin), 'containernetworking-plugins');
  debian('/usr/sbin/runc', 'runc');
  return {
    kubelet: labBinary('kubelet', versions.kubeOld),
    kubeProxy: labBinary('kube-proxy', versions.kubeOld),
    crictl: labBinary('crictl', versions.criTools),
    containerd: debian('/usr/bin/containerd', 'containerd'),
    ctr: debian('/usr/bin/ctr', 'containerd'),
    cniBinDir,
    pauseImage: `registry.k8s.io/pause:${versions.pauseImageTag}`,
  };
}
