// Which /apis document an Accept header gets from kube-apiserver: its content negotiation
// (goautoneg's Accept parsing and ordering, then the first clause and serializer that the
// discovery endpoint allows), re-stated from k8s.io/apiserver v0.36 handlers/negotiation and
// discovery/aggregated. Pure.

export interface AcceptClause {
  readonly type: string;
  readonly subType: string;
  readonly q: number;
  readonly params: ReadonlyMap<string, string>;
}

/** The serializers of the discovery endpoint, in kube-apiserver's order. */
const SERVED = [
  { type: 'application', subType: 'json', streams: true },
  { type: 'application', subType: 'yaml', streams: false },
  { type: 'application', subType: 'vnd.kubernetes.protobuf', streams: true },
] as const;

export type ServedMediaType = `${(typeof SERVED)[number]['type']}/${(typeof SERVED)[number]['subType']}`;

export type ApisNegotiation =
  /** APIGroupDiscoveryList v2: aggregated discovery, peer-aggregated unless profile=nopeer. */
  | { readonly kind: 'aggregated'; readonly mediaType: ServedMediaType; readonly profile: string; readonly pretty: boolean }
  /** No acceptable aggregated clause: the legacy APIGroupList, or 406 when no clause fits at all. */
  | { readonly kind: 'not_aggregated' };

/** Cuts at the first `sep`: [before, after], after '' when there is none. */
function cut(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}

/** goautoneg trims spaces only (not tabs). */
const trim = (s: string): string => s.replace(/^ +| +$/g, '');

const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** strconv.ParseFloat(s, 32) as goautoneg uses it: a syntax error gives 0, overflow ±Inf. */
function parseQ(s: string): number {
  if (DECIMAL.test(s)) return Math.fround(Number(s));
  const m = /^([+-]?)(inf|infinity)$/i.exec(s);
  if (m) return m[1] === '-' ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(s)) return Number.NaN;
  return 0;
}

/** Go's sort.Sort uses insertion sort up to this many elements. */
const GO_INSERTION_SORT_MAX = 12;

/** goautoneg's ordering: higher q first, then concrete types before wildcards (not a strict order). */
function before(a: AcceptClause, b: AcceptClause): boolean {
  if (a.q > b.q) return true;
  if (a.type !== '*' && b.type === '*') return true;
  if (a.subType !== '*' && b.subType === '*') return true;
  return false;
}

/**
 * The clauses of an Accept header in the order kube-apiserver tries them. Malformed clauses are
 * dropped, a parameter without a value is ignored, and the sort is Go's for up to 12 clauses (an
 * insertion sort, so equal clauses keep the client's order).
 */
export function parseAccept(header: string): AcceptClause[] {
  const clauses: AcceptClause[] = [];
  let remaining = header;
  while (remaining.length > 0) {
    let part: string;
    [part, remaining] = cut(remaining, ',');
    part = trim(part);
    const [mediaRange, rawParams] = cut(part, ';');
    const [rawType, afterSlash] = cut(mediaRange, '/');
    const type = trim(rawType);
    let subType: string;
    if (afterSlash.length === 0) {
      if (type !== '*') continue;
      subType = '*';
    } else {
      const [rawSub, extra] = cut(afterSlash, '/');
      if (extra.length > 0) continue;
      subType = trim(rawSub);
    }
    let q = 1;
    const params = new Map<string, string>();
    let rest = rawParams;
    while (rest.length > 0) {
      let p: string;
      [p, rest] = cut(rest, ';');
      const [name, afterEq] = cut(p, '=');
      if (afterEq.length === 0) continue;
      const [value, extra] = cut(afterEq, '=');
      if (extra.length > 0) continue;
      const token = trim(name);
      if (token === 'q') q = parseQ(value);
      else params.set(token, trim(value));
    }
    clauses.push({ type, subType, q, params });
  }
  if (clauses.length > GO_INSERTION_SORT_MAX) {
    // Go switches to pdqsort here (not stable); a stable O(n log n) sort keeps a hostile header cheap.
    return clauses.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
  }
  for (let i = 1; i < clauses.length; i++) {
    for (let j = i; j > 0 && before(clauses[j] as AcceptClause, clauses[j - 1] as AcceptClause); j--) {
      [clauses[j], clauses[j - 1]] = [clauses[j - 1] as AcceptClause, clauses[j] as AcceptClause];
    }
  }
  return clauses;
}

/**
 * The clause's options if the discovery endpoint accepts it for this serializer: only a
 * conversion to apidiscovery.k8s.io/v2 APIGroupDiscoveryList is allowed (v2beta1 is gone since
 * 1.35), `stream` only as "watch" on a streaming serializer, and never `sv`. A clause without a
 * conversion is skipped, not chosen: `application/json,<v2>` gets the aggregated document.
 */
function aggregatedOptions(
  params: ReadonlyMap<string, string>,
  served: (typeof SERVED)[number],
): { profile: string; pretty: boolean } | null {
  if (params.get('g') !== 'apidiscovery.k8s.io' || params.get('v') !== 'v2' || params.get('as') !== 'APIGroupDiscoveryList') return null;
  const stream = params.get('stream') ?? '';
  if (stream.length > 0 && (!served.streams || stream !== 'watch')) return null;
  if ((params.get('sv') ?? '').length > 0) return null;
  return { profile: params.get('profile') ?? '', pretty: params.get('pretty') === '1' };
}

/** What kube-apiserver answers on GET /apis for this Accept header. */
export function negotiateApis(accept: string | undefined): ApisNegotiation {
  if (accept === undefined || accept.length === 0) return { kind: 'not_aggregated' };
  for (const clause of parseAccept(accept)) {
    for (const served of SERVED) {
      const matches =
        (clause.type === served.type && (clause.subType === served.subType || clause.subType === '*')) ||
        (clause.type === '*' && clause.subType === '*');
      if (!matches) continue;
      const options = aggregatedOptions(clause.params, served);
      if (options !== null) return { kind: 'aggregated', mediaType: `${served.type}/${served.subType}`, ...options };
    }
  }
  return { kind: 'not_aggregated' };
}

/** Clients send the same few Accept headers over and over: negotiate each once (a small, bounded memo). */
const negotiated = new Map<string, ApisNegotiation>();
const NEGOTIATED_MAX = 256;
const NEGOTIATED_MAX_LENGTH = 512;

/** negotiateApis() for the request path: the same frozen answer for a header seen before. */
export function negotiateApisCached(accept: string): ApisNegotiation {
  const known = negotiated.get(accept);
  if (known !== undefined) return known;
  const n = Object.freeze(negotiateApis(accept));
  if (accept.length <= NEGOTIATED_MAX_LENGTH) {
    if (negotiated.size >= NEGOTIATED_MAX) negotiated.clear();
    negotiated.set(accept, n);
  }
  return n;
}
