// What rendering Envoy's bootstrap needs of a config beyond what `serve` needs: said once, by the
// config's validation for `envoy-config` and `validate` (every problem at once, with its path),
// and by the renderer, which only guards (a config that passed cannot reach its throw).

/** apiservers[].caFile for Envoy (membership.template.caFile is required with any source). */
export const ENVOY_CA_FILE_REQUIRED =
  "required to render the Envoy bootstrap (and, with envoy.xds, the clusters serve writes): Envoy verifies every apiserver's serving certificate against it, and has no trust store to fall back to";

/** envoy.tls.certFile and envoy.tls.keyFile. */
export const ENVOY_SERVING_PAIR_REQUIRED = "required to render the Envoy bootstrap: the gateway's own serving certificate and key";

/** telemetry.tracing.caFile with an https endpoint and Envoy's tracer on. */
export const ENVOY_TRACING_CA_REQUIRED =
  'required with an https telemetry.tracing.endpoint while Envoy traces (telemetry.tracing.enabled or .envoy): Envoy verifies the collector against it';

/** Whether Envoy traces (its own OpenTelemetry tracer in the bootstrap): envoyTracing's rule, also for the validation, which sees the fields unparsed. */
export function tracesEnvoy(t: { readonly envoy?: unknown; readonly enabled?: unknown }): boolean {
  return (t.envoy ?? t.enabled === true) === true;
}
