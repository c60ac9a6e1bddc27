// grpc.health.v1 for Envoy's gRPC health checker: SERVING while running, NOT_SERVING from the
// moment shutdown begins, so Envoy stops opening streams before the listener goes away.
import { EXTPROC_SERVICE_NAME } from '../constants.js';
import { GrpcStatus, type GrpcEnd } from './core/grpc-wire.js';
import type { ServerCall } from './grpc-call.js';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';
export type WireStatus = ServingStatus | 'SERVICE_UNKNOWN';

export interface HealthResponse {
  readonly status: WireStatus;
}

/** "" is the whole server; the ext_proc service name is what Envoy's health check asks for. */
const KNOWN_SERVICES: ReadonlySet<string> = new Set(['', EXTPROC_SERVICE_NAME]);

export interface HealthService {
  status(): ServingStatus;
  /** Changes the status and tells every watcher. */
  setStatus(status: ServingStatus): void;
  /** Check: the status of a service, or NOT_FOUND for one this server does not have. */
  check(service: string): HealthResponse | GrpcEnd;
  /** Watch: the status now and at every change, until the call ends or endWatches. */
  watch(call: ServerCall<HealthResponse>, service: string): void;
  /** Ends every Watch stream (OK), so that they do not hold up a graceful shutdown. */
  endWatches(): void;
}

export function createHealthService(initial: ServingStatus = 'SERVING'): HealthService {
  let current: ServingStatus = initial;
  // Watch calls → whether they watch a known service (unknown ones never change).
  const watchers = new Map<ServerCall<HealthResponse>, boolean>();
  return {
    status: () => current,
    setStatus(status) {
      if (status === current) return;
      current = status;
      for (const [w, known] of watchers) {
        if (known && !w.cancelled && !w.writableEnded) w.write({ status });
      }
    },
    check(service) {
      if (!KNOWN_SERVICES.has(service)) return { code: GrpcStatus.NOT_FOUND, details: `unknown service "${service}"` };
      return { status: current };
    },
    watch(call, service) {
      const known = KNOWN_SERVICES.has(service);
      // The protocol keeps a Watch on an unknown service open, reporting SERVICE_UNKNOWN.
      call.write({ status: known ? current : 'SERVICE_UNKNOWN' });
      watchers.set(call, known);
      const forget = (): void => {
        watchers.delete(call);
      };
      call.on('cancelled', forget);
      call.on('finish', forget);
      call.on('close', forget);
    },
    endWatches() {
      for (const w of [...watchers.keys()]) {
        if (!w.cancelled && !w.writableEnded) w.end();
      }
      watchers.clear();
    },
  };
}
