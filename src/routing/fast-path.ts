// The fast path (docs/design.md, "The fast path"): from a snapshot, the requests that need no
// per-request judgement compiled into a table that Envoy matches itself, sending them straight to
// the table's own pool without asking skewgate. The pool is every apiserver that is ready, not
// draining nor cordoned, and whose view is current; the table, the group/versions every pool member serves
// identically. An apiserver restarting or leaving only leaves the pool. Pure: snapshot × clock →
// table.
//
// Compiled conservatively: a request the table matches is one decide() sends to a member of the
// pool — default/served_by_all when the pool is every apiserver, routed/served_by_subset with the
// pool as its ready candidates otherwise — at any moment until the table expires; everything else
// (skewed group/versions, merged /apis, documents, client certificates, long-running requests,
// names the views do not list, any doubt) still goes through ext_proc.
// test/unit/fast-path.test.ts proves it over the rendered Envoy routes.
import { gvKey, type ResourceCapability, type ServerState, type Snapshot } from '../discovery/core/types.js';
import { isFresh, isHealthy } from './freshness.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../util/core/sliced.js';

/**
 * How long before a view goes stale its routes are withdrawn. Envoy reloads rds.json in
 * milliseconds; the withdrawal is confirmed within ROUTES_CONFIRM_TIMEOUT_MS (envoy-runtime/fast-path-sync.ts).
 */
export const FAST_PATH_MARGIN_MS = 1000;
/** The decision a table's routes stand for: the ladder's literals for a request every pool member serves. */
export function fastPathDecision(table: FastTable): {
  readonly outcome: 'default' | 'routed';
  readonly reason: 'served_by_all' | 'served_by_subset';
} {
  return table.servesAll ? { outcome: 'default', reason: 'served_by_all' } : { outcome: 'routed', reason: 'served_by_subset' };
}

/** A request's shape below its group/version, which (with the method) fixes kube-apiserver's verb. */
export type FastShape = 'collection' | 'object' | 'subresource';

/** Verbs kube-apiserver derives from a method and a shape (k8s/classify.ts), watch aside. */
const VERB_BY_SHAPE: Readonly<Record<string, Partial<Record<FastShape, string>>>> = {
  GET: { collection: 'list', object: 'get', subresource: 'get' },
  HEAD: { collection: 'list', object: 'get', subresource: 'get' },
  POST: { collection: 'create', subresource: 'create' },
  PUT: { object: 'update', subresource: 'update' },
  PATCH: { object: 'patch', subresource: 'patch' },
  DELETE: { collection: 'deletecollection', object: 'delete', subresource: 'delete' },
};
export const FAST_PATH_METHODS: readonly string[] = Object.freeze(Object.keys(VERB_BY_SHAPE));

/**
 * Never fast, whatever discovery says: kube-apiserver holds these open (k8s/long-running.ts); a
 * resource called like a path keyword would be read as one (/watch/…, /proxy/…, and
 * namespaces/<ns>/status|finalize, which kube-apiserver takes for the namespace's own subresource
 * in every group); and namespaces outside the core group, which its path rule treats specially.
 */
const LONG_RUNNING_SUBRESOURCES: ReadonlySet<string> = new Set(['attach', 'exec', 'proxy', 'log', 'portforward']);
const KEYWORD_RESOURCES: ReadonlySet<string> = new Set(['watch', 'proxy', 'status', 'finalize']);

function keyword(group: string, resource: string): boolean {
  return KEYWORD_RESOURCES.has(resource) || (group !== '' && resource === 'namespaces');
}

/** One resource of a fast group/version, as every apiserver lists it. */
export interface FastResource {
  readonly resource: string;
  readonly namespaced: boolean;
  readonly verbs: readonly string[];
  /** Subresources with their verbs; the long-running ones left out. */
  readonly subresources: readonly { readonly name: string; readonly verbs: readonly string[] }[];
}

export interface FastGroupVersion {
  /** '' for the core group (/api/v1). */
  readonly group: string;
  readonly version: string;
  readonly resources: readonly FastResource[];
}

/**
 * What Envoy may decide alone. Empty groupVersions: nothing is fast, every request goes through
 * ext_proc. `members` is the table's pool: the apiservers it was compiled over, and the only ones
 * its routes may send to (envoy/clusters.ts renders them as a cluster of their own).
 */
export interface FastTable {
  /** The snapshot generation the table was compiled from (span tag, access-log field). */
  readonly generation: number;
  /** The pool, sorted. */
  readonly members: readonly string[];
  /** The pool is every apiserver of the snapshot: decide() answers default, not routed. */
  readonly servesAll: boolean;
  readonly groupVersions: readonly FastGroupVersion[];
  /**
   * Epoch ms after which a view the table rests on is no longer current (discovery.staleAfter):
   * the table must be out of Envoy before then. Infinity when it rests on nothing.
   */
  readonly validUntil: number;
  /** Why nothing (or not everything) is fast, for the log line; '' when every group/version is. */
  readonly why: string;
}

export interface FastPathOptions {
  readonly now: number;
  readonly staleAfterMs: number;
  /** How long before a view goes stale the table stops relying on it: Envoy needs that to reload. */
  readonly marginMs: number;
}

const NOTHING: readonly FastGroupVersion[] = Object.freeze([]);

const NOBODY: readonly string[] = Object.freeze([]);

export function emptyFastTable(generation: number, why: string): FastTable {
  return Object.freeze({
    generation,
    members: NOBODY,
    servesAll: false,
    groupVersions: NOTHING,
    validUntil: Number.POSITIVE_INFINITY,
    why,
  });
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

function sameCapability(a: ResourceCapability, b: ResourceCapability): boolean {
  if (a.namespaced !== b.namespaced || !sameSet(a.verbs, b.verbs) || a.subresources.size !== b.subresources.size) return false;
  for (const [name, verbs] of a.subresources) {
    const other = b.subresources.get(name);
    if (other === undefined || !sameSet(verbs, other)) return false;
  }
  return true;
}

function fastResource(resource: string, cap: ResourceCapability): FastResource {
  const subresources = [...cap.subresources]
    .filter(([name]) => !LONG_RUNNING_SUBRESOURCES.has(name))
    .map(([name, verbs]) => Object.freeze({ name, verbs: Object.freeze([...verbs].sort()) }))
    .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  return Object.freeze({
    resource,
    namespaced: cap.namespaced,
    verbs: Object.freeze([...cap.verbs].sort()),
    subresources: Object.freeze(subresources),
  });
}

/** Why a server stays out of the fast pool at this moment, or null when it is in. */
function doubt(s: ServerState, now: number, staleAfterMs: number): string | null {
  if (s.draining === true) return `${s.name} is draining`;
  // Out of the balanced pool: it gets only what no open apiserver serves (or, drained, nothing).
  if (s.cordon !== undefined) return `${s.name} is ${s.cordon === 'drain' ? 'drained' : 'cordoned'}`;
  if (!isHealthy(s)) return `${s.name} is not ready`;
  if (!isFresh(s, now, staleAfterMs)) return `${s.name}'s view is not current`;
  return null;
}

/**
 * The fast pool: the servers ready, not draining and current for at least marginMs more — exactly
 * those rung 4 counts as "known and ready" for a resource they list — and why the others are out.
 */
export interface FastPool {
  readonly servers: readonly ServerState[];
  readonly left: readonly string[];
}

export function fastPool(snap: Snapshot, opts: FastPathOptions): FastPool {
  const judgedAt = opts.now + opts.marginMs;
  const servers: ServerState[] = [];
  const left: string[] = [];
  for (const s of snap.servers) {
    const why = doubt(s, judgedAt, opts.staleAfterMs);
    if (why === null) servers.push(s);
    else left.push(why);
  }
  return { servers, left };
}

/**
 * What the pool's views alone make fast: the group/versions every pool member lists with the same
 * resources, scopes, verbs and subresources. Depends on the members' names and views only, so a
 * caller may keep it while those stay the same objects (a 304 keeps a view), and judge the moment
 * apart.
 */
export interface FastBody {
  readonly servers: readonly string[];
  readonly views: readonly unknown[];
  readonly groupVersions: readonly FastGroupVersion[];
  readonly why: string;
}

/** True when `body` was computed from exactly these pool members' views (same objects). */
export function fastBodyHolds(body: FastBody, pool: readonly ServerState[]): boolean {
  if (body.servers.length !== pool.length) return false;
  for (let i = 0; i < pool.length; i++) {
    const s = pool[i] as ServerState;
    if (body.servers[i] !== s.name || body.views[i] !== s.view) return false;
  }
  return true;
}

export function fastBody(snap: Snapshot, pool: readonly ServerState[]): FastBody {
  return runToEnd(fastBodySteps(snap, pool));
}

/** fastBody as a sliced computation (util/core/sliced.ts): a walk over every resource pauses. */
export function* fastBodySteps(snap: Snapshot, pool: readonly ServerState[]): Sliced<FastBody> {
  let n = 0;
  const servers = Object.freeze(pool.map((s) => s.name));
  const views = Object.freeze(pool.map((s) => s.view));
  // gvKey → resource → capability, kept only while every server lists the resource identically.
  const byGv = new Map<string, { group: string; version: string; resources: Map<string, ResourceCapability>; broken: boolean }>();
  for (const [gv, holders] of snap.groupVersions) {
    const slash = gv.indexOf('/');
    byGv.set(gv, {
      group: gv.slice(0, slash),
      version: gv.slice(slash + 1),
      resources: new Map(),
      broken: servers.some((name) => !holders.has(name)),
    });
  }
  for (const [key, byServer] of snap.resources) {
    if (++n % STEP_EVERY === 0) yield;
    const last = key.lastIndexOf('/');
    const entry = byGv.get(key.slice(0, last));
    if (entry === undefined || entry.broken) continue;
    const first = byServer.get(servers[0] ?? '');
    if (first === undefined) {
      // Listed only by apiservers outside the pool: not routed fast (the routes name their
      // resources), and no reason to doubt the ones the pool lists alike.
      if (!pool.some((s) => byServer.has(s.name))) continue;
      entry.broken = true;
      continue;
    }
    for (const s of pool) {
      const cap = byServer.get(s.name);
      if (cap === undefined || !sameCapability(first, cap)) {
        entry.broken = true;
        break;
      }
    }
    if (!entry.broken) entry.resources.set(key.slice(last + 1), first);
  }
  const groupVersions: FastGroupVersion[] = [];
  let skewed = 0;
  for (const e of byGv.values()) {
    if (e.broken) {
      skewed++;
      continue;
    }
    n += e.resources.size;
    if (n > STEP_EVERY) {
      n = 0;
      yield;
    }
    const resources = [...e.resources]
      .filter(([r]) => !keyword(e.group, r))
      .map(([r, cap]) => fastResource(r, cap))
      .sort((x, y) => (x.resource < y.resource ? -1 : x.resource > y.resource ? 1 : 0));
    if (resources.length > 0)
      groupVersions.push(Object.freeze({ group: e.group, version: e.version, resources: Object.freeze(resources) }));
  }
  groupVersions.sort((x, y) => {
    const a = gvKey(x.group, x.version);
    const b = gvKey(y.group, y.version);
    return a < b ? -1 : a > b ? 1 : 0;
  });
  return Object.freeze({
    servers,
    views,
    groupVersions: Object.freeze(groupVersions),
    why: skewed === 0 ? '' : `${skewed} group/version${skewed === 1 ? '' : 's'} not served identically`,
  });
}

/**
 * The table for a snapshot at `now`: the fast pool (fastPool) and its body's group/versions
 * (fastBody, or one kept from an earlier snapshot of the same pool and views). No pool: empty.
 */
export function compileFastPath(snap: Snapshot, opts: FastPathOptions, body?: FastBody): FastTable {
  if (snap.servers.length === 0) return emptyFastTable(snap.generation, 'no apiservers');
  const pool = fastPool(snap, opts);
  const left = pool.left.join('; ');
  if (pool.servers.length === 0) return emptyFastTable(snap.generation, left);
  // An apiserver identity no member matches, or one being verified, changes nothing here: the
  // ladder's rung 4 answers from the ready, current members before it looks at them (they turn
  // would-be 404s into 503s).
  const b = body !== undefined && fastBodyHolds(body, pool.servers) ? body : fastBody(snap, pool.servers);
  let oldest = Number.POSITIVE_INFINITY;
  for (const s of pool.servers) oldest = Math.min(oldest, s.lastSuccessAt ?? Number.NEGATIVE_INFINITY);
  return Object.freeze({
    generation: snap.generation,
    members: Object.freeze(pool.servers.map((s) => s.name).sort()),
    servesAll: pool.left.length === 0,
    groupVersions: b.groupVersions,
    validUntil: oldest + opts.staleAfterMs,
    why: [b.why, left === '' ? '' : `out of the fast pool: ${left}`].filter((x) => x !== '').join('; '),
  });
}

/**
 * The verb kube-apiserver gives a method on a shape, or undefined when the fast path never takes
 * it. `watch`: the request carries watch=true (or 1): a GET of a collection is a watch; the fast
 * path takes no other shape of watch (an object's, the /watch/ prefix) and judges those in skewgate.
 */
export function fastVerb(method: string, shape: FastShape, watch = false): string | undefined {
  if (watch) return method === 'GET' && shape === 'collection' ? 'watch' : undefined;
  return VERB_BY_SHAPE[method]?.[shape];
}
