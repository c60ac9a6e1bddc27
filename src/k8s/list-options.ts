// The query of a nameless GET, read as kube-apiserver's DecodeParameters reads it into
// ListOptions: list or watch, and a name from fieldSelector=metadata.name=... Pure.
import { fieldSelectorName } from './field-selector.js';
import { isInt64 } from './go-strings.js';
import { isLabelSelector } from './label-selector.js';
import { badEscape, PERCENT } from './request-path.js';

export interface ListDecision {
  readonly watch: boolean;
  readonly name: string;
}

const LIST: ListDecision = { watch: false, name: '' };
const WATCH: ListDecision = { watch: true, name: '' };

/**
 * Mirrors DecodeParameters(url.Query()) into ListOptions: if any parameter fails to convert
 * (timeoutSeconds or limit not an int64, a label or field selector that does not parse) the
 * apiserver keeps only the watch flag, judged by strings.ToLower; otherwise the watch flag is
 * judged by EqualFold and an exact metadata.name field selector supplies the name.
 */
export function listOptions(rawQuery: string): ListDecision {
  let watch: string | undefined;
  let fieldSelector: string | undefined;
  let labelSelector: string | undefined;
  let timeoutSeconds: string | undefined;
  let limit: string | undefined;

  // Go's url.ParseQuery: '&'-separated; pieces with ';' or a bad escape are dropped; first value wins.
  let semicolon = rawQuery.indexOf(';');
  let start = 0;
  while (start <= rawQuery.length) {
    let end = rawQuery.indexOf('&', start);
    if (end < 0) end = rawQuery.length;
    if (semicolon >= 0 && semicolon < start) semicolon = rawQuery.indexOf(';', start);
    if (end > start && !(semicolon >= 0 && semicolon < end)) {
      let eq = rawQuery.indexOf('=', start);
      if (eq < 0 || eq > end) eq = end;
      const key = queryKey(rawQuery, start, eq);
      if (key !== K_OTHER) {
        const value = queryUnescape(rawQuery.slice(Math.min(eq + 1, end), end));
        switch (key) {
          case K_WATCH:
            if (watch === undefined) watch = value;
            break;
          case K_FIELD_SELECTOR:
            if (fieldSelector === undefined) fieldSelector = value;
            break;
          case K_LABEL_SELECTOR:
            if (labelSelector === undefined) labelSelector = value;
            break;
          case K_TIMEOUT_SECONDS:
            if (timeoutSeconds === undefined) timeoutSeconds = value;
            break;
          case K_LIMIT:
            if (limit === undefined) limit = value;
            break;
        }
      }
    }
    start = end + 1;
  }

  const decodes =
    (timeoutSeconds === undefined || isInt64(timeoutSeconds)) &&
    (limit === undefined || isInt64(limit)) &&
    (labelSelector === undefined || isLabelSelector(labelSelector));
  const exact = decodes && fieldSelector !== undefined ? fieldSelectorName(fieldSelector) : undefined;
  if (!decodes || exact === null) {
    // the fallback in requestinfo.go: any watch value except false/0 (lower-cased) is a watch
    if (watch === undefined) return LIST;
    const w = watch.toLowerCase();
    return w === 'false' || w === '0' ? LIST : WATCH;
  }
  const isWatch = watch !== undefined && !(watch === '0' || equalFoldFalse(watch));
  if (exact === undefined || !isValidPathSegmentName(exact)) return isWatch ? WATCH : LIST;
  return { watch: isWatch, name: exact };
}

const K_OTHER = 0;
const K_WATCH = 1;
const K_FIELD_SELECTOR = 2;
const K_LABEL_SELECTOR = 3;
const K_TIMEOUT_SECONDS = 4;
const K_LIMIT = 5;

/** Which ListOptions parameter q[start:end] names, comparing in place for the plain spellings. */
function queryKey(q: string, start: number, end: number): number {
  switch (end - start) {
    case 5:
      if (q.startsWith('watch', start)) return K_WATCH;
      if (q.startsWith('limit', start)) return K_LIMIT;
      break;
    case 13:
      if (q.startsWith('fieldSelector', start)) return K_FIELD_SELECTOR;
      if (q.startsWith('labelSelector', start)) return K_LABEL_SELECTOR;
      break;
    case 14:
      if (q.startsWith('timeoutSeconds', start)) return K_TIMEOUT_SECONDS;
      break;
  }
  for (let i = start; i < end; i++) {
    const c = q.charCodeAt(i);
    if (c === PERCENT || c === 0x2b) {
      // an escaped spelling such as wat%63h; rare, so decode only here
      switch (queryUnescape(q.slice(start, end))) {
        case 'watch':
          return K_WATCH;
        case 'fieldSelector':
          return K_FIELD_SELECTOR;
        case 'labelSelector':
          return K_LABEL_SELECTOR;
        case 'timeoutSeconds':
          return K_TIMEOUT_SECONDS;
        case 'limit':
          return K_LIMIT;
        default:
          return K_OTHER;
      }
    }
  }
  return K_OTHER;
}

/** Go's url.QueryUnescape; undefined when an escape is malformed. Non-UTF-8 bytes become U+FFFD. */
function queryUnescape(s: string): string | undefined {
  const pct = s.indexOf('%');
  const plus = s.indexOf('+');
  if (pct < 0 && plus < 0) return s;
  if (pct >= 0 && badEscape(s) !== undefined) return undefined;
  const spaced = plus < 0 ? s : s.replaceAll('+', ' ');
  if (pct < 0) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return lossyDecode(spaced);
  }
}

function lossyDecode(s: string): string {
  const encoder = new TextEncoder();
  const chunks: Uint8Array[] = [];
  let run = 0;
  for (let i = s.indexOf('%'); i >= 0; i = s.indexOf('%', run)) {
    if (i > run) chunks.push(encoder.encode(s.slice(run, i)));
    chunks.push(Uint8Array.of(parseInt(s.slice(i + 1, i + 3), 16)));
    run = i + 3;
  }
  if (run < s.length) chunks.push(encoder.encode(s.slice(run)));
  return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks));
}

/** strings.EqualFold(v, "false"): Unicode simple folding lets 'ſ' (U+017F) stand for 's'. */
function equalFoldFalse(v: string): boolean {
  if (v.length !== 5) return false;
  const s = v.charCodeAt(3);
  return (
    (v.charCodeAt(0) | 0x20) === 0x66 &&
    (v.charCodeAt(1) | 0x20) === 0x61 &&
    (v.charCodeAt(2) | 0x20) === 0x6c &&
    ((s | 0x20) === 0x73 || s === 0x17f) &&
    (v.charCodeAt(4) | 0x20) === 0x65
  );
}

/** path.IsValidPathSegmentName: the apiserver only takes a selector name that is a safe segment. */
function isValidPathSegmentName(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}
