// The admin endpoint: plain HTTP on loopback or a unix socket (config/core/admin-address.ts refuses anything
// else), off the request path. What the running gateway believes (GET /v1/status, GET /v1/skew),
// what changed lately (GET /v1/history) and its own decision for a request (POST /v1/explain);
// and the one thing an operator may change here, cordons (POST /v1/cordon, /v1/uncordon). Every
// answer JSON. The handlers are the pure inspect/ functions over the live snapshot; nothing here decides.
import { chmod, unlink } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../util/log.js';
import { ExplainInputError, type Explanation, type ExplainRequest } from '../inspect/explanation.js';
import type { GatewayStatus } from '../inspect/status.js';
import type { SkewReport } from '../inspect/skew-report.js';
import type { HistoryAnswer } from '../history/recorder.js';
import { clearStaleSocket } from '../util/unix-socket.js';
import { formatAdminAddress, parseAdminAddress } from '../config/core/admin-address.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import { cordonRequestOf, type CordonRequest } from '../cordon/core/cordons.js';
import { CordonRefused, type CordonAnswer } from './cordon-control.js';
import type { GateAnswer, GateQuestion } from '../gate/core/verdict.js';

export interface AdminHandlers {
  status(): GatewayStatus;
  skew(): SkewReport;
  history(): HistoryAnswer;
  /** Throws ExplainInputError for a request that cannot be explained as given. */
  explain(req: ExplainRequest): Explanation;
  /** Throws CordonRefused; `peer` is where the request came from. */
  cordon(req: CordonRequest, peer: string): Promise<CordonAnswer>;
  /** May a rollout go on (src/gate/core/verdict.ts). */
  gate(question: GateQuestion): Promise<GateAnswer>;
  /** Whether ext_proc serves (grpc.health.v1 SERVING): GET /healthz. */
  serving(): boolean;
}

export interface AdminServerOptions {
  readonly listen: string;
  readonly logger: Logger;
  readonly handlers: AdminHandlers;
  /** Sent as x-skewgate-version on every answer. */
  readonly version: string;
}

/** A request header block and body of 1 MiB each, as Envoy's listener admits: any explain request fits. */
const MAX_BODY_BYTES = 2 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 10_000;

class AdminHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

export class AdminServer {
  private server: Server | null = null;
  private socketPath: string | null = null;
  private closing: Promise<void> | undefined;

  constructor(private readonly opts: AdminServerOptions) {}

  /** Listens; resolves with the address bound (a TCP port 0 resolved). */
  async start(): Promise<string> {
    const address = parseAdminAddress(this.opts.listen);
    if (typeof address === 'string') throw new Error(`admin.listen ${this.opts.listen}: ${address}`);
    const server = createServer({ requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: REQUEST_TIMEOUT_MS }, (req, res) => {
      void this.handle(req, res);
    });
    server.keepAliveTimeout = 1000;
    if (address.kind === 'unix') await clearStaleSocket(address.path);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      const done = (): void => {
        server.off('error', reject);
        resolve();
      };
      if (address.kind === 'unix') server.listen(address.path, done);
      else server.listen(address.port, address.host, done);
    });
    server.on('error', (err) => this.opts.logger.error({ err: err.message }, 'admin endpoint: listener error'));
    this.server = server;
    let bound: string;
    if (address.kind === 'unix') {
      this.socketPath = address.path;
      // The owner only: the endpoint has no authentication of its own.
      await chmod(address.path, 0o600);
      bound = formatAdminAddress(address);
    } else {
      const a = server.address() as AddressInfo;
      bound = formatAdminAddress({ kind: 'tcp', host: address.host, port: a.port });
    }
    this.opts.logger.info({ listen: bound }, 'admin endpoint listening');
    return bound;
  }

  /** Stops listening and ends open connections. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const server = this.server;
      if (server === null) return;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      if (this.socketPath !== null) await unlink(this.socketPath).catch(() => undefined);
    })();
    return this.closing;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    let status = 200;
    try {
      const body = await this.answer(req);
      this.send(res, 200, body);
    } catch (err) {
      const e =
        err instanceof AdminHttpError
          ? err
          : err instanceof ExplainInputError
            ? new AdminHttpError(400, err.message)
            : err instanceof CordonRefused
              ? new AdminHttpError(err.status, err.message)
              : new AdminHttpError(500, `internal error: ${(err as Error).message}`);
      status = e.status;
      if (status === 500)
        this.opts.logger.error({ err: (err as Error).stack ?? String(err), path: req.url }, 'admin endpoint: request failed');
      this.send(res, status, { error: e.message }, e.headers);
    }
    this.opts.logger.debug({ method: req.method, path: req.url, status, ms: Date.now() - started }, 'admin request');
  }

  private async answer(req: IncomingMessage): Promise<unknown> {
    const path = (req.url ?? '/').split('?')[0];
    const { handlers } = this.opts;
    switch (path) {
      case '/':
        allow(req, 'GET');
        return { endpoints: ADMIN_PATHS };
      case ADMIN_PATHS.status:
        allow(req, 'GET');
        return handlers.status();
      case ADMIN_PATHS.skew:
        allow(req, 'GET');
        return handlers.skew();
      case ADMIN_PATHS.history:
        allow(req, 'GET');
        return handlers.history();
      case ADMIN_PATHS.explain: {
        allow(req, 'POST');
        return handlers.explain(explainRequestOf(await readJson(req)));
      }
      case ADMIN_PATHS.healthz:
        allow(req, 'GET');
        // What grpc.health.v1 says, for a probe that cannot speak gRPC on loopback (httpGet, host 127.0.0.1).
        if (!handlers.serving()) throw new AdminHttpError(503, 'ext_proc not serving: skewgate is shutting down');
        return { status: 'SERVING' };
      case ADMIN_PATHS.gate: {
        allow(req, 'GET');
        return handlers.gate(gateQuestionOf(req.url ?? ''));
      }
      case ADMIN_PATHS.cordon:
      case ADMIN_PATHS.uncordon: {
        allow(req, 'POST');
        const parsed = cordonRequestOf(await readJson(req), path === ADMIN_PATHS.uncordon);
        if (Array.isArray(parsed)) throw new AdminHttpError(400, parsed.join('; '));
        return handlers.cordon(parsed as CordonRequest, peerOf(req));
      }
      default:
        // Drained so that a keep-alive connection stays usable.
        req.resume();
        throw new AdminHttpError(404, `no such endpoint: ${path}; see GET /`);
    }
  }

  private send(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, {
      ...headers,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'x-skewgate-version': this.opts.version,
      'cache-control': 'no-store',
    });
    res.end(text);
  }
}

const GATE_PARAMS: readonly string[] = ['expect', 'removing', 'version'];

/** ?expect=NAME&removing=NAME&version=vX.Y.Z, each at most once. */
function gateQuestionOf(url: string): GateQuestion {
  const params = new URL(url, 'http://admin').searchParams;
  const problems: string[] = [];
  for (const k of new Set(params.keys())) {
    if (!GATE_PARAMS.includes(k)) problems.push(`unknown parameter ${JSON.stringify(k)} (${GATE_PARAMS.join(', ')})`);
    else if (params.getAll(k).length > 1 || (params.get(k) ?? '') === '') problems.push(`${k}: given once, not empty`);
  }
  if (problems.length > 0) throw new AdminHttpError(400, problems.join('; '));
  return Object.fromEntries(GATE_PARAMS.flatMap((k) => (params.has(k) ? [[k, params.get(k) as string]] : [])));
}

/** Who sent it, as far as the connection says: the endpoint has no authentication of its own. */
function peerOf(req: IncomingMessage): string {
  const a = req.socket.remoteAddress;
  return a === undefined ? 'unix socket' : `${a}:${req.socket.remotePort ?? '?'}`;
}

function allow(req: IncomingMessage, method: 'GET' | 'POST'): void {
  if (req.method === method || (method === 'GET' && req.method === 'HEAD')) return;
  req.resume();
  throw new AdminHttpError(405, `${req.method ?? '?'} is not allowed here: ${method}`, { allow: method });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) {
    req.resume();
    throw new AdminHttpError(415, `send the request as application/json (got ${type || 'no content-type'})`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      req.destroy();
      throw new AdminHttpError(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch (err) {
    throw new AdminHttpError(400, `the body is not JSON: ${(err as Error).message}`);
  }
}

/** {method, path, headers?: ["Name: value"], clientCertificate?: PEM}, each checked. */
function explainRequestOf(body: unknown): ExplainRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new AdminHttpError(400, 'the body must be a JSON object');
  const b = body as Record<string, unknown>;
  const problems: string[] = [];
  for (const k of Object.keys(b))
    if (!['method', 'path', 'headers', 'clientCertificate'].includes(k)) problems.push(`unknown field ${JSON.stringify(k)}`);
  if (typeof b['method'] !== 'string' || !/^[A-Za-z]+$/.test(b['method'])) problems.push('method: must be an HTTP method, e.g. "GET"');
  if (typeof b['path'] !== 'string' || !b['path'].startsWith('/')) problems.push('path: must be a request path starting with "/"');
  const headers = b['headers'] ?? [];
  if (!Array.isArray(headers) || !headers.every((h) => typeof h === 'string'))
    problems.push('headers: must be a list of "Name: value" strings');
  const cert = b['clientCertificate'];
  if (cert !== undefined && typeof cert !== 'string') problems.push('clientCertificate: must be a PEM string');
  if (problems.length > 0) throw new AdminHttpError(400, problems.join('; '));
  return {
    method: b['method'] as string,
    path: b['path'] as string,
    headers: headers as string[],
    ...(cert === undefined ? {} : { clientCertificate: cert as string }),
  };
}
