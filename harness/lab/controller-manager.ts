// kube-controller-manager's command line in the lab: by default only the controllers whose harm a
// false 404 causes (the garbage collector, namespace deletion); with a node, its whole default
// set (node lifecycle with its default 40 s grace, Deployments, ReplicaSets, service accounts).
// Pointed at one kubeconfig (a gateway's, or an apiserver's), no leader election (one per run), no
// serving port. Pure. Every flag was checked against `--help` of the pinned build (lab/build.sh).

export interface ControllerManagerSpec {
  /** "kcm-skewgate": the process name in the lab. */
  readonly name: string;
  /** The version built by lab/build.sh (KUBE_OLD). */
  readonly version: string;
  readonly kubeconfig: string;
  /** Default: the garbage collector and the namespace controller; ['*']: kube-controller-manager's own default set. */
  readonly controllers?: readonly string[];
  /**
   * With the default set: the service-account token controller's signing key and the CA it puts
   * into each namespace's kube-root-ca.crt (both of the lab's PKI).
   */
  readonly serviceAccountKeyFile?: string;
  readonly rootCaFile?: string;
}

export const HARM_CONTROLLERS: readonly string[] = Object.freeze(['garbage-collector-controller', 'namespace-controller']);

export function controllerManagerArgs(spec: ControllerManagerSpec): string[] {
  return [
    `--kubeconfig=${spec.kubeconfig}`,
    `--controllers=${(spec.controllers ?? HARM_CONTROLLERS).join(',')}`,
    // One controller manager per arm and run: nothing to elect.
    '--leader-elect=false',
    // Nothing scrapes it here; 0 serves no HTTPS at all (so no certificate or authn config).
    '--secure-port=0',
    // Its own credentials for every controller (the kubeconfig's), not per-controller service accounts.
    '--use-service-account-credentials=false',
    ...(spec.serviceAccountKeyFile === undefined ? [] : [`--service-account-private-key-file=${spec.serviceAccountKeyFile}`]),
    ...(spec.rootCaFile === undefined ? [] : [`--root-ca-file=${spec.rootCaFile}`]),
    '--v=2',
  ];
}
