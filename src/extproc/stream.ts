// One ext_proc Process stream: request headers in, one reply out. Never throws; an internal error
// ends the stream with INTERNAL, never with OK (OK would make Envoy continue as if we had agreed).
// The call is grpc-call.ts's; tests may drive the handler with any ServerCall.
import type { Logger } from 'pino';
import type { LogThrottle } from '../util/core/log-throttle.js';
import { isLongRunning } from '../k8s/long-running.js';
import type { RequestRouter, RoutingResult } from '../routing/router.js';
import { headerMapToMap } from './core/headers.js';
import type { ProcessingRequestMsg, ProcessingResponseOut, RequestPhase } from './core/messages.js';
import type { DecisionObserver, DecisionTrace } from './observer.js';
import { emptyResponseFor, responseFor, tooManyStreamsResponse } from './core/responses.js';
import { REQUEST_PHASES } from './core/messages.js';
import { GrpcStatus, type GrpcStatusCode } from './core/grpc-wire.js';
import type { ServerCall } from './grpc-call.js';

export type ProcessCall = ServerCall<ProcessingResponseOut>;

/** What one skewgate holds at once (extproc.limits). */
export interface StreamLimits {
  /**
   * Streams past their first message at once, over every connection: a request on a stream beyond
   * is answered 429. Also the most streams still waiting for their first message: beyond, the
   * oldest of those is ended.
   */
  readonly maxStreams: number;
  /**
   * A stream whose first message has not arrived whole by then is ended (DEADLINE_EXCEEDED), and
   * whatever it had sent of one dropped: Envoy sends the request headers as it opens the stream.
   */
  readonly firstMessageTimeoutMs: number;
}

/** Ends a stream still waiting for its first message: timed out, or evicted to make room. */
export type EndPending = (timedOut: boolean) => void;

/** The open streams, shared by every connection of one server. */
export interface StreamGauge {
  /**
   * Streams whose first message has not arrived, oldest first, each with its first-message
   * deadline (monotonic ms). One timer for all of them (a timer per stream cost more than its
   * stream's routing): every stream has the same timeout, so the oldest is always the next due.
   */
  readonly pending: Map<EndPending, number>;
  /** Streams past their first message and not yet over. */
  active: number;
}

export interface ProcessHandlerDeps {
  readonly router: RequestRouter;
  readonly logger: Logger;
  readonly observer: DecisionObserver;
  readonly limits: StreamLimits;
  readonly gauge: StreamGauge;
  /** Repeated warnings (a broken or hostile client can cause one per stream) are rate-limited. */
  readonly throttle: LogThrottle;
  /** Monotonic nanoseconds; injected for tests. */
  readonly now?: () => bigint;
}

const PHASES: ReadonlySet<string> = new Set<RequestPhase>(REQUEST_PHASES);

function isPhase(v: unknown): v is RequestPhase {
  return typeof v === 'string' && PHASES.has(v);
}

/** Ends the call with a non-OK status unless it is already over. */
function fail(call: ProcessCall, code: GrpcStatusCode, details: string): void {
  if (call.cancelled || call.writableEnded) return;
  call.fail(code, details);
}

/** How long a stream we ended may keep its client's side open before it is reset. */
const RESET_AFTER_MS = 250;

/**
 * The status leaves the HTTP/2 stream half-open while the client keeps its side open, and what the
 * client sent of a message stays held as long (measured under grpc-js: 100 partial 1.9 MB messages
 * held 219 MB until reset, 26 MB after). So shortly after the status, a stream we ended for holding
 * back its first message is reset (RST_STREAM CANCEL).
 */
function resetSoon(call: ProcessCall): void {
  setTimeout(() => call.reset(), RESET_AFTER_MS).unref();
}

export function createProcessHandler(deps: ProcessHandlerDeps): (call: ProcessCall) => void {
  const { router, logger, observer, limits, gauge, throttle } = deps;
  const now = deps.now ?? process.hrtime.bigint;
  /** A line at most once per key per throttle interval, with the count held back since the last. */
  const throttled = (level: 'warn' | 'error', key: string, fields: Record<string, unknown>, msg: string): void => {
    const admitted = throttle.admit(key);
    if (admitted) logger[level]({ ...fields, ...(admitted.suppressed > 0 ? { suppressed: admitted.suppressed } : {}) }, msg);
  };
  const warn = (key: string, fields: Record<string, unknown>, msg: string): void => throttled('warn', key, fields, msg);
  const nowMs = (): number => Number(now() / 1_000_000n);

  let sweepTimer: NodeJS.Timeout | undefined;
  /** Arms the one timer for the oldest pending stream's deadline, unless it is armed already. */
  const armSweep = (): void => {
    if (sweepTimer !== undefined) return;
    const oldest = gauge.pending.values().next();
    if (oldest.done) return;
    sweepTimer = setTimeout(sweep, Math.max(0, Math.ceil(oldest.value - nowMs())));
    sweepTimer.unref();
  };
  const sweep = (): void => {
    sweepTimer = undefined;
    const t = nowMs();
    for (const [end, deadline] of gauge.pending) {
      if (deadline > t) break;
      end(true); // removes itself
    }
    armSweep();
  };

  return function process(call: ProcessCall): void {
    let replies = 0;
    let failed = false;
    /** Set when the first message arrives: whether this stream is beyond maxStreams (answered 429). */
    let overloaded: boolean | undefined;
    const endPending = (code: GrpcStatusCode, key: string, fields: Record<string, unknown>, msg: string, details: string): void => {
      failed = true;
      warn(key, fields, msg);
      fail(call, code, details);
      resetSoon(call);
    };
    const end: EndPending = (timedOut) => {
      gauge.pending.delete(end);
      if (timedOut) {
        endPending(
          GrpcStatus.DEADLINE_EXCEEDED,
          'first_message_timeout',
          { timeoutMs: limits.firstMessageTimeoutMs },
          'ext_proc stream sent no whole message in time; ended',
          'skewgate: no ProcessingRequest within the first-message timeout',
        );
      } else {
        endPending(
          GrpcStatus.RESOURCE_EXHAUSTED,
          'pending_evicted',
          { pending: limits.maxStreams },
          'too many ext_proc streams without a first message; ending the oldest',
          'skewgate: too many ext_proc streams without a first message',
        );
      }
    };
    // Envoy sends a stream's headers as it opens it, so a stream still waiting for its first message
    // is the one to go when too many wait: the oldest, never the newest (an idle flood cannot lock
    // Envoy's streams out, and holds at most maxStreams partial messages).
    gauge.pending.set(end, nowMs() + limits.firstMessageTimeoutMs);
    armSweep();
    if (gauge.pending.size > limits.maxStreams) gauge.pending.keys().next().value?.(false);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      gauge.pending.delete(end);
      if (overloaded !== undefined) gauge.active--;
    };
    // Whichever comes first: our status sent (finish), Envoy's reset (cancelled, below), or the
    // stream torn down. release is idempotent, so plain listeners (no once wrappers) do.
    call.on('finish', release);
    call.on('close', release);

    const onHeaders = (msg: ProcessingRequestMsg, started: bigint): void => {
      const headers = headerMapToMap(msg.request_headers?.headers);
      const method = headers.get(':method') ?? '';
      const path = headers.get(':path') ?? '';
      // The decision span starts now, before routing, so that its context can go upstream.
      let trace: DecisionTrace | undefined;
      try {
        trace = observer.onRequest?.({ metadata: call.metadata, headers });
      } catch (err) {
        warn('observer_failed', { err }, 'decision observer failed');
      }
      let result: RoutingResult;
      let reply: ProcessingResponseOut;
      try {
        result = router.route(method, path, headers);
        // What kube-apiserver ends at --request-timeout gets Envoy's bound too (envoy.requestTimeout);
        // an upgrade never does, whatever its path.
        const bounded = !isLongRunning(result.info) && !headers.has('upgrade');
        reply = responseFor(result, router.retryAfterSeconds, trace?.upstreamHeaders, bounded);
      } catch (err) {
        failed = true;
        throttled(
          'error',
          'routing_failed',
          { err, method, path: path.split('?', 1)[0] },
          'routing failed; ending the ext_proc stream with INTERNAL',
        );
        fail(call, GrpcStatus.INTERNAL, 'skewgate: internal error while routing the request');
        try {
          observer.onRouteError?.(err, { durationNs: now() - started, metadata: call.metadata, headers, trace });
        } catch {
          // Observers must not break the stream.
        }
        return;
      }
      // In observability mode Envoy ignores replies; the decision is still recorded.
      if (!msg.observability_mode) {
        call.write(reply);
        replies++;
      }
      const ctx = { durationNs: now() - started, metadata: call.metadata, headers, trace };
      try {
        observer.onDecision(result, ctx);
      } catch (err) {
        warn('observer_failed', { err }, 'decision observer failed');
      }
    };

    call.on('data', (msg: ProcessingRequestMsg) => {
      const started = now();
      if (overloaded === undefined && !released) {
        gauge.pending.delete(end);
        gauge.active++;
        // Counted as the headers arrive: a burst beyond the bound is answered cheaply, not routed.
        overloaded = gauge.active > limits.maxStreams;
      }
      if (failed || call.cancelled || call.writableEnded) return;
      try {
        const phase = msg.request;
        if (phase === 'request_headers' && overloaded) {
          // Over the bound: no routing, a 429 the client retries, and the stream is done.
          warn(
            'too_many_streams',
            { active: gauge.active, maxStreams: limits.maxStreams },
            'too many ext_proc streams at once; answering 429',
          );
          if (!msg.observability_mode) {
            call.write(tooManyStreamsResponse(router.retryAfterSeconds, limits.maxStreams));
            replies++;
          }
          call.end();
        } else if (phase === 'request_headers') {
          onHeaders(msg, started);
        } else if (isPhase(phase)) {
          // Headers-only mode should never send these, but a reply of the matching kind is correct.
          if (!msg.observability_mode) {
            call.write(emptyResponseFor(phase));
            replies++;
          }
        } else {
          warn('unknown_phase', { phase }, 'ext_proc message without a known phase');
          failed = true;
          fail(call, GrpcStatus.INVALID_ARGUMENT, 'skewgate: ProcessingRequest without a known request phase');
        }
      } catch (err) {
        failed = true;
        throttled('error', 'handler_failed', { err }, 'ext_proc stream handler failed');
        fail(call, GrpcStatus.INTERNAL, 'skewgate: internal error');
      }
    });

    // Envoy half-closed: nothing more will come. Close our side with OK (replies are all sent).
    call.on('end', () => {
      if (!failed && !call.cancelled && !call.writableEnded) call.end();
    });

    // Envoy ≥1.37 resets the stream right after the last reply it needs: that is the normal end.
    call.on('cancelled', () => {
      release();
      if (replies === 0) logger.debug('ext_proc stream cancelled before any reply');
    });
  };
}
