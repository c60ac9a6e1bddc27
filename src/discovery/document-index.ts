// Pure: which apiserver holds which discovery-like document whole. Legacy discovery (/api/v1,
// /apis, /apis/<g>, /apis/<g>/<v>) and OpenAPI (/openapi/v2, /openapi/v3 and its per-group-version
// documents) are one server's own answer; a client must get one that lists everything the cluster
// serves, and an OpenAPI document whose hash matches the index it came from
// (docs/design.md, "Discovery-like documents"). Built from the views alone, with the snapshot.
import { frozenMap, frozenSet } from './freeze.js';
import { sameOpenApiIndex } from './parse.js';
import { gvKey, type ServerState } from './types.js';

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

/** How the servers' views compare within one scope. */
export interface ScopeCoverage {
  /** Servers whose view has anything in the scope. */
  readonly serving: ReadonlySet<string>;
  /** Server → the servers whose content in the scope it holds entirely (itself included). */
  readonly covers: ReadonlyMap<string, ReadonlySet<string>>;
  /** Server → how many items of the scope it holds: the fullest is taken when none holds all. */
  readonly items: ReadonlyMap<string, number>;
}

export interface DocumentIndex {
  /** Scope key (SCOPE_ALL, SCOPE_GROUPS, groupScope(), groupVersionScope()) → coverage. */
  readonly scopes: ReadonlyMap<string, ScopeCoverage>;
  /** OpenAPI v3 document path ("api/v1") → hash → the servers whose index lists that hash. */
  readonly openapi: ReadonlyMap<string, ReadonlyMap<string, ReadonlySet<string>>>;
  /** Every server with a view lists the same OpenAPI v3 index (same paths, same hashes). */
  readonly openapiIdentical: boolean;
}

export const EMPTY_DOCUMENT_INDEX: DocumentIndex = Object.freeze({
  scopes: frozenMap<string, ScopeCoverage>([]),
  openapi: frozenMap<string, ReadonlyMap<string, ReadonlySet<string>>>([]),
  openapiIdentical: true,
});

function add(content: Map<string, Set<string>>, scope: string, item: string): void {
  let items = content.get(scope);
  if (!items) content.set(scope, (items = new Set()));
  items.add(item);
}

/** One server's content, scope by scope. An item is a string that differs where documents differ. */
function contentOf(s: ServerState): Map<string, Set<string>> {
  const content = new Map<string, Set<string>>();
  const view = s.view;
  if (!view) return content;
  for (const gv of view.groupVersions) {
    const slash = gv.lastIndexOf('/');
    const group = gv.slice(0, slash);
    const version = gv.slice(slash + 1);
    add(content, SCOPE_ALL, gv);
    add(content, SCOPE_GROUPS, gv);
    add(content, groupScope(group), version);
    // A group/version with no resources still has its (empty) APIResourceList.
    add(content, groupVersionScope(group, version), '');
  }
  for (const [key, cap] of view.resources) {
    // key is group/version/resource; the resource holds no '/'.
    const cut = key.lastIndexOf('/');
    const gv = key.slice(0, cut);
    const slash = gv.lastIndexOf('/');
    const scope = groupVersionScope(gv.slice(0, slash), gv.slice(slash + 1));
    const resource = key.slice(cut + 1);
    const items = [resource, ...[...cap.verbs].map((v) => `${resource} ${v}`)];
    for (const [sub, verbs] of cap.subresources) {
      items.push(`${resource}/${sub}`, ...[...verbs].map((v) => `${resource}/${sub} ${v}`));
    }
    for (const item of items) {
      add(content, scope, item);
      add(content, SCOPE_ALL, `${gv} ${item}`);
    }
  }
  return content;
}

function holdsAll(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size < b.size) return false;
  for (const item of b) if (!a.has(item)) return false;
  return true;
}

/** Builds the index over every server that has a view, ready or not (routing picks among the ready ones). */
export function buildDocumentIndex(servers: readonly ServerState[]): DocumentIndex {
  const withView = servers.filter((s) => s.view !== null);
  const contents = new Map(withView.map((s) => [s.name, contentOf(s)] as const));
  const scopeKeys = new Set<string>();
  for (const c of contents.values()) for (const k of c.keys()) scopeKeys.add(k);
  const none: ReadonlySet<string> = new Set();

  const scopes = new Map<string, ScopeCoverage>();
  for (const key of scopeKeys) {
    const serving: string[] = [];
    const covers = new Map<string, ReadonlySet<string>>();
    const items = new Map<string, number>();
    for (const [a, ca] of contents) {
      const mine = ca.get(key) ?? none;
      if (mine.size > 0) serving.push(a);
      items.set(a, mine.size);
      const held: string[] = [];
      for (const [b, cb] of contents) if (holdsAll(mine, cb.get(key) ?? none)) held.push(b);
      covers.set(a, frozenSet(held));
    }
    scopes.set(key, Object.freeze({ serving: frozenSet(serving), covers: frozenMap(covers), items: frozenMap(items) }));
  }

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
