// What a lab node's kube-proxy is started with: its KubeProxyConfiguration
// (kubeproxy.config.k8s.io/v1alpha1, the fields of the pinned v1.35 build) and command line. It
// runs in the node's network namespace (netns.ts), so its iptables rules are the node's alone. Pure.
import { join } from 'node:path';
import type { NodeSpec } from './config.js';

/** The cluster's pod network (every node's range is a part of it: placement.ts). */
export const CLUSTER_POD_CIDR = '10.244.0.0/16';
/** kube-proxy's health and metrics ports, on the node's own address. */
export const KUBE_PROXY_HEALTHZ_PORT = 10256;
export const KUBE_PROXY_METRICS_PORT = 10249;

export function kubeProxyPaths(dir: string) {
  return { config: join(dir, 'kube-proxy.yaml'), kubeconfig: join(dir, 'kube-proxy.kubeconfig') } as const;
}

export function kubeProxyConfiguration(spec: Pick<NodeSpec, 'name' | 'dir' | 'ip'>): object {
  return {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: kubeProxyPaths(spec.dir).kubeconfig },
    hostnameOverride: spec.name,
    bindAddress: spec.ip,
    healthzBindAddress: `${spec.ip}:${KUBE_PROXY_HEALTHZ_PORT}`,
    metricsBindAddress: `${spec.ip}:${KUBE_PROXY_METRICS_PORT}`,
    mode: 'iptables',
    clusterCIDR: CLUSTER_POD_CIDR,
    // These machines forbid lowering oom_score_adj (kube-proxy asks −999 and logs the refusal).
    oomScoreAdj: 0,
    // 0: leave the machine's conntrack table size as it is (its sysctl is not the node's to set).
    conntrack: { maxPerCore: 0 },
  };
}

/** The command line; `--config=` (this node's file) is also the supervisor's marker. */
export function kubeProxyArgs(spec: Pick<NodeSpec, 'dir'>): string[] {
  return [`--config=${kubeProxyPaths(spec.dir).config}`, '--v=2'];
}
