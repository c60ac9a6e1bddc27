// The :path as kube-apiserver will see it, from the raw request path: control characters and
// malformed %-escapes found, dot segments removed (as Envoy's normalize_path does), decoded like
// Go's URL.Path and split into segments. Pure; used by classify.ts on every request.

export const SLASH = 0x2f;
const DOT = 0x2e;
export const PERCENT = 0x25;

export const HAS_PERCENT = 1;
const HAS_DOT_SEGMENT = 2;

/** One pass over the raw path: -1 on a control character, else HAS_* flags (0 = nothing to do). */
export function scanPath(p: string): number {
  let flags = 0;
  const n = p.length;
  for (let i = 0; i < n; i++) {
    const c = p.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return -1;
    if (c === PERCENT) {
      flags |= HAS_PERCENT;
    } else if (c === DOT && p.charCodeAt(i - 1) === SLASH) {
      const c1 = i + 1 < n ? p.charCodeAt(i + 1) : SLASH;
      if (c1 === SLASH || (c1 === DOT && (i + 2 >= n || p.charCodeAt(i + 2) === SLASH))) {
        flags |= HAS_DOT_SEGMENT;
      }
    }
  }
  return flags;
}

interface Problem {
  readonly problem: string;
}

export function normalisePath(raw: string, hasPercent: boolean): string | Problem {
  if (hasPercent) {
    const bad = badEscape(raw);
    if (bad !== undefined) return { problem: `invalid URL escape "${bad}"` };
  }
  const segments = raw.slice(1).split('/');
  const out: string[] = [];
  let trailingSlash = false;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] ?? '';
    const dots = dotSegment(seg, hasPercent);
    const last = i === segments.length - 1;
    if (dots === 0) {
      out.push(seg);
    } else {
      if (dots === 2) out.pop();
      // "/a/.." and "/a/." end in a slash under RFC 3986 section 5.2.4
      if (last) trailingSlash = true;
    }
  }
  let path = '/' + out.join('/');
  if (trailingSlash && out.length > 0) path += '/';
  if (!hasPercent) return path;

  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return { problem: 'percent-encoded bytes in the path are not valid UTF-8' };
  }
  if (decoded.includes('\0')) return { problem: 'path contains an encoded NUL byte' };
  return decoded;
}

/** 0: not a dot segment, 1: '.', 2: '..' (also %2E spellings, which RFC 3986 makes equal). */
function dotSegment(seg: string, hasPercent: boolean): 0 | 1 | 2 {
  if (seg === '.') return 1;
  if (seg === '..') return 2;
  if (!hasPercent || seg.length < 3 || seg.length > 6) return 0;
  const s = seg.toLowerCase();
  if (s === '%2e') return 1;
  if (s === '%2e%2e' || s === '.%2e' || s === '%2e.') return 2;
  return 0;
}

/** The first malformed %-escape, cut like Go's url.EscapeError, or undefined. */
export function badEscape(s: string): string | undefined {
  for (let i = s.indexOf('%'); i >= 0; i = s.indexOf('%', i + 1)) {
    if (i + 2 >= s.length || !isHex(s.charCodeAt(i + 1)) || !isHex(s.charCodeAt(i + 2))) {
      return s.slice(i, i + 3);
    }
  }
  return undefined;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/**
 * strings.Split(strings.Trim(path, "/"), "/"), no segments for an empty result. Hand-rolled
 * because String#split on a fresh slice costs about twice as much.
 */
export function splitPath(p: string): string[] {
  let s = 0;
  let e = p.length;
  while (s < e && p.charCodeAt(s) === SLASH) s++;
  while (e > s && p.charCodeAt(e - 1) === SLASH) e--;
  const parts: string[] = [];
  if (s === e) return parts;
  for (;;) {
    const j = p.indexOf('/', s);
    if (j < 0 || j >= e) {
      parts.push(p.slice(s, e));
      return parts;
    }
    parts.push(p.slice(s, j));
    s = j + 1;
  }
}
