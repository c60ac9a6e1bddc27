// When skewgate asks V8 for its memory back (src/memory/reclaimer.ts): pure, over the sizes of the
// views a process holds. V8 returns a heap it grew only at a later full collection, and under a
// steady request rate that comes when the old generation reaches the limit the large view raised:
// minutes, or never. skewgate knows when it dropped a large view; V8 does not (docs/discovery.md,
// "bounds").

/** Entries (resources) a view set must have dropped, at least, for a collection to be worth it. */
export const RECLAIM_MIN_DROP = 10_000;
/**
 * The most entries still held when collecting: a forced collection is not incremental, its pause
 * follows what is live (24–33 ms with a typical view on the 2-core bench machine, bench (f)), and
 * must stay well within the event-loop bound of 100 ms. Larger: V8's own collections do it.
 */
export const RECLAIM_MAX_HELD = 20_000;

export interface ReclaimState {
  /** The most entries held since the last collection (or since start). */
  readonly highWater: number;
}

export type ReclaimDecision =
  /** Collect: the views shrank from `from` to `to` entries. */
  | { readonly reason: 'shrank'; readonly from: number; readonly to: number }
  /** Nothing to give back: no large drop since the last collection. */
  | { readonly reason: 'no-drop'; readonly from: number; readonly to: number }
  /** A large drop, but what is still held is too large for a bounded pause. */
  | { readonly reason: 'held-too-large'; readonly from: number; readonly to: number };

export const INITIAL_RECLAIM: ReclaimState = { highWater: 0 };

/**
 * What a new size means: collect when the views hold at most half of their high point since the
 * last collection, at least RECLAIM_MIN_DROP fewer, and at most RECLAIM_MAX_HELD. The high point
 * is kept until `collected` resets it.
 */
export function reclaimDecision(state: ReclaimState, size: number): { state: ReclaimState; decision: ReclaimDecision } {
  const highWater = Math.max(state.highWater, size);
  const span = { from: highWater, to: size };
  const next = { highWater };
  if (highWater - size < RECLAIM_MIN_DROP || size * 2 > highWater) return { state: next, decision: { reason: 'no-drop', ...span } };
  if (size > RECLAIM_MAX_HELD) return { state: next, decision: { reason: 'held-too-large', ...span } };
  return { state: next, decision: { reason: 'shrank', ...span } };
}

/** After a collection: the high point starts again from what is held now. */
export function collected(size: number): ReclaimState {
  return { highWater: size };
}

/** Entries a snapshot's views hold: their resources, every apiserver's counted. */
export function heldEntries(servers: readonly { readonly view: { readonly resources: { readonly size: number } } | null }[]): number {
  let n = 0;
  for (const s of servers) n += s.view?.resources.size ?? 0;
  return n;
}
