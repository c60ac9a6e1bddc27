// Kubernetes Status bodies (meta/v1 Status) so that kubectl and client-go print skewgate's own
// answers the way they print an apiserver's.

export type StatusReason =
  | 'NotFound'
  | 'ServiceUnavailable'
  | 'BadRequest'
  | 'Unauthorized'
  | 'InternalError'
  /** skewgate's own stream bound (extproc.limits.maxStreams); client-go retries it after Retry-After. */
  | 'TooManyRequests'
  /** Envoy's own replies only (envoy/listener.ts): a timed-out request, a body too large. */
  | 'Timeout'
  | 'RequestEntityTooLarge';

export interface StatusDetails {
  readonly group?: string;
  readonly kind?: string;
  readonly name?: string;
  readonly causes?: readonly { readonly reason: string; readonly message: string }[];
  readonly retryAfterSeconds?: number;
}

export interface Status {
  readonly kind: 'Status';
  readonly apiVersion: 'v1';
  readonly metadata: Record<string, never>;
  readonly status: 'Failure';
  readonly message: string;
  readonly reason: StatusReason;
  readonly details?: StatusDetails;
  readonly code: number;
}

export const STATUS_CODE: Readonly<Record<StatusReason, number>> = Object.freeze({
  NotFound: 404,
  ServiceUnavailable: 503,
  BadRequest: 400,
  Unauthorized: 401,
  InternalError: 500,
  TooManyRequests: 429,
  Timeout: 504,
  RequestEntityTooLarge: 413,
});

export function statusBody(reason: StatusReason, message: string, details?: StatusDetails): Status {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code: STATUS_CODE[reason],
  };
}
