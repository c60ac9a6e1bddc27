// The fast path (docs/design.md, "The fast path"): from a snapshot, the requests that need no
// per-request judgement — a group/version every apiserver serves identically, every view current
// and every apiserver ready — compiled into a table that Envoy matches itself, sending those
// requests straight to the balanced pool without asking skewgate. Pure: snapshot × clock → table.
//
// Compiled conservatively: a request the table matches is one decide() answers
// default/served_by_all for, at any moment until the table expires; everything else (skewed
// group/versions, merged /apis, documents, client certificates, long-running requests, names the
// views do not list, any doubt) still goes through ext_proc. test/unit/fast-path.test.ts proves
// it over the rendered Envoy routes.
import { gvKey, type ResourceCapability, type ServerState, type Snapshot } from '../discovery/core/types.js';
import { isFresh, isHealthy } from './freshness.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../util/core/sliced.js';

/** The decision a fast-path route stands for: the same literals as the ladder's default rung. */
/**
 * How long before a view goes stale its routes are withdrawn. Envoy reloads rds.json in
 * milliseconds; the withdrawal is confirmed within ROUTES_CONFIRM_TIMEOUT_MS (envoy-runtime/fast-path-sync.ts).
 */
export const FAST_PATH_MARGIN_MS = 1000;
export const FAST_PATH_OUTCOME = 'default';
export const FAST_PATH_REASON = 'served_by_all';

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
 * ext_proc. `members` are the apiservers the table was compiled over; Envoy's balanced pool must be
 * exactly these for the table to hold (envoy-runtime/xds-files.ts renders it only then).
 */
export interface FastTable {
  /** The snapshot generation the table was compiled from (span tag, access-log field). */
  readonly generation: number;
  readonly members: readonly string[];
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

function empty(generation: number, members: readonly string[], why: string): FastTable {
  return Object.freeze({ generation, members, groupVersions: NOTHING, validUntil: Number.POSITIVE_INFINITY, why });
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

/** Why a server makes nothing fast at this moment, or null when it does not stand in the way. */
function doubt(s: ServerState, now: number, staleAfterMs: number): string | null {
  if (s.draining === true) return `${s.name} is draining`;
  if (!isHealthy(s)) return `${s.name} is not ready`;
  if (!isFresh(s, now, staleAfterMs)) return `${s.name}'s view is not current`;
  return null;
}

/**
 * What the views alone make fast: the group/versions every server lists with the same resources,
 * scopes, verbs and subresources. Depends on the servers' names and views only, so a caller may
 * keep it while those stay the same objects (a 304 keeps a view), and judge the moment apart.
 */
export interface FastBody {
  readonly servers: readonly string[];
  readonly views: readonly unknown[];
  readonly groupVersions: readonly FastGroupVersion[];
  readonly why: string;
}

/** True when `body` was computed from exactly these servers' views (same objects). */
export function fastBodyHolds(body: FastBody, snap: Snapshot): boolean {
  if (body.servers.length !== snap.servers.length) return false;
  for (let i = 0; i < snap.servers.length; i++) {
    const s = snap.servers[i] as ServerState;
    if (body.servers[i] !== s.name || body.views[i] !== s.view) return false;
  }
  return true;
}

export function fastBody(snap: Snapshot): FastBody {
  return runToEnd(fastBodySteps(snap));
}

/** fastBody as a sliced computation (util/core/sliced.ts): a walk over every resource pauses. */
export function* fastBodySteps(snap: Snapshot): Sliced<FastBody> {
  let n = 0;
  const servers = Object.freeze(snap.servers.map((s) => s.name));
  const views = Object.freeze(snap.servers.map((s) => s.view));
  // gvKey → resource → capability, kept only while every server lists the resource identically.
  const byGv = new Map<string, { group: string; version: string; resources: Map<string, ResourceCapability>; broken: boolean }>();
  for (const [gv, holders] of snap.groupVersions) {
    const slash = gv.indexOf('/');
    byGv.set(gv, {
      group: gv.slice(0, slash),
      version: gv.slice(slash + 1),
      resources: new Map(),
      broken: holders.size !== snap.servers.length,
    });
  }
  for (const [key, byServer] of snap.resources) {
    if (++n % STEP_EVERY === 0) yield;
    const last = key.lastIndexOf('/');
    const entry = byGv.get(key.slice(0, last));
    if (entry === undefined || entry.broken) continue;
    const first = byServer.get(snap.servers[0]?.name ?? '');
    if (byServer.size !== snap.servers.length || first === undefined) {
      entry.broken = true;
      continue;
    }
    for (const s of snap.servers) {
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
 * The table for a snapshot at `now`: the body's group/versions (fastBody, or one kept from an
 * earlier snapshot of the same views), when every server is ready and its view current for at
 * least marginMs more. Anything less: empty.
 */
export function compileFastPath(snap: Snapshot, opts: FastPathOptions, body?: FastBody): FastTable {
  const members = Object.freeze(snap.servers.map((s) => s.name));
  if (snap.servers.length === 0) return empty(snap.generation, members, 'no apiservers');
  const judgedAt = opts.now + opts.marginMs;
  for (const s of snap.servers) {
    const why = doubt(s, judgedAt, opts.staleAfterMs);
    if (why !== null) return empty(snap.generation, members, why);
  }
  // An apiserver identity no member matches, or one being verified, changes nothing here: the
  // ladder's default rung does not look at them (they turn would-be 404s into 503s), and Envoy's
  // pool holds the members only.
  const b = body !== undefined && fastBodyHolds(body, snap) ? body : fastBody(snap);
  let oldest = Number.POSITIVE_INFINITY;
  for (const s of snap.servers) oldest = Math.min(oldest, s.lastSuccessAt ?? Number.NEGATIVE_INFINITY);
  return Object.freeze({
    generation: snap.generation,
    members,
    groupVersions: b.groupVersions,
    validUntil: oldest + opts.staleAfterMs,
    why: b.why,
  });
}

const gvKeyOf = (gv: FastGroupVersion): string => gvKey(gv.group, gv.version);

const sameList = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Field by field (verbs and subresources are sorted when compiled): no serialisation per resource. */
function sameResource(a: FastResource, b: FastResource): boolean {
  if (a === b) return true;
  if (a.resource !== b.resource || a.namespaced !== b.namespaced || !sameList(a.verbs, b.verbs)) return false;
  return (
    a.subresources.length === b.subresources.length &&
    a.subresources.every((s, i) => s.name === b.subresources[i]?.name && sameList(s.verbs, b.subresources[i]?.verbs ?? []))
  );
}

function sameGroupVersions(a: readonly FastGroupVersion[], b: readonly FastGroupVersion[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as FastGroupVersion;
    const y = b[i] as FastGroupVersion;
    if (x.group !== y.group || x.version !== y.version || x.resources.length !== y.resources.length) return false;
    for (let j = 0; j < x.resources.length; j++)
      if (!sameResource(x.resources[j] as FastResource, y.resources[j] as FastResource)) return false;
  }
  return true;
}

/**
 * What both tables let Envoy decide alone, with b's generation and the earlier expiry: the table
 * to hold while switching from a to b, so that nothing either one sends to ext_proc goes fast.
 * Tables over different members share nothing.
 */
export function intersectFastTables(a: FastTable, b: FastTable): FastTable {
  if (!sameMembers(a, b)) return empty(b.generation, b.members, 'the members changed');
  // Both are sorted (group/versions by key, resources by name, as compiled): one merge walk.
  const groupVersions: FastGroupVersion[] = [];
  let i = 0;
  for (const gv of b.groupVersions) {
    const key = gvKey(gv.group, gv.version);
    while (i < a.groupVersions.length && gvKeyOf(a.groupVersions[i] as FastGroupVersion) < key) i++;
    const other = a.groupVersions[i];
    if (other === undefined || gvKeyOf(other) !== key) continue;
    if (other === gv) {
      groupVersions.push(gv);
      continue;
    }
    const resources: FastResource[] = [];
    let j = 0;
    for (const r of gv.resources) {
      while (j < other.resources.length && (other.resources[j] as FastResource).resource < r.resource) j++;
      const o = other.resources[j];
      if (o !== undefined && sameResource(o, r)) resources.push(r);
    }
    if (resources.length === gv.resources.length) groupVersions.push(gv);
    else if (resources.length > 0) groupVersions.push(Object.freeze({ ...gv, resources: Object.freeze(resources) }));
  }
  return Object.freeze({
    generation: b.generation,
    members: b.members,
    groupVersions: Object.freeze(groupVersions),
    validUntil: Math.min(a.validUntil, b.validUntil),
    why: b.why,
  });
}

/** True when every request `b` sends straight to the pool, `a` does too: going from `a` to `b` demotes nothing. */
export function fastTableCovers(a: FastTable, b: FastTable): boolean {
  if (b.groupVersions.length === 0) return true;
  if (a.groupVersions === b.groupVersions && sameMembers(a, b)) return true;
  const both = intersectFastTables(a, b);
  return fastResourceCount(both) === fastResourceCount(b);
}

export function fastResourceCount(t: FastTable): number {
  let n = 0;
  for (const gv of t.groupVersions) n += gv.resources.length;
  return n;
}

/** Same requests matched (generation and expiry aside): nothing to write. */
export function sameFastRequests(a: FastTable, b: FastTable): boolean {
  if (!sameMembers(a, b)) return false;
  return sameGroupVersions(a.groupVersions, b.groupVersions);
}

function sameMembers(a: FastTable, b: FastTable): boolean {
  return a.members.length === b.members.length && a.members.every((m, i) => m === b.members[i]);
}

/** The verb kube-apiserver gives a method on a shape, or undefined when the fast path never takes it. */
export function fastVerb(method: string, shape: FastShape): string | undefined {
  return VERB_BY_SHAPE[method]?.[shape];
}
