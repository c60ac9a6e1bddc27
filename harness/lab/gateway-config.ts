// The documents a lab gateway is made of: skewgate's YAML config and the kubeconfig for clients
// (the RBAC objects its users need are in rbac.ts). Pure.
import { LAB_ALIAS_PREFIX } from './flags.js';
import type { LabPki, LabPkiFiles } from './pki.js';

export interface GatewayApiServer {
  readonly name: string;
  readonly url: string;
}

export interface GatewayConfigInput {
  /** File paths only: the compose demo renders this before its PKI exists. */
  readonly pki: LabPkiFiles;
  readonly apiservers: readonly GatewayApiServer[];
  /** host:port or unix:/path */
  readonly extprocListen: string;
  readonly port: number;
  readonly logLevel?: string;
  /**
   * log.decisions.interval 0s: every routed or refused decision on its own line (the default holds
   * repeats back), so that a false 404's line is found by its request id (test/helpers/false-404s.ts).
   */
  readonly logEveryDecision?: boolean;
  /** The config's `telemetry` section as written in YAML (Envoy's tracer follows it); none: off. */
  readonly telemetry?: Readonly<Record<string, unknown>>;
  /** Filesystem xDS in this folder: Envoy's apiserver clusters and routes can change while it runs. */
  readonly xdsDir?: string;
  /** membership.sources (needs xdsDir): apiservers learnt from Nodes or the kubernetes EndpointSlice. */
  readonly membershipSources?: readonly ('nodes' | 'endpointSlice')[];
  /** Envoy's listen address (default 127.0.0.1). */
  readonly address?: string;
  /** kubernetesService.publish as this gateway (its name, at address:port). */
  readonly publishService?: { readonly gatewayName: string; readonly leaseDuration: string };
  /** envoy.extprocPeers: another node's skewgate behind the local one (mutual TLS). */
  readonly extprocPeers?: {
    readonly endpoints: readonly string[];
    readonly certFile: string;
    readonly keyFile: string;
    readonly caFile: string;
    readonly serverName: string;
  };
  /** extproc.peer: this skewgate's listener for other nodes' Envoys. */
  readonly peerListener?: { readonly listen: string; readonly certFile: string; readonly keyFile: string; readonly clientCaFile: string };
  /** envoy.health: the gateway's health listener on 127.0.0.1:port. */
  readonly healthPort?: number;
  /** envoy.requestTimeout ("5s"): the bound on a request the apiserver would end itself (default 65 s). */
  readonly requestTimeout?: string;
  /** envoy.tls.clientCaFile (default pki.caFile, the apiservers' --client-ca-file). */
  readonly clientCaFile?: string;
  /** routing.fastPath (default true; only in effect with xdsDir): false asks skewgate about every request. */
  readonly fastPath?: boolean;
  /**
   * The operator's controls: skewgate's admin endpoint (admin.listen) and its gate section, with
   * Envoy's admin on this fixed port so that the gate can read Envoy's counters (else port 0).
   */
  readonly operator?: { readonly adminListen: string; readonly envoyAdminPort: number; readonly gate: Readonly<Record<string, unknown>> };
}

/** A skewgate config (src/config/core/schema.ts) for the lab's apiservers and gateway. */
export function gatewayConfigDocument(o: GatewayConfigInput): Record<string, unknown> {
  return {
    apiservers: o.apiservers.map((s) => ({
      name: s.name,
      url: s.url,
      // The serving certificate carries the IP SANs 127.0.0.1-16 (pki.ts LAB_SANS) and the compose
      // network's: no serverName needed there; an alias address is verified as kubeadm's
      // apiservers are, by the DNS SAN `kubernetes`.
      ...(new URL(s.url).hostname.startsWith(LAB_ALIAS_PREFIX) ? { serverName: 'kubernetes' } : {}),
      caFile: o.pki.caFile,
      credentials: { tokenFile: o.pki.skewgateTokenFile },
    })),
    discovery: { interval: '1s', timeout: '2s', watch: true },
    extproc: {
      listen: o.extprocListen,
      messageTimeout: '1s',
      failureMode: 'open',
      shutdownGrace: '2s',
      ...(o.peerListener === undefined ? {} : { peer: { ...o.peerListener } }),
    },
    envoy: {
      listen: { address: o.address ?? '127.0.0.1', port: o.port },
      // Port 0: Envoy writes the address it bound to a file (--admin-address-path).
      admin: { address: '127.0.0.1', port: o.operator?.envoyAdminPort ?? 0 },
      // Client certificates are verified against the apiservers' own --client-ca-file and
      // re-stated upstream as front-proxy identity (--requestheader-* flags, flags.ts).
      tls: { certFile: o.pki.gatewayCertFile, keyFile: o.pki.gatewayKeyFile, clientCaFile: o.clientCaFile ?? o.pki.caFile },
      upstreamClientCert: { certFile: o.pki.frontProxyClientCertFile, keyFile: o.pki.frontProxyClientKeyFile },
      healthCheck: { interval: '1s', timeout: '1s', unhealthyThreshold: 2, healthyThreshold: 1 },
      ...(o.xdsDir === undefined ? {} : { xds: { directory: o.xdsDir } }),
      ...(o.extprocPeers === undefined ? {} : { extprocPeers: { ...o.extprocPeers, endpoints: [...o.extprocPeers.endpoints] } }),
      ...(o.healthPort === undefined ? {} : { health: { address: '127.0.0.1', port: o.healthPort } }),
      ...(o.requestTimeout === undefined ? {} : { requestTimeout: o.requestTimeout }),
    },
    ...(o.fastPath === undefined ? {} : { routing: { fastPath: o.fastPath } }),
    ...(o.operator === undefined ? {} : { admin: { listen: o.operator.adminListen }, gate: { ...o.operator.gate } }),
    log: { level: o.logLevel ?? 'info', ...(o.logEveryDecision === true ? { decisions: { interval: '0s' } } : {}) },
    ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }),
    ...(o.publishService === undefined
      ? {}
      : {
          kubernetesService: {
            publish: true,
            address: o.address ?? '127.0.0.1',
            port: o.port,
            gatewayName: o.publishService.gatewayName,
            leaseDuration: o.publishService.leaseDuration,
          },
        }),
    ...(o.membershipSources === undefined
      ? {}
      : {
          membership: {
            sources: [...o.membershipSources],
            port: 6443,
            // A learnt apiserver is verified as kubeadm's are: the cluster CA, the DNS SAN kubernetes.
            template: { caFile: o.pki.caFile, serverName: 'kubernetes', credentials: { tokenFile: o.pki.skewgateTokenFile } },
            drainTimeout: '10s',
          },
        }),
  };
}

export interface KubeconfigInput {
  readonly pki: LabPki;
  readonly gatewayUrl: string;
  /** Direct contexts, one set per apiserver. */
  readonly apiservers: readonly GatewayApiServer[];
}

/** The lab's client credentials: kubeconfig user names (and, through the gateway, context names). */
export const LAB_USERS = Object.freeze(['admin-cert', 'admin-token', 'jane-cert', 'jane-token', 'bob-cert', 'tricky-cert'] as const);
export type LabUser = (typeof LAB_USERS)[number];

/** The context of `user` straight to one apiserver, bypassing the gateway. */
export function directContext(user: LabUser, apiserver: string): string {
  return `${user}@${apiserver}`;
}

function kubeconfigUser(pki: LabPki, user: LabUser): Record<string, string> {
  const cert = (certFile: string, keyFile: string): Record<string, string> => ({ 'client-certificate': certFile, 'client-key': keyFile });
  switch (user) {
    case 'admin-cert':
      return cert(pki.adminCertFile, pki.adminKeyFile);
    case 'admin-token':
      return { token: pki.adminToken };
    case 'jane-cert':
      return cert(pki.janeCertFile, pki.janeKeyFile);
    case 'jane-token':
      return { token: pki.janeToken };
    case 'bob-cert':
      return cert(pki.bobCertFile, pki.bobKeyFile);
    case 'tricky-cert':
      return cert(pki.trickyCertFile, pki.trickyKeyFile);
  }
}

/**
 * Contexts through the gateway: `token` (current) and `cert` (the admin's token and client
 * certificate), and one per LAB_USERS entry named after it (`jane-cert`, …). Straight to an
 * apiserver: `kas-1` (admin certificate) and `<user>@kas-1` for every user. Envoy terminates TLS
 * and verifies a client certificate against the cluster CA; skewgate states its CN and O values
 * to the apiserver as front-proxy identity (X-Remote-User, X-Remote-Group), so a certificate
 * context sees the same user through the gateway as directly.
 */
export function gatewayKubeconfig(o: KubeconfigInput): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'gateway', cluster: { server: o.gatewayUrl, 'certificate-authority': o.pki.caFile } },
      ...o.apiservers.map((s) => ({ name: s.name, cluster: { server: s.url, 'certificate-authority': o.pki.caFile } })),
    ],
    users: LAB_USERS.map((u) => ({ name: u, user: kubeconfigUser(o.pki, u) })),
    contexts: [
      { name: 'token', context: { cluster: 'gateway', user: 'admin-token' } },
      { name: 'cert', context: { cluster: 'gateway', user: 'admin-cert' } },
      ...LAB_USERS.map((u) => ({ name: u, context: { cluster: 'gateway', user: u } })),
      ...o.apiservers.flatMap((s) => [
        { name: s.name, context: { cluster: s.name, user: 'admin-cert' } },
        ...LAB_USERS.map((u) => ({ name: directContext(u, s.name), context: { cluster: s.name, user: u } })),
      ]),
    ],
    'current-context': 'token',
  };
}
