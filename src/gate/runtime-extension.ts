// The Cluster API Runtime Extension endpoint (gate.runtimeExtension): HTTPS, POST only, answering
// the Runtime SDK's discovery and the lifecycle hooks the gate serves (core/capi-hooks.ts) with
// the gate's verdict. Read-only, like GET /v1/gate: it tells a rollout to wait, nothing more.
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { discoveryResponse, failureResponse, hookCallOf, hookResponse, questionOf, type HookSettings } from './core/capi-hooks.js';
import type { GateAnswer, GateQuestion } from './core/verdict.js';

/** A Cluster object with its status fits many times over; anything larger is not a hook request. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;

export interface RuntimeExtensionOptions {
  /** host:port. */
  readonly listen: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly hooks: HookSettings;
  readonly gate: (q: GateQuestion) => Promise<GateAnswer>;
  readonly log: Logger;
}

export class RuntimeExtension {
  private server: Server | null = null;
  private closing: Promise<void> | undefined;
  private lastSaid = '';

  constructor(private readonly o: RuntimeExtensionOptions) {}

  /** Listens; resolves with the port bound. */
  async start(): Promise<number> {
    const [cert, key] = await Promise.all([readFile(this.o.certFile), readFile(this.o.keyFile)]);
    const colon = this.o.listen.lastIndexOf(':');
    const host = this.o.listen.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    const port = Number(this.o.listen.slice(colon + 1));
    const server = createServer({ cert, key, requestTimeout: REQUEST_TIMEOUT_MS }, (req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => this.o.log.error({ err: err.message }, 'cluster api runtime extension: listener error'));
    this.server = server;
    const bound = (server.address() as AddressInfo).port;
    this.o.log.info({ listen: `${host}:${bound}`, handler: this.o.hooks.handlerName }, 'cluster api runtime extension listening');
    return bound;
  }

  /** Idempotent. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      const s = this.server;
      if (s === null) return resolve();
      s.close(() => resolve());
      s.closeAllConnections();
    });
    return this.closing;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const call = hookCallOf(path, this.o.hooks);
    if (req.method !== 'POST')
      return this.send(res, 405, failureResponse('Status', `${req.method ?? '?'} is not allowed: the Runtime SDK POSTs`));
    if (call.kind === 'unknown') return this.send(res, 404, failureResponse('Status', call.problem));
    let body: unknown;
    try {
      body = await readJson(req);
    } catch (err) {
      return this.send(
        res,
        400,
        failureResponse(call.kind === 'discovery' ? 'DiscoveryResponse' : `${call.hook}Response`, (err as Error).message),
      );
    }
    if (call.kind === 'discovery') return this.send(res, 200, discoveryResponse(this.o.hooks));
    const question = questionOf(call.hook, body);
    if (typeof question === 'string') {
      this.o.log.warn({ hook: call.hook, problem: question }, 'cluster api runtime extension: a hook request it cannot read');
      return this.send(res, 400, failureResponse(`${call.hook}Response`, question));
    }
    try {
      const g = await this.o.gate(question);
      const said = `${call.hook} ${g.verdict} ${g.holds.map((h) => h.reason).join(',')}`;
      if (said !== this.lastSaid)
        this.o.log.info(
          { hook: call.hook, verdict: g.verdict, reasons: g.holds.map((h) => h.reason), ...question },
          `cluster api hook: ${g.verdict}`,
        );
      this.lastSaid = said;
      this.send(res, 200, hookResponse(call.hook, g));
    } catch (err) {
      this.o.log.error({ hook: call.hook, err: (err as Error).message }, 'cluster api runtime extension: the gate failed');
      this.send(res, 500, failureResponse(`${call.hook}Response`, `the gate could not answer: ${(err as Error).message}`));
    }
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error(`the body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new Error(`the body is not JSON: ${(err as Error).message}`);
  }
}
