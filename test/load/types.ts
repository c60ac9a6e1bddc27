// What the load generator records. Plain data, so that the accounting over it stays pure.

/** Which copy of the API a request is about: the one only some apiservers serve, or one all serve. */
export type ResourceKind = 'skewed' | 'common';
export type Op = 'create' | 'get' | 'list' | 'watch';

/** One HTTP request through a gateway (a watch counts once per connect attempt). */
export interface RequestRecord {
  readonly arm: string;
  readonly kind: ResourceKind;
  readonly op: Op;
  /** Wall-clock ms (fractional), the same clock as the timeline. */
  readonly startMs: number;
  readonly endMs: number;
  /** null: no HTTP answer (connection refused/reset, timeout). */
  readonly status: number | null;
  /** The error code when status is null (ECONNRESET, UND_ERR_HEADERS_TIMEOUT …). */
  readonly error?: string;
  /** get: the object asked for; create: the name the apiserver acknowledged. */
  readonly name?: string;
  /** create: the client-side unique id written into the object's label. */
  readonly token?: string;
  /** skewgate's x-skewgate-reason when skewgate answered itself. */
  readonly reason?: string;
  /** For answers other than 2xx/404: who said what (skewgate's reason, the Status reason, Envoy's text). */
  readonly detail?: string;
  /** The Audit-Id the apiserver answered with: which apiserver(s) handled it, from their audit logs. */
  readonly auditId?: string;
  /** The Retry-After header of an error answer. */
  readonly retryAfter?: string;
}

/** One watch event, or the end of a watch stream (an interruption). */
export interface WatchRecord {
  readonly arm: string;
  readonly kind: ResourceKind;
  readonly atMs: number;
  /** ADDED/MODIFIED/DELETED/BOOKMARK/ERROR, or END when the stream ended or failed. */
  readonly type: string;
  readonly name?: string;
  readonly detail?: string;
}

/** An object found at the end, listed directly from an apiserver (not through a gateway). */
export interface FinalObject {
  readonly kind: ResourceKind;
  readonly arm: string;
  readonly name: string;
  /** The token label; undefined when the object has none (not ours). */
  readonly token: string | undefined;
}
