// Pure: which apiserver holds which discovery-like document whole. Legacy discovery (/api/v1,
// /apis, /apis/<g>, /apis/<g>/<v>) and OpenAPI (/openapi/v2, /openapi/v3 and its per-group-version
// documents) are one server's own answer; a client must get one that lists everything the cluster
// serves, and an OpenAPI document whose hash matches the index it came from
// (docs/design.md, "Discovery-like documents"). Built from the views alone, with the snapshot.
import { frozenMap, frozenSet } from './freeze.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';
import {
  gvKey,
  sameOpenApiIndex,
  type DocumentIndex,
  type ScopeCoverage,
  type ResourceCapability,
  type ServerState,
  type ServerView,
} from './types.js';

/** Every group/version and every resource, verb and subresource: /openapi/v2, the OpenAPI v3 index, /apis in any aggregated form. */
export const SCOPE_ALL = 'all';
/** Every group/version: the legacy /apis (APIGroupList). */
export const SCOPE_GROUPS = 'groups';

/** The versions of one group: /apis/<group> (APIGroup). */
export function groupScope(group: string): string {
  return `group:${group}`;
}

/** The resources of one group/version: /api/v1, /apis/<g>/<v> (APIResourceList), /openapi/v3/apis/<g>/<v>. */
export function groupVersionScope(group: string, version: string): string {
  return `gv:${gvKey(group, version)}`;
}

export const EMPTY_DOCUMENT_INDEX: DocumentIndex = Object.freeze({
  scopes: frozenMap<string, ScopeCoverage>([]),
  openapi: frozenMap<string, ReadonlyMap<string, ReadonlySet<string>>>([]),
  openapiIdentical: true,
});

/** One server's view, by group/version: what the comparisons walk. */
interface ByGroupVersion {
  /** gvKey → resource → capability (a group/version with no resources maps to an empty map). */
  readonly gvs: ReadonlyMap<string, ReadonlyMap<string, ResourceCapability>>;
  /** group → its versions. */
  readonly groups: ReadonlyMap<string, ReadonlySet<string>>;
}

function splitGv(gv: string): [string, string] {
  const slash = gv.lastIndexOf('/');
  return [gv.slice(0, slash), gv.slice(slash + 1)];
}

function* byGroupVersion(view: ServerView): Sliced<ByGroupVersion> {
  const gvs = new Map<string, Map<string, ResourceCapability>>();
  const groups = new Map<string, Set<string>>();
  let n = 0;
  for (const gv of view.groupVersions) {
    gvs.set(gv, new Map());
    const [group, version] = splitGv(gv);
    let versions = groups.get(group);
    if (!versions) groups.set(group, (versions = new Set()));
    versions.add(version);
  }
  for (const [key, cap] of view.resources) {
    // key is group/version/resource; the resource holds no '/'.
    const cut = key.lastIndexOf('/');
    const gv = key.slice(0, cut);
    let resources = gvs.get(gv);
    if (!resources) gvs.set(gv, (resources = new Map()));
    resources.set(key.slice(cut + 1), cap);
    if (++n % STEP_EVERY === 0) yield;
  }
  return { gvs, groups };
}

function superset(a: ReadonlySet<string> | undefined, b: ReadonlySet<string>): boolean {
  if (a === undefined || a.size < b.size) return false;
  for (const v of b) if (!a.has(v)) return false;
  return true;
}

/** A lists every resource of B in the group/version, each with every verb and subresource B lists. */
function holdsGroupVersion(a: ByGroupVersion, b: ByGroupVersion, gv: string): boolean {
  const mine = a.gvs.get(gv);
  const theirs = b.gvs.get(gv);
  if (theirs === undefined) return true;
  if (mine === undefined || mine.size < theirs.size) return false;
  for (const [resource, capB] of theirs) {
    const capA = mine.get(resource);
    if (capA === undefined || !superset(capA.verbs, capB.verbs)) return false;
    for (const [sub, verbs] of capB.subresources) if (!superset(capA.subresources.get(sub), verbs)) return false;
  }
  return true;
}

/** How many items a group/version's document lists: the group/version, each resource, verb and subresource. */
function groupVersionItems(resources: ReadonlyMap<string, ResourceCapability>): number {
  let n = 1;
  for (const cap of resources.values()) {
    n += 1 + cap.verbs.size;
    for (const verbs of cap.subresources.values()) n += 1 + verbs.size;
  }
  return n;
}

/**
 * Builds the index over every server that has a view, ready or not (routing picks among the ready
 * ones). A pause point after each group/version and group.
 */
export function* buildDocumentIndexSteps(servers: readonly ServerState[]): Sliced<DocumentIndex> {
  const withView = servers.filter((s) => s.view !== null);
  const views: (readonly [string, ByGroupVersion])[] = [];
  for (const s of withView) views.push([s.name, yield* byGroupVersion(s.view as ServerView)]);
  const scopes = new Map<string, ScopeCoverage>();
  /** One scope: who serves it, who holds whom, how many items each lists. */
  const compare = (
    key: string,
    serves: (v: ByGroupVersion) => boolean,
    holds: (a: ByGroupVersion, b: ByGroupVersion) => boolean,
    items: (v: ByGroupVersion) => number,
  ): void => {
    const serving: string[] = [];
    const covers = new Map<string, ReadonlySet<string>>();
    const counts = new Map<string, number>();
    for (const [a, va] of views) {
      if (serves(va)) serving.push(a);
      counts.set(a, items(va));
      covers.set(a, frozenSet(views.filter(([, vb]) => va === vb || holds(va, vb)).map(([b]) => b)));
    }
    scopes.set(key, Object.freeze({ serving: frozenSet(serving), covers: frozenMap(covers), items: frozenMap(counts) }));
  };

  const allGvs = new Set<string>();
  const allGroups = new Set<string>();
  for (const [, v] of views) {
    for (const gv of v.gvs.keys()) allGvs.add(gv);
    for (const g of v.groups.keys()) allGroups.add(g);
  }
  // Per group/version, computed once: the whole-cluster scope is their conjunction.
  const gvHolds = new Map<string, Map<ByGroupVersion, Set<ByGroupVersion>>>();
  const gvItems = new Map<ByGroupVersion, number>();
  for (const gv of allGvs) {
    const held = new Map<ByGroupVersion, Set<ByGroupVersion>>();
    for (const [, va] of views) held.set(va, new Set(views.filter(([, vb]) => holdsGroupVersion(va, vb, gv)).map(([, vb]) => vb)));
    gvHolds.set(gv, held);
    const [group, version] = splitGv(gv);
    compare(
      groupVersionScope(group, version),
      (v) => v.gvs.has(gv),
      (a, b) => held.get(a)?.has(b) === true,
      (v) => {
        const resources = v.gvs.get(gv);
        return resources ? groupVersionItems(resources) : 0;
      },
    );
    yield;
  }
  for (const [, v] of views) {
    let n = 0;
    for (const resources of v.gvs.values()) n += groupVersionItems(resources);
    gvItems.set(v, n);
  }
  for (const group of allGroups) {
    compare(
      groupScope(group),
      (v) => v.groups.has(group),
      (a, b) => {
        const theirs = b.groups.get(group);
        return theirs === undefined || superset(a.groups.get(group), theirs);
      },
      (v) => v.groups.get(group)?.size ?? 0,
    );
    yield;
  }
  const holdsGvs = (a: ByGroupVersion, b: ByGroupVersion): boolean => {
    for (const gv of b.gvs.keys()) if (!a.gvs.has(gv)) return false;
    return true;
  };
  compare(
    SCOPE_GROUPS,
    (v) => v.gvs.size > 0,
    holdsGvs,
    (v) => v.gvs.size,
  );
  compare(
    SCOPE_ALL,
    (v) => v.gvs.size > 0,
    (a, b) => holdsGvs(a, b) && [...b.gvs.keys()].every((gv) => gvHolds.get(gv)?.get(a)?.has(b) === true),
    (v) => gvItems.get(v) ?? 0,
  );

  const openapi = new Map<string, Map<string, Set<string>>>();
  for (const s of withView) {
    for (const [path, hash] of s.view?.openapiV3 ?? []) {
      let byHash = openapi.get(path);
      if (!byHash) openapi.set(path, (byHash = new Map()));
      let names = byHash.get(hash);
      if (!names) byHash.set(hash, (names = new Set()));
      names.add(s.name);
    }
  }
  const first = withView[0]?.view?.openapiV3;
  const openapiIdentical = withView.every((s) => sameOpenApiIndex(s.view?.openapiV3, first));

  return Object.freeze({
    scopes: frozenMap(scopes),
    openapi: frozenMap([...openapi].map(([p, m]) => [p, frozenMap([...m].map(([h, n]) => [h, frozenSet(n)] as const))] as const)),
    openapiIdentical,
  });
}

export function buildDocumentIndex(servers: readonly ServerState[]): DocumentIndex {
  return runToEnd(buildDocumentIndexSteps(servers));
}
