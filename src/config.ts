// The one YAML config file: parsed, validated once with every problem listed by path, then frozen.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import {
  DEFAULT_MAX_DOCUMENT_BYTES,
  DEFAULT_MAX_DOWNLOAD_BACKOFF_MS,
  EXTPROC_LIMIT_DEFAULTS,
  EXTPROC_MIN_MESSAGE_BYTES,
} from './constants.js';
import { EXTPROC_MAX_WORKERS, extprocListenProblem } from './extproc/listen-addresses.js';
import { ADMIN_LISTEN_DEFAULT, adminListenProblem } from './admin/address.js';
import { caFileProblems, looseFileFields, type FileFields } from './config-files.js';
import { ENVOY_CA_FILE_REQUIRED, ENVOY_SERVING_PAIR_REQUIRED, ENVOY_TRACING_CA_REQUIRED } from './envoy/requirements.js';
import { tracesEnvoy } from './envoy/tracing.js';

/**
 * Durations are written as Go writes them ("500ms", "5s", "1m30s", "1.5h", "2h45m"; units ns, us
 * or µs, ms, s, m, h) or as a number of milliseconds. Pure.
 */
const DURATION_PART = /(\d+(?:\.\d+)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go-style duration in milliseconds, or null when it is not one. */
export function parseDuration(text: string): number | null {
  const v = text.trim();
  if (v === '0') return 0;
  if (v === '') return null;
  let total = 0;
  DURATION_PART.lastIndex = 0;
  while (DURATION_PART.lastIndex < v.length) {
    const m = DURATION_PART.exec(v);
    if (!m) return null;
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  }
  return total;
}

const duration = z
  .union([z.number().nonnegative(), z.string()])
  .meta({ description: 'a duration as Go writes it (500ms, 5s, 1m30s, 2h45m) or a number of milliseconds' })
  .transform((v, ctx) => {
    if (typeof v === 'number') return v;
    const ms = parseDuration(v);
    if (ms === null) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a duration (use e.g. 500ms, 5s, 1m30s, 2h)` });
      return z.NEVER;
    }
    return ms;
  });

/** Sizes are a number of bytes or a binary quantity as Kubernetes writes them: "512Ki", "32Mi", "1Gi". */
const SIZE = /^(\d+)(Ki|Mi|Gi)$/;
const SIZE_UNIT: Record<string, number> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

const size = z
  .union([z.number().int().nonnegative(), z.string()])
  .meta({ description: 'a number of bytes, or a binary quantity as Kubernetes writes it (512Ki, 32Mi, 1Gi)' })
  .transform((v, ctx) => {
    if (typeof v === 'number') return v;
    const m = SIZE.exec(v.trim());
    if (!m) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a size (use a number of bytes, or e.g. 512Ki, 32Mi, 1Gi)` });
      return z.NEVER;
    }
    return Number(m[1]) * (SIZE_UNIT[m[2] as string] as number);
  });

const path = z.string().min(1, 'must be a file path');
const EXTPROC_LIMITS_DEFAULT = {
  maxStreams: EXTPROC_LIMIT_DEFAULTS.maxStreams,
  maxStreamsPerConnection: EXTPROC_LIMIT_DEFAULTS.maxStreamsPerConnection,
  maxMessageBytes: EXTPROC_LIMIT_DEFAULTS.maxMessageBytes,
  firstMessageTimeout: EXTPROC_LIMIT_DEFAULTS.firstMessageTimeoutMs,
};
/** envoy.requestTimeout: kube-apiserver's default --request-timeout (60 s) and a margin for its 504 to arrive. */
export const REQUEST_TIMEOUT_MS = 65_000;
/** Names become Envoy cluster names and header values: keep them DNS-label-like. */
const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

const credentials = z
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

const apiserver = z
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
const membershipSource = z.enum(['nodes', 'endpointSlice']);

const membership = z
  .object({
    sources: z.array(membershipSource).default([]),
    /** The apiservers' port on a control-plane Node (the nodes source). */
    port: z.number().int().min(1).max(65535).default(6443),
    /** Which Nodes run an apiserver: a label selector. */
    nodeSelector: z.string().min(1).default('node-role.kubernetes.io/control-plane'),
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
    drainTimeout: duration.default(30_000),
  })
  .strict()
  .default({ sources: [], port: 6443, nodeSelector: 'node-role.kubernetes.io/control-plane', template: {}, drainTimeout: 30_000 });

/**
 * The gateways publish themselves as the `kubernetes` Service's endpoints (docs/design.md, "The
 * kubernetes Service"), so that pods using their in-cluster config go through a gateway. Needs the
 * apiservers' own reconciler off (`--endpoint-reconciler-type=none`).
 */
const kubernetesService = z
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

const listenAddress = z
  .string()
  .refine((v) => v.startsWith('unix:') || /^[^:]+:\d{1,5}$/.test(v) || /^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(v), {
    message: 'must be host:port or unix:/path',
  });

/**
 * The admin endpoint's address: loopback TCP or a unix socket only. It answers anyone who reaches
 * it (read-only: the snapshot, skew and explain), so it must never face a network.
 */
const adminListen = z.string().superRefine((v, ctx) => {
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
 * environment variable, then to the default (src/telemetry/settings.ts, docs/tracing.md).
 * Everything is off unless turned on here or by the environment.
 */
const telemetry = z
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

const fields = z
  .object({
    apiservers: z.array(apiserver).min(1, 'name at least one apiserver'),
    discovery: z
      .object({
        /** How often each apiserver's discovery is re-fetched. Conditional GETs answered 304 are cheap, and
         * a short interval bounds how long a restarted (upgraded) apiserver can go unnoticed. */
        interval: duration.default(1000),
        timeout: duration.default(3000),
        /** A view older than this is not fresh: skewgate then never answers 404 from it. */
        staleAfter: duration.optional(),
        /** Watch CRDs and APIServices so that new APIs are learnt within a second, and the apiservers'
         * identity Leases so that an apiserver missing from this list is noticed. */
        watch: z.boolean().default(true),
        /** An identity Lease renewed longer ago than this belongs to an apiserver that stopped
         * (kube-apiserver renews its own every 10 s by default). */
        identityLeaseLiveness: duration.default(60_000),
        /**
         * The largest discovery body skewgate reads (/api, /apis, the legacy group/versions, the
         * /openapi/v3 index): a larger one is not downloaded past it, and that round fails
         * (docs/discovery.md, "Reading the apiservers' documents: bounds"). kube-apiserver itself sets no limit.
         */
        maxDocumentBytes: size
          .pipe(
            z
              .number()
              .min(64 * 1024, "must be at least 64Ki: even a bare cluster's /apis may not fit below it")
              .max(1024 ** 3, 'must be at most 1Gi'),
          )
          .default(DEFAULT_MAX_DOCUMENT_BYTES),
        /** A document whose download failed (too large, malformed) is downloaded again after the
         * interval, doubling per failure, at most this long (never less than the interval);
         * conditional requests (304) go on meanwhile. */
        maxDownloadBackoff: duration.default(DEFAULT_MAX_DOWNLOAD_BACKOFF_MS),
      })
      .strict()
      // A view goes stale between two rounds when staleAfter is not longer than the interval: no
      // 404 would ever be proven.
      .refine((d) => d.staleAfter === undefined || d.staleAfter > d.interval, {
        path: ['staleAfter'],
        message: 'must be longer than discovery.interval: a view would go stale between two rounds (default: 3 × interval, at least 3s)',
      })
      .default({
        interval: 1000,
        timeout: 3000,
        watch: true,
        identityLeaseLiveness: 60_000,
        maxDocumentBytes: DEFAULT_MAX_DOCUMENT_BYTES,
        maxDownloadBackoff: DEFAULT_MAX_DOWNLOAD_BACKOFF_MS,
      }),
    extproc: z
      .object({
        listen: listenAddress.default('127.0.0.1:9002'),
        /** Envoy's per-message timeout for the ext_proc call. */
        messageTimeout: duration.default(500),
        /** open: Envoy keeps balancing when skewgate is unreachable (docs/design.md, invariant 4); closed: 503. */
        failureMode: z.enum(['open', 'closed']).default('open'),
        /** How long graceful shutdown waits for open streams before closing them. */
        shutdownGrace: duration.default(5000),
        /**
         * ext_proc endpoints of this skewgate (docs/design.md, "Workers"): the main process on listen
         * and workers − 1 worker processes on the addresses after it (port + i, or path.i). One
         * discovery; every endpoint decides on the same snapshot. Envoy balances streams over them.
         */
        workers: z.number().int().min(1).max(EXTPROC_MAX_WORKERS).default(1),
        /**
         * What this skewgate holds at once (docs/design.md, overload). Envoy's circuit breaker on
         * its ext_proc cluster is rendered from maxStreams, so that Envoy never opens more.
         */
        limits: z
          .object({
            /** Streams open at once, every connection together; a request beyond is answered 429 with Retry-After. */
            maxStreams: z.number().int().positive().default(EXTPROC_LIMIT_DEFAULTS.maxStreams),
            /** Streams on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS): Envoy opens another. */
            maxStreamsPerConnection: z.number().int().positive().default(EXTPROC_LIMIT_DEFAULTS.maxStreamsPerConnection),
            /** The largest ProcessingRequest read: above 1 MiB of request headers and their framing. */
            maxMessageBytes: z
              .number()
              .int()
              .min(
                EXTPROC_MIN_MESSAGE_BYTES,
                `must be at least ${EXTPROC_MIN_MESSAGE_BYTES} (1 MiB of request headers, as Envoy's listener admits, and their framing)`,
              )
              .default(EXTPROC_LIMIT_DEFAULTS.maxMessageBytes),
            /** A stream that has not sent its request headers by then is ended (Envoy sends them at once). */
            firstMessageTimeout: duration
              .refine((ms) => ms >= 100, 'must be at least 100ms')
              .default(EXTPROC_LIMIT_DEFAULTS.firstMessageTimeoutMs),
          })
          .strict()
          .default(EXTPROC_LIMITS_DEFAULT),
        /**
         * A second listener for the other control-plane nodes' Envoys, which fall back on this
         * skewgate while their own is down (envoy.extprocPeers): mutual TLS, the client
         * certificate verified against clientCaFile. The files are re-read as they change.
         */
        peer: z
          .object({
            listen: z.string().regex(/^(\[[0-9a-fA-F:]+\]|[^:[\]]+):\d{1,5}$/, 'must be host:port (TCP: other nodes connect to it)'),
            certFile: path,
            keyFile: path,
            clientCaFile: path,
          })
          .strict()
          .optional(),
      })
      .strict()
      .superRefine((e, ctx) => {
        const problem = extprocListenProblem(e.listen, e.workers);
        if (problem !== null) ctx.addIssue({ code: 'custom', path: ['workers'], message: problem });
      })
      .default({
        listen: '127.0.0.1:9002',
        messageTimeout: 500,
        failureMode: 'open',
        shutdownGrace: 5000,
        workers: 1,
        limits: EXTPROC_LIMITS_DEFAULT,
      }),
    membership,
    kubernetesService,
    routing: z
      .object({
        /** Retry-After seconds on a 503 from skewgate. */
        retryAfterSeconds: z.number().int().min(0).default(1),
        /**
         * With envoy.xds: what needs no per-request judgement (a group/version every apiserver
         * serves identically, no client certificate, nothing long-running) is compiled into Envoy
         * routes that skip ext_proc (docs/design.md, "The fast path"). false: every request is
         * asked about, as without envoy.xds.
         */
        fastPath: z.boolean().default(true),
      })
      .strict()
      .default({ retryAfterSeconds: 1, fastPath: true }),
    envoy: z
      .object({
        listen: z
          .object({ address: z.string().default('0.0.0.0'), port: z.number().int().min(0).max(65535).default(6443) })
          .strict()
          .default({ address: '0.0.0.0', port: 6443 }),
        tls: z
          .object({
            /**
             * The gateway's own serving certificate and key (downstream TLS): Envoy's. Required by
             * `envoy-config` and `validate`; `serve` never reads them.
             */
            certFile: path.optional(),
            keyFile: path.optional(),
            /**
             * The CA bundle that signs client certificates: the cluster's --client-ca-file. When set,
             * Envoy asks for a client certificate (optional: tokens keep working), verifies it
             * against this bundle, and skewgate re-states it to the apiservers as front-proxy identity
             * (X-Remote-User, X-Remote-Group), presented with upstreamClientCert.
             */
            clientCaFile: path.optional(),
          })
          .strict()
          .prefault({}),
        admin: z
          .object({ address: z.string().default('127.0.0.1'), port: z.number().int().min(0).max(65535).default(9901) })
          .strict()
          .default({ address: '127.0.0.1', port: 9901 }),
        /**
         * Filesystem xDS: the apiserver clusters and routes live in this folder (cds.json,
         * rds.json) instead of the bootstrap, written by `envoy-config` (the seed) and rewritten
         * atomically by `serve` as members join and leave; Envoy watches the folder.
         */
        xds: z.object({ directory: path }).strict().optional(),
        /** Connect timeout to an apiserver (TCP and TLS handshake). */
        connectTimeout: duration.default(2000),
        /**
         * The longest Envoy waits for an apiserver's whole answer to a request that is not
         * long-running (skewgate marks those, src/k8s/long-running.ts): then 504 Timeout. Above
         * kube-apiserver's own --request-timeout (60 s by default), so that its 504 normally
         * comes first; raise it with that flag. 0: no bound. Watches, exec, attach,
         * port-forward, logs and proxies are never bounded.
         */
        requestTimeout: duration
          .refine((ms) => ms === 0 || ms >= 1000, 'must be 0 (no bound) or at least 1s: it bounds every ordinary request')
          .default(REQUEST_TIMEOUT_MS),
        /** Active /readyz health checks on every apiserver cluster. */
        healthCheck: z
          .object({
            interval: duration.default(2000),
            timeout: duration.default(1000),
            unhealthyThreshold: z.number().int().positive().default(2),
            healthyThreshold: z.number().int().positive().default(1),
          })
          .strict()
          .default({ interval: 2000, timeout: 1000, unhealthyThreshold: 2, healthyThreshold: 1 }),
        /**
         * The front-proxy client certificate Envoy presents on every upstream connection (requests
         * and /readyz checks): issued by the apiservers' --requestheader-client-ca-file CA, its CN in
         * their --requestheader-allowed-names. Required with tls.clientCaFile: the apiservers accept
         * X-Remote-* identity only from it. Must not be issued by a CA in tls.clientCaFile
         * (src/envoy/tls-check.ts).
         */
        upstreamClientCert: z.object({ certFile: path, keyFile: path }).strict().optional(),
        /**
         * The other control-plane nodes' skewgates (their extproc.peer listeners): Envoy's ext_proc
         * cluster tries them only while the local skewgate is not healthy (priority 1), over mutual
         * TLS: this node's client certificate, their serving certificates verified against caFile
         * (and serverName, when given).
         */
        extprocPeers: z
          .object({
            endpoints: z
              .array(z.string().regex(/^(\[[0-9a-fA-F:]+\]|[^:[\]]+):\d{1,5}$/, 'must be host:port'))
              .min(1, 'name at least one other skewgate'),
            certFile: path,
            keyFile: path,
            caFile: path,
            serverName: z.string().min(1).optional(),
          })
          .strict()
          .optional(),
        /**
         * A plain-HTTP health listener for the load balancer in front of the gateways: GET /ready
         * answers 200 only while Envoy can reach a ready apiserver and, with client certificates
         * (or failureMode closed), a healthy skewgate (local or peer); 503 otherwise.
         */
        health: z
          .object({ address: z.string().default('0.0.0.0'), port: z.number().int().min(0).max(65535).default(16444) })
          .strict()
          .optional(),
      })
      .strict()
      .refine((e) => e.tls.clientCaFile === undefined || e.upstreamClientCert !== undefined, {
        path: ['upstreamClientCert'],
        message:
          'required with tls.clientCaFile: client certificates are re-stated as front-proxy identity, which the apiservers accept only from this front-proxy client certificate (issued by their --requestheader-client-ca-file CA)',
        // Also when a sibling field is wrong, so that this problem is listed with the others.
        when: (p) => {
          const v = p.value as { tls?: unknown } | null;
          return (
            typeof v === 'object' &&
            v !== null &&
            typeof v.tls === 'object' &&
            v.tls !== null &&
            !p.issues.some((i) => i.path?.[0] === 'tls' || i.path?.[0] === 'upstreamClientCert')
          );
        },
      })
      // `serve` needs only what skewgate itself uses of this section (the identity settings, xds).
      .prefault({}),
    /**
     * The running gateway's admin endpoint (docs/design.md, "The admin endpoint"): what it
     * believes now (GET /v1/status, /v1/skew) and its own decision for a request (POST
     * /v1/explain); `skewgate status|skew|explain` ask it. Off the request path; off when absent.
     */
    admin: z
      .object({ listen: adminListen.default(ADMIN_LISTEN_DEFAULT) })
      .strict()
      .optional(),
    log: z
      .object({
        level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
        /** json: one JSON object per line (for collectors); text: a line for people. Both on stderr. */
        format: z.enum(['json', 'text']).default('json'),
      })
      .strict()
      .default({ level: 'info', format: 'json' }),
    telemetry,
  })
  .strict();

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

type Parsed = z.output<typeof fields>;
export type ApiServerConfig = Parsed['apiservers'][number];
export type MembershipSource = z.output<typeof membershipSource>;
export type Config = DeepReadonly<Parsed & { discovery: Parsed['discovery'] & { staleAfter: number } }> & {
  /** The file the config came from; relative paths inside it were resolved against its folder. */
  readonly source: string;
};

type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** One problem in a config: where, and what is wrong. */
export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

export class ConfigError extends Error {
  readonly code = 'SKEWGATE_ERR_CONFIG';
  constructor(
    readonly source: string,
    readonly problems: readonly ConfigProblem[],
  ) {
    super(
      `${source}: ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => `  - ${p.path || '(top)'}: ${p.message}`).join('\n')}`,
    );
    this.name = 'ConfigError';
  }
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
}

/** Validates an already-parsed document. Pure apart from resolving relative paths against baseDir. */
export function parseConfig(doc: unknown, source: string, baseDir: string, use: ConfigUse = 'serve'): Config {
  const result = schemas[use].safeParse(doc ?? {});
  if (!result.success) {
    throw new ConfigError(
      source,
      result.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message })),
    );
  }
  const c = result.data;
  const abs = (p: string): string => resolve(baseDir, p);
  const absOpt = (p: string | undefined): string | undefined => (p === undefined ? undefined : abs(p));
  const resolveCredentials = (cr: ApiServerConfig['credentials']): ApiServerConfig['credentials'] =>
    cr && {
      ...cr,
      tokenFile: absOpt(cr.tokenFile),
      clientCertFile: absOpt(cr.clientCertFile),
      clientKeyFile: absOpt(cr.clientKeyFile),
      kubeconfig: absOpt(cr.kubeconfig),
    };
  const resolved = {
    ...c,
    source,
    apiservers: c.apiservers.map((s) => ({
      ...s,
      caFile: absOpt(s.caFile),
      credentials: resolveCredentials(s.credentials),
    })),
    membership: {
      ...c.membership,
      template: {
        ...c.membership.template,
        caFile: absOpt(c.membership.template.caFile),
        credentials: resolveCredentials(c.membership.template.credentials),
      },
    },
    discovery: { ...c.discovery, staleAfter: c.discovery.staleAfter ?? Math.max(3 * c.discovery.interval, 3000) },
    extproc: {
      ...c.extproc,
      listen:
        c.extproc.listen.startsWith('unix:') && !c.extproc.listen.startsWith('unix:/')
          ? `unix:${abs(c.extproc.listen.slice(5))}`
          : c.extproc.listen,
      peer: c.extproc.peer && {
        ...c.extproc.peer,
        certFile: abs(c.extproc.peer.certFile),
        keyFile: abs(c.extproc.peer.keyFile),
        clientCaFile: abs(c.extproc.peer.clientCaFile),
      },
    },
    admin: c.admin && {
      listen:
        c.admin.listen.startsWith('unix:') && !c.admin.listen.startsWith('unix:/')
          ? `unix:${abs(c.admin.listen.slice(5))}`
          : c.admin.listen,
    },
    envoy: {
      ...c.envoy,
      tls: { certFile: absOpt(c.envoy.tls.certFile), keyFile: absOpt(c.envoy.tls.keyFile), clientCaFile: absOpt(c.envoy.tls.clientCaFile) },
      xds: c.envoy.xds && { directory: abs(c.envoy.xds.directory) },
      upstreamClientCert: c.envoy.upstreamClientCert && {
        certFile: abs(c.envoy.upstreamClientCert.certFile),
        keyFile: abs(c.envoy.upstreamClientCert.keyFile),
      },
      extprocPeers: c.envoy.extprocPeers && {
        ...c.envoy.extprocPeers,
        certFile: abs(c.envoy.extprocPeers.certFile),
        keyFile: abs(c.envoy.extprocPeers.keyFile),
        caFile: abs(c.envoy.extprocPeers.caFile),
      },
    },
    telemetry: {
      ...c.telemetry,
      tracing: { ...c.telemetry.tracing, caFile: absOpt(c.telemetry.tracing.caFile) },
      metrics: {
        ...c.telemetry.metrics,
        otlp: c.telemetry.metrics.otlp && { ...c.telemetry.metrics.otlp, caFile: absOpt(c.telemetry.metrics.otlp.caFile) },
      },
    },
  };
  return deepFreeze(resolved) as Config;
}

/**
 * The config's JSON Schema (draft 2020-12), for editors (yaml-language-server) and linters: what
 * may be written, as input (durations as strings or ms). The cross-field rules and the files'
 * contents are checked by skewgate only. Published as docs/skewgate-config.schema.json.
 */
export function configJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(fields, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }),
    title: 'skewgate config',
  };
}

/**
 * Reads, parses and validates a YAML config file for a use: the fields and the use's needs, and
 * the CA files named, every problem of both in one ConfigError. src/config-check.ts adds the TLS
 * material for the commands that act on it.
 */
export function loadConfig(file: string, use: ConfigUse = 'serve'): Config {
  const read = readConfig(file, use);
  const problems = [...read.problems, ...configFileProblems(read.files)];
  if (read.config === null || problems.length > 0) throw new ConfigError(read.source, problems);
  return read.config;
}

/** A config file read and parsed: the config when its fields are valid, else their problems. */
export interface ConfigRead {
  readonly source: string;
  readonly config: Config | null;
  readonly problems: readonly ConfigProblem[];
  /** The fields that name files: the config's, or (fields invalid) what the document gives of them. */
  readonly files: FileFields;
}

/**
 * The first stage: read, YAML, the fields and the use's needs. An unreadable file or bad YAML
 * throws (nothing else can be checked); the fields' problems are returned, so that the files
 * they name can still be checked and every problem listed at once.
 */
export function readConfig(file: string, use: ConfigUse = 'serve'): ConfigRead {
  const source = resolve(file);
  let text: string;
  try {
    text = readFileSync(source, 'utf8');
  } catch (err) {
    throw new ConfigError(source, [{ path: '', message: `cannot read: ${(err as Error).message}` }]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: true });
  } catch (err) {
    const msg = err instanceof YAMLParseError ? err.message : String(err);
    throw new ConfigError(source, [{ path: '', message: `not valid YAML: ${msg}` }]);
  }
  try {
    const config = parseConfig(doc, source, dirname(source), use);
    return { source, config, problems: [], files: config };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { source, config: null, problems: err.problems, files: looseFileFields(doc, dirname(source)) };
  }
}

/** The second stage, on the files the fields name: the CA bundles' contents. */
export function configFileProblems(files: FileFields): ConfigProblem[] {
  return caFileProblems(files, (f) => {
    try {
      return readFileSync(f, 'utf8');
    } catch {
      return null;
    }
  });
}

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
