// The files the compose services read from deploy/compose/ (mounted at /deploy): skewgate's config,
// kube-apiserver's tracing config and the RBAC objects. Built from the same functions as the lab's.
// Envoy's two bootstraps are rendered from skewgate's config when the demo starts (the envoy-config
// one-shot, document.ts). Pure.
import { stringify } from 'yaml';
import { gatewayConfigDocument } from '../lab/gateway-config.js';
import { labRbacObjects } from '../lab/rbac.js';
import { apiserverTracingConfig } from '../../src/telemetry/kube-apiserver.js';
import { ADMIN_LISTEN_DEFAULT } from '../../src/config/core/admin-address.js';
import {
  ENVOY_ADMIN_PORT,
  EXTPROC_LISTEN,
  GATEWAY_PORT,
  METRICS_PORT,
  OTLP_ENDPOINT,
  OTLP_GRPC_PORT,
  SERVICES,
  apiServerUrlOnNetwork,
  frontedApiServers,
  pkiFiles,
} from './layout.js';
import type { ComposeVersions } from './versions.js';

/** skewgate's service.name; Envoy's tracer reports as "<name>-envoy". */
export const SKEWGATE_SERVICE_NAME = 'skewgate';
/** The baseline Envoy's tracer reports as "baseline-envoy", apart from the gateway's in Jaeger. */
export const BASELINE_SERVICE_NAME = 'baseline';

/**
 * The lab's gateway config (gatewayConfigDocument) for the compose network: apiservers by DNS
 * name (the serving certificate carries them) with their hostnames, ext_proc on a unix socket in
 * a volume only skewgate and Envoy mount, Envoy listening on every interface of its container,
 * traces to Jaeger (skewgate's and Envoy's own), Prometheus metrics, the admin endpoint on the
 * container's loopback.
 */
export function skewgateConfigDocument(v: ComposeVersions): Record<string, unknown> {
  const base = gatewayConfigDocument({
    pki: pkiFiles(),
    apiservers: frontedApiServers(v).map((s) => ({ name: s.name, url: apiServerUrlOnNetwork(s) })),
    extprocListen: EXTPROC_LISTEN,
    port: GATEWAY_PORT,
    telemetry: {
      serviceName: SKEWGATE_SERVICE_NAME,
      tracing: { enabled: true, endpoint: `http://${SERVICES.jaeger}:${OTLP_GRPC_PORT}`, protocol: 'grpc', envoy: true },
      metrics: { prometheus: { listen: `0.0.0.0:${METRICS_PORT}` } },
    },
  });
  const envoy = base['envoy'] as Record<string, unknown>;
  return {
    ...base,
    // hostname: the identity lease kube-apiserver names after it, which orders the merged /apis.
    apiservers: (base['apiservers'] as Record<string, unknown>[]).map((a) => ({
      name: a['name'],
      url: a['url'],
      hostname: a['name'],
      ...a,
    })),
    envoy: {
      ...envoy,
      listen: { address: '0.0.0.0', port: GATEWAY_PORT },
      admin: { address: '0.0.0.0', port: ENVOY_ADMIN_PORT },
    },
    // On the skewgate container's loopback: `docker compose exec skewgate … status` asks it.
    admin: { listen: ADMIN_LISTEN_DEFAULT },
  };
}

export interface DeployFileTexts {
  readonly skewgate: string;
  readonly tracing: string;
  readonly rbac: string;
}

/** Each file's text without the generated-file header (render.ts adds it). */
export function renderDeployFiles(v: ComposeVersions): DeployFileTexts {
  const doc = skewgateConfigDocument(v);
  return {
    skewgate: stringify(doc, { lineWidth: 0 }),
    tracing: apiserverTracingConfig(OTLP_ENDPOINT),
    rbac: labRbacObjects()
      .map((o) => stringify(o.body, { lineWidth: 0 }))
      .join('---\n'),
  };
}
