// A node of a lab as `skewgate-lab node` and the node tests make it: the parts it runs on this
// machine (kubelet and kube-proxy built by lab/build.sh --node, Debian's containerd, runc and CNI
// plugins, the pause image) and its options in the lab's slot — kube-proxy, the kubelet's serving
// and client certificates from the lab CA, a server checked by the name `kubernetes` (the caller
// adds which). A missing part throws with the command that provides it.
import { accessSync, constants as fsConstants } from 'node:fs';
import { join } from 'node:path';
import type { LabAddresses } from '../lab/addresses.js';
import type { Lab } from '../lab/lab.js';
import { labBinary, labVersions } from '../lab/versions.js';
import type { NodeOptions } from './node.js';
import { labNodeSpec } from './placement.js';

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

/** Node `index` (0…3: its addresses, pod range, namespace) of the lab's slot; add `server`. */
export function labNodeOptions(
  lab: Lab,
  parts: NodeParts,
  o: {
    readonly addresses: LabAddresses;
    readonly index: number;
    readonly name: string;
    readonly images: readonly string[];
    readonly log: (line: string) => void;
  },
): Omit<NodeOptions, 'server'> {
  return {
    spec: labNodeSpec({
      addresses: o.addresses,
      index: o.index,
      name: o.name,
      labDir: lab.dir,
      sandboxImage: parts.pauseImage,
      cniBinDir: parts.cniBinDir,
      clientCaFile: lab.pki.caFile,
    }),
    serverName: 'kubernetes',
    ca: { certFile: lab.pki.caFile, keyFile: lab.pki.caKeyFile },
    binaries: { kubelet: parts.kubelet, containerd: parts.containerd, ctr: parts.ctr },
    images: o.images,
    kubeProxy: { binary: parts.kubeProxy, certFile: lab.pki.kubeProxyCertFile, keyFile: lab.pki.kubeProxyKeyFile },
    log: o.log,
  };
}
