// The kube-apiserver side of a trace: its --tracing-config-file, so that the apiservers behind the
// gateway export to the same collector and their spans join skewgate's traces. Pure.
import { stringify } from 'yaml';

/** kube-apiserver's own service.name in its spans. */
export const APISERVER_SERVICE_NAME = 'apiserver';

/**
 * TracingConfiguration (apiserver.config.k8s.io/v1, served by 1.35 and 1.36): OTLP/gRPC to
 * `endpoint` ("host:port", no scheme). The sampler is parent-based, so a sampled traceparent from
 * Envoy or skewgate is followed — for callers in system:masters or system:monitoring only; for
 * everyone else kube-apiserver starts a new trace linked to the incoming one (docs/tracing.md).
 */
export function apiserverTracingConfig(endpoint: string, samplingRatePerMillion = 1_000_000): string {
  if (/^[a-z]+:\/\//i.test(endpoint)) throw new Error(`kube-apiserver's tracing endpoint is host:port without a scheme, got ${endpoint}`);
  return stringify({ apiVersion: 'apiserver.config.k8s.io/v1', kind: 'TracingConfiguration', endpoint, samplingRatePerMillion });
}
