// What changed between two snapshots, as the history on the admin endpoint records it: apiservers
// joining and leaving the members, readiness, draining, versions and views; and an operator's
// cordons. Pure; the time comes in.
import type { ServerState } from '../../discovery/core/types.js';
import type { CordonChange, CordonMode } from '../../cordon/core/cordons.js';

/** One transition. `kind` is a literal: the same word in the JSON and the CLI's table. */
export type HistoryEvent =
  | { readonly at: string; readonly kind: 'member_added'; readonly apiserver: string; readonly url: string }
  | { readonly at: string; readonly kind: 'member_removed'; readonly apiserver: string }
  | { readonly at: string; readonly kind: 'ready'; readonly apiserver: string }
  | { readonly at: string; readonly kind: 'not_ready'; readonly apiserver: string; readonly error: string | null }
  | { readonly at: string; readonly kind: 'draining'; readonly apiserver: string }
  | { readonly at: string; readonly kind: 'version'; readonly apiserver: string; readonly from: string | null; readonly to: string }
  | { readonly at: string; readonly kind: 'view_changed'; readonly apiserver: string }
  | {
      readonly at: string;
      readonly kind: 'cordoned' | 'uncordoned';
      readonly apiserver: string;
      /** The mode after (cordoned) or before (uncordoned). */
      readonly mode: CordonMode;
      readonly by: string;
      readonly reason: string;
    }
  | {
      readonly at: string;
      readonly kind: 'skew';
      readonly before: number;
      readonly after: number;
      /** "group/version/resource missing from a,b", at most a few (the rest counted in `after`). */
      readonly newlySkewed: readonly string[];
      readonly noLongerSkewed: readonly string[];
    };

export type HistoryKind = HistoryEvent['kind'];

/** Ready for routing: what status calls ready (a draining member is not). */
const up = (s: ServerState): boolean => s.ready === true && s.consecutiveFailures === 0;

/**
 * The transitions from `prev` to `next` (servers by name). The first call (prev null) records the
 * members as added and what is already known of them; a server whose readiness is still unknown
 * (never probed) records nothing for it.
 */
export function serverTransitions(prev: readonly ServerState[] | null, next: readonly ServerState[], atMs: number): HistoryEvent[] {
  const at = new Date(atMs).toISOString();
  const before = new Map((prev ?? []).map((s) => [s.name, s]));
  const out: HistoryEvent[] = [];
  for (const s of next) {
    const p = before.get(s.name);
    const apiserver = s.name;
    if (p === undefined) out.push({ at, kind: 'member_added', apiserver, url: s.url });
    if (s.gitVersion !== undefined && s.gitVersion !== p?.gitVersion)
      out.push({ at, kind: 'version', apiserver, from: p?.gitVersion ?? null, to: s.gitVersion });
    if (s.ready !== null && (p === undefined || p.ready === null || up(p) !== up(s)))
      out.push(up(s) ? { at, kind: 'ready', apiserver } : { at, kind: 'not_ready', apiserver, error: s.lastError });
    if (s.draining === true && p?.draining !== true) out.push({ at, kind: 'draining', apiserver });
    if (p !== undefined && p.view !== null && s.view !== null && s.view !== p.view) out.push({ at, kind: 'view_changed', apiserver });
  }
  const names = new Set(next.map((s) => s.name));
  for (const p of prev ?? []) if (!names.has(p.name)) out.push({ at, kind: 'member_removed', apiserver: p.name });
  return out;
}

/** An operator's cordon change as the history keeps it; null when it changed nothing. */
export function cordonTransition(c: CordonChange, atMs: number): HistoryEvent | null {
  const at = new Date(atMs).toISOString();
  if (c.after !== null && c.after !== c.before)
    return { at, kind: 'cordoned', apiserver: c.apiserver, mode: c.after, by: c.by, reason: c.reason };
  if (c.after === null && c.before !== null)
    return { at, kind: 'uncordoned', apiserver: c.apiserver, mode: c.before, by: c.by, reason: c.reason };
  return null;
}
