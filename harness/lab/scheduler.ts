// kube-scheduler's command line in the lab: one scheduler (no leader election), pointed at one
// kubeconfig (a gateway's, with the scheduler's own client certificate: CN=system:kube-scheduler,
// bound by the apiservers' bootstrap RBAC), no serving port. Pure. Every flag was checked against
// `--help` of the pinned build (lab/build.sh --node).

export interface SchedulerSpec {
  /** "kube-scheduler": the process name in the lab. */
  readonly name: string;
  /** The version built by lab/build.sh --node (KUBE_OLD). */
  readonly version: string;
  readonly kubeconfig: string;
}

export function schedulerArgs(spec: SchedulerSpec): string[] {
  return [
    `--kubeconfig=${spec.kubeconfig}`,
    // Delegated authentication and authorization serve its HTTPS port; there is none.
    '--secure-port=0',
    '--leader-elect=false',
    '--v=2',
  ];
}
