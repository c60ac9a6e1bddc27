// A test client that speaks ext_proc the way Envoy (1.37+) does: one Process stream per HTTP
// request, call metadata with a traceparent, request_headers with lower-case keys and raw_value
// bytes, then a reset (cancel) right after the one reply it needs. Plus a grpc.health.v1 client.
import { connect as http2Connect, constants as h2, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import type { RequestInfo, ResourceRequest } from '../../src/k8s/request-info.js';
import type { ClientIdentity, IdentityResult } from '../../src/identity/core/client-identity.js';
import type { Decision } from '../../src/routing/decision.js';
import type { RequestRouter, RoutingResult } from '../../src/routing/router.js';
import type { ProcessingResponseMsg } from '../../src/extproc/core/messages.js';
import { loadProtos } from '../../src/extproc/proto.js';

/** A valid W3C traceparent, as Envoy's OpenTelemetry tracer would send it. */
export const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

export interface EnvoyRequest {
  readonly method?: string;
  readonly path: string;
  readonly authority?: string;
  readonly scheme?: string;
  /** Extra headers; keys are lower-cased as Envoy does. An array repeats the header. */
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
  /** Envoy sends raw_value; 'value' imitates an old sender, to test the fallback. */
  readonly encoding?: 'raw_value' | 'value';
  /** Envoy sets it when the request has no body; default true for GET/HEAD/OPTIONS. */
  readonly endOfStream?: boolean;
}

export interface ProcessOptions {
  /** 'cancel' (Envoy ≥1.37 resets after the last needed reply) or 'half-close' (graceful). */
  readonly close?: 'cancel' | 'half-close';
  readonly traceparent?: string;
  readonly metadata?: Readonly<Record<string, string>>;
  readonly deadlineMs?: number;
}

export interface ProcessExchange {
  /** The one reply, or null when the stream ended without one. */
  readonly response: ProcessingResponseMsg | null;
  /** How the stream ended, as the client saw it (CANCELLED after our own cancel). */
  readonly status: grpc.StatusObject;
}

export type ProcessStream = grpc.ClientDuplexStream<Record<string, unknown>, ProcessingResponseMsg>;

export interface ExtProcTestClient {
  process(req: EnvoyRequest, opts?: ProcessOptions): Promise<ProcessExchange>;
  /** A raw Process stream with Envoy-like metadata, for custom message sequences. */
  open(opts?: ProcessOptions): ProcessStream;
  check(service?: string): Promise<{ status?: string; code: grpc.status; details?: string }>;
  watch(service?: string): HealthWatch;
  close(): void;
}

export interface HealthWatch {
  /** The next status the server sent (queued if it already arrived). */
  next(timeoutMs?: number): Promise<string>;
  /** Resolves when the server ends the Watch. */
  readonly ended: Promise<grpc.StatusObject>;
  cancel(): void;
}

function bodyless(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS';
}

/** The ProcessingRequest Envoy sends for a request's headers. */
export function requestHeadersMessage(req: EnvoyRequest): Record<string, unknown> {
  const method = req.method ?? 'GET';
  const pairs: [string, string][] = [
    [':authority', req.authority ?? 'kubernetes.default.svc'],
    [':path', req.path],
    [':method', method],
    [':scheme', req.scheme ?? 'https'],
  ];
  for (const [k, v] of Object.entries(req.headers ?? {})) {
    for (const one of typeof v === 'string' ? [v] : v) pairs.push([k.toLowerCase(), one]);
  }
  const encode = req.encoding ?? 'raw_value';
  const headers = pairs.map(([key, value]) => (encode === 'raw_value' ? { key, raw_value: Buffer.from(value, 'utf8') } : { key, value }));
  return {
    request_headers: { headers: { headers }, end_of_stream: req.endOfStream ?? bodyless(method) },
  };
}

function metadataFor(opts: ProcessOptions): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set('traceparent', opts.traceparent ?? TRACEPARENT);
  for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
  return md;
}

/** The text of a header set by a reply (mutation or immediate response), read from raw_value. */
export function replyHeader(res: ProcessingResponseMsg | null, key: string): { value?: string; raw?: string } | undefined {
  const list = res?.immediate_response?.headers?.set_headers ?? res?.request_headers?.response?.header_mutation?.set_headers ?? [];
  const found = list.find((o) => o.header?.key === key)?.header;
  if (!found) return undefined;
  return { value: found.value ?? '', raw: found.raw_value ? Buffer.from(found.raw_value).toString('utf8') : '' };
}

/** The parsed JSON body of an immediate response. */
export function immediateBody(res: ProcessingResponseMsg | null): unknown {
  const body = res?.immediate_response?.body;
  return body ? JSON.parse(Buffer.from(body).toString('utf8')) : undefined;
}

export function createExtProcClient(target: string): ExtProcTestClient {
  const { ExtProcClient, HealthClient } = loadProtos();
  const creds = grpc.credentials.createInsecure();
  const extProc = new ExtProcClient(target, creds);
  const health = new HealthClient(target, creds);

  const open = (opts: ProcessOptions = {}): ProcessStream => {
    const callOpts: grpc.CallOptions = opts.deadlineMs ? { deadline: Date.now() + opts.deadlineMs } : {};
    const method = extProc['Process'] as (md: grpc.Metadata, o: grpc.CallOptions) => ProcessStream;
    return method.call(extProc, metadataFor(opts), callOpts);
  };

  return {
    open,
    process(req, opts = {}) {
      return new Promise((resolve) => {
        const call = open(opts);
        let response: ProcessingResponseMsg | null = null;
        call.on('data', (msg: ProcessingResponseMsg) => {
          if (response !== null) return; // a second reply would be spurious; the caller sees the first
          response = msg;
          if ((opts.close ?? 'cancel') === 'cancel') call.cancel();
          else call.end();
        });
        call.on('error', () => undefined); // the status event carries the outcome
        call.on('status', (status: grpc.StatusObject) => resolve({ response, status }));
        call.write(requestHeadersMessage(req));
      });
    },
    check(service = '') {
      return new Promise((resolve) => {
        const method = health['Check'] as (
          r: { service: string },
          o: grpc.CallOptions,
          cb: (e: grpc.ServiceError | null, r?: { status?: string }) => void,
        ) => void;
        method.call(health, { service }, { deadline: Date.now() + 5000 }, (err, res) => {
          if (err) resolve({ code: err.code, details: err.details });
          else resolve({ code: grpc.status.OK, ...(res?.status ? { status: res.status } : {}) });
        });
      });
    },
    watch(service = '') {
      const method = health['Watch'] as (r: { service: string }) => grpc.ClientReadableStream<{ status?: string }>;
      const call = method.call(health, { service });
      const queue: string[] = [];
      const waiters: ((s: string) => void)[] = [];
      call.on('data', (msg: { status?: string }) => {
        const s = msg.status ?? '';
        const w = waiters.shift();
        if (w) w(s);
        else queue.push(s);
      });
      call.on('error', () => undefined);
      const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
      return {
        ended,
        cancel: () => call.cancel(),
        next(timeoutMs = 5000) {
          const queued = queue.shift();
          if (queued !== undefined) return Promise.resolve(queued);
          return new Promise((resolve, reject) => {
            const waiter = (s: string): void => {
              clearTimeout(timer);
              resolve(s);
            };
            const timer = setTimeout(() => {
              waiters.splice(waiters.indexOf(waiter), 1);
              reject(new Error('no health status within timeout'));
            }, timeoutMs);
            waiters.push(waiter);
          });
        },
      };
    },
    close() {
      extProc.close();
      health.close();
    },
  };
}

// ---- Fixtures shared by the ext_proc tests: routing results, a stub router, a log capture. ----

export function resourceInfo(over: Partial<Omit<ResourceRequest, 'kind'>> = {}): ResourceRequest {
  return {
    kind: 'resource',
    method: 'GET',
    path: '/apis/example.com/v1/namespaces/default/widgets',
    apiPrefix: 'apis',
    group: 'example.com',
    version: 'v1',
    resource: 'widgets',
    subresource: '',
    name: '',
    namespace: 'default',
    verb: 'list',
    ...over,
  };
}

/** A verified client certificate's identity, as the verifier states it. */
export function statedIdentity(identity: ClientIdentity): IdentityResult {
  return { kind: 'stated', identity };
}

export function resultOf(
  decision: Decision,
  info: RequestInfo = resourceInfo(),
  identity: IdentityResult = { kind: 'none' },
): RoutingResult {
  return { info, decision, generation: 7, viewAgeMs: 120, identity };
}

export interface StubRouter extends RequestRouter {
  readonly calls: { method: string; path: string; headers: ReadonlyMap<string, string> }[];
}

/** Answers by :path; a function entry may throw, to test the error path. */
export function stubRouter(table: Readonly<Record<string, RoutingResult | (() => RoutingResult)>>, retryAfterSeconds = 7): StubRouter {
  const calls: StubRouter['calls'] = [];
  return {
    calls,
    retryAfterSeconds,
    route(method, path, headers) {
      calls.push({ method, path, headers });
      const entry = table[path];
      if (entry === undefined) return resultOf({ outcome: 'passthrough', reason: 'non_resource', candidates: [] });
      return typeof entry === 'function' ? entry() : entry;
    },
  };
}

export interface LogCapture {
  readonly logger: Logger;
  readonly lines: Record<string, unknown>[];
  /** Lines at warn (40) or above. */
  problems(): Record<string, unknown>[];
  text(): string;
}

export function captureLogs(level = 'debug'): LogCapture {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const logger = pino(
    { level },
    {
      write(s: string) {
        raw.push(s);
        lines.push(JSON.parse(s) as Record<string, unknown>);
      },
    },
  );
  return {
    logger,
    lines,
    problems: () => lines.filter((l) => typeof l['level'] === 'number' && l['level'] >= 40),
    text: () => raw.join(''),
  };
}

/** A raw HTTP/2 connection to the ext_proc listener: what a client that is not Envoy can send. */
export function rawSession(port: number): ClientHttp2Session {
  const session = http2Connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  return session;
}

/** A Process stream on it with nothing sent yet: the caller writes (or withholds) the gRPC frames. */
export function rawProcess(session: ClientHttp2Session): ClientHttp2Stream {
  const stream = session.request({
    [h2.HTTP2_HEADER_METHOD]: 'POST',
    [h2.HTTP2_HEADER_PATH]: '/envoy.service.ext_proc.v3.ExternalProcessor/Process',
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  stream.on('error', () => undefined);
  return stream;
}
