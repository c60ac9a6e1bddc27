// The immutable data that discovery produces and routing reads. No I/O, no mutation after build.
import type { ErrorCode, FailureKind } from '../../errors/catalog.js';
import type { Membership } from '../../membership/identity-leases.js';
import type { CordonMode } from '../../cordon/core/cordons.js';

/** What one apiserver says it can do with one resource (group/version/resource). */
export interface ResourceCapability {
  readonly verbs: ReadonlySet<string>;
  /** subresource name → its verbs */
  readonly subresources: ReadonlyMap<string, ReadonlySet<string>>;
  readonly namespaced: boolean;
}

/** One apiserver's parsed discovery: every resource it serves, keyed by gvrKey(). */
export interface ServerView {
  /** How the view was obtained: aggregated discovery v2, or the legacy per-group-version documents. */
  readonly source: 'aggregated' | 'legacy';
  readonly resources: ReadonlyMap<string, ResourceCapability>;
  /** gvKey() of every group/version served, including ones with no resources. */
  readonly groupVersions: ReadonlySet<string>;
  /**
   * The server's own aggregated /apis document (profile=nopeer), parsed JSON, kept for the
   * peer-aggregated merge. Absent for legacy servers.
   */
  readonly apisDocument?: unknown;
  /**
   * The server's OpenAPI v3 index (GET /openapi/v3): document path ("apis/apps/v1") → the hash its
   * serverRelativeURL names (uppercase hex SHA-512 of the JSON document). Absent when the server
   * serves none or it could not be read yet.
   */
  readonly openapiV3?: ReadonlyMap<string, string>;
}

/** Everything skewgate knows about one apiserver at one moment. */
export interface ServerState {
  /** Config name, also the Envoy cluster name. */
  readonly name: string;
  readonly url: string;
  /** The last good view; kept across failed fetches (docs/design.md, invariant 5). */
  readonly view: ServerView | null;
  /** Epoch ms of the last successful discovery fetch (a 304 counts). */
  readonly lastSuccessAt: number | null;
  readonly consecutiveFailures: number;
  readonly lastError: string | null;
  /** The last failure's code (src/errors/catalog.ts) and kind, while failing; absent otherwise. */
  readonly lastErrorCode?: ErrorCode;
  readonly lastErrorKind?: FailureKind;
  /** /readyz answered 200 at the last probe; null until probed. */
  readonly ready: boolean | null;
  /** The gitVersion its /version last answered (absent until read; kept when a read fails). */
  readonly gitVersion?: string;
  /** Epoch ms of that read. */
  readonly versionReadAt?: number;
  /**
   * The apiserver left every membership source: no new request goes to it (it is not healthy for
   * routing, nor merged into /apis), but its current view still counts (docs/design.md, membership).
   */
  readonly draining?: true;
  /**
   * An operator's cordon (src/cordon/): `cordon`, it gets only what no other member can serve;
   * `drain`, nothing new (not healthy for routing, nor merged into /apis). Out of the balanced pool either way.
   */
  readonly cordon?: CordonMode;
}

/** What routing needs to know about one resource across the servers that serve it. */
export type ResourceServers = ReadonlyMap<string, ResourceCapability>;

/** The merged, immutable view that every routing decision reads. Replaced, never changed. */
export interface Snapshot {
  /**
   * Increases by one with every swap that changes what routing can tell (core/snapshot.ts,
   * routingInputsChanged); a swap that only refreshed a view's time keeps it. In logs and spans.
   */
  readonly generation: number;
  /** Servers in config order. */
  readonly servers: readonly ServerState[];
  /** gvrKey → server name → capability. */
  readonly resources: ReadonlyMap<string, ResourceServers>;
  /** gvKey → names of the servers that serve that group/version. */
  readonly groupVersions: ReadonlyMap<string, ReadonlySet<string>>;
  /**
   * The peer-aggregated /apis of the ready servers (kube-apiserver's merge, same body and ETag),
   * or why it is refused; built with the snapshot, so that answering /apis is a lookup.
   * Freshness, which moves with the clock, is judged per request (routing).
   */
  readonly peerDiscovery: PeerDiscoveryResult;
  /**
   * Whether the member list is complete: the live apiserver identities (kube-system identity
   * Leases) that match no configured apiserver. While one lives, no absence is proven.
   */
  readonly membership: Membership;
  /**
   * Which server holds which discovery-like documents (legacy discovery, OpenAPI) whole: built
   * with the snapshot from the views alone, so that routing a document is a lookup.
   */
  readonly documents: DocumentIndex;
}

/** The merged /apis document, as served at the edge. */
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

export function gvKey(group: string, version: string): string {
  return `${group}/${version}`;
}

export function gvrKey(group: string, version: string, resource: string): string {
  return `${group}/${version}/${resource}`;
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

/** Same OpenAPI v3 index: the same paths with the same hashes (both absent counts as the same). */
export function sameOpenApiIndex(a: ReadonlyMap<string, string> | undefined, b: ReadonlyMap<string, string> | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.size !== b.size) return false;
  for (const [path, hash] of a) if (b.get(path) !== hash) return false;
  return true;
}
