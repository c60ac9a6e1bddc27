// The peer-aggregated /apis document of a snapshot, built once per change of the healthy servers'
// views and kept: serving it is a lookup. Pure apart from the memo (no clock, no I/O).
import type { ServerState, Snapshot } from './types.js';
import { computeEtag, discoveryBody, encodeItems, mergePeerDiscovery } from './merge.js';
import { apiserverIdentity } from './apiserver-identity.js';
import { compareGoStrings } from './relative-order.js';

export interface PeerDiscoveryDocument {
  /** Config names of the merged servers, in merge (identity) order. */
  readonly servers: readonly string[];
  /** The JSON body, exactly as kube-apiserver writes it (trailing newline included). */
  readonly body: Buffer;
  /** Uppercase hex SHA-512, unquoted. */
  readonly etag: string;
  /** The ETag header value: the hash in double quotes. */
  readonly quotedEtag: string;
  readonly groups: number;
}

export type PeerDiscoveryResult =
  | { readonly ok: true; readonly document: PeerDiscoveryDocument }
  | { readonly ok: false; readonly reason: 'not_synced' | 'view_incomplete'; readonly detail: string };

export interface PeerDiscoveryOptions {
  /**
   * The identity (lease name) of a configured apiserver, which orders the merge. Default:
   * kube-apiserver's own derivation with the config name taken as the apiserver's hostname.
   */
  readonly identityOf?: (name: string) => string;
}

/** What the merged document depends on: who is healthy and the very view objects they hold. */
interface Key {
  readonly names: readonly string[];
  readonly ready: readonly (boolean | null)[];
  readonly views: readonly unknown[];
}

function keyOf(snap: Snapshot): Key {
  return { names: snap.servers.map((s) => s.name), ready: snap.servers.map((s) => s.ready), views: snap.servers.map((s) => s.view) };
}

function sameKey(a: Key, b: Key): boolean {
  const eq = <T>(x: readonly T[], y: readonly T[]): boolean => x.length === y.length && x.every((v, i) => v === y[i]);
  return eq(a.names, b.names) && eq(a.ready, b.ready) && eq(a.views, b.views);
}

/**
 * The servers whose documents make up the merged /apis: every apiserver whose /readyz answered
 * 200 at the last probe (an unready one is left out, as kube-apiserver leaves out a peer whose
 * identity lease is gone). The union is refused rather than served partial when readiness is
 * not yet known for some server, or a ready server has no view yet or only a legacy one.
 * Freshness, which moves with the clock, is checked per request (see routing).
 */
export function peerDiscoveryParticipants(servers: readonly ServerState[]): { readonly ok: true; readonly servers: readonly ServerState[] } | Extract<PeerDiscoveryResult, { ok: false }> {
  const unprobed = servers.filter((s) => s.ready === null).map((s) => s.name);
  if (unprobed.length > 0) return { ok: false, reason: 'not_synced', detail: `readiness not yet known: ${unprobed.join(', ')}` };
  const ready = servers.filter((s) => s.ready === true);
  if (ready.length === 0) return { ok: false, reason: 'view_incomplete', detail: 'no apiserver is ready' };
  const noView = ready.filter((s) => s.view === null).map((s) => s.name);
  if (noView.length > 0) return { ok: false, reason: 'not_synced', detail: `no discovery view yet: ${noView.join(', ')}` };
  const legacy = ready.filter((s) => s.view?.apisDocument === undefined).map((s) => s.name);
  if (legacy.length > 0) return { ok: false, reason: 'view_incomplete', detail: `only legacy discovery (no aggregated /apis to merge): ${legacy.join(', ')}` };
  return { ok: true, servers: ready };
}

/** Merges the participants' documents into the cached form. Throws on a document Go would not decode. */
export function buildPeerDiscoveryDocument(servers: readonly ServerState[], identityOf: (name: string) => string): PeerDiscoveryDocument {
  const ids = new Map(servers.map((s) => [identityOf(s.name), s.name] as const));
  const items = mergePeerDiscovery(servers.map((s) => ({ serverId: identityOf(s.name), document: s.view?.apisDocument })));
  const encoded = encodeItems(items);
  const etag = computeEtag(encoded);
  return Object.freeze({
    servers: Object.freeze([...ids].sort(([a], [b]) => compareGoStrings(a, b)).map(([, name]) => name)),
    body: Buffer.from(discoveryBody(encoded), 'utf8'),
    etag,
    quotedEtag: `"${etag}"`,
    groups: items.length,
  });
}

/**
 * Memoises the merged document by (server names, readiness, view objects): a new snapshot with
 * the same views (the usual 304 poll) reuses it; any change of a view or of readiness rebuilds.
 */
export class PeerDiscoveryCache {
  private readonly identityOf: (name: string) => string;
  private lastSnapshot: Snapshot | null = null;
  private lastKey: Key | null = null;
  private lastResult: PeerDiscoveryResult | null = null;
  private builds = 0;

  constructor(opts: PeerDiscoveryOptions = {}) {
    this.identityOf = opts.identityOf ?? apiserverIdentity;
  }

  /** How many times a document was merged (for tests and the benchmark). */
  get rebuilds(): number {
    return this.builds;
  }

  forSnapshot(snap: Snapshot): PeerDiscoveryResult {
    if (snap === this.lastSnapshot && this.lastResult !== null) return this.lastResult;
    const key = keyOf(snap);
    if (this.lastKey === null || this.lastResult === null || !sameKey(key, this.lastKey)) {
      this.lastResult = this.build(snap);
      this.lastKey = key;
    }
    this.lastSnapshot = snap;
    return this.lastResult;
  }

  private build(snap: Snapshot): PeerDiscoveryResult {
    const p = peerDiscoveryParticipants(snap.servers);
    if (!p.ok) return p;
    this.builds++;
    try {
      return { ok: true, document: buildPeerDiscoveryDocument(p.servers, this.identityOf) };
    } catch (err) {
      return { ok: false, reason: 'view_incomplete', detail: `cannot merge the documents: ${err instanceof Error ? err.message : String(err)}` };
    }
  }
}
