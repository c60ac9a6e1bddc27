// The gRPC server: ext_proc Process plus grpc.health.v1, on TCP or a unix socket (and, for other
// nodes' Envoys, mutual TLS), on node:http2 with grpc-call.ts: a graceful, idempotent close, and
// per-connection limits. Not grpc-js's server: its per-call machinery cost about a third of a
// decided request's CPU over bare node:http2 (bench (b)); its clients stay (cli/health.ts, tests).
import { readFile } from 'node:fs/promises';
import * as http2 from 'node:http2';
import { createSecureContext } from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import type { RequestRouter } from '../routing/router.js';
import { createHealthService, type ServingStatus } from './health.js';
import { createLogObserver, type DecisionObserver } from './observer.js';
import { EXTPROC_SERVICE_PATH, HEALTH_SERVICE_PATH } from './proto.js';
import { EXTPROC_LIMIT_DEFAULTS, EXTPROC_LOG_INTERVAL_MS } from '../constants.js';
import { createLogThrottle } from '../util/core/log-throttle.js';
import { createProcessHandler, type StreamGauge, type StreamLimits } from './stream.js';
import { HEALTH_CODEC, PROCESS_CODEC } from './codec.js';
import { unixSocketPath } from '../config/core/extproc-listen.js';
import { clearStaleSocket } from '../util/unix-socket.js';
import { Http2ServerCall } from './grpc-call.js';
import { encodeGrpcMessage, GrpcStatus, parseGrpcTimeout } from './core/grpc-wire.js';

export interface ExtProcServerOptions {
  readonly router: RequestRouter;
  readonly logger: Logger;
  /** Defaults to a logger-based observer. */
  readonly observer?: DecisionObserver;
  /** extproc.limits; each one left out takes its default (EXTPROC_LIMIT_DEFAULTS). */
  readonly limits?: Partial<ExtProcLimits>;
  /** Repeated warnings on the ext_proc path: one per kind per this interval. Default EXTPROC_LOG_INTERVAL_MS. */
  readonly logIntervalMs?: number;
  /** Told the service name of every grpc.health.v1 Check received (a test watches Envoy's health checker). */
  readonly onHealthCheck?: (service: string) => void;
  /** The server's pings on each connection (default every 30 s, 10 s to answer); a test may shorten them. */
  readonly keepalive?: { readonly intervalMs: number; readonly timeoutMs: number };
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
   * listener, `healthListen` a plaintext one for grpc.health.v1 alone (the kubelet's gRPC probes).
   * Resolves with the TCP ports.
   */
  start(listen: string, peer?: PeerListen, healthListen?: string): Promise<{ port?: number; peerPort?: number; healthPort?: number }>;
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
 * The server pings each connection itself, to notice an Envoy that vanished without closing; client
 * pings (Envoy's HTTP/2 keepalive) are answered by node:http2. Per connection: at most
 * maxStreamsPerConnection streams (Envoy, told so by SETTINGS, opens another connection; any other
 * client gets REFUSED_STREAM) and messages of maxMessageBytes (checked on the length prefix, before
 * anything is buffered). No session memory bound of node's own (10 MB by default, which ends a
 * whole connection): what a connection holds is bounded by these limits and maxStreams.
 */
const KEEPALIVE = { intervalMs: 30_000, timeoutMs: 10_000 } as const;

function serverOptions(limits: ExtProcLimits): http2.ServerOptions {
  return { settings: { maxConcurrentStreams: limits.maxStreamsPerConnection }, maxSessionMemory: Number.MAX_SAFE_INTEGER };
}

interface PeerMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer;
}

/**
 * The peer listener's certificate, key and client CA. A missing or malformed file is a clear error
 * at start rather than a listener that fails every handshake.
 */
async function readPeerMaterial(peer: PeerListen): Promise<PeerMaterial> {
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
  return { cert, key, ca };
}

const PEER_REFRESH_MS = 10_000;

const PROCESS_PATH = `/${EXTPROC_SERVICE_PATH}/Process`;
const CHECK_PATH = `/${HEALTH_SERVICE_PATH}/Check`;
const WATCH_PATH = `/${HEALTH_SERVICE_PATH}/Watch`;

/** "host:port" or "[v6]:port" → where node listens; "unix:/path" → the path. */
function listenTarget(listen: string): { path: string } | { host: string | undefined; port: number } {
  const path = unixSocketPath(listen);
  if (path !== null) return { path };
  const m = /^\[?(.*?)\]?:(\d{1,5})$/.exec(listen);
  if (!m) throw new Error(`cannot listen on ${listen}: neither host:port nor unix:/path`);
  return { host: m[1] === '' ? undefined : m[1], port: Number(m[2]) };
}

function listenOn(server: http2.Http2Server | http2.Http2SecureServer, listen: string, logger: Logger): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    let target: ReturnType<typeof listenTarget>;
    try {
      target = listenTarget(listen);
    } catch (err) {
      reject(err as Error);
      return;
    }
    const onError = (err: Error): void => reject(new Error(`cannot listen on ${listen}: ${err.message}`, { cause: err }));
    server.once('error', onError);
    const listening = (): void => {
      server.off('error', onError);
      // From now on an accept failure (EMFILE, say) is logged, never an unhandled 'error' that ends the process.
      server.on('error', (err) => logger.error({ err, listen }, 'ext_proc listener error'));
      const a = server.address();
      resolve(typeof a === 'object' && a !== null ? a.port : undefined);
    };
    if ('path' in target) server.listen(target.path, listening);
    else server.listen(target.port, target.host, listening);
  });
}

export function createExtProcServer(opts: ExtProcServerOptions): ExtProcServer {
  const { router, logger } = opts;
  const observer = opts.observer ?? createLogObserver(logger);
  const health = createHealthService('SERVING');
  const limits: ExtProcLimits = { ...EXTPROC_LIMIT_DEFAULTS, ...opts.limits };
  const gauge: StreamGauge = { pending: new Map(), active: 0 };
  const throttle = createLogThrottle({ intervalMs: opts.logIntervalMs ?? EXTPROC_LOG_INTERVAL_MS, now: Date.now });
  const handleProcess = createProcessHandler({ router, logger, observer, limits, gauge, throttle });
  const listeners: (http2.Http2Server | http2.Http2SecureServer)[] = [];
  const sessions = new Set<http2.ServerHttp2Session>();
  let refreshTimer: NodeJS.Timeout | undefined;
  const pings = opts.keepalive ?? KEEPALIVE;

  function onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => undefined);
    const contentType = headers['content-type'] ?? '';
    if (headers[':method'] !== 'POST' || !contentType.startsWith('application/grpc')) {
      stream.respond({ ':status': 415 }, { endStream: true });
      return;
    }
    const path = headers[':path'];
    const timeoutMs = parseGrpcTimeout(headers['grpc-timeout'] as string | undefined);
    if (path === PROCESS_PATH) {
      handleProcess(new Http2ServerCall(stream, headers, PROCESS_CODEC, limits.maxMessageBytes, timeoutMs));
    } else if (path === CHECK_PATH || path === WATCH_PATH) {
      const call = new Http2ServerCall(stream, headers, HEALTH_CODEC, limits.maxMessageBytes, timeoutMs);
      let asked = false;
      call.on('data', (service: string) => {
        if (asked) return;
        asked = true;
        if (path === WATCH_PATH) {
          health.watch(call, service);
          return;
        }
        opts.onHealthCheck?.(service);
        const answer = health.check(service);
        if ('status' in answer) {
          call.write(answer);
          call.end();
        } else call.fail(answer.code, answer.details);
      });
      call.on('end', () => {
        if (!asked) call.fail(GrpcStatus.INTERNAL, 'skewgate: the call ended without its request message');
      });
    } else {
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc+proto',
          'grpc-status': String(GrpcStatus.UNIMPLEMENTED),
          'grpc-message': encodeGrpcMessage(`unknown method ${String(path)}`),
        },
        { endStream: true },
      );
    }
  }

  function onSession(session: http2.ServerHttp2Session): void {
    sessions.add(session);
    const keepalive = setInterval(() => {
      const timeout = setTimeout(() => session.destroy(), pings.timeoutMs);
      timeout.unref();
      try {
        if (!session.ping(() => clearTimeout(timeout))) clearTimeout(timeout);
      } catch {
        clearTimeout(timeout);
      }
    }, pings.intervalMs);
    keepalive.unref();
    session.on('close', () => {
      clearInterval(keepalive);
      sessions.delete(session);
    });
    session.on('error', (err) => logger.debug({ err }, 'ext_proc connection error'));
  }

  /** The probe listener: grpc.health.v1 only; ext_proc is not served there. */
  function onHealthStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    if (headers[':path'] === PROCESS_PATH) {
      stream.on('error', () => undefined);
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc+proto',
          'grpc-status': String(GrpcStatus.UNIMPLEMENTED),
          'grpc-message': encodeGrpcMessage('this listener (extproc.healthListen) serves grpc.health.v1 only'),
        },
        { endStream: true },
      );
      return;
    }
    onStream(stream, headers);
  }

  function serve<S extends http2.Http2Server | http2.Http2SecureServer>(server: S, handler = onStream): S {
    server.on('stream', handler);
    server.on('session', onSession);
    listeners.push(server);
    return server;
  }

  /** Re-reads the peer files every refreshMs: a certificate renewed in place is served from then on. */
  function refreshPeer(server: http2.Http2SecureServer, peer: PeerListen, first: PeerMaterial): void {
    let last = first;
    refreshTimer = setInterval(() => {
      readPeerMaterial(peer).then(
        (next) => {
          if (next.cert.equals(last.cert) && next.key.equals(last.key) && next.ca.equals(last.ca)) return;
          server.setSecureContext({ ...next });
          last = next;
          logger.info({ certFile: peer.certFile }, 'extproc.peer: certificate, key or client CA re-read; new connections use them');
        },
        (err: unknown) => logger.warn({ err: (err as Error).message }, 'extproc.peer: cannot re-read the files; keeping the ones in use'),
      );
    }, peer.refreshMs ?? PEER_REFRESH_MS);
    refreshTimer.unref();
  }

  let binding: Promise<unknown> | undefined;
  let closing: Promise<void> | undefined;

  async function bind(
    listen: string,
    peer: PeerListen | undefined,
    healthListen: string | undefined,
  ): Promise<{ port?: number; peerPort?: number; healthPort?: number }> {
    const socketPath = unixSocketPath(listen);
    if (socketPath !== null) await clearStaleSocket(socketPath);
    // The peer material first: a bad file fails start() before anything listens.
    const material = peer && (await readPeerMaterial(peer));
    const port = await listenOn(serve(http2.createServer(serverOptions(limits))), listen, logger);
    let peerPort: number | undefined;
    if (peer && material) {
      const secure = serve(
        http2.createSecureServer({
          ...serverOptions(limits),
          ...material,
          requestCert: true,
          rejectUnauthorized: true,
          ALPNProtocols: ['h2'],
        }),
      );
      peerPort = await listenOn(secure, peer.listen, logger);
      refreshPeer(secure, peer, material);
    }
    const healthPort =
      healthListen === undefined
        ? undefined
        : await listenOn(serve(http2.createServer(serverOptions(limits)), onHealthStream), healthListen, logger);
    return {
      ...(socketPath === null && port !== undefined ? { port } : {}),
      ...(peerPort === undefined ? {} : { peerPort }),
      ...(healthPort === undefined ? {} : { healthPort }),
    };
  }

  /** Stops accepting, lets open streams finish (GOAWAY), and resolves once every connection is gone. */
  function stopListening(): Promise<void> {
    const closed = Promise.all(listeners.map((l) => new Promise<void>((resolve) => (l.listening ? l.close(() => resolve()) : resolve()))));
    for (const session of sessions) session.close();
    return closed.then(() => undefined);
  }

  async function shutdown(graceMs: number, drainMs: number): Promise<void> {
    health.setStatus('NOT_SERVING');
    if (binding) await binding.catch(() => undefined);
    if (drainMs > 0) await delay(drainMs);
    health.endWatches();
    clearInterval(refreshTimer);
    let timer: NodeJS.Timeout | undefined;
    const cut = new Promise<'cut'>((resolve) => {
      timer = setTimeout(() => resolve('cut'), Math.max(0, graceMs));
    });
    const closed = stopListening();
    if ((await Promise.race([closed, cut])) === 'cut') {
      logger.warn({ graceMs }, 'ext_proc streams still open after the grace period; cutting them');
      for (const session of sessions) session.destroy();
      await closed;
    }
    clearTimeout(timer);
    // Node unlinks the socket file itself when the listener closes.
  }

  return {
    start(listen, peer, healthListen) {
      if (closing) return Promise.reject(new Error('ext_proc server is closed'));
      if (binding) return Promise.reject(new Error('ext_proc server already started'));
      const bound = bind(listen, peer, healthListen);
      binding = bound;
      // A failed bind leaves the server unstarted, so start may be tried again.
      bound.catch(() => {
        if (binding === bound) binding = undefined;
        void stopListening();
        listeners.length = 0;
        clearInterval(refreshTimer);
      });
      return bound;
    },
    close(graceMs, closeOpts) {
      closing ??= shutdown(graceMs, closeOpts?.drainMs ?? 0).catch((err: unknown) => {
        logger.error({ err }, 'ext_proc server shutdown failed');
        for (const session of sessions) session.destroy();
      });
      return closing;
    },
    servingStatus: () => health.status(),
  };
}
