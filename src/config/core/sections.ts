// The config's sections that stand on their own (an apiserver and its credentials, membership,
// the kubernetes Service, telemetry) and the listen-address fields: src/config/core/schema.ts puts them
// together. Pure.
import { isIP } from 'node:net';
import { z } from 'zod';
import { adminListenProblem } from './admin-address.js';
import { duration, path } from './units.js';

/** Names become Envoy cluster names and header values: keep them DNS-label-like. */
export const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export const credentials = z
  .object({
    tokenFile: path.optional(),
    clientCertFile: path.optional(),
    clientKeyFile: path.optional(),
    kubeconfig: path.optional(),
    context: z.string().min(1).optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const kinds = [c.tokenFile && 'tokenFile', c.clientCertFile && 'clientCertFile', c.kubeconfig && 'kubeconfig'].filter(Boolean);
    // One identity: with a token and a certificate both, kube-apiserver authenticates the
    // certificate first and the token is never read, so a config naming both is a mistake.
    if (kinds.length > 1) {
      ctx.addIssue({
        code: 'custom',
        message: `choose one of tokenFile, clientCertFile/clientKeyFile or kubeconfig (got ${kinds.join(', ')}): an apiserver authenticates one identity`,
      });
    }
    if (Boolean(c.clientCertFile) !== Boolean(c.clientKeyFile)) {
      ctx.addIssue({ code: 'custom', message: 'clientCertFile and clientKeyFile go together' });
    }
    if (c.context && !c.kubeconfig) ctx.addIssue({ code: 'custom', path: ['context'], message: 'context needs kubeconfig' });
  });

export const apiserver = z
  .object({
    name: z.string().regex(NAME, 'must be a lower-case DNS label (a-z, 0-9, -), at most 63 characters'),
    // scheme://host:port only: skewgate appends /api, /apis, /readyz itself, and a path prefix
    // (a proxy in front of an apiserver) is not an apiserver.
    url: z.url({ protocol: /^https$/, error: 'must be an https:// URL' }).refine(
      (u) => {
        const p = new URL(u);
        return (p.pathname === '/' || p.pathname === '') && p.search === '' && p.hash === '' && p.username === '' && p.password === '';
      },
      { message: 'must be https://host[:port] only: no path, query, fragment or user (skewgate adds /api, /apis and /readyz)' },
    ),
    /** CA bundle that signed the apiserver's serving certificate. Verification cannot be turned off. */
    caFile: path.optional(),
    /** Name to verify the serving certificate against (and send as SNI) when the URL holds an IP. */
    serverName: z.string().min(1).optional(),
    /**
     * The apiserver's hostname, from which kube-apiserver derives its identity lease name; the
     * merged /apis orders servers by it exactly as kube-apiserver does. Default: `name`.
     */
    hostname: z.string().min(1).optional(),
    credentials: credentials.optional(),
  })
  .strict();

/**
 * Where skewgate learns apiservers the list above does not name (docs/design.md, membership):
 * the control-plane Nodes (their InternalIP and `port`) and the `default/kubernetes`
 * EndpointSlice, in which the apiservers publish their own addresses. A learnt apiserver is
 * reached with `template`'s CA, server name and credentials.
 */
export const membershipSource = z.enum(['nodes', 'endpointSlice']);

/** The membership section's defaults: the schema's, and the discovery service's when it is given none (tests). */
export const MEMBERSHIP_DEFAULTS = Object.freeze({
  sources: Object.freeze([]) as readonly never[],
  port: 6443,
  nodeSelector: 'node-role.kubernetes.io/control-plane',
  template: Object.freeze({}),
  drainTimeout: 30_000,
});

export const membership = z
  .object({
    sources: z.array(membershipSource).default([]),
    /** The apiservers' port on a control-plane Node (the nodes source). */
    port: z.number().int().min(1).max(65535).default(MEMBERSHIP_DEFAULTS.port),
    /** Which Nodes run an apiserver: a label selector. */
    nodeSelector: z.string().min(1).default(MEMBERSHIP_DEFAULTS.nodeSelector),
    /** How to reach (and verify) a learnt apiserver: as in apiservers[], without name and url. */
    template: z
      .object({
        caFile: path.optional(),
        /** The name its serving certificate must carry; default: its IP (an IP SAN). */
        serverName: z.string().min(1).optional(),
        credentials: credentials.optional(),
      })
      .strict()
      .default({}),
    /** How long an apiserver that left every source keeps its open requests before it is removed. */
    drainTimeout: duration.default(MEMBERSHIP_DEFAULTS.drainTimeout),
  })
  .strict()
  .default({ ...MEMBERSHIP_DEFAULTS, sources: [], template: {} });

/**
 * The gateways publish themselves as the `kubernetes` Service's endpoints (docs/design.md, "The
 * kubernetes Service"), so that pods using their in-cluster config go through a gateway. Needs the
 * apiservers' own reconciler off (`--endpoint-reconciler-type=none`).
 */
export const kubernetesService = z
  .object({
    publish: z.boolean().default(false),
    /** This gateway's address as pods reach it (the node's IP). */
    address: z
      .string()
      .refine((v) => isIP(v) !== 0, 'must be an IP address')
      .optional(),
    /** Default: envoy.listen.port. Every gateway must publish the same port. */
    port: z.number().int().min(1).max(65535).optional(),
    /** This gateway's name in its Lease (skewgate-gateway-<name>); default: the host name. */
    gatewayName: z
      .string()
      .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a lower-case DNS label')
      .optional(),
    /** A gateway whose Lease was not renewed for this long leaves the endpoints. */
    leaseDuration: duration.default(15_000),
  })
  .strict()
  .default({ publish: false, leaseDuration: 15_000 });

export const listenAddress = z
  .string()
  .refine((v) => v.startsWith('unix:') || /^[^:]+:\d{1,5}$/.test(v) || /^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(v), {
    message: 'must be host:port or unix:/path',
  });

/**
 * The admin endpoint's address: loopback TCP or a unix socket only. It answers anyone who reaches
 * it (read-only: the snapshot, skew and explain), so it must never face a network.
 */
export const adminListen = z.string().superRefine((v, ctx) => {
  const problem = adminListenProblem(v);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

/** An OTLP collector (Jaeger, the OpenTelemetry Collector, ...). */
const otlpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });
/** Exporter headers (e.g. a collector's API key): sent, never logged. */
const otlpHeaders = z.record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'must be an HTTP header name'), z.string());
const otlpProtocol = z.enum(['grpc', 'http']);

/**
 * OpenTelemetry. Every field is optional: an unset field falls back to the standard OTEL_*
 * environment variable, then to the default (src/telemetry/core/settings.ts, docs/tracing.md).
 * Everything is off unless turned on here or by the environment.
 */
export const telemetry = z
  .object({
    /** service.name of skewgate's spans and metrics (OTEL_SERVICE_NAME; default "skewgate"). */
    serviceName: z.string().min(1).optional(),
    tracing: z
      .object({
        enabled: z.boolean().optional(),
        /** grpc: http(s)://host:4317; http: the base URL, /v1/traces is appended (http(s)://host:4318). */
        endpoint: otlpUrl.optional(),
        protocol: otlpProtocol.optional(),
        /** CA bundle for an https endpoint (skewgate and Envoy). */
        caFile: path.optional(),
        headers: otlpHeaders.optional(),
        /** Root spans kept (parent-based: a sampled parent is always followed). Default 1. */
        samplerRatio: z.number().min(0).max(1).optional(),
        /** Render Envoy's own OpenTelemetry tracer into the bootstrap (default: when enabled is true). */
        envoy: z.boolean().optional(),
      })
      .strict()
      .default({}),
    metrics: z
      .object({
        /** Serve /metrics in the Prometheus text format on host:port (port 0 picks one). */
        prometheus: z
          .object({ listen: z.string().regex(/^[^:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/, 'must be host:port') })
          .strict()
          .optional(),
        /** Push metrics over OTLP; endpoint, protocol, headers and caFile default to tracing's. */
        otlp: z
          .object({
            enabled: z.boolean().optional(),
            endpoint: otlpUrl.optional(),
            protocol: otlpProtocol.optional(),
            caFile: path.optional(),
            headers: otlpHeaders.optional(),
            interval: duration.optional(),
          })
          .strict()
          .optional(),
      })
      .strict()
      .default({}),
  })
  .strict()
  .default({ tracing: {}, metrics: {} });

/** The gate's defaults (docs/design.md, "The gate"). */
export const GATE_DEFAULTS = Object.freeze({
  window: 120_000,
  usageWindow: 900_000,
  maxErrorRate: 0.01,
  maxDecisionLatency: 100,
  minDecisions: 20,
});

/**
 * The gate a rollout tool asks between apiservers (GET /v1/gate, `skewgate gate`): how far back
 * it looks, and the thresholds it holds at. Applied on a reload.
 */
export const gate = z
  .object({
    /** Decisions, errors and Envoy's counters are judged over this much of the recent past. */
    window: duration.default(GATE_DEFAULTS.window),
    /** A resource used within this much is "in use": the removal of the last apiserver serving it holds. */
    usageWindow: duration.default(GATE_DEFAULTS.usageWindow),
    /** Unavailable and rejected decisions and routing failures, as a share of decisions, above which the gate holds. */
    maxErrorRate: z.number().min(0).max(1).default(GATE_DEFAULTS.maxErrorRate),
    /** The p99 of skewgate's decision time above which the gate holds (a fifth of the default message timeout). */
    maxDecisionLatency: duration.default(GATE_DEFAULTS.maxDecisionLatency),
    /** Below this many decisions in the window the error rate is not judged. */
    minDecisions: z.number().int().min(1).default(GATE_DEFAULTS.minDecisions),
    /**
     * The gate as a Cluster API Runtime Extension (docs/cluster-api.md): HTTPS on this address,
     * answering the lifecycle hooks BeforeClusterUpgrade, BeforeControlPlaneUpgrade,
     * AfterControlPlaneUpgrade and BeforeWorkersUpgrade. Off when absent.
     */
    runtimeExtension: z
      .object({
        listen: z.string().regex(/^([^:\s]+|\[[0-9a-fA-F:]+\]):\d{1,5}$/, 'host:port'),
        certFile: path,
        keyFile: path,
        /** The handler's name in discovery and in its path: a DNS-1123 label. */
        handlerName: z
          .string()
          .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'a DNS-1123 label')
          .default('skewgate-gate'),
        /** How long Cluster API waits for an answer (the SDK allows 0–30). */
        timeoutSeconds: z.number().int().min(1).max(30).default(10),
        /** What Cluster API does when the extension cannot be reached: Fail (wait) or Ignore (go on). */
        failurePolicy: z.enum(['Fail', 'Ignore']).default('Fail'),
      })
      .strict()
      .optional(),
  })
  .strict()
  .default({ ...GATE_DEFAULTS });
