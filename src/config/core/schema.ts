// The config's fields as written in the YAML file, their defaults, and the Config type the rest of
// skewgate reads (src/config/load.ts parses, resolves and freezes it). Pure.
import { z } from 'zod';
import {
  DEFAULT_MAX_DOCUMENT_BYTES,
  DEFAULT_MAX_DOWNLOAD_BACKOFF_MS,
  DEFAULT_MAX_RESOURCES,
  EXTPROC_LIMIT_DEFAULTS,
  EXTPROC_MIN_MESSAGE_BYTES,
} from '../../constants.js';
import { ADMIN_LISTEN_DEFAULT } from './admin-address.js';
import { EXTPROC_MAX_WORKERS, extprocListenProblem } from './extproc-listen.js';
import {
  adminListen,
  apiserver,
  gate,
  kubernetesService,
  listenAddress,
  membership,
  type membershipSource,
  telemetry,
} from './sections.js';
import { duration, path, size } from './units.js';

const EXTPROC_LIMITS_DEFAULT = {
  maxStreams: EXTPROC_LIMIT_DEFAULTS.maxStreams,
  maxStreamsPerConnection: EXTPROC_LIMIT_DEFAULTS.maxStreamsPerConnection,
  maxMessageBytes: EXTPROC_LIMIT_DEFAULTS.maxMessageBytes,
  firstMessageTimeout: EXTPROC_LIMIT_DEFAULTS.firstMessageTimeoutMs,
};
/** envoy.requestTimeout: kube-apiserver's default --request-timeout (60 s) and a margin for its 504 to arrive. */
export const REQUEST_TIMEOUT_MS = 65_000;
/** log.decisions.interval: a restart's burst of routed decisions is a line per reason per 10 s. */
export const DECISION_LOG_INTERVAL_MS = 10_000;

export const fields = z
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
        /**
         * The most resources and group/versions one apiserver's view may hold: a larger one is
         * refused (that round fails, counted as too_large). What absorbing a view costs follows
         * this count (docs/discovery.md, "bounds").
         */
        maxResources: z
          .number({ message: 'must be a whole number of resources, e.g. 50000' })
          .int('must be a whole number of resources, e.g. 50000')
          .min(1000, 'must be at least 1000: a bare cluster lists a few hundred, and CRDs add more')
          .max(10_000_000, 'must be at most 10000000')
          .default(DEFAULT_MAX_RESOURCES),
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
        maxResources: DEFAULT_MAX_RESOURCES,
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
        /**
         * A plaintext TCP listener that serves grpc.health.v1 alone (no ext_proc): for the
         * kubelet's gRPC probes (`grpc: {port}`), which dial the pod's IP and cannot reach a unix
         * socket (docs/design.md, "Probes"). Off by default.
         */
        healthListen: z
          .string()
          .regex(/^(\[[0-9a-fA-F:]+\]|[^:[\]]*):\d{1,5}$/, 'must be host:port (TCP: the kubelet dials the pod IP), e.g. 0.0.0.0:9004')
          .optional(),
      })
      .strict()
      .superRefine((e, ctx) => {
        if (e.healthListen !== undefined && [e.listen, e.peer?.listen].includes(e.healthListen))
          ctx.addIssue({
            code: 'custom',
            path: ['healthListen'],
            message: `${e.healthListen} is taken by another ext_proc listener: give it a port of its own`,
          });
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
        /**
         * Envoy's access log (a JSON line per request on its stdout, with the fast path's decision):
         * off, or only responses with a status of at least minStatus (400: failures only), and of
         * those a sampled share (Envoy's runtime fraction, per request). At 2,000 requests a second
         * every line costs Envoy and the collector; the default keeps them all.
         */
        accessLog: z
          .object({
            enabled: z.boolean().default(true),
            minStatus: z.number().int().min(0).max(599).default(0),
            sample: z.number().gt(0, 'must be above 0 (to write none, set enabled: false)').max(1).default(1),
          })
          .strict()
          .default({ enabled: true, minStatus: 0, sample: 1 }),
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
         * (src/config/tls.ts).
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
    gate,
    log: z
      .object({
        level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
        /** json: one JSON object per line (for collectors); text: a line for people. Both on stderr. */
        format: z.enum(['json', 'text']).default('json'),
        /**
         * The decisions an operator follows (routed, not found, unavailable …; the routine ones are
         * debug lines): per outcome and reason, the first of each interval is logged in full and
         * the others are counted, in one line at the interval's end — so an apiserver restarting
         * under load writes a few lines per reason, not one per request. 0: a line for each. At
         * level debug every decision has its line.
         */
        decisions: z
          .object({ interval: duration.default(DECISION_LOG_INTERVAL_MS) })
          .strict()
          .default({ interval: DECISION_LOG_INTERVAL_MS }),
      })
      .strict()
      .default({ level: 'info', format: 'json', decisions: { interval: DECISION_LOG_INTERVAL_MS } }),
    telemetry,
  })
  .strict();

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
