// The checks across sections, and what each command needs of a config beyond its fields (Envoy's
// bootstrap: docs/design.md). They run even when a section has problems of its own, so that every
// problem is listed at once. Pure.
import { z } from 'zod';
import { ENVOY_CA_FILE_REQUIRED, ENVOY_SERVING_PAIR_REQUIRED, ENVOY_TRACING_CA_REQUIRED, tracesEnvoy } from './envoy-rules.js';
import { fields } from './schema.js';

/**
 * What a config is loaded for. `serve` also stands for the commands that run skewgate's own
 * discovery (skew, explain and status with --discover, health); `envoy-config` adds what Envoy's
 * bootstrap needs; `validate` checks for both, so that a config it passes is refused by neither.
 */
export type ConfigUse = 'serve' | 'envoy-config' | 'validate';

/**
 * The fields, then the cross-section checks and the command's own needs. These run even when some
 * section has problems of its own (`when`), so that every problem is listed at once; the value may
 * then be partly invalid, hence the guards.
 */
const schemas: Readonly<Record<ConfigUse, z.ZodType<z.output<typeof fields>>>> = Object.freeze({
  serve: withChecks('serve'),
  'envoy-config': withChecks('envoy-config'),
  validate: withChecks('validate'),
});

function withChecks(use: ConfigUse): z.ZodType<z.output<typeof fields>> {
  return fields.check(
    z.superRefine((value, ctx) => crossChecks(value as unknown as LooseConfig, ctx, use), {
      when: (p) => typeof p.value === 'object' && p.value !== null,
    }),
  );
}

/** The parsed config as the cross-section checks see it: any part may be missing or malformed. */
interface LooseConfig {
  readonly apiservers?: unknown;
  readonly kubernetesService?: { readonly publish?: unknown; readonly address?: unknown };
  readonly membership?: {
    readonly sources?: unknown;
    readonly template?: {
      readonly caFile?: unknown;
      readonly credentials?: { readonly kubeconfig?: unknown; readonly tokenFile?: unknown };
    };
  };
  readonly envoy?: { readonly xds?: unknown; readonly tls?: { readonly certFile?: unknown; readonly keyFile?: unknown } };
  readonly discovery?: { readonly watch?: unknown };
  readonly admin?: { readonly listen?: unknown };
  readonly extproc?: { readonly listen?: unknown };
  readonly telemetry?: {
    readonly metrics?: { readonly prometheus?: { readonly listen?: unknown } };
    readonly tracing?: { readonly enabled?: unknown; readonly envoy?: unknown; readonly endpoint?: unknown; readonly caFile?: unknown };
  };
}

/**
 * What Envoy's bootstrap needs (`envoy-config`, `validate`); the renderer only guards against it.
 * With envoy.xds, `serve` writes the apiservers' clusters itself, so their CA files are its needs too.
 */
function envoyChecks(c: LooseConfig, ctx: z.RefinementCtx, use: ConfigUse): void {
  if (use !== 'serve' || (c.envoy?.xds !== undefined && c.envoy.xds !== null))
    (Array.isArray(c.apiservers) ? (c.apiservers as unknown[]) : []).forEach((entry, i) => {
      if (typeof entry === 'object' && entry !== null && (entry as { caFile?: unknown }).caFile === undefined)
        ctx.addIssue({ code: 'custom', path: ['apiservers', i, 'caFile'], message: ENVOY_CA_FILE_REQUIRED });
    });
  if (use === 'serve') return;
  const tls = c.envoy?.tls;
  for (const key of ['certFile', 'keyFile'] as const)
    if (tls?.[key] === undefined) ctx.addIssue({ code: 'custom', path: ['envoy', 'tls', key], message: ENVOY_SERVING_PAIR_REQUIRED });
  const t = c.telemetry?.tracing;
  if (t !== undefined && tracesEnvoy(t) && typeof t.endpoint === 'string' && t.endpoint.startsWith('https:') && t.caFile === undefined)
    ctx.addIssue({ code: 'custom', path: ['telemetry', 'tracing', 'caFile'], message: ENVOY_TRACING_CA_REQUIRED });
}

/**
 * Without credentials skewgate's reads are anonymous: a default kube-apiserver refuses /apis to
 * system:unauthenticated (403), or answers only what that group may see, so the views would be
 * empty or wrong rather than failing loudly.
 */
const NO_CREDENTIALS =
  'give tokenFile, clientCertFile and clientKeyFile, or kubeconfig: skewgate reads discovery, /readyz and the identity Leases as a client, and an anonymous client is refused /apis';

function namesIdentity(cr: unknown): boolean {
  if (typeof cr !== 'object' || cr === null) return false;
  const o = cr as { tokenFile?: unknown; clientCertFile?: unknown; kubeconfig?: unknown };
  return o.tokenFile !== undefined || o.clientCertFile !== undefined || o.kubeconfig !== undefined;
}

function crossChecks(c: LooseConfig, ctx: z.RefinementCtx, use: ConfigUse): void {
  envoyChecks(c, ctx, use);
  const sources = Array.isArray(c.membership?.sources) ? (c.membership.sources as unknown[]) : [];
  if (c.kubernetesService?.publish === true) {
    if (c.kubernetesService.address === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['kubernetesService', 'address'],
        message: 'required with publish: the address pods reach this gateway at',
      });
    if (sources.includes('endpointSlice'))
      ctx.addIssue({
        code: 'custom',
        path: ['membership', 'sources'],
        message:
          'endpointSlice cannot be a source while the gateways publish the kubernetes Service (it would list the gateways): use nodes',
      });
  }
  if (sources.length > 0) {
    if (typeof c.envoy === 'object' && c.envoy !== null && c.envoy.xds === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['envoy', 'xds'],
        message:
          'required with membership.sources: Envoy must learn the apiservers skewgate learns (else a request routed to one would fall back to the balanced pool)',
      });
    if (c.discovery?.watch === false)
      ctx.addIssue({
        code: 'custom',
        path: ['discovery', 'watch'],
        message: 'must be true with membership.sources: the sources are watched',
      });
    // Also with a kubeconfig (whose CA skewgate could use): Envoy verifies a learnt apiserver too,
    // with this file only, in the clusters serve writes (envoy.xds).
    if (c.membership?.template?.caFile === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['membership', 'template', 'caFile'],
        message: 'required with membership.sources: a learnt apiserver is verified against this CA',
      });
    if (!namesIdentity(c.membership?.template?.credentials))
      ctx.addIssue({
        code: 'custom',
        path: ['membership', 'template', 'credentials'],
        message: `required with membership.sources: ${NO_CREDENTIALS}`,
      });
  }
  const adminListen = c.admin?.listen;
  if (typeof adminListen === 'string' && !adminListen.endsWith(':0'))
    for (const [path, other] of [
      [['extproc', 'listen'], c.extproc?.listen],
      [['telemetry', 'metrics', 'prometheus', 'listen'], c.telemetry?.metrics?.prometheus?.listen],
    ] as const)
      if (other === adminListen)
        ctx.addIssue({ code: 'custom', path: ['admin', 'listen'], message: `the same address as ${path.join('.')}: give each its own` });
  const seen = new Map<string, number>();
  (Array.isArray(c.apiservers) ? (c.apiservers as unknown[]) : []).forEach((entry, i) => {
    if (typeof entry === 'object' && entry !== null && !namesIdentity((entry as { credentials?: unknown }).credentials))
      ctx.addIssue({ code: 'custom', path: ['apiservers', i, 'credentials'], message: `required: ${NO_CREDENTIALS}` });
    const name = typeof entry === 'object' && entry !== null ? (entry as { name?: unknown }).name : undefined;
    if (typeof name !== 'string') return;
    const first = seen.get(name);
    if (first !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['apiservers', i, 'name'],
        message: `duplicate name "${name}" (also apiservers[${first}])`,
      });
    else seen.set(name, i);
    if (name === 'default' || name === 'skewgate-extproc' || name === 'skewgate-otel') {
      ctx.addIssue({
        code: 'custom',
        path: ['apiservers', i, 'name'],
        message: `"${name}" is reserved for a cluster skewgate renders itself`,
      });
    }
  });
}

/** The schema a config is validated with for a use. */
export function configSchema(use: ConfigUse): z.ZodType<z.output<typeof fields>> {
  return schemas[use];
}
