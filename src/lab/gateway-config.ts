// The documents a lab gateway is made of: skewgate's YAML config and the kubeconfig for clients,
// plus the RBAC objects skewgate's token needs. Pure.
import type { LabPki } from './pki.js';
import { SKEWGATE_GROUP } from './pki.js';

export interface GatewayApiServer {
  readonly name: string;
  readonly url: string;
}

export interface GatewayConfigInput {
  readonly pki: LabPki;
  readonly apiservers: readonly GatewayApiServer[];
  /** host:port or unix:/path */
  readonly extprocListen: string;
  readonly port: number;
  readonly logLevel?: string;
  /** The config's `telemetry` section as written in YAML (Envoy's tracer follows it); none: off. */
  readonly telemetry?: Readonly<Record<string, unknown>>;
}

/** A skewgate config (src/config.ts format) for the lab's apiservers and gateway. */
export function gatewayConfigDocument(o: GatewayConfigInput): Record<string, unknown> {
  return {
    apiservers: o.apiservers.map((s) => ({
      name: s.name,
      url: s.url,
      // The serving certificate carries the IP SANs 127.0.0.1-9: no serverName needed.
      caFile: o.pki.caFile,
      credentials: { tokenFile: o.pki.skewgateTokenFile },
    })),
    discovery: { interval: '1s', timeout: '2s', watch: true },
    extproc: { listen: o.extprocListen, messageTimeout: '1s', failureMode: 'open', shutdownGrace: '2s' },
    envoy: {
      listen: { address: '127.0.0.1', port: o.port },
      // Port 0: Envoy writes the address it bound to a file (--admin-address-path).
      admin: { address: '127.0.0.1', port: 0 },
      tls: { certFile: o.pki.gatewayCertFile, keyFile: o.pki.gatewayKeyFile },
      healthCheck: { interval: '1s', timeout: '1s', unhealthyThreshold: 2, healthyThreshold: 1 },
    },
    log: { level: o.logLevel ?? 'info' },
    ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }),
  };
}

export interface KubeconfigInput {
  readonly pki: LabPki;
  readonly gatewayUrl: string;
  /** Direct contexts, one per apiserver, using the admin client certificate. */
  readonly apiservers: readonly GatewayApiServer[];
}

/**
 * Contexts: `token` (current) and `cert` through the gateway, and one per apiserver (`kas-1`, …)
 * straight to it with the admin client certificate. Envoy terminates TLS, so the client
 * certificate of the `cert` context does not reach an apiserver through the gateway (requests are
 * anonymous there) until the gateway re-states it as front-proxy identity.
 */
export function gatewayKubeconfig(o: KubeconfigInput): Record<string, unknown> {
  const certUser = { 'client-certificate': o.pki.adminCertFile, 'client-key': o.pki.adminKeyFile };
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'gateway', cluster: { server: o.gatewayUrl, 'certificate-authority': o.pki.caFile } },
      ...o.apiservers.map((s) => ({ name: s.name, cluster: { server: s.url, 'certificate-authority': o.pki.caFile } })),
    ],
    users: [
      { name: 'admin-token', user: { token: o.pki.adminToken } },
      { name: 'admin-cert', user: certUser },
    ],
    contexts: [
      { name: 'token', context: { cluster: 'gateway', user: 'admin-token' } },
      { name: 'cert', context: { cluster: 'gateway', user: 'admin-cert' } },
      ...o.apiservers.map((s) => ({ name: s.name, context: { cluster: s.name, user: 'admin-cert' } })),
    ],
    'current-context': 'token',
  };
}

export const SKEWGATE_ROLE = 'skewgate:discovery';

/**
 * Discovery documents and /readyz are open to every authenticated user by default
 * (system:discovery, system:public-info-viewer); the CRD and APIService watch needs this role.
 */
export function skewgateRbac(): { clusterRole: Record<string, unknown>; clusterRoleBinding: Record<string, unknown> } {
  return {
    clusterRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: SKEWGATE_ROLE },
      rules: [
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['apiregistration.k8s.io'], resources: ['apiservices'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: SKEWGATE_ROLE },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: SKEWGATE_ROLE },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: SKEWGATE_GROUP }],
    },
  };
}
