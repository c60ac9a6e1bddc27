// The hook through which every decision leaves the stream: logging now, spans and metrics later.
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { RoutingResult } from '../routing/router.js';
import { redactHeaders } from './headers.js';

export interface DecisionContext {
  /** Time from the request_headers message to the reply being handed to gRPC. */
  readonly durationNs: bigint;
  /** The Process call metadata; carries Envoy's traceparent. */
  readonly metadata: grpc.Metadata;
  /** The request headers (lower-case keys). Contains credentials: redact before logging. */
  readonly headers: ReadonlyMap<string, string>;
}

export interface DecisionObserver {
  onDecision(result: RoutingResult, ctx: DecisionContext): void;
  /** Routing threw (the stream logs it and ends with gRPC INTERNAL); for counting. */
  onRouteError?(error: unknown, ctx: DecisionContext): void;
}

/** Calls every observer; one failing observer does not stop the others. */
export function combineObservers(...observers: readonly DecisionObserver[]): DecisionObserver {
  return {
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

function firstValue(metadata: grpc.Metadata, key: string): string | undefined {
  const v = metadata.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}

/** Routine decisions: every apiserver can answer, or the request is not about a resource. */
function isRoutine(result: RoutingResult): boolean {
  const d = result.decision;
  return d.outcome === 'default' || (d.outcome === 'passthrough' && d.reason === 'non_resource');
}

/**
 * One log line per decision: info for the ones an operator follows during an upgrade, debug for
 * routine traffic. Headers appear only at debug, and redacted.
 */
export function createLogObserver(logger: Logger): DecisionObserver {
  return {
    onDecision(result, ctx) {
      const routine = isRoutine(result);
      const debug = logger.isLevelEnabled('debug');
      if (routine && !debug) return;
      const { decision, info } = result;
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
      if (decision.outcome === 'routed') fields['upstream'] = decision.upstream;
      if (decision.outcome === 'rejected') fields['problem'] = decision.problem;
      if (info.kind === 'resource') {
        fields['group'] = info.group;
        fields['version'] = info.version;
        fields['resource'] = info.resource;
        if (info.subresource !== '') fields['subresource'] = info.subresource;
        fields['verb'] = info.verb;
      }
      const traceparent = firstValue(ctx.metadata, 'traceparent');
      if (traceparent) fields['traceparent'] = traceparent;
      if (debug) fields['requestHeaders'] = redactHeaders(ctx.headers);
      if (routine) logger.debug(fields, 'decision');
      else logger.info(fields, 'decision');
    },
  };
}
