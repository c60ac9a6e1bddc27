// Classifies a request the way kube-apiserver's RequestInfoResolver does
// (k8s.io/apiserver pkg/endpoints/request/requestinfo.go), from the method and the :path only.
// Pure and allocation-light: it runs on every request Envoy hands to skewgate.

import { listOptions } from './list-options.js';
import type { InvalidRequest, NonResourceRequest, RequestInfo, ResourceRequest, Verb } from './request-info.js';
import { HAS_PERCENT, normalisePath, scanPath, SLASH, splitPath } from './request-path.js';

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
  if (parts.length < 3) return nonResource(m, path, rawPath, q);
  const prefix = parts[0];
  if (prefix !== 'api' && prefix !== 'apis') return nonResource(m, path, rawPath, q);

  let i = 1;
  let group = '';
  if (prefix === 'apis') {
    // 'apis' needs group, version and at least one more segment
    if (parts.length < 4) return nonResource(m, path, rawPath, q);
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

function nonResource(method: string, path: string, rawPath: string, q: number): NonResourceRequest {
  return { kind: 'non-resource', method, path, query: q < 0 ? '' : rawPath.slice(q + 1), verb: lowerMethod(method) };
}

function invalid(method: string, path: string, problem: string): InvalidRequest {
  return { kind: 'invalid', method, path, problem };
}

function upperMethod(method: string): string {
  switch (method) {
    case 'GET':
    case 'POST':
    case 'PUT':
    case 'PATCH':
    case 'DELETE':
    case 'HEAD':
    case 'OPTIONS':
      return method;
    default:
      return method.toUpperCase();
  }
}

function lowerMethod(method: string): string {
  switch (method) {
    case 'GET':
      return 'get';
    case 'POST':
      return 'post';
    case 'PUT':
      return 'put';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    case 'HEAD':
      return 'head';
    case 'OPTIONS':
      return 'options';
    default:
      return method.toLowerCase();
  }
}

function verbForMethod(method: string): Verb | '' {
  switch (method) {
    case 'POST':
      return 'create';
    case 'GET':
    case 'HEAD':
      return 'get';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    default:
      return '';
  }
}
