// How two views of one apiserver compare: the same routing content (the fetcher keeps the old
// view object when nothing changed, so that unchanged rounds rebuild nothing), and what changed
// between two (the log line of a view change). Sliced: a walk over every resource pauses. Pure.
import { runToEnd, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';
import { sameOpenApiIndex, type ResourceCapability, type ServerView } from './types.js';

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const v of a) if (!b.has(v)) return false;
  return true;
}

export function sameCapability(a: ResourceCapability, b: ResourceCapability): boolean {
  if (a === b) return true;
  if (a.namespaced !== b.namespaced || !sameSet(a.verbs, b.verbs) || a.subresources.size !== b.subresources.size) return false;
  for (const [name, verbs] of a.subresources) {
    const other = b.subresources.get(name);
    if (!other || !sameSet(verbs, other)) return false;
  }
  return true;
}

/**
 * Same routing content (source, group/versions, resources and their capabilities, the OpenAPI v3
 * index). The kept /apis document is not compared here; the client compares response bodies for that.
 */
export function* sameViewSteps(a: ServerView, b: ServerView): Sliced<boolean> {
  if (a === b) return true;
  if (!sameOpenApiIndex(a.openapiV3, b.openapiV3)) return false;
  if (a.source !== b.source || !sameSet(a.groupVersions, b.groupVersions) || a.resources.size !== b.resources.size) return false;
  let n = 0;
  for (const [key, cap] of a.resources) {
    const other = b.resources.get(key);
    if (!other || !sameCapability(cap, other)) return false;
    if (++n % STEP_EVERY === 0) yield;
  }
  return true;
}

export function sameView(a: ServerView, b: ServerView): boolean {
  return runToEnd(sameViewSteps(a, b));
}

export interface ViewDiff {
  readonly added: readonly string[];
  readonly removed: readonly string[];
  readonly changed: readonly string[];
}

/** Resource keys added, removed and changed from one view to the next (for change logs). */
export function* diffViewsSteps(before: ServerView | null, after: ServerView): Sliced<ViewDiff> {
  const added: string[] = [];
  const removed: string[] = [];
  const changed: string[] = [];
  let n = 0;
  for (const [key, cap] of after.resources) {
    const old = before?.resources.get(key);
    if (!old) added.push(key);
    else if (!sameCapability(old, cap)) changed.push(key);
    if (++n % STEP_EVERY === 0) yield;
  }
  if (before)
    for (const key of before.resources.keys()) {
      if (!after.resources.has(key)) removed.push(key);
      if (++n % STEP_EVERY === 0) yield;
    }
  return { added, removed, changed };
}

export function diffViews(before: ServerView | null, after: ServerView): ViewDiff {
  return runToEnd(diffViewsSteps(before, after));
}
