// Envoy's HeaderMap → a plain lower-case map, and header redaction for logs. Pure.
import type { HeaderMapMsg, HeaderValueMsg } from './messages.js';

/** Replaces a secret in a log line; the same word the logger's own redaction uses. */
export const REDACTED = '[redacted]';

const SENSITIVE = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie']);
const SENSITIVE_PREFIXES = ['x-remote-'];

function bytesToText(raw: Uint8Array): string {
  return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
}

/** A header's text: raw_value (what Envoy sends) wins; value is the fallback for older senders. */
export function headerValueText(h: HeaderValueMsg): string {
  const raw = h.raw_value;
  if (typeof raw === 'string') {
    if (raw.length > 0) return raw;
  } else if (raw && raw.byteLength > 0) {
    return bytesToText(raw);
  }
  return h.value ?? '';
}

/**
 * Lower-case keys; a header sent more than once is joined with "," (RFC 9110 §5.3), except
 * cookie, which HTTP/2 splits and rejoins with "; " (RFC 9113 §8.2.3).
 */
export function headerMapToMap(map: HeaderMapMsg | null | undefined): ReadonlyMap<string, string> {
  const out = new Map<string, string>();
  for (const h of map?.headers ?? []) {
    const key = (h.key ?? '').toLowerCase();
    if (key === '') continue;
    const value = headerValueText(h);
    const prev = out.get(key);
    if (prev === undefined) out.set(key, value);
    else out.set(key, `${prev}${key === 'cookie' ? '; ' : ','}${value}`);
  }
  return out;
}

export function isSensitiveHeader(name: string): boolean {
  const key = name.toLowerCase();
  return SENSITIVE.has(key) || SENSITIVE_PREFIXES.some((p) => key.startsWith(p));
}

/**
 * Headers for a log line with every credential and identity claim blanked. The auth scheme
 * (e.g. "Bearer") is kept because it helps debugging and is no secret.
 */
export function redactHeaders(headers: ReadonlyMap<string, string>): Record<string, string> {
  // No prototype: a client-chosen header name such as __proto__ must stay an ordinary key.
  const out = Object.create(null) as Record<string, string>;
  for (const [key, value] of headers) {
    if (!isSensitiveHeader(key)) {
      out[key] = value;
      continue;
    }
    const scheme = key.endsWith('authorization') ? /^([A-Za-z][A-Za-z0-9-]*) /.exec(value)?.[1] : undefined;
    out[key] = scheme ? `${scheme} ${REDACTED}` : REDACTED;
  }
  return out;
}
