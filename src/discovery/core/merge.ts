// The peer-aggregated /apis document: every server's own (profile=nopeer) aggregated document
// merged the way kube-apiserver's peer-aggregated discovery handler merges them (k8s.io/apiserver
// pkg/endpoints/discovery/aggregated, v0.36), with its ETag and its JSON body. Pure: no clock, no
// I/O (hashing is computation).
//
// kube-apiserver merges its local groups with each peer's, visiting servers in the Go string
// order of their identity-lease names; the first visited copy of a group, version or resource is
// the base, later ones are merged into it. At the edge there is no local server: the first server
// in that order plays its part (see docs/discovery.md for the one case where that matters).
import { createHash } from 'node:crypto';
import {
  decodeGroupListSteps,
  marshalGroupsSteps,
  sameResource,
  type GroupDiscovery,
  type ResourceDiscovery,
  type SubresourceDiscovery,
  type VersionDiscovery,
} from './aggregated-model.js';
import { compareGoStrings, mergePreservingRelativeOrder } from './relative-order.js';
import { runToEnd, type Sliced } from '../../util/core/sliced.js';

export interface ServerDocument {
  /** The server's identity (kube-apiserver's identity-lease name); decides the merge order. */
  readonly serverId: string;
  /** Its own aggregated /apis document (APIGroupDiscoveryList JSON, profile=nopeer). */
  readonly document: unknown;
}

/**
 * A frozen document (as a ServerView holds it) is decoded once: when one apiserver's view changes,
 * the others' documents are not decoded again. The merge never changes what it is given.
 */
const decodedDocuments = new WeakMap<object, readonly GroupDiscovery[]>();

function* decoded(document: unknown): Sliced<readonly GroupDiscovery[]> {
  if (document === null || typeof document !== 'object' || !Object.isFrozen(document)) return yield* decodeGroupListSteps(document);
  let groups = decodedDocuments.get(document);
  if (groups === undefined) {
    groups = Object.freeze(yield* decodeGroupListSteps(document));
    decodedDocuments.set(document, groups);
  }
  return groups;
}

const sameNames = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((v, i) => v === b[i]);

/** Verbs unioned and sorted; subresources unioned by name (a later copy wins) and sorted; the rest from `a`. */
function mergeResourceCapabilities(a: ResourceDiscovery, b: ResourceDiscovery): ResourceDiscovery {
  const verbs = new Set([...(a.verbs ?? []), ...(b.verbs ?? [])]);
  const subs = new Map<string, SubresourceDiscovery>();
  for (const s of a.subresources ?? []) subs.set(s.subresource, s);
  for (const s of b.subresources ?? []) subs.set(s.subresource, s);
  const base = a.resource === '' ? b : a;
  return {
    ...base,
    // Go leaves the slices nil when there is nothing to put in them.
    verbs: verbs.size > 0 ? [...verbs].sort(compareGoStrings) : null,
    subresources: subs.size > 0 ? [...subs.values()].sort((x, y) => compareGoStrings(x.subresource, y.subresource)) : null,
  };
}

/** Picks each name of `order` once from `byName`. */
function pick<T>(byName: Map<string, T>, order: readonly string[]): T[] {
  const out: T[] = [];
  for (const name of order) {
    const v = byName.get(name);
    if (v === undefined) continue;
    out.push(v);
    byName.delete(name);
  }
  return out;
}

/** [merged, whether it differs from a]. */
function mergeVersionResources(a: VersionDiscovery, b: VersionDiscovery): [VersionDiscovery, boolean] {
  const byName = new Map<string, ResourceDiscovery>();
  const aNames: string[] = [];
  const bNames: string[] = [];
  let changed = false;
  for (const r of a.resources ?? []) {
    aNames.push(r.resource);
    byName.set(r.resource, r);
  }
  for (const r of b.resources ?? []) {
    bNames.push(r.resource);
    const existing = byName.get(r.resource);
    if (existing === undefined) {
      byName.set(r.resource, r);
    } else if (!sameResource(existing, r)) {
      changed = true;
      byName.set(r.resource, mergeResourceCapabilities(existing, r));
    }
  }
  const sameOrder = sameNames(aNames, bNames);
  if (!changed && sameOrder) return [a, false];
  const order = sameOrder ? aNames : mergePreservingRelativeOrder([aNames, bNames]);
  return [{ version: a.version, resources: pick(byName, order), freshness: a.freshness }, true];
}

/** [merged, whether it differs from a]. */
function mergeGroupVersions(a: GroupDiscovery, b: GroupDiscovery): [GroupDiscovery, boolean] {
  const byName = new Map<string, VersionDiscovery>();
  const aNames: string[] = [];
  const bNames: string[] = [];
  let changed = false;
  for (const v of a.versions ?? []) {
    aNames.push(v.version);
    byName.set(v.version, v);
  }
  for (const v of b.versions ?? []) {
    bNames.push(v.version);
    const existing = byName.get(v.version);
    if (existing === undefined) {
      byName.set(v.version, v);
    } else {
      const [merged, did] = mergeVersionResources(existing, v);
      byName.set(v.version, merged);
      if (did) changed = true;
    }
  }
  const sameOrder = sameNames(aNames, bNames);
  if (!changed && sameOrder) return [a, false];
  const order = sameOrder ? aNames : mergePreservingRelativeOrder([aNames, bNames]);
  return [{ kind: a.kind, apiVersion: a.apiVersion, name: a.name, versions: pick(byName, order) }, true];
}

/**
 * The merged groups (APIGroupDiscoveryList.items) of the servers' documents. Servers are visited
 * in Go order of serverId (a repeated id: the later document wins). Throws AggregatedDecodeError
 * when a document does not decode as Go would.
 */
export function* mergePeerDiscoverySteps(docs: readonly ServerDocument[]): Sliced<readonly GroupDiscovery[]> {
  const byServer = new Map<string, readonly GroupDiscovery[]>();
  for (const d of docs) byServer.set(d.serverId, yield* decoded(d.document));
  const ids = [...byServer.keys()].sort(compareGoStrings);
  const first = byServer.get(ids[0] ?? '');
  if (first === undefined) return [];
  if (ids.length === 1) return first;

  const merged = new Map<string, GroupDiscovery>();
  const groupNames: (readonly string[])[] = [];
  let changed = false;
  let allSameNames = true;
  const firstNames = first.map((g) => g.name);
  for (const id of ids) {
    const names: string[] = [];
    for (const g of byServer.get(id) as readonly GroupDiscovery[]) {
      const existing = merged.get(g.name);
      if (existing === undefined) {
        merged.set(g.name, g);
      } else {
        const [m, did] = mergeGroupVersions(existing, g);
        merged.set(g.name, m);
        if (did) changed = true;
      }
      names.push(g.name);
      yield;
    }
    groupNames.push(names);
    if (!sameNames(firstNames, names)) allSameNames = false;
  }
  // kube-apiserver returns its local list untouched here; the first server stands in for it.
  if (!changed && allSameNames) return first;
  return pick(merged, allSameNames ? firstNames : mergePreservingRelativeOrder(groupNames));
}

export function mergePeerDiscovery(docs: readonly ServerDocument[]): readonly GroupDiscovery[] {
  return runToEnd(mergePeerDiscoverySteps(docs));
}

/** Serialised once, shared by the hash and the body. */
export interface EncodedDiscovery {
  /** Go's json.Marshal of the items (a JSON array). */
  readonly itemsJson: string;
}

export function* encodeItemsSteps(items: readonly GroupDiscovery[]): Sliced<EncodedDiscovery> {
  return { itemsJson: yield* marshalGroupsSteps(items) };
}

export function encodeItems(items: readonly GroupDiscovery[]): EncodedDiscovery {
  return runToEnd(encodeItemsSteps(items));
}

/** Encoded and hashed a piece at a time: a large cluster's document is tens of megabytes. */
const PIECE_CHARS = 256 * 1024;

const BODY_PREFIX = '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":';
const HASHED_PREFIX = '{"metadata":{},"items":';

/** The items JSON as UTF-8 pieces, cut where no surrogate pair is split; a pause point after each. */
function* utf8Pieces(json: string): Sliced<Buffer[]> {
  const pieces: Buffer[] = [];
  for (let at = 0; at < json.length;) {
    let end = Math.min(json.length, at + PIECE_CHARS);
    const last = json.charCodeAt(end - 1);
    if (end < json.length && last >= 0xd800 && last <= 0xdbff) end++;
    pieces.push(Buffer.from(json.slice(at, end), 'utf8'));
    at = end;
    yield;
  }
  return pieces;
}

/**
 * The ETag and the response body of a merged document, from one UTF-8 encoding of its items.
 * kube-apiserver's ETag: the uppercase hex SHA-512 of Go's json.Marshal of
 * APIGroupDiscoveryList{Items: items}, whose empty TypeMeta is omitted and whose ListMeta is not
 * (`{"metadata":{},"items":[...]}`); unquoted, the header carries it in double quotes. The body is
 * what its JSON encoder writes: kind and apiVersion set, a newline at the end.
 */
export function* encodeResponseSteps(encoded: EncodedDiscovery): Sliced<{ readonly etag: string; readonly body: Buffer }> {
  const pieces = yield* utf8Pieces(encoded.itemsJson);
  const hash = createHash('sha512').update(HASHED_PREFIX, 'utf8');
  for (const p of pieces) {
    hash.update(p);
    yield;
  }
  const etag = hash.update('}', 'utf8').digest('hex').toUpperCase();
  return { etag, body: Buffer.concat([Buffer.from(BODY_PREFIX, 'utf8'), ...pieces, Buffer.from('}\n', 'utf8')]) };
}

export function computeEtag(items: readonly GroupDiscovery[] | EncodedDiscovery): string {
  return runToEnd(encodeResponseSteps('itemsJson' in items ? items : encodeItems(items))).etag;
}

/**
 * The response body kube-apiserver writes for the list: its JSON encoder sets kind and apiVersion
 * and ends the document with a newline.
 */
export function discoveryBody(items: readonly GroupDiscovery[] | EncodedDiscovery): string {
  // The very bytes the service serves (encodeResponseSteps), so that tests of this read them.
  return runToEnd(encodeResponseSteps('itemsJson' in items ? items : encodeItems(items))).body.toString('utf8');
}
