// The hook through which every decision leaves the stream: a log line, and (src/telemetry/ implements
// DecisionObserver) a span and metrics.
import type { Logger } from 'pino';
import type { RoutingResult } from '../routing/router.js';
import { parseTraceparent } from './core/traceparent.js';
import { redactHeaders } from './core/headers.js';
import { createLogThrottle } from '../util/core/log-throttle.js';
import { REQUEST_ID_HEADER } from '../constants.js';

/** A call's metadata (its HTTP/2 request headers), as grpc-js's Metadata reads too. */
export interface CallMetadata {
  get(key: string): (string | Buffer)[];
  getMap(): Record<string, string | Buffer>;
}

/** What is known when the request headers arrive, before routing. */
export interface RequestContext {
  /** The Process call metadata; carries Envoy's traceparent when Envoy traces. */
  readonly metadata: CallMetadata;
  /** The request headers (lower-case keys). Contains credentials: redact before logging. */
  readonly headers: ReadonlyMap<string, string>;
}

/** The span a tracing observer opened for one decision. */
export interface DecisionTrace {
  readonly traceId: string;
  readonly spanId: string;
  /**
   * W3C trace-context headers naming the decision span (traceparent, and tracestate when there
   * is one), set on the request that goes upstream so that the apiserver continues the trace.
   */
  readonly upstreamHeaders: readonly (readonly [name: string, value: string])[];
}

export interface DecisionContext extends RequestContext {
  /** Time from the request_headers message to the reply being handed to gRPC. */
  readonly durationNs: bigint;
  /** The span onRequest opened, if any. */
  readonly trace?: DecisionTrace | undefined;
}

export interface DecisionObserver {
  /**
   * The request headers arrived; called before routing, so a span starts here and its context can
   * travel upstream. At most one observer in a combination should return a trace.
   */
  onRequest?(ctx: RequestContext): DecisionTrace | undefined;
  onDecision(result: RoutingResult, ctx: DecisionContext): void;
  /** Routing threw (the stream logs it and ends with gRPC INTERNAL); for counting. */
  onRouteError?(error: unknown, ctx: DecisionContext): void;
}

/** Calls every observer; one failing observer does not stop the others. */
export function combineObservers(...observers: readonly DecisionObserver[]): DecisionObserver {
  return {
    onRequest(ctx) {
      let trace: DecisionTrace | undefined;
      for (const o of observers) {
        try {
          trace ??= o.onRequest?.(ctx);
        } catch {
          // An observer must never break request handling.
        }
      }
      return trace;
    },
    onDecision(result, ctx) {
      for (const o of observers) {
        try {
          o.onDecision(result, ctx);
        } catch {
          // An observer must never break request handling.
        }
      }
    },
    onRouteError(error, ctx) {
      for (const o of observers) {
        try {
          o.onRouteError?.(error, ctx);
        } catch {
          // As above.
        }
      }
    },
  };
}

function firstValue(metadata: CallMetadata, key: string): string | undefined {
  const v = metadata.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}

/**
 * trace_id and span_id of the decision span; without one (tracing off), the caller's trace id
 * and its span as parent_span_id: Envoy's from the call metadata first, else the client's header.
 */
export function traceFields(ctx: DecisionContext): Record<string, string> {
  if (ctx.trace) return { trace_id: ctx.trace.traceId, span_id: ctx.trace.spanId };
  const incoming = parseTraceparent(firstValue(ctx.metadata, 'traceparent')) ?? parseTraceparent(ctx.headers.get('traceparent'));
  return incoming ? { trace_id: incoming.traceId, parent_span_id: incoming.spanId } : {};
}

/**
 * Routine decisions: every apiserver can answer, the request is not about a resource, or it is
 * the merged /apis that every kubectl invocation asks for.
 */
function isRoutine(result: RoutingResult): boolean {
  const d = result.decision;
  return d.outcome === 'default' || d.outcome === 'discovery' || (d.outcome === 'passthrough' && d.reason === 'non_resource');
}

/** How the log observer writes decisions (log.decisions). */
export interface LogObserverOptions {
  /** Per outcome and reason, one full line per interval, the others counted at its end; 0: every one. */
  readonly intervalMs: number;
  /** Epoch ms (tests). */
  readonly now?: () => number;
}

export interface LogObserver extends DecisionObserver {
  /** Writes the counts held back so far; stops the interval's timer. Idempotent. */
  close(): void;
}

/**
 * One log line per decision, at most one per outcome and reason per interval: info for the ones
 * an operator follows during an upgrade, debug for routine traffic (every one, at level debug),
 * each with its trace and span ids. The decisions held back are counted and written, per outcome
 * and reason, when the interval ends. Headers appear only at debug, and redacted; the path is
 * logged without its query (a query value may carry anything).
 */
export function createLogObserver(logger: Logger, opts: LogObserverOptions = { intervalMs: 0 }): LogObserver {
  const throttle = opts.intervalMs > 0 ? createLogThrottle({ intervalMs: opts.intervalMs, now: opts.now ?? Date.now }) : null;
  const flush = (): void => {
    for (const { key, suppressed } of throttle?.drain() ?? []) {
      const [outcome, reason] = key.split('/');
      logger.info(
        { outcome, reason, count: suppressed, intervalMs: opts.intervalMs },
        'decisions held back: the same outcome and reason as the last line logged',
      );
    }
  };
  let timer: NodeJS.Timeout | null = throttle === null ? null : setInterval(flush, opts.intervalMs);
  timer?.unref();
  return {
    onDecision(result, ctx) {
      const routine = isRoutine(result);
      const debug = logger.isLevelEnabled('debug');
      if (routine && !debug) return;
      const { decision, info } = result;
      let heldBack = 0;
      if (!debug && throttle !== null) {
        const admitted = throttle.admit(`${decision.outcome}/${decision.reason}`);
        if (admitted === null) return;
        heldBack = admitted.suppressed;
      }
      const fields: Record<string, unknown> = {
        outcome: decision.outcome,
        reason: decision.reason,
        method: info.method,
        path: info.path,
        candidates: decision.candidates,
        generation: result.generation,
        viewAgeMs: result.viewAgeMs,
        durationUs: Number(ctx.durationNs / 1000n),
      };
      // Envoy's request id: the same value is in its access log line and, as Audit-Id, the apiserver's audit event.
      const requestId = ctx.headers.get(REQUEST_ID_HEADER);
      if (requestId) fields['requestId'] = requestId;
      if (heldBack > 0) fields['heldBack'] = heldBack;
      if (decision.outcome === 'routed') fields['upstream'] = decision.upstream;
      if (decision.outcome === 'rejected') fields['problem'] = decision.problem;
      if (result.identity.kind !== 'none') fields['clientIdentity'] = result.identity.kind;
      // The apiserver's audit log records this as the user's credential-id; the name stays out of our logs.
      if (result.identity.kind === 'stated') fields['clientCertSha256'] = result.identity.identity.fingerprint;
      if (info.kind === 'resource') {
        fields['group'] = info.group;
        fields['version'] = info.version;
        fields['resource'] = info.resource;
        if (info.subresource !== '') fields['subresource'] = info.subresource;
        fields['verb'] = info.verb;
      }
      Object.assign(fields, traceFields(ctx));
      // Envoy's context as it arrived (the parent of the decision span when tracing is on).
      const traceparent = firstValue(ctx.metadata, 'traceparent');
      if (traceparent) fields['traceparent'] = traceparent;
      if (debug) fields['requestHeaders'] = redactHeaders(ctx.headers);
      if (routine) logger.debug(fields, 'decision');
      else logger.info(fields, 'decision');
    },
    close() {
      if (timer === null) return;
      clearInterval(timer);
      timer = null;
      flush();
    },
  };
}
