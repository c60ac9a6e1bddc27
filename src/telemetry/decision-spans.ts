// One span per routing decision, parented on the caller's trace context: Envoy's (ext_proc gRPC
// call metadata) first, else the client's (HTTP traceparent header), else a new trace. Its
// context goes back to Envoy as the traceparent of the request sent upstream.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { AUDIT_ID_HEADER, EXTPROC_SERVICE_NAME, REQUEST_ID_HEADER } from '../constants.js';
import type { CallMetadata, DecisionObserver, DecisionTrace, RequestContext } from '../extproc/observer.js';
import type { RoutingResult } from '../routing/router.js';
import { ATTR, SPAN_DECISION } from './core/names.js';

export interface ServerAddress {
  readonly address: string;
  readonly port: number;
}

export type ParentSource = 'envoy' | 'client' | 'none';

const propagator = new W3CTraceContextPropagator();

const metadataGetter: TextMapGetter<CallMetadata> = {
  get(md, key) {
    const values = md.get(key).filter((v): v is string => typeof v === 'string');
    return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
  },
  keys: (md) => Object.keys(md.getMap()),
};

const headerGetter: TextMapGetter<ReadonlyMap<string, string>> = {
  get: (headers, key) => headers.get(key),
  keys: (headers) => [...headers.keys()],
};

const pairSetter: TextMapSetter<[string, string][]> = {
  set: (carrier, key, value) => {
    carrier.push([key, value]);
  },
};

/** The parent context: the call metadata wins over the HTTP header; an invalid one is ignored. */
export function parentContext(ctx: RequestContext): { readonly context: Context; readonly source: ParentSource } {
  const fromEnvoy = propagator.extract(ROOT_CONTEXT, ctx.metadata, metadataGetter);
  if (trace.getSpanContext(fromEnvoy)) return { context: fromEnvoy, source: 'envoy' };
  const fromClient = propagator.extract(ROOT_CONTEXT, ctx.headers, headerGetter);
  if (trace.getSpanContext(fromClient)) return { context: fromClient, source: 'client' };
  return { context: ROOT_CONTEXT, source: 'none' };
}

/** Span attributes of a decision. Paths carry no query; no header value ever becomes an attribute. */
export function decisionAttributes(result: RoutingResult, servers: ReadonlyMap<string, ServerAddress>): Attributes {
  const { info, decision } = result;
  const a: Attributes = {
    [ATTR.httpMethod]: info.method,
    [ATTR.urlPath]: info.path,
    [ATTR.requestKind]: info.kind,
    [ATTR.outcome]: decision.outcome,
    [ATTR.reason]: decision.reason,
    [ATTR.candidates]: [...decision.candidates],
    [ATTR.generation]: result.generation,
  };
  if (info.kind === 'resource') {
    a[ATTR.group] = info.group;
    a[ATTR.version] = info.version;
    a[ATTR.resource] = info.resource;
    if (info.subresource !== '') a[ATTR.subresource] = info.subresource;
    if (info.namespace !== '') a[ATTR.namespace] = info.namespace;
    if (info.verb !== '') a[ATTR.verb] = info.verb;
  } else if (info.kind === 'non-resource') {
    a[ATTR.verb] = info.verb;
  }
  if (result.viewAgeMs !== null) a[ATTR.discoveryAgeMs] = result.viewAgeMs;
  if (decision.outcome === 'routed') {
    a[ATTR.upstream] = decision.upstream;
    if (result.upstreamVersion !== undefined) a[ATTR.upstreamVersion] = result.upstreamVersion;
    const server = servers.get(decision.upstream);
    if (server) {
      a[ATTR.serverAddress] = server.address;
      a[ATTR.serverPort] = server.port;
    }
  }
  if (decision.outcome === 'rejected') a[ATTR.problem] = decision.problem;
  a[ATTR.clientIdentity] = result.identity.kind;
  if (result.identity.kind === 'stated') a[ATTR.clientCertSha256] = result.identity.identity.fingerprint;
  return a;
}

/**
 * The id the apiserver will audit the request under: the client's own Audit-ID, else Envoy's
 * request id, which Envoy sends as Audit-ID (envoy/routes.ts). A value that is not a short
 * printable token is left out (it comes from the client).
 */
export function auditIdOf(headers: ReadonlyMap<string, string>): string | null {
  const id = headers.get(AUDIT_ID_HEADER) ?? headers.get(REQUEST_ID_HEADER);
  return id !== undefined && /^[\x21-\x7e]{1,128}$/.test(id) ? id : null;
}

/** apiserver name → host and port of its URL, for server.address. */
export function serverAddresses(apiservers: readonly { readonly name: string; readonly url: string }[]): Map<string, ServerAddress> {
  return new Map(
    apiservers.map((s) => {
      const u = new URL(s.url);
      return [s.name, { address: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port === '' ? 443 : Number(u.port) }];
    }),
  );
}

/** The tracing half of the telemetry observer. */
export function createDecisionSpans(
  tracer: Tracer,
  servers: ReadonlyMap<string, ServerAddress>,
): Required<Pick<DecisionObserver, 'onRequest' | 'onDecision' | 'onRouteError'>> {
  // The span behind each DecisionTrace handed to the stream; dropped when it ends.
  const open = new WeakMap<DecisionTrace, Span>();
  const take = (t: DecisionTrace | undefined): Span | undefined => {
    if (!t) return undefined;
    const span = open.get(t);
    open.delete(t);
    return span;
  };
  return {
    onRequest(ctx) {
      const parent = parentContext(ctx);
      const span = tracer.startSpan(
        SPAN_DECISION,
        {
          kind: SpanKind.SERVER,
          attributes: {
            [ATTR.rpcSystem]: 'grpc',
            [ATTR.rpcService]: EXTPROC_SERVICE_NAME,
            [ATTR.rpcMethod]: 'Process',
            [ATTR.parentSource]: parent.source,
          },
        },
        parent.context,
      );
      const upstreamHeaders: [string, string][] = [];
      // Also for an unsampled span: the upstream must learn that this trace is not sampled.
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), upstreamHeaders, pairSetter);
      const sc = span.spanContext();
      const t: DecisionTrace = { traceId: sc.traceId, spanId: sc.spanId, upstreamHeaders };
      open.set(t, span);
      return t;
    },
    onDecision(result, ctx) {
      const span = take(ctx.trace);
      if (!span) return;
      if (span.isRecording()) {
        span.setAttributes(decisionAttributes(result, servers));
        const auditId = auditIdOf(ctx.headers);
        if (auditId !== null) span.setAttribute(ATTR.auditId, auditId);
        if (result.decision.outcome === 'unavailable') span.setStatus({ code: SpanStatusCode.ERROR, message: result.decision.reason });
      }
      span.end();
    },
    onRouteError(error, ctx) {
      const span = take(ctx.trace);
      if (!span) return;
      // The type only: a message might quote the request.
      span.setAttribute('error.type', error instanceof Error ? error.name : typeof error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'internal error while routing' });
      span.end();
    },
  };
}
