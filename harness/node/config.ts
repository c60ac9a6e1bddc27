// What a lab node's processes are started with: containerd's config, the CNI network, the
// KubeletConfiguration and the kubelet's command line. Pure: every path, name and address comes in
// the spec. What these machines need (root, no systemd, cgroup v1 with cgroupfs, no registry) is
// said where it is set; ../shared/reference/node.md has the facts it was measured from.
import { join } from 'node:path';

export interface NodeSpec {
  /** The Node's name (kubelet --hostname-override). */
  readonly name: string;
  /** Where everything of this node lives: configs, containerd's root and state, the kubelet's root. */
  readonly dir: string;
  /** The node's address (kubelet --node-ip, its serving address): its eth0 in its own network namespace. */
  readonly ip: string;
  /** The node's network namespace and the link to this machine (netns.ts). */
  readonly netns: string;
  readonly hostIf: string;
  readonly hostIp: string;
  /** The kubelet's HTTPS port (exec, logs, port-forward); healthz is on the next one. */
  readonly kubeletPort: number;
  /** containerd's streaming server port (exec/attach/port-forward between kubelet and runtime). */
  readonly streamPort: number;
  /** The pod network of this node, e.g. 10.244.1.0/24; pods get addresses from it on a bridge. */
  readonly podCidr: string;
  /** The pods' Linux bridge (≤ 15 characters), inside the node's namespace. */
  readonly bridge: string;
  /** The pod sandbox image, e.g. registry.k8s.io/pause:3.10.1 (imported, never pulled). */
  readonly sandboxImage: string;
  /** Where the CNI plugins are (Debian's containernetworking-plugins: /usr/lib/cni). */
  readonly cniBinDir: string;
  /** The cluster CA (clients of the kubelet's API), and the kubelet's serving pair. */
  readonly clientCaFile: string;
  readonly servingCertFile: string;
  readonly servingKeyFile: string;
  /** Absent: a standalone kubelet (static pods only), no apiserver. */
  readonly kubeconfig?: string;
}

/** The files and sockets of a node, under spec.dir. */
export function nodePaths(dir: string) {
  return {
    containerdConfig: join(dir, 'containerd.toml'),
    containerdRoot: join(dir, 'containerd', 'root'),
    containerdState: join(dir, 'containerd', 'state'),
    containerdSocket: join(dir, 'containerd', 'containerd.sock'),
    cniConfDir: join(dir, 'cni', 'net.d'),
    cniIpam: join(dir, 'cni', 'ipam'),
    kubeletConfig: join(dir, 'kubelet.yaml'),
    kubeletRoot: join(dir, 'kubelet'),
    staticPods: join(dir, 'manifests'),
    podLogs: join(dir, 'pod-logs'),
  } as const;
}

const toml = (s: string): string => JSON.stringify(s);

/** The node's cgroup subtree (the kubelet's cgroupRoot), in every hierarchy. */
export function nodeCgroupRoot(name: string): string {
  return `/skewgate-lab-${name}`;
}

/** containerd 1.6 (config version 2): its own root, state and sockets, so it runs beside Docker's. */
export function containerdConfig(spec: NodeSpec): string {
  const p = nodePaths(spec.dir);
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return [
    'version = 2',
    `root = ${toml(p.containerdRoot)}`,
    `state = ${toml(p.containerdState)}`,
    '[grpc]',
    `  address = ${toml(p.containerdSocket)}`,
    '[ttrpc]',
    `  address = ${toml(`${p.containerdSocket}.ttrpc`)}`,
    '[debug]',
    '  address = ""',
    '[metrics]',
    '  address = ""',
    `[${cri}]`,
    // No registry is reachable: the sandbox image is imported, and naming it here keeps containerd
    // from trying to pull its own default (registry.k8s.io/pause:3.6).
    `  sandbox_image = ${toml(spec.sandboxImage)}`,
    // These machines forbid lowering oom_score_adj; the kubelet asks −998 for sandboxes, and runc
    // then dies ("failed to update /proc/self/oom_score_adj: Permission denied").
    '  restrict_oom_score_adj = true',
    `  stream_server_address = ${toml(spec.ip)}`,
    `  stream_server_port = ${toml(String(spec.streamPort))}`,
    '  enable_selinux = false',
    // Pod network namespaces under the node's state, not /var/run/netns: a SIGKILLed node's are
    // found (and unmounted) with the rest of its folder.
    '  netns_mounts_under_state_dir = true',
    `[${cri}.containerd]`,
    '  snapshotter = "overlayfs"',
    '  default_runtime_name = "runc"',
    `[${cri}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    // cgroupfs, as the kubelet's cgroupDriver: no systemd here.
    `[${cri}.containerd.runtimes.runc.options]`,
    '  SystemdCgroup = false',
    `[${cri}.cni]`,
    `  bin_dir = ${toml(spec.cniBinDir)}`,
    `  conf_dir = ${toml(p.cniConfDir)}`,
    '  max_conf_num = 1',
    '',
  ].join('\n');
}

/**
 * The pod network: a bridge with host-local addresses from podCidr (recorded under the node's
 * folder), ports mapped. Not masqueraded: pods reach only this machine (the lab's alias addresses,
 * via the bridge), and a masquerade would leave a NAT chain per pod behind a SIGKILLed node.
 */
export function cniConflist(spec: NodeSpec): object {
  return {
    cniVersion: '0.4.0',
    name: `skewgate-lab-${spec.name}`,
    plugins: [
      {
        type: 'bridge',
        bridge: spec.bridge,
        isGateway: true,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: spec.podCidr }]],
          routes: [{ dst: '0.0.0.0/0' }],
          dataDir: nodePaths(spec.dir).cniIpam,
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

/** The KubeletConfiguration (kubelet.config.k8s.io/v1beta1). */
export function kubeletConfiguration(spec: NodeSpec): object {
  const p = nodePaths(spec.dir);
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // kubelet ≥ 1.35 refuses cgroup v1 unless told; these machines have cgroup v1 (hybrid).
    failCgroupV1: false,
    // No systemd as PID 1.
    cgroupDriver: 'cgroupfs',
    // Its own subtree (cgroups.ts): kubelets sharing one would kill each other's pods as orphans.
    cgroupRoot: nodeCgroupRoot(spec.name),
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${p.containerdSocket}`,
    staticPodPath: p.staticPods,
    podLogsDir: p.podLogs,
    address: spec.ip,
    port: spec.kubeletPort,
    readOnlyPort: 0,
    healthzBindAddress: spec.ip,
    healthzPort: spec.kubeletPort + 1,
    tlsCertFile: spec.servingCertFile,
    tlsPrivateKeyFile: spec.servingKeyFile,
    // The kubelet's API (exec, logs, port-forward) as in a kubeadm cluster: client certificates of
    // the cluster CA, the apiserver's webhook for tokens and for authorization.
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: spec.kubeconfig !== undefined },
      x509: { clientCAFile: spec.clientCaFile },
    },
    authorization: { mode: spec.kubeconfig !== undefined ? 'Webhook' : 'AlwaysAllow' },
    rotateCertificates: false,
    serverTLSBootstrap: false,
    clusterDomain: 'cluster.local',
    resolvConf: '/etc/resolv.conf',
    // The lab's disks are shared with builds and images: the default eviction thresholds (10 %
    // free) would evict pods for reasons that are not the node's health under test.
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    // The node's Lease and status: the kubelet's defaults, stated because the tests measure them.
    nodeLeaseDurationSeconds: 40,
    nodeStatusUpdateFrequency: '10s',
  };
}

/** The kubelet's command line; `--config=` (this node's file) is also the supervisor's marker. */
export function kubeletArgs(spec: NodeSpec): string[] {
  const p = nodePaths(spec.dir);
  return [
    `--config=${p.kubeletConfig}`,
    `--root-dir=${p.kubeletRoot}`,
    `--hostname-override=${spec.name}`,
    `--node-ip=${spec.ip}`,
    ...(spec.kubeconfig === undefined ? [] : [`--kubeconfig=${spec.kubeconfig}`]),
    '--v=2',
  ];
}
