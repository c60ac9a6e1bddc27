// What changing from one fast-path table to another allows (docs/design.md, "The fast path"): the
// table both allow, with the pool both share, to hold while switching; whether one table's routes
// and pool are within another's; whether two send the same requests to the same pool. Pure.
import { gvKey } from '../discovery/core/types.js';
import { emptyFastTable, type FastGroupVersion, type FastResource, type FastTable } from './fast-path.js';

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
 * What both tables let Envoy decide alone, sent to the members both pools hold, with b's
 * generation and the earlier expiry: the table to hold while switching from a to b, so that
 * nothing either one sends to ext_proc goes fast, and nothing goes to an apiserver either one
 * leaves out. No shared member: nothing is fast.
 */
export function intersectFastTables(a: FastTable, b: FastTable): FastTable {
  const members = Object.freeze(b.members.filter((m) => a.members.includes(m)));
  if (members.length === 0) return emptyFastTable(b.generation, 'the fast pool changes');
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
    members: sameList(members, b.members) ? b.members : members,
    servesAll: a.servesAll && b.servesAll && sameMembers(a, b),
    groupVersions: Object.freeze(groupVersions),
    validUntil: Math.min(a.validUntil, b.validUntil),
    why: b.why,
  });
}

/**
 * True when every request `b` sends straight to its pool, `a` sends too, and b's pool is within
 * a's: going from `a` to `b` demotes nothing and sends nothing to an apiserver `a` leaves out.
 */
export function fastTableCovers(a: FastTable, b: FastTable): boolean {
  if (b.groupVersions.length === 0) return true;
  return b.members.every((m) => a.members.includes(m)) && fastClaimsCover(a, b);
}

/** Every request b's routes match, a's match too, and alike (whatever the pools). */
export function fastClaimsCover(a: FastTable, b: FastTable): boolean {
  if (b.groupVersions.length === 0 || a.groupVersions === b.groupVersions) return true;
  const both = intersectFastTables({ ...a, members: b.members }, b);
  return fastResourceCount(both) === fastResourceCount(b);
}

export function fastResourceCount(t: FastTable): number {
  let n = 0;
  for (const gv of t.groupVersions) n += gv.resources.length;
  return n;
}

/** Same requests matched, sent to the same pool (generation and expiry aside): nothing to write. */
export function sameFastRequests(a: FastTable, b: FastTable): boolean {
  if (!sameMembers(a, b) || a.servesAll !== b.servesAll) return false;
  return sameGroupVersions(a.groupVersions, b.groupVersions);
}

function sameMembers(a: FastTable, b: FastTable): boolean {
  return a.members.length === b.members.length && a.members.every((m, i) => m === b.members[i]);
}
