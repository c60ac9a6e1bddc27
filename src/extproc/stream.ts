// One ext_proc Process stream: request headers in, one reply out. Never throws; an internal error
// ends the stream with INTERNAL, never with OK (OK would make Envoy continue as if we had agreed).
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { isLongRunning } from '../k8s/long-running.js';
import type { RequestRouter, RoutingResult } from '../routing/router.js';
import { headerMapToMap } from './headers.js';
import type { ProcessingRequestMsg, ProcessingResponseOut, RequestPhase } from './messages.js';
import type { DecisionObserver, DecisionTrace } from './observer.js';
import { emptyResponseFor, responseFor } from './responses.js';

export type ProcessCall = grpc.ServerDuplexStream<ProcessingRequestMsg, ProcessingResponseOut>;

export interface ProcessHandlerDeps {
  readonly router: RequestRouter;
  readonly logger: Logger;
  readonly observer: DecisionObserver;
  /** Monotonic nanoseconds; injected for tests. */
  readonly now?: () => bigint;
}

const PHASES: ReadonlySet<string> = new Set<RequestPhase>([
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_trailers',
  'response_trailers',
]);

function isPhase(v: unknown): v is RequestPhase {
  return typeof v === 'string' && PHASES.has(v);
}

/** Ends the call with a non-OK status unless it is already over. */
function fail(call: ProcessCall, code: grpc.status, details: string): void {
  if (call.cancelled || call.writableEnded) return;
  const err: Partial<grpc.StatusObject> & Error = Object.assign(new Error(details), { code, details });
  // grpc-js turns an 'error' emitted on a server stream into the call's final status.
  call.emit('error', err);
}

export function createProcessHandler(deps: ProcessHandlerDeps): (call: ProcessCall) => void {
  const { router, logger, observer } = deps;
  const now = deps.now ?? process.hrtime.bigint;

  return function process(call: ProcessCall): void {
    let replies = 0;
    let failed = false;

    const onHeaders = (msg: ProcessingRequestMsg, started: bigint): void => {
      const headers = headerMapToMap(msg.request_headers?.headers);
      const method = headers.get(':method') ?? '';
      const path = headers.get(':path') ?? '';
      // The decision span starts now, before routing, so that its context can go upstream.
      let trace: DecisionTrace | undefined;
      try {
        trace = observer.onRequest?.({ metadata: call.metadata, headers });
      } catch (err) {
        logger.warn({ err }, 'decision observer failed');
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
        logger.error({ err, method, path: path.split('?', 1)[0] }, 'routing failed; ending the ext_proc stream with INTERNAL');
        fail(call, grpc.status.INTERNAL, 'skewgate: internal error while routing the request');
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
        logger.warn({ err }, 'decision observer failed');
      }
    };

    call.on('data', (msg: ProcessingRequestMsg) => {
      const started = now();
      if (failed || call.cancelled || call.writableEnded) return;
      try {
        const phase = msg.request;
        if (phase === 'request_headers') {
          onHeaders(msg, started);
        } else if (isPhase(phase)) {
          // Headers-only mode should never send these, but a reply of the matching kind is correct.
          if (!msg.observability_mode) {
            call.write(emptyResponseFor(phase));
            replies++;
          }
        } else {
          logger.warn({ phase }, 'ext_proc message without a known phase');
          failed = true;
          fail(call, grpc.status.INVALID_ARGUMENT, 'skewgate: ProcessingRequest without a known request phase');
        }
      } catch (err) {
        failed = true;
        logger.error({ err }, 'ext_proc stream handler failed');
        fail(call, grpc.status.INTERNAL, 'skewgate: internal error');
      }
    });

    // Envoy half-closed: nothing more will come. Close our side with OK (replies are all sent).
    call.on('end', () => {
      if (!failed && !call.cancelled && !call.writableEnded) call.end();
    });

    // Envoy ≥1.37 resets the stream right after the last reply it needs: that is the normal end.
    call.on('cancelled', () => {
      if (replies === 0) logger.debug('ext_proc stream cancelled before any reply');
    });

    call.on('error', (err: Partial<grpc.StatusObject> & Error) => {
      if (failed) return; // our own fail() above, already logged
      if (err.code === grpc.status.CANCELLED) return;
      logger.warn({ err }, 'ext_proc stream error');
    });
  };
}
