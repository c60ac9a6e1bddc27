// A kubeconfig of one identity at one server: a component's own (the scheduler, kube-proxy, a
// kubelet) with its client certificate, as kubeadm writes scheduler.conf or kubelet.conf. Pure.

export interface CertKubeconfigInput {
  /** The cluster's (and context's) name, e.g. "gateway". */
  readonly cluster: string;
  readonly server: string;
  readonly caFile: string;
  /** The name the server's certificate is verified against, when not the URL's host (e.g. "kubernetes"). */
  readonly tlsServerName?: string;
  /** The user's name in the file, e.g. "system:node:node-1". */
  readonly user: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export function certKubeconfig(o: CertKubeconfigInput): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: o.cluster,
        cluster: {
          server: o.server,
          'certificate-authority': o.caFile,
          ...(o.tlsServerName === undefined ? {} : { 'tls-server-name': o.tlsServerName }),
        },
      },
    ],
    users: [{ name: o.user, user: { 'client-certificate': o.certFile, 'client-key': o.keyFile } }],
    contexts: [{ name: o.cluster, context: { cluster: o.cluster, user: o.user } }],
    'current-context': o.cluster,
  };
}
