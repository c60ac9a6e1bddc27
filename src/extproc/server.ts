// The gRPC server: ext_proc Process plus grpc.health.v1, on TCP or a unix socket, with a
// graceful, idempotent close.
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import type { RequestRouter } from '../routing/router.js';
import { createHealthService, type ServingStatus } from './health.js';
import { createLogObserver, type DecisionObserver } from './observer.js';
import { loadProtos } from './proto.js';
import { EXTPROC_LIMIT_DEFAULTS, EXTPROC_LOG_INTERVAL_MS } from '../constants.js';
import { createLogThrottle } from '../util/core/log-throttle.js';
import { createProcessHandler, type StreamGauge, type StreamLimits } from './stream.js';
import { decodeProcessingRequest, encodeProcessingResponse } from './codec.js';
import { unixSocketPath } from '../config/core/extproc-listen.js';
import { clearStaleSocket } from '../util/unix-socket.js';

export interface ExtProcServerOptions {
  readonly router: RequestRouter;
  readonly logger: Logger;
  /** Defaults to a logger-based observer. */
  readonly observer?: DecisionObserver;
  /** extproc.limits; each one left out takes its default (EXTPROC_LIMIT_DEFAULTS). */
  readonly limits?: Partial<ExtProcLimits>;
  /** Repeated warnings on the ext_proc path: one per kind per this interval. Default EXTPROC_LOG_INTERVAL_MS. */
  readonly logIntervalMs?: number;
  /** Merged over skewgate's grpc-js server options (last: a test may loosen a limit). */
  readonly grpcOptions?: grpc.ServerOptions;
}

export interface ExtProcLimits extends StreamLimits {
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: Envoy opens another connection beyond it; others are refused. */
  readonly maxStreamsPerConnection: number;
  /** The largest ProcessingRequest read; a larger one ends its stream (RESOURCE_EXHAUSTED) as its length arrives. */
  readonly maxMessageBytes: number;
}

export interface CloseOptions {
  /**
   * Time to keep answering (with health NOT_SERVING) before the listener closes, so that Envoy's
   * health checker sees the change and stops sending new streams. Default 0.
   */
  readonly drainMs?: number;
}

/** The listener for other nodes' Envoys: mutual TLS, files re-read every refreshMs. */
export interface PeerListen {
  readonly listen: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** Client certificates must chain to this bundle. */
  readonly clientCaFile: string;
  /** How often the three files are re-read (a rotated certificate is served from then on). Default 10 s. */
  readonly refreshMs?: number;
}

export interface ExtProcServer {
  /**
   * `listen` is "host:port" (port 0 picks one) or "unix:/path"; `peer` adds the mutual-TLS
   * listener. Resolves with the TCP ports.
   */
  start(listen: string, peer?: PeerListen): Promise<{ port?: number; peerPort?: number }>;
  /**
   * Health goes NOT_SERVING, then the server stops accepting and lets open streams finish; what
   * is still open after graceMs is cut. Idempotent: every call returns the same promise.
   */
  close(graceMs: number, opts?: CloseOptions): Promise<void>;
  /** What grpc.health.v1 currently reports. */
  servingStatus(): ServingStatus;
}

/**
 * extproc.limits as one endpoint takes them: with extproc.workers, maxStreams is shared evenly
 * (Envoy balances streams over the endpoints round robin; its breaker stays at the total).
 */
export function extprocLimits(config: Config): ExtProcLimits {
  const { firstMessageTimeout, maxStreams, ...rest } = config.extproc.limits;
  return { ...rest, maxStreams: Math.ceil(maxStreams / config.extproc.workers), firstMessageTimeoutMs: firstMessageTimeout };
}

/**
 * grpc-js never penalises client pings, so Envoy's HTTP/2 keepalive is accepted as is. The server
 * pings idle connections itself to notice an Envoy that vanished without closing. Per connection:
 * at most maxStreamsPerConnection streams (Envoy, told so by SETTINGS, opens another connection;
 * any other client gets REFUSED_STREAM) and messages of maxMessageBytes (grpc-js checks the length
 * prefix before it buffers anything; its default, 4 MiB, let 100 partial messages hold 390 MB).
 * Channelz stays on: grpc-js 1.14 tracks sessions for forceShutdown() only when it is enabled.
 */
function grpcOptions(limits: ExtProcLimits): grpc.ServerOptions {
  return {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.max_concurrent_streams': limits.maxStreamsPerConnection,
    'grpc.max_receive_message_length': limits.maxMessageBytes,
  };
}

/**
 * Mutual TLS for the peer listener, from files grpc-js re-reads every refreshMs (a certificate
 * renewed in place is served without a restart). Read once here first, so that a missing or
 * malformed file is a clear error at start rather than a listener that fails every handshake.
 */
async function peerServerCredentials(peer: PeerListen): Promise<grpc.ServerCredentials> {
  const read = async (what: string, file: string): Promise<Buffer> => {
    try {
      return await readFile(file);
    } catch (err) {
      throw new Error(`extproc.peer.${what}: cannot read ${file}: ${(err as Error).message}`, { cause: err });
    }
  };
  const [cert, key, ca] = await Promise.all([
    read('certFile', peer.certFile),
    read('keyFile', peer.keyFile),
    read('clientCaFile', peer.clientCaFile),
  ]);
  try {
    createSecureContext({ cert, key, ca });
  } catch (err) {
    throw new Error(`extproc.peer: the certificate, key or client CA is not usable: ${(err as Error).message}`, { cause: err });
  }
  const files = new grpc.experimental.FileWatcherCertificateProvider({
    certificateFile: peer.certFile,
    privateKeyFile: peer.keyFile,
    caCertificateFile: peer.clientCaFile,
    refreshIntervalMs: peer.refreshMs ?? PEER_REFRESH_MS,
  });
  return grpc.experimental.createCertificateProviderServerCredentials(files, files, true);
}

const PEER_REFRESH_MS = 10_000;

/**
 * The ext_proc service as served: Process decodes and encodes with protobufjs's codec directly
 * (codec.ts), without proto-loader's object conversions. Clients keep proto-loader's codec.
 */
function servedExtProc(def: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const process = def['Process'];
  if (!process) throw new Error('skewgate: the ext_proc service has no Process method');
  return {
    ...def,
    Process: {
      ...process,
      requestDeserialize: decodeProcessingRequest,
      responseSerialize: encodeProcessingResponse as (value: unknown) => Buffer,
    },
  };
}

export function createExtProcServer(opts: ExtProcServerOptions): ExtProcServer {
  const { router, logger } = opts;
  const observer = opts.observer ?? createLogObserver(logger);
  const protos = loadProtos();
  const health = createHealthService('SERVING');
  const limits: ExtProcLimits = { ...EXTPROC_LIMIT_DEFAULTS, ...opts.limits };
  const server = new grpc.Server({ ...grpcOptions(limits), ...opts.grpcOptions });
  const gauge: StreamGauge = { pending: new Map(), active: 0 };
  const throttle = createLogThrottle({ intervalMs: opts.logIntervalMs ?? EXTPROC_LOG_INTERVAL_MS, now: Date.now });
  server.addService(servedExtProc(protos.extProc), {
    Process: createProcessHandler({ router, logger, observer, limits, gauge, throttle }),
  });
  server.addService(protos.health, health.implementation);

  let binding: Promise<unknown> | undefined;
  let closing: Promise<void> | undefined;
  const bindOne = (listen: string, credentials: grpc.ServerCredentials): Promise<number> =>
    new Promise<number>((resolve, reject) => {
      server.bindAsync(listen, credentials, (err, p) =>
        err ? reject(new Error(`cannot listen on ${listen}: ${err.message}`, { cause: err })) : resolve(p),
      );
    });

  async function bind(listen: string, peer: PeerListen | undefined): Promise<{ port?: number; peerPort?: number }> {
    const socketPath = unixSocketPath(listen);
    if (socketPath !== null) await clearStaleSocket(socketPath);
    // The peer material first: a bad file fails start() before anything listens.
    const peerCredentials = peer && (await peerServerCredentials(peer));
    const port = await bindOne(listen, grpc.ServerCredentials.createInsecure());
    const peerPort = peer && peerCredentials ? await bindOne(peer.listen, peerCredentials) : undefined;
    return { ...(socketPath === null ? { port } : {}), ...(peerPort === undefined ? {} : { peerPort }) };
  }

  async function shutdown(graceMs: number, drainMs: number): Promise<void> {
    health.setStatus('NOT_SERVING');
    if (binding) await binding.catch(() => undefined);
    if (drainMs > 0) await delay(drainMs);
    health.endWatches();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(
        () => {
          logger.warn({ graceMs }, 'ext_proc streams still open after the grace period; cutting them');
          server.forceShutdown();
          resolve();
        },
        Math.max(0, graceMs),
      );
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    // Node unlinks the socket file itself when the listener closes.
  }

  return {
    start(listen, peer) {
      if (closing) return Promise.reject(new Error('ext_proc server is closed'));
      if (binding) return Promise.reject(new Error('ext_proc server already started'));
      const bound = bind(listen, peer);
      binding = bound;
      // A failed bind leaves the server unstarted, so start may be tried again.
      bound.catch(() => {
        if (binding === bound) binding = undefined;
      });
      return bound;
    },
    close(graceMs, closeOpts) {
      closing ??= shutdown(graceMs, closeOpts?.drainMs ?? 0).catch((err: unknown) => {
        logger.error({ err }, 'ext_proc server shutdown failed');
        server.forceShutdown();
      });
      return closing;
    },
    servingStatus: () => health.status(),
  };
}
