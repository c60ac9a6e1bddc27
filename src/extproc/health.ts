// grpc.health.v1 for Envoy's gRPC health checker: SERVING while running, NOT_SERVING from the
// moment shutdown begins, so Envoy stops opening streams before the listener goes away.
import * as grpc from '@grpc/grpc-js';
import { EXTPROC_SERVICE_NAME } from '../constants.js';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';
type WireStatus = ServingStatus | 'SERVICE_UNKNOWN';

interface HealthRequest {
  readonly service?: string;
}
interface HealthResponse {
  readonly status: WireStatus;
}

/** "" is the whole server; the ext_proc service name is what Envoy's health check asks for. */
const KNOWN_SERVICES: ReadonlySet<string> = new Set(['', EXTPROC_SERVICE_NAME]);

export interface HealthService {
  readonly implementation: grpc.UntypedServiceImplementation;
  status(): ServingStatus;
  /** Changes the status and tells every watcher. */
  setStatus(status: ServingStatus): void;
  /** Ends every Watch stream (OK), so that they do not hold up a graceful shutdown. */
  endWatches(): void;
}

export function createHealthService(initial: ServingStatus = 'SERVING'): HealthService {
  let current: ServingStatus = initial;
  // Watch calls → whether they watch a known service (unknown ones never change).
  const watchers = new Map<grpc.ServerWritableStream<HealthRequest, HealthResponse>, boolean>();

  const check: grpc.handleUnaryCall<HealthRequest, HealthResponse> = (call, callback) => {
    const service = call.request.service ?? '';
    if (!KNOWN_SERVICES.has(service)) {
      callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${service}"` });
      return;
    }
    callback(null, { status: current });
  };

  const watch: grpc.handleServerStreamingCall<HealthRequest, HealthResponse> = (call) => {
    const known = KNOWN_SERVICES.has(call.request.service ?? '');
    // The protocol keeps a Watch on an unknown service open, reporting SERVICE_UNKNOWN.
    call.write({ status: known ? current : 'SERVICE_UNKNOWN' });
    watchers.set(call, known);
    const forget = (): void => {
      watchers.delete(call);
    };
    call.on('cancelled', forget);
    call.on('error', forget);
    call.on('finish', forget);
  };

  return {
    implementation: { Check: check, Watch: watch },
    status: () => current,
    setStatus(status) {
      if (status === current) return;
      current = status;
      for (const [w, known] of watchers) {
        if (known && !w.cancelled && !w.writableEnded) w.write({ status });
      }
    },
    endWatches() {
      for (const w of [...watchers.keys()]) {
        if (!w.cancelled && !w.writableEnded) w.end();
      }
      watchers.clear();
    },
  };
}
