// Classifies a request the way kube-apiserver's RequestInfoResolver does
// (k8s.io/apiserver pkg/endpoints/request/requestinfo.go), from the method and the :path only.
// Pure and allocation-light: it runs on every request Envoy hands to skewgate.

import { compareGoStrings } from './go-strings.js';
import type {
  InvalidRequest,
  NonResourceRequest,
  RequestInfo,
  ResourceRequest,
  Verb,
} from './request-info.js';

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;

/**
 * Classifies one request.
 *
 * Path handling, in order:
 * 1. The query is everything after the first '?'.
 * 2. The path must start with '/' and hold no raw control character (Go's url parser refuses
 *    those with 400); a malformed %-escape is invalid, as in Go.
 * 3. Dot segments ('.', '..', and their %2E spellings) are removed as RFC 3986 remove_dot_segments
 *    does, on the still-encoded path. kube-apiserver itself keeps them, but Envoy's normalize_path
 *    resolves them before skewgate sees the request, so this is what the apiserver will receive.
 *    Encoded slashes are left alone at that step (Envoy's default keeps %2F).
 * 4. The path is percent-decoded like Go's URL.Path, so %2F becomes '/' and splits a segment,
 *    exactly as kube-apiserver splits URL.Path. Bytes that are not UTF-8, or a decoded NUL, make
 *    the request invalid (a JS string cannot carry them faithfully).
 * 5. Leading and trailing slashes are trimmed and the rest split on '/', so '//' yields an empty
 *    segment, as in the apiserver.
 *
 * The method is matched case-insensitively; `method` in the result is upper-case.
 */
export function classifyRequest(method: string, rawPath: string): RequestInfo {
  const m = upperMethod(method);
  const q = rawPath.indexOf('?');
  const rawPathOnly = q < 0 ? rawPath : rawPath.slice(0, q);
  if (rawPathOnly.length === 0) {
    return invalid(m, rawPathOnly, rawPath.length === 0 ? 'empty path' : 'empty path before the query');
  }
  if (rawPathOnly.charCodeAt(0) !== SLASH) return invalid(m, rawPathOnly, 'path must start with "/"');

  const flags = scanPath(rawPathOnly);
  if (flags < 0) return invalid(m, rawPathOnly, 'path contains a control character');
  let path = rawPathOnly;
  if (flags !== 0) {
    const normal = normalisePath(rawPathOnly, (flags & HAS_PERCENT) !== 0);
    if (typeof normal !== 'string') return invalid(m, rawPathOnly, normal.problem);
    path = normal;
  }

  const parts = splitPath(path);
  if (parts.length < 3) return nonResource(m, path);
  const prefix = parts[0];
  if (prefix !== 'api' && prefix !== 'apis') return nonResource(m, path);

  let i = 1;
  let group = '';
  if (prefix === 'apis') {
    // 'apis' needs group, version and at least one more segment
    if (parts.length < 4) return nonResource(m, path);
    group = parts[1] ?? '';
    i = 2;
  }
  const version = parts[i++] ?? '';

  let verb: Verb | '';
  const special = parts[i];
  if (special === 'watch' || special === 'proxy') {
    if (parts.length - i < 2) {
      return invalid(m, path, `"${special}" must be followed by a resource: unable to determine kind and namespace from url ${path}`);
    }
    verb = special;
    i++;
  } else {
    verb = verbForMethod(m);
  }

  let namespace = '';
  if (parts[i] === 'namespaces' && parts.length - i > 1) {
    namespace = parts[i + 1] ?? '';
    const next = parts[i + 2];
    // namespaces/<ns>/status and /finalize are subresources of the namespace itself
    if (next !== undefined && next !== 'status' && next !== 'finalize') i += 2;
  }

  const left = parts.length - i;
  const resource = parts[i] ?? '';
  let name = left >= 2 ? (parts[i + 1] ?? '') : '';
  const subresource = left >= 3 && verb !== 'proxy' ? (parts[i + 2] ?? '') : '';

  if (name === '' && verb === 'get') {
    if (q < 0 || q === rawPath.length - 1) {
      verb = 'list';
    } else {
      const opts = listOptions(rawPath.slice(q + 1));
      verb = opts.watch ? 'watch' : 'list';
      name = opts.name;
    }
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';

  const info: ResourceRequest = {
    kind: 'resource',
    method: m,
    path,
    apiPrefix: prefix,
    group,
    version,
    resource,
    subresource,
    name,
    namespace,
    verb,
  };
  return info;
}

function nonResource(method: string, path: string): NonResourceRequest {
  return { kind: 'non-resource', method, path, verb: lowerMethod(method) };
}

function invalid(method: string, path: string, problem: string): InvalidRequest {
  return { kind: 'invalid', method, path, problem };
}

function upperMethod(method: string): string {
  switch (method) {
    case 'GET': case 'POST': case 'PUT': case 'PATCH': case 'DELETE': case 'HEAD': case 'OPTIONS':
      return method;
    default:
      return method.toUpperCase();
  }
}

function lowerMethod(method: string): string {
  switch (method) {
    case 'GET': return 'get';
    case 'POST': return 'post';
    case 'PUT': return 'put';
    case 'PATCH': return 'patch';
    case 'DELETE': return 'delete';
    case 'HEAD': return 'head';
    case 'OPTIONS': return 'options';
    default: return method.toLowerCase();
  }
}

function verbForMethod(method: string): Verb | '' {
  switch (method) {
    case 'POST': return 'create';
    case 'GET': case 'HEAD': return 'get';
    case 'PUT': return 'update';
    case 'PATCH': return 'patch';
    case 'DELETE': return 'delete';
    default: return '';
  }
}

// ---------------------------------------------------------------------------------------------
// Path decoding

const HAS_PERCENT = 1;
const HAS_DOT_SEGMENT = 2;

/** One pass over the raw path: -1 on a control character, else HAS_* flags (0 = nothing to do). */
function scanPath(p: string): number {
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

interface Problem { readonly problem: string }

function normalisePath(raw: string, hasPercent: boolean): string | Problem {
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
function badEscape(s: string): string | undefined {
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
function splitPath(p: string): string[] {
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

// ---------------------------------------------------------------------------------------------
// The query of a nameless GET: list or watch, and a name from fieldSelector=metadata.name=...

interface ListDecision { readonly watch: boolean; readonly name: string }

const LIST: ListDecision = { watch: false, name: '' };
const WATCH: ListDecision = { watch: true, name: '' };

/**
 * Mirrors DecodeParameters(url.Query()) into ListOptions: if any parameter fails to convert
 * (timeoutSeconds or limit not an int64, a label or field selector that does not parse) the
 * apiserver keeps only the watch flag, judged by strings.ToLower; otherwise the watch flag is
 * judged by EqualFold and an exact metadata.name field selector supplies the name.
 */
function listOptions(rawQuery: string): ListDecision {
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
          case K_WATCH: if (watch === undefined) watch = value; break;
          case K_FIELD_SELECTOR: if (fieldSelector === undefined) fieldSelector = value; break;
          case K_LABEL_SELECTOR: if (labelSelector === undefined) labelSelector = value; break;
          case K_TIMEOUT_SECONDS: if (timeoutSeconds === undefined) timeoutSeconds = value; break;
          case K_LIMIT: if (limit === undefined) limit = value; break;
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
        case 'watch': return K_WATCH;
        case 'fieldSelector': return K_FIELD_SELECTOR;
        case 'labelSelector': return K_LABEL_SELECTOR;
        case 'timeoutSeconds': return K_TIMEOUT_SECONDS;
        case 'limit': return K_LIMIT;
        default: return K_OTHER;
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

/** strconv.ParseInt(s, 10, 64) succeeds. */
function isInt64(s: string): boolean {
  let i = 0;
  let negative = false;
  const sign = s.charCodeAt(0);
  if (sign === 0x2b || sign === 0x2d) {
    negative = sign === 0x2d;
    i = 1;
  }
  if (i >= s.length) return false;
  for (let j = i; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c < 0x30 || c > 0x39) return false;
  }
  while (i < s.length - 1 && s.charCodeAt(i) === 0x30) i++;
  const digits = s.length - i;
  if (digits !== 19) return digits < 19;
  return s.slice(i) <= (negative ? '9223372036854775808' : '9223372036854775807');
}

/** path.IsValidPathSegmentName: the apiserver only takes a selector name that is a safe segment. */
function isValidPathSegmentName(name: string): boolean {
  return name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}

// ---------------------------------------------------------------------------------------------
// Field selectors (k8s.io/apimachinery pkg/fields): only "does it parse" and the exact
// metadata.name value matter here.

/**
 * The value required for metadata.name by a field selector; undefined when no term requires one,
 * null when the selector does not parse.
 */
function fieldSelectorName(selector: string): string | undefined | null {
  let bestTerm: string | undefined;
  let bestValue: string | undefined;
  let termStart = 0;
  let escaped = false;
  for (let i = 0; i <= selector.length; i++) {
    if (i < selector.length) {
      const c = selector.charCodeAt(i);
      if (escaped) { escaped = false; continue; }
      if (c === 0x5c) { escaped = true; continue; }
      if (c !== 0x2c) continue;
    }
    const term = selector.slice(termStart, i);
    termStart = i + 1;
    if (term === '') continue;
    const parsed = parseFieldTerm(term);
    if (parsed === null) return null;
    // the apiserver sorts terms and takes the first matching equality term
    if (parsed.equality && parsed.field === 'metadata.name' &&
        (bestTerm === undefined || compareGoStrings(term, bestTerm) < 0)) {
      bestTerm = term;
      bestValue = parsed.value;
    }
  }
  return bestValue;
}

interface FieldTerm { readonly field: string; readonly equality: boolean; readonly value: string }

function parseFieldTerm(term: string): FieldTerm | null {
  // the first operator occurrence splits; at one position '!=' beats '==' beats '='
  for (let i = 0; i < term.length; i++) {
    const c = term.charCodeAt(i);
    let opLen = 0;
    let equality = true;
    if (c === 0x21 && term.charCodeAt(i + 1) === 0x3d) { opLen = 2; equality = false; }
    else if (c === 0x3d) opLen = term.charCodeAt(i + 1) === 0x3d ? 2 : 1;
    if (opLen === 0) continue;
    const value = unescapeFieldValue(term.slice(i + opLen));
    if (value === null) return null;
    return { field: term.slice(0, i), equality, value };
  }
  return null;
}

/** fields.UnescapeValue: '\\' may escape only '\\', ',' and '='; bare ',' or '=' are errors. */
function unescapeFieldValue(s: string): string | null {
  if (!s.includes('\\') && !s.includes(',') && !s.includes('=')) return s;
  let out = '';
  let escaped = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] ?? '';
    if (escaped) {
      if (ch !== '\\' && ch !== ',' && ch !== '=') return null;
      out += ch;
      escaped = false;
    } else if (ch === '\\') {
      escaped = true;
    } else if (ch === ',' || ch === '=') {
      return null;
    } else {
      out += ch;
    }
  }
  return escaped ? null : out;
}


// ---------------------------------------------------------------------------------------------
// Label selectors (k8s.io/apimachinery pkg/labels Parse): only validity matters here, because an
// invalid one makes the apiserver drop the field-selector name.

const T_EOS = 1;
const T_CLOSE = 2;
const T_COMMA = 3;
const T_NOT = 4;
const T_DOUBLE_EQ = 5;
const T_EQ = 6;
const T_GT = 7;
const T_ID = 8;
const T_IN = 9;
const T_LT = 10;
const T_NOT_EQ = 11;
const T_NOT_IN = 12;
const T_OPEN = 13;

function symbolToken(s: string): number {
  switch (s) {
    case ')': return T_CLOSE;
    case ',': return T_COMMA;
    case '!': return T_NOT;
    case '==': return T_DOUBLE_EQ;
    case '=': return T_EQ;
    case '>': return T_GT;
    case '<': return T_LT;
    case '!=': return T_NOT_EQ;
    case '(': return T_OPEN;
    default: return 0;
  }
}

function isSelectorWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0d || c === 0x0a;
}

function isSelectorSymbol(c: number): boolean {
  return c === 0x3d || c === 0x21 || c === 0x28 || c === 0x29 || c === 0x2c || c === 0x3e || c === 0x3c;
}

interface Tokens { readonly toks: number[]; readonly lits: string[] }

/** The apiserver's lexer, including its quirk that a NUL reads as end of input. */
function lexLabelSelector(s: string): Tokens {
  const toks: number[] = [];
  const lits: string[] = [];
  let pos = 0;
  const read = (): number => (pos < s.length ? s.charCodeAt(pos++) : 0);
  for (;;) {
    let ch = read();
    while (isSelectorWhitespace(ch)) ch = read();
    if (ch === 0) {
      toks.push(T_EOS);
      lits.push('');
      return { toks, lits };
    }
    pos--;
    if (isSelectorSymbol(ch)) {
      let buffer = '';
      let tok = 0;
      let lit = '';
      for (;;) {
        const c = read();
        if (c === 0) break;
        if (!isSelectorSymbol(c)) { pos--; break; }
        buffer += String.fromCharCode(c);
        const t = symbolToken(buffer);
        if (t !== 0) { tok = t; lit = buffer; }
        else if (tok !== 0) { pos--; break; }
      }
      toks.push(tok);
      lits.push(lit);
    } else {
      const begin = pos;
      let lit = '';
      for (;;) {
        const at = pos;
        const c = read();
        if (c === 0) { lit = s.slice(begin, at); break; }
        if (isSelectorSymbol(c) || isSelectorWhitespace(c)) { pos--; lit = s.slice(begin, at); break; }
      }
      toks.push(lit === 'in' ? T_IN : lit === 'notin' ? T_NOT_IN : T_ID);
      lits.push(lit);
    }
  }
}

function isLabelSelector(selector: string): boolean {
  const { toks, lits } = lexLabelSelector(selector);
  let p = 0;
  // in a value position the keywords 'in' and 'notin' are plain identifiers
  const look = (values: boolean): number => {
    const t = toks[p] ?? T_EOS;
    return values && (t === T_IN || t === T_NOT_IN) ? T_ID : t;
  };
  const consume = (values: boolean): number => {
    const t = look(values);
    p++;
    return t;
  };
  const literal = (): string => lits[p - 1] ?? '';

  const identifierList = (): string[] | null => {
    const values: string[] = [];
    for (;;) {
      const t = consume(true);
      if (t === T_ID) {
        values.push(literal());
        const next = look(true);
        if (next === T_COMMA) continue;
        if (next === T_CLOSE) return values;
        return null;
      }
      if (t !== T_COMMA) return null;
      if (values.length === 0) values.push('');
      const next = look(true);
      if (next === T_CLOSE) { values.push(''); return values; }
      if (next === T_COMMA) values.push('');
    }
  };

  const setValues = (): string[] | null => {
    if (consume(true) !== T_OPEN) return null;
    const t = look(true);
    if (t === T_ID || t === T_COMMA) {
      const values = identifierList();
      if (values === null || consume(true) !== T_CLOSE) return null;
      return values;
    }
    if (t === T_CLOSE) { consume(true); return ['']; }
    return null;
  };

  const exactValue = (): string[] | null => {
    const t = look(true);
    if (t === T_EOS || t === T_COMMA) return [''];
    return consume(true) === T_ID ? [literal()] : null;
  };

  const requirement = (): boolean => {
    let t = consume(true);
    let negated = false;
    if (t === T_NOT) { negated = true; t = consume(true); }
    if (t !== T_ID || !isQualifiedName(literal())) return false;
    const after = look(true);
    if (negated || after === T_EOS || after === T_COMMA) return true;
    const op = consume(false);
    let values: string[] | null;
    if (op === T_IN || op === T_NOT_IN) values = setValues();
    else if (op === T_EQ || op === T_DOUBLE_EQ || op === T_NOT_EQ || op === T_GT || op === T_LT) values = exactValue();
    else return false;
    if (values === null) return false;
    for (const v of values) {
      if (!isLabelValue(v)) return false;
      if ((op === T_GT || op === T_LT) && !isInt64(v)) return false;
    }
    return true;
  };

  for (;;) {
    const t = look(true);
    if (t === T_EOS) return true;
    if (t !== T_ID && t !== T_NOT) return false;
    if (!requirement()) return false;
    const sep = consume(true);
    if (sep === T_EOS) return true;
    if (sep !== T_COMMA) return false;
    const next = look(true);
    if (next !== T_ID && next !== T_NOT) return false;
  }
}

const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A label key: [DNS-1123 subdomain '/'] name, the name at most 63 characters. */
function isQualifiedName(key: string): boolean {
  const slash = key.indexOf('/');
  let name = key;
  if (slash >= 0) {
    const prefix = key.slice(0, slash);
    name = key.slice(slash + 1);
    if (name.includes('/')) return false;
    if (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) return false;
  }
  return name.length > 0 && name.length <= 63 && QUALIFIED_NAME.test(name);
}

function isLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && QUALIFIED_NAME.test(value));
}
