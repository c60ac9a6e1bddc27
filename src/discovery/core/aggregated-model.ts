// The apidiscovery.k8s.io/v2 types as Go holds them after decoding, and Go's json.Marshal of them.
// The peer-aggregated merge compares and hashes these structs, not the JSON text, so the model
// keeps what Go keeps: a nil slice (absent or null in the JSON) is `null` and differs from an
// empty one, unknown fields are dropped, and the struct field order decides the output order.
// Field tags (json names, omitempty) are those of k8s.io/api apidiscovery/v2 and apimachinery
// meta/v1 at v0.36. Pure.
import type { ErrorCode } from '../../errors/catalog.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';

export interface GroupVersionKind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
}

export interface SubresourceDiscovery {
  readonly subresource: string;
  readonly responseKind: GroupVersionKind | null;
  readonly acceptedTypes: readonly GroupVersionKind[] | null;
  readonly verbs: readonly string[] | null;
}

export interface ResourceDiscovery {
  readonly resource: string;
  readonly responseKind: GroupVersionKind | null;
  readonly scope: string;
  readonly singularResource: string;
  readonly verbs: readonly string[] | null;
  readonly shortNames: readonly string[] | null;
  readonly categories: readonly string[] | null;
  readonly subresources: readonly SubresourceDiscovery[] | null;
}

export interface VersionDiscovery {
  readonly version: string;
  readonly resources: readonly ResourceDiscovery[] | null;
  readonly freshness: string;
}

/**
 * APIGroupDiscovery. Of ObjectMeta only `name` is kept: kube-apiserver never sets another field
 * on a discovery group, and the merge reads only the name.
 */
export interface GroupDiscovery {
  readonly kind: string;
  readonly apiVersion: string;
  readonly name: string;
  readonly versions: readonly VersionDiscovery[] | null;
}

/** A document that Go's decoder would reject (a field of the wrong JSON type). */
export class AggregatedDecodeError extends Error {
  readonly code = 'SKEWGATE_ERR_AGGREGATED_DECODE' satisfies ErrorCode;
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`cannot decode aggregated discovery at ${field || 'the top level'}: ${problem}`);
    this.name = 'AggregatedDecodeError';
  }
}

// ---------------------------------------------------------------------------------------------
// Decoding with Go's rules: null leaves a Go value at its zero value, null or absence gives a nil
// slice or pointer, and a JSON type that does not fit the Go type is an error.

type Obj = Readonly<Record<string, unknown>>;

const SURROGATE = /[\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Go's decoder turns an unpaired surrogate escape into U+FFFD. */
function goString(s: string): string {
  return SURROGATE.test(s) ? s.replace(LONE_SURROGATE, '\ufffd') : s;
}

function obj(v: unknown, at: string): Obj | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'object' || Array.isArray(v)) throw new AggregatedDecodeError(at, 'expected an object');
  return v as Obj;
}

function str(o: Obj, key: string, at: string): string {
  const v = o[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new AggregatedDecodeError(`${at}.${key}`, 'expected a string');
  return goString(v);
}

function slice<T>(v: unknown, at: string, item: (x: unknown, at: string) => T): T[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw new AggregatedDecodeError(at, 'expected an array');
  return v.map((x, i) => item(x, `${at}[${i}]`));
}

function stringItem(v: unknown, at: string): string {
  if (v === null) return '';
  if (typeof v !== 'string') throw new AggregatedDecodeError(at, 'expected a string');
  return goString(v);
}

/**
 * What one document's decoding shares: equal string lists and kinds are one frozen object (every
 * CRD lists the same verbs; a document of 200,000 resources holds a few lists, not 600,000), and
 * the count of resources decoded, for the pause points.
 */
interface Pool {
  readonly lists: Map<string, readonly string[]>;
  readonly kinds: Map<string, GroupVersionKind>;
  resources: number;
}

const newPool = (): Pool => ({ lists: new Map(), kinds: new Map(), resources: 0 });

/** A []string, shared with an equal one of the same document. */
function strings(v: unknown, at: string, pool: Pool): readonly string[] | null {
  const list = slice(v, at, stringItem);
  if (list === null) return null;
  // JSON: no string can make two different lists one key.
  const key = JSON.stringify(list);
  let shared = pool.lists.get(key);
  if (shared === undefined) pool.lists.set(key, (shared = Object.freeze(list)));
  return shared;
}

function gvk(v: unknown, at: string, pool: Pool): GroupVersionKind | null {
  const o = obj(v, at);
  if (o === null) return null;
  const group = str(o, 'group', at);
  const version = str(o, 'version', at);
  const kind = str(o, 'kind', at);
  const key = JSON.stringify([group, version, kind]);
  let shared = pool.kinds.get(key);
  if (shared === undefined) pool.kinds.set(key, (shared = Object.freeze({ group, version, kind })));
  return shared;
}

const ZERO: Obj = Object.freeze({});

function subresource(v: unknown, at: string, pool: Pool): SubresourceDiscovery {
  const o = obj(v, at) ?? ZERO;
  return {
    subresource: str(o, 'subresource', at),
    responseKind: gvk(o['responseKind'], `${at}.responseKind`, pool),
    acceptedTypes: slice(o['acceptedTypes'], `${at}.acceptedTypes`, (x, a) => gvk(x, a, pool) ?? { group: '', version: '', kind: '' }),
    verbs: strings(o['verbs'], `${at}.verbs`, pool),
  };
}

function resource(v: unknown, at: string, pool: Pool): ResourceDiscovery {
  const o = obj(v, at) ?? ZERO;
  return {
    resource: str(o, 'resource', at),
    responseKind: gvk(o['responseKind'], `${at}.responseKind`, pool),
    scope: str(o, 'scope', at),
    singularResource: str(o, 'singularResource', at),
    verbs: strings(o['verbs'], `${at}.verbs`, pool),
    shortNames: strings(o['shortNames'], `${at}.shortNames`, pool),
    categories: strings(o['categories'], `${at}.categories`, pool),
    subresources: slice(o['subresources'], `${at}.subresources`, (x, a) => subresource(x, a, pool)),
  };
}

/** A pause point every STEP_EVERY resources: one group may hold most of a large document. */
function* version(v: unknown, at: string, pool: Pool): Sliced<VersionDiscovery> {
  const o = obj(v, at) ?? ZERO;
  const name = str(o, 'version', at);
  const raw = o['resources'];
  let resources: ResourceDiscovery[] | null = null;
  if (raw !== undefined && raw !== null) {
    if (!Array.isArray(raw)) throw new AggregatedDecodeError(`${at}.resources`, 'expected an array');
    resources = [];
    for (let i = 0; i < raw.length; i++) {
      resources.push(resource(raw[i], `${at}.resources[${i}]`, pool));
      if (++pool.resources % STEP_EVERY === 0) yield;
    }
  }
  return { version: name, resources, freshness: str(o, 'freshness', at) };
}

function* group(v: unknown, at: string, pool: Pool): Sliced<GroupDiscovery> {
  const o = obj(v, at) ?? ZERO;
  const meta = obj(o['metadata'], `${at}.metadata`) ?? ZERO;
  const kind = str(o, 'kind', at);
  const apiVersion = str(o, 'apiVersion', at);
  const name = str(meta, 'name', `${at}.metadata`);
  const raw = o['versions'];
  let versions: VersionDiscovery[] | null = null;
  if (raw !== undefined && raw !== null) {
    if (!Array.isArray(raw)) throw new AggregatedDecodeError(`${at}.versions`, 'expected an array');
    versions = [];
    for (let i = 0; i < raw.length; i++) versions.push(yield* version(raw[i], `${at}.versions[${i}]`, pool));
  }
  return { kind, apiVersion, name, versions };
}

/**
 * A server's aggregated /apis document (APIGroupDiscoveryList JSON) → its groups as kube-apiserver
 * keeps a peer's: decoded, the core group ("") left out, a repeated group name kept once (first).
 * A pause point after each group, and every STEP_EVERY resources.
 */
export function* decodeGroupListSteps(doc: unknown): Sliced<GroupDiscovery[]> {
  const list = obj(doc, '');
  if (list === null) throw new AggregatedDecodeError('', 'expected an APIGroupDiscoveryList object');
  const raw = list['items'];
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new AggregatedDecodeError('items', 'expected an array');
  const seen = new Set<string>();
  const out: GroupDiscovery[] = [];
  const pool = newPool();
  for (let i = 0; i < raw.length; i++) {
    const g = yield* group(raw[i], `items[${i}]`, pool);
    yield;
    if (g.name === '' || seen.has(g.name)) continue;
    seen.add(g.name);
    out.push(g);
  }
  return out;
}

export function decodeGroupList(doc: unknown): GroupDiscovery[] {
  return runToEnd(decodeGroupListSteps(doc));
}

// ---------------------------------------------------------------------------------------------
// Go's reflect.DeepEqual on these structs: nil and empty slices differ, pointers compare by value.

function sameStrings(a: readonly string[] | null, b: readonly string[] | null): boolean {
  if (a === null || b === null) return a === b;
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function sameGvk(a: GroupVersionKind | null, b: GroupVersionKind | null): boolean {
  if (a === null || b === null) return a === b;
  return a.group === b.group && a.version === b.version && a.kind === b.kind;
}

function sameList<T>(a: readonly T[] | null, b: readonly T[] | null, same: (x: T, y: T) => boolean): boolean {
  if (a === null || b === null) return a === b;
  return a.length === b.length && a.every((v, i) => same(v, b[i] as T));
}

function sameSubresource(a: SubresourceDiscovery, b: SubresourceDiscovery): boolean {
  return (
    a.subresource === b.subresource &&
    sameGvk(a.responseKind, b.responseKind) &&
    sameList(a.acceptedTypes, b.acceptedTypes, (x, y) => sameGvk(x, y)) &&
    sameStrings(a.verbs, b.verbs)
  );
}

export function sameResource(a: ResourceDiscovery, b: ResourceDiscovery): boolean {
  return (
    a === b ||
    (a.resource === b.resource &&
      sameGvk(a.responseKind, b.responseKind) &&
      a.scope === b.scope &&
      a.singularResource === b.singularResource &&
      sameStrings(a.verbs, b.verbs) &&
      sameStrings(a.shortNames, b.shortNames) &&
      sameStrings(a.categories, b.categories) &&
      sameList(a.subresources, b.subresources, sameSubresource))
  );
}

// ---------------------------------------------------------------------------------------------
// Go's json.Marshal: fields in struct order, `omitempty` drops "" and nil or empty slices (never
// a struct), a nil slice without omitempty is null; strings escape <, >, &, U+2028 and U+2029.

// Written as text directly: building objects for JSON.stringify costs twice the time in garbage.
const q = (s: string): string => JSON.stringify(s);
const nonEmpty = <T>(v: readonly T[] | null): v is readonly T[] => v !== null && v.length > 0;
const stringList = (v: readonly string[] | null): string => JSON.stringify(v);

function writeGvk(k: GroupVersionKind): string {
  return `{"group":${q(k.group)},"version":${q(k.version)},"kind":${q(k.kind)}}`;
}

function writeSubresource(s: SubresourceDiscovery): string {
  let out = `{"subresource":${q(s.subresource)}`;
  if (s.responseKind !== null) out += `,"responseKind":${writeGvk(s.responseKind)}`;
  if (nonEmpty(s.acceptedTypes)) out += `,"acceptedTypes":[${s.acceptedTypes.map(writeGvk).join(',')}]`;
  return `${out},"verbs":${stringList(s.verbs)}}`;
}

function writeResource(r: ResourceDiscovery): string {
  let out = `{"resource":${q(r.resource)}`;
  if (r.responseKind !== null) out += `,"responseKind":${writeGvk(r.responseKind)}`;
  out += `,"scope":${q(r.scope)},"singularResource":${q(r.singularResource)},"verbs":${stringList(r.verbs)}`;
  if (nonEmpty(r.shortNames)) out += `,"shortNames":${stringList(r.shortNames)}`;
  if (nonEmpty(r.categories)) out += `,"categories":${stringList(r.categories)}`;
  if (nonEmpty(r.subresources)) out += `,"subresources":[${r.subresources.map(writeSubresource).join(',')}]`;
  return `${out}}`;
}

function writeVersion(v: VersionDiscovery): string {
  let out = `{"version":${q(v.version)}`;
  if (nonEmpty(v.resources)) out += `,"resources":[${v.resources.map(writeResource).join(',')}]`;
  if (v.freshness !== '') out += `,"freshness":${q(v.freshness)}`;
  return `${out}}`;
}

function writeGroup(g: GroupDiscovery): string {
  let out = '{';
  if (g.kind !== '') out += `"kind":${q(g.kind)},`;
  if (g.apiVersion !== '') out += `"apiVersion":${q(g.apiVersion)},`;
  out += g.name !== '' ? `"metadata":{"name":${q(g.name)}}` : '"metadata":{}';
  if (nonEmpty(g.versions)) out += `,"versions":[${g.versions.map(writeVersion).join(',')}]`;
  return `${out}}`;
}

const GO_ESCAPES: Readonly<Record<string, string>> = {
  '<': '\\u003c',
  '>': '\\u003e',
  '&': '\\u0026',
  '\u2028': '\\u2028',
  '\u2029': '\\u2029',
};

/**
 * JSON.stringify already escapes as Go does (", \, \b \f \n \r \t, other controls as \u00xx);
 * Go also escapes these five, which can only occur inside strings of the output.
 */
function goEscape(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => GO_ESCAPES[c] as string);
}

/** Go's json.Marshal of a []APIGroupDiscovery (null for a nil slice); a pause point after each group. */
export function* marshalGroupsSteps(groups: readonly GroupDiscovery[] | null): Sliced<string> {
  if (groups === null) return 'null';
  const parts: string[] = [];
  for (const g of groups) {
    // Escaping per group is the same as escaping the whole: the five characters only occur in strings.
    parts.push(goEscape(writeGroup(g)));
    yield;
  }
  return `[${parts.join(',')}]`;
}

export function marshalGroups(groups: readonly GroupDiscovery[] | null): string {
  return runToEnd(marshalGroupsSteps(groups));
}
