// Pure: merges every server's view into the immutable Snapshot that routing reads, the
// peer-aggregated /apis document and the index of whole documents included.
import type { ResourceCapability, ServerState, Snapshot } from './types.js';
import { apiserverIdentity } from '../../membership/apiserver-identity.js';
import { buildDocumentIndexSteps } from './document-index.js';
import { mapBuilder, setBuilder, type MapBuilder, type SetBuilder } from './freeze.js';
import { NO_MEMBERSHIP, sameMembership, type Membership } from '../../membership/identity-leases.js';
import { peerDiscoveryOfSteps } from './peer-discovery.js';
import { runToEnd, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';

export interface SnapshotOptions {
  /**
   * The identity (lease name) of a configured apiserver, which orders the /apis merge. Default:
   * kube-apiserver's own derivation with the config name taken as the apiserver's hostname. The
   * same function for every snapshot of one service (a reused merge assumes it).
   */
  readonly identityOf?: (name: string) => string;
  /** The identities matching no configured apiserver (identity-leases.ts); default: not known. */
  readonly membership?: Membership;
}

function freezeState(s: ServerState): ServerState {
  return Object.isFrozen(s) ? s : Object.freeze({ ...s });
}

/** True when both lists hold the same servers, in the same order, with the very same view objects. */
function sameViews(a: readonly ServerState[], b: readonly ServerState[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((s, i) => s.name === b[i]?.name && s.view === b[i]?.view);
}

/**
 * Builds generation `generation` from the servers' states (config order). When no server's
 * view object changed since `previous` (the usual poll: 304s, only timestamps or readiness
 * moved), the merged indexes of `previous` are reused as they are.
 */
export function* buildSnapshotSteps(
  servers: readonly ServerState[],
  generation: number,
  previous?: Snapshot,
  opts: SnapshotOptions = {},
): Sliced<Snapshot> {
  const states = Object.freeze(servers.map(freezeState));
  const membership = opts.membership ?? NO_MEMBERSHIP;
  const peerDiscovery = yield* peerDiscoveryOfSteps(
    states,
    opts.identityOf ?? apiserverIdentity,
    previous && { servers: previous.servers, result: previous.peerDiscovery },
  );
  if (previous && sameViews(states, previous.servers)) {
    return Object.freeze({
      generation,
      servers: states,
      resources: previous.resources,
      groupVersions: previous.groupVersions,
      peerDiscovery,
      membership,
      documents: previous.documents,
    });
  }
  // Built in place and sealed (no copies): a large cluster has tens of thousands of keys.
  const resources = mapBuilder<string, MapBuilder<string, ResourceCapability>>();
  const groupVersions = mapBuilder<string, SetBuilder<string>>();
  let n = 0;
  for (const s of states) {
    if (!s.view) continue;
    for (const [key, cap] of s.view.resources) {
      let byServer = resources.get(key);
      if (!byServer) resources.set(key, (byServer = mapBuilder()));
      byServer.set(s.name, cap);
      if (++n % STEP_EVERY === 0) yield;
    }
    for (const gv of s.view.groupVersions) {
      let names = groupVersions.get(gv);
      if (!names) groupVersions.set(gv, (names = setBuilder()));
      names.add(s.name);
    }
  }
  const sealedResources = yield* sealAll(resources);
  const sealedGroupVersions = yield* sealAll(groupVersions);
  return Object.freeze({
    generation,
    servers: states,
    resources: sealedResources,
    groupVersions: sealedGroupVersions,
    peerDiscovery,
    membership,
    documents: yield* buildDocumentIndexSteps(states),
  });
}

/** Seals every inner builder, then the outer one: values keep their identity, nothing is copied. */
function* sealAll<K, V extends { seal(): unknown }>(outer: MapBuilder<K, V>): Sliced<ReadonlyMap<K, SealedOf<V>>> {
  let n = 0;
  for (const inner of outer.values()) {
    inner.seal();
    if (++n % STEP_EVERY === 0) yield;
  }
  // The same objects, sealed: what the type now says of them.
  return outer.seal() as unknown as ReadonlyMap<K, SealedOf<V>>;
}

type SealedOf<V> = V extends { seal(): infer S } ? S : never;

export function buildSnapshot(
  servers: readonly ServerState[],
  generation: number,
  previous?: Snapshot,
  opts: SnapshotOptions = {},
): Snapshot {
  return runToEnd(buildSnapshotSteps(servers, generation, previous, opts));
}

/** The snapshot before any fetch: every configured server, no view. */
/** A configured apiserver before its first discovery round: no view, readiness not probed. */
export function unprobedState(s: { readonly name: string; readonly url: string }): ServerState {
  return Object.freeze({ name: s.name, url: s.url, view: null, lastSuccessAt: null, consecutiveFailures: 0, lastError: null, ready: null });
}

export function initialSnapshot(servers: readonly { readonly name: string; readonly url: string }[], opts: SnapshotOptions = {}): Snapshot {
  return buildSnapshot(servers.map(unprobedState), 0, undefined, opts);
}

/**
 * Whether a snapshot built from these states and this membership would differ from `prev` in
 * anything but a view's time: a view (object), readiness, failures, a version, draining, a cordon,
 * the members or the membership. The generation moves only when this holds: a round that only
 * refreshed a view's age is the same generation, so that "the generation moved on" means
 * something changed (docs/design.md, "Snapshots").
 */
export function routingInputsChanged(prev: Snapshot, servers: readonly ServerState[], membership: Membership | undefined): boolean {
  if (!sameMembership(prev.membership, membership ?? NO_MEMBERSHIP)) return true;
  if (prev.servers.length !== servers.length) return true;
  return servers.some((s, i) => {
    const p = prev.servers[i];
    return (
      p === undefined ||
      p.name !== s.name ||
      p.url !== s.url ||
      p.view !== s.view ||
      p.ready !== s.ready ||
      p.consecutiveFailures !== s.consecutiveFailures ||
      p.lastError !== s.lastError ||
      p.gitVersion !== s.gitVersion ||
      p.draining !== s.draining ||
      p.cordon !== s.cordon ||
      // A view that had never been fetched, fetched: freshness can prove something now.
      (p.lastSuccessAt === null) !== (s.lastSuccessAt === null)
    );
  });
}
