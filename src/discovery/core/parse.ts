// Pure parsing of kube-apiserver discovery documents into a ServerView. Documents come from the
// network, so every field is checked: a bad document is a DiscoveryDocumentError naming the
// document and the field, never a TypeError deep inside routing (docs/design.md, invariant 5).
import type { ErrorCode, FailureKind } from '../../errors/catalog.js';
import { type ResourceCapability, type ServerView, gvKey, gvrKey } from './types.js';
import { deepFreezeJsonSteps, frozenMap, frozenSet, mapBuilder, setBuilder, type MapBuilder, type SetBuilder } from './freeze.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';

export class DiscoveryDocumentError extends Error {
  readonly code = 'SKEWGATE_ERR_DISCOVERY_DOCUMENT' satisfies ErrorCode;
  /**
   * @param document which document, e.g. "/apis" or "/apis/apps/v1"
   * @param field where in it, e.g. "items[2].versions[0].resources[1].verbs" ('' = the whole document)
   * @param kind how the fetch-errors metric counts it: past a bound (discovery.maxResources, a piece
   *   too large to parse at once) it is `too_large`, as a body past discovery.maxDocumentBytes is
   */
  constructor(
    readonly document: string,
    readonly field: string,
    readonly problem: string,
    readonly kind: Extract<FailureKind, 'malformed' | 'too_large'> = 'malformed',
  ) {
    super(`malformed discovery document ${document}${field ? ` at ${field}` : ''}: ${problem}`);
    this.name = 'DiscoveryDocumentError';
  }
}

const AGGREGATED_API_VERSION = 'apidiscovery.k8s.io/v2';

// ---------------------------------------------------------------------------------------------
// Field readers: each either returns the typed value or throws a DiscoveryDocumentError.

type Obj = Record<string, unknown>;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'nothing';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

class Reader {
  constructor(readonly document: string) {}

  fail(field: string, problem: string): never {
    throw new DiscoveryDocumentError(this.document, field, problem);
  }

  object(v: unknown, field: string): Obj {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) this.fail(field, `expected an object, got ${describe(v)}`);
    return v as Obj;
  }

  string(o: Obj, key: string, field: string, opts: { optional?: boolean; nonEmpty?: boolean } = {}): string {
    const v = o[key];
    const at = join(field, key);
    if (v === undefined && opts.optional) return '';
    if (v === undefined) this.fail(at, 'is missing');
    if (typeof v !== 'string') this.fail(at, `expected a string, got ${describe(v)}`);
    if (opts.nonEmpty && v === '') this.fail(at, 'must not be empty');
    return v;
  }

  boolean(o: Obj, key: string, field: string): boolean {
    const v = o[key];
    const at = join(field, key);
    if (v === undefined) this.fail(at, 'is missing');
    if (typeof v !== 'boolean') this.fail(at, `expected true or false, got ${describe(v)}`);
    return v;
  }

  /**
   * Go encodes a nil slice as null, and omits `omitempty` ones: both mean "empty" there, so
   * `missing: 'empty'` accepts absence and null; `missing: 'error'` rejects both.
   */
  array(o: Obj, key: string, field: string, missing: 'empty' | 'error'): readonly unknown[] {
    const v = o[key];
    const at = join(field, key);
    if (v === undefined || v === null) {
      if (missing === 'empty') return [];
      this.fail(at, v === null ? 'expected an array, got null' : 'is missing');
    }
    if (!Array.isArray(v)) this.fail(at, `expected an array, got ${describe(v)}`);
    return v;
  }

  strings(o: Obj, key: string, field: string): string[] {
    const arr = this.array(o, key, field, 'empty');
    return arr.map((s, i) => {
      if (typeof s !== 'string') this.fail(`${join(field, key)}[${i}]`, `expected a string, got ${describe(s)}`);
      return s;
    });
  }

  kind(o: Obj, expected: string, apiVersion: string | null): void {
    const kind = o.kind;
    if (kind !== expected) this.fail('kind', `expected "${expected}", got ${describe(kind)}`);
    // Some legacy documents (APIVersions, /api/v1) carry no apiVersion at all; tolerate absence there.
    if (apiVersion !== null && o.apiVersion !== apiVersion && !(apiVersion === 'v1' && o.apiVersion === undefined)) {
      this.fail('apiVersion', `expected "${apiVersion}", got ${describe(o.apiVersion)}`);
    }
  }
}

function join(field: string, key: string): string {
  return field ? `${field}.${key}` : key;
}

/**
 * Capabilities by content, one object per distinct content: the resources of one document mostly
 * share a few verb lists (every CRD has the same eight), so a view of 200,000 resources holds a
 * handful of sets, not 200,000 (memory, and the garbage collector's work). Local to one parse.
 */
type Capabilities = Map<string, ResourceCapability>;

function capability(
  interned: Capabilities,
  verbs: readonly string[],
  subresources: readonly (readonly [string, readonly string[]])[],
  namespaced: boolean,
): ResourceCapability {
  // JSON: no verb or name can make two different contents one key.
  const key = JSON.stringify([namespaced, verbs, subresources]);
  let cap = interned.get(key);
  if (cap === undefined) {
    const subs = frozenMap(subresources.map(([name, v]) => [name, frozenSet(v)] as const));
    cap = Object.freeze({ verbs: frozenSet(verbs), subresources: subs, namespaced });
    interned.set(key, cap);
  }
  return cap;
}

// ---------------------------------------------------------------------------------------------
// Aggregated discovery (apidiscovery.k8s.io/v2 APIGroupDiscoveryList).

interface Collected {
  readonly resources: MapBuilder<string, ResourceCapability>;
  readonly groupVersions: SetBuilder<string>;
  readonly capabilities: Capabilities;
  /** Resources and group/versions read so far, and how many may be. */
  entries: number;
  readonly maxEntries: number;
}

/** A view past discovery.maxResources: refused, counted as too large. */
function tooManyEntries(document: string, maxEntries: number): DiscoveryDocumentError {
  return new DiscoveryDocumentError(
    document,
    '',
    `lists more than ${maxEntries.toLocaleString('en-US')} resources and group/versions (discovery.maxResources); raise it if the cluster is genuine`,
    'too_large',
  );
}

function* collectAggregated(doc: unknown, document: string, into: Collected): Sliced<void> {
  const r = new Reader(document);
  const list = r.object(doc, '');
  r.kind(list, 'APIGroupDiscoveryList', AGGREGATED_API_VERSION);
  const items = r.array(list, 'items', '', 'empty');
  let n = 0;
  for (let gi = 0; gi < items.length; gi++) {
    const gAt = `items[${gi}]`;
    const group = r.object(items[gi], gAt);
    const meta = r.object(group.metadata ?? {}, `${gAt}.metadata`);
    const groupName = r.string(meta, 'name', `${gAt}.metadata`, { optional: true });
    // A real server never lists a group without a version; treat it as broken rather than
    // conclude that the group's resources are gone (that would be a false 404).
    const versions = r.array(group, 'versions', gAt, 'error');
    if (versions.length === 0) r.fail(`${gAt}.versions`, `group "${groupName}" lists no versions`);
    for (let vi = 0; vi < versions.length; vi++) {
      const vAt = `${gAt}.versions[${vi}]`;
      const version = r.object(versions[vi], vAt);
      const versionName = r.string(version, 'version', vAt, { nonEmpty: true });
      into.groupVersions.add(gvKey(groupName, versionName));
      if (++into.entries > into.maxEntries) throw tooManyEntries(document, into.maxEntries);
      const resources = r.array(version, 'resources', vAt, 'empty');
      for (let ri = 0; ri < resources.length; ri++) {
        const rAt = `${vAt}.resources[${ri}]`;
        const res = r.object(resources[ri], rAt);
        const name = r.string(res, 'resource', rAt, { nonEmpty: true });
        const scope = r.string(res, 'scope', rAt);
        if (scope !== 'Namespaced' && scope !== 'Cluster')
          r.fail(`${rAt}.scope`, `expected "Namespaced" or "Cluster", got ${describe(scope)}`);
        const verbs = r.strings(res, 'verbs', rAt);
        const subs = r.array(res, 'subresources', rAt, 'empty').map((rawSub, si): [string, string[]] => {
          const sAt = `${rAt}.subresources[${si}]`;
          const sub = r.object(rawSub, sAt);
          return [r.string(sub, 'subresource', sAt, { nonEmpty: true }), r.strings(sub, 'verbs', sAt)];
        });
        into.resources.set(gvrKey(groupName, versionName, name), capability(into.capabilities, verbs, subs, scope === 'Namespaced'));
        if (++into.entries > into.maxEntries) throw tooManyEntries(document, into.maxEntries);
        if (++n % STEP_EVERY === 0) yield;
      }
    }
  }
}

/**
 * Both aggregated documents of one server → its view. `/api` holds the core group, `/apis` the
 * rest; the parsed `/apis` JSON is kept (frozen) for the peer-aggregated merge.
 */
export function* parseAggregatedDiscoverySteps(
  apiDocument: unknown,
  apisDocument: unknown,
  opts: { readonly maxEntries?: number } = {},
): Sliced<ServerView> {
  const into: Collected = {
    resources: mapBuilder(),
    groupVersions: setBuilder(),
    capabilities: new Map(),
    entries: 0,
    maxEntries: opts.maxEntries ?? Number.POSITIVE_INFINITY,
  };
  yield* collectAggregated(apiDocument, '/api', into);
  yield* collectAggregated(apisDocument, '/apis', into);
  const apis = yield* deepFreezeJsonSteps(apisDocument);
  return Object.freeze({
    source: 'aggregated' as const,
    resources: into.resources.seal(),
    groupVersions: into.groupVersions.seal(),
    apisDocument: apis,
  });
}

export function parseAggregatedDiscovery(apiDocument: unknown, apisDocument: unknown): ServerView {
  return runToEnd(parseAggregatedDiscoverySteps(apiDocument, apisDocument));
}

// ---------------------------------------------------------------------------------------------
// Legacy discovery: APIVersions (/api), APIGroupList (/apis), APIResourceList (/api/v1, /apis/g/v).

/** /api (APIVersions) → the core versions, e.g. ["v1"]. */
export function parseApiVersions(doc: unknown): readonly string[] {
  const r = new Reader('/api');
  const o = r.object(doc, '');
  r.kind(o, 'APIVersions', null);
  const versions = r.strings(o, 'versions', '');
  versions.forEach((v, i) => v === '' && r.fail(`versions[${i}]`, 'must not be empty'));
  return Object.freeze(versions);
}

export interface LegacyGroup {
  readonly group: string;
  /** In the server's order of preference. */
  readonly versions: readonly string[];
}

/** /apis (APIGroupList) → each group with all its versions. */
export function parseApiGroupList(doc: unknown): readonly LegacyGroup[] {
  const r = new Reader('/apis');
  const o = r.object(doc, '');
  r.kind(o, 'APIGroupList', 'v1');
  return Object.freeze(
    r.array(o, 'groups', '', 'empty').map((raw, gi) => {
      const gAt = `groups[${gi}]`;
      const g = r.object(raw, gAt);
      const group = r.string(g, 'name', gAt, { nonEmpty: true });
      const versions = r.array(g, 'versions', gAt, 'error').map((rawV, vi) => {
        const vAt = `${gAt}.versions[${vi}]`;
        return r.string(r.object(rawV, vAt), 'version', vAt, { nonEmpty: true });
      });
      if (versions.length === 0) r.fail(`${gAt}.versions`, `group "${group}" lists no versions`);
      return Object.freeze({ group, versions: Object.freeze(versions) });
    }),
  );
}

/** The path of a legacy group/version document: /api/v1 or /apis/<group>/<version>. */
export function legacyGroupVersionPath(group: string, version: string): string {
  return group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
}

/**
 * One APIResourceList → resource name → capability. Subresources arrive as separate "pods/status"
 * entries and are folded into their parent; a subresource whose parent is not listed gets a
 * parent with no verbs of its own (so the subresource stays routable).
 */
export function parseApiResourceList(doc: unknown, group: string, version: string): ReadonlyMap<string, ResourceCapability> {
  const r = new Reader(legacyGroupVersionPath(group, version));
  const o = r.object(doc, '');
  r.kind(o, 'APIResourceList', 'v1');
  const gv = r.string(o, 'groupVersion', '');
  const expected = group === '' ? version : `${group}/${version}`;
  if (gv !== expected) r.fail('groupVersion', `expected "${expected}", got ${describe(gv)}`);

  const parents = new Map<string, { verbs: string[]; namespaced: boolean }>();
  const subs = new Map<string, [string, string[]][]>();
  r.array(o, 'resources', '', 'empty').forEach((raw, i) => {
    const at = `resources[${i}]`;
    const res = r.object(raw, at);
    const name = r.string(res, 'name', at, { nonEmpty: true });
    const namespaced = r.boolean(res, 'namespaced', at);
    const verbs = r.strings(res, 'verbs', at);
    const slash = name.indexOf('/');
    if (slash < 0) {
      parents.set(name, { verbs, namespaced });
      return;
    }
    const parent = name.slice(0, slash);
    const sub = name.slice(slash + 1);
    if (parent === '' || sub === '') r.fail(`${at}.name`, `"${name}" is not resource or resource/subresource`);
    const list = subs.get(parent) ?? [];
    list.push([sub, verbs]);
    subs.set(parent, list);
    if (!parents.has(parent)) parents.set(parent, { verbs: [], namespaced });
  });
  // A placeholder parent is replaced when the real entry comes later in the list, as set() above does.
  const interned: Capabilities = new Map();
  return frozenMap([...parents].map(([name, p]) => [name, capability(interned, p.verbs, subs.get(name) ?? [], p.namespaced)] as const));
}

export interface LegacyGroupVersion {
  readonly group: string;
  readonly version: string;
  /** resource name → capability, as parseApiResourceList gives it. */
  readonly resources: ReadonlyMap<string, ResourceCapability>;
}

/** Assembles the per-group-version pieces of a legacy server into its view. */
export function legacyView(groupVersions: readonly LegacyGroupVersion[], opts: { readonly maxEntries?: number } = {}): ServerView {
  // The same bound as an aggregated view's (discovery.maxResources), counted the same way.
  const maxEntries = opts.maxEntries ?? Number.POSITIVE_INFINITY;
  if (groupVersions.reduce((n, gv) => n + 1 + gv.resources.size, 0) > maxEntries) throw tooManyEntries('/apis', maxEntries);
  const resources = new Map<string, ResourceCapability>();
  const gvs = new Set<string>();
  for (const { group, version, resources: rs } of groupVersions) {
    gvs.add(gvKey(group, version));
    for (const [name, cap] of rs) resources.set(gvrKey(group, version, name), cap);
  }
  return Object.freeze({ source: 'legacy' as const, resources: frozenMap(resources), groupVersions: frozenSet(gvs) });
}

/** The resources one view holds for one group/version (name → capability); used to carry a failed legacy fetch over. */
export function groupVersionResources(view: ServerView, group: string, version: string): ReadonlyMap<string, ResourceCapability> | null {
  if (!view.groupVersions.has(gvKey(group, version))) return null;
  const prefix = `${gvKey(group, version)}/`;
  const out = new Map<string, ResourceCapability>();
  for (const [key, cap] of view.resources) if (key.startsWith(prefix)) out.set(key.slice(prefix.length), cap);
  return frozenMap(out);
}

// ---------------------------------------------------------------------------------------------

/**
 * True when a response Content-Type is aggregated discovery v2 JSON. Parameters are compared
 * by name, in any order, case-insensitively (a profile parameter, if echoed, is ignored).
 */
export function isAggregatedDiscoveryMediaType(contentType: string | null | undefined): boolean {
  if (!contentType) return false;
  const [type, ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  if (type !== 'application/json') return false;
  const p = new Map<string, string>();
  for (const kv of params) {
    const eq = kv.indexOf('=');
    if (eq > 0)
      p.set(
        kv.slice(0, eq).trim(),
        kv
          .slice(eq + 1)
          .trim()
          .replace(/^"(.*)"$/, '$1'),
      );
  }
  return p.get('g') === 'apidiscovery.k8s.io' && p.get('v') === 'v2' && p.get('as') === 'apigroupdiscoverylist';
}

/** The OpenAPI v3 index (GET /openapi/v3) → document path → the hash its serverRelativeURL names. */
export function parseOpenApiV3Index(doc: unknown): ReadonlyMap<string, string> {
  const r = new Reader('/openapi/v3');
  const paths = r.object(r.object(doc, '').paths, 'paths');
  const out = new Map<string, string>();
  for (const [path, entry] of Object.entries(paths)) {
    const field = `paths[${JSON.stringify(path)}]`;
    const url = r.string(r.object(entry, field), 'serverRelativeURL', field, { nonEmpty: true });
    const q = url.indexOf('?');
    const hash = q < 0 ? '' : (new URLSearchParams(url.slice(q + 1)).get('hash') ?? '');
    if (hash === '') r.fail(`${field}.serverRelativeURL`, 'has no hash= parameter');
    out.set(path, hash);
  }
  return frozenMap(out);
}
