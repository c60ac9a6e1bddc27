// The W3C trace-context `traceparent` header, read without the SDK: the log observer uses it to
// put the caller's trace id on log lines even when skewgate's own tracing is off. Pure.

export interface TraceParent {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
}

// version-traceid-parentid-flags; version ff is forbidden, later versions may append fields.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

export function parseTraceparent(value: string | undefined): TraceParent | null {
  if (value === undefined) return null;
  const m = TRACEPARENT.exec(value.trim());
  if (!m) return null;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 };
}

export function formatTraceparent(p: TraceParent): string {
  return `00-${p.traceId}-${p.spanId}-${p.sampled ? '01' : '00'}`;
}
