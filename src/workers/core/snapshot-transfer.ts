// Pure: a published Snapshot as messages for the ext_proc worker processes, and back.
// Structured clone copies a whole object graph each time, but a snapshot changes mostly in small
// things (timestamps, readiness) while its large parts (views, merged indexes, the /apis body)
// stay the very same objects round after round. So each large part is sent once under an id and
// named by that id afterwards; the worker keeps the parts the latest message names, and nothing
// else. The worker's snapshot is the main process's, copied: no second build, no second
// discovery load on the apiservers.
import type { DocumentIndex } from '../../discovery/core/types.js';
import type { Membership } from '../../membership/identity-leases.js';
import type { PeerDiscoveryResult, ResourceServers, ServerState, ServerView, Snapshot } from '../../discovery/core/types.js';

/** A large part: its value when the receiver has not seen this id yet. */
export interface PartRef<T> {
  readonly id: number;
  readonly value?: T;
}

export interface TransferredState extends Omit<ServerState, 'view'> {
  readonly view: PartRef<ServerView> | null;
}

/** One snapshot as posted to a worker (structured-cloneable: Maps, Sets and typed arrays only). */
export interface SnapshotMessage {
  readonly generation: number;
  readonly servers: readonly TransferredState[];
  readonly resources: PartRef<ReadonlyMap<string, ResourceServers>>;
  readonly groupVersions: PartRef<ReadonlyMap<string, ReadonlySet<string>>>;
  readonly peerDiscovery: PartRef<PeerDiscoveryResult>;
  readonly documents: PartRef<DocumentIndex>;
  readonly membership: Membership;
}

/**
 * The sender's side, one per receiver: which parts that receiver holds. A receiver that restarts
 * gets a new encoder (it holds nothing).
 */
export class SnapshotEncoder {
  private readonly ids = new WeakMap<object, number>();
  private next = 1;

  encode(snap: Snapshot): SnapshotMessage {
    return {
      generation: snap.generation,
      servers: snap.servers.map((s) => ({ ...s, view: s.view === null ? null : this.ref(s.view) })),
      resources: this.ref(snap.resources),
      groupVersions: this.ref(snap.groupVersions),
      peerDiscovery: this.ref(snap.peerDiscovery),
      documents: this.ref(snap.documents),
      membership: snap.membership,
    };
  }

  private ref<T extends object>(part: T): PartRef<T> {
    const known = this.ids.get(part);
    if (known !== undefined) return { id: known };
    const id = this.next++;
    this.ids.set(part, id);
    return { id, value: part };
  }
}

export class SnapshotTransferError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotTransferError';
  }
}

/** The receiver's side: the parts the last message named, by id. */
export class SnapshotDecoder {
  private parts = new Map<number, unknown>();

  /** Throws SnapshotTransferError when a message names a part never sent (a sender/receiver mismatch). */
  decode(msg: SnapshotMessage): Snapshot {
    const kept = new Map<number, unknown>();
    const take = <T>(ref: PartRef<T>, what: string): T => {
      const value = ref.value !== undefined ? ref.value : (kept.get(ref.id) ?? this.parts.get(ref.id));
      if (value === undefined) throw new SnapshotTransferError(`snapshot ${msg.generation}: ${what} part ${ref.id} was never sent`);
      kept.set(ref.id, value);
      return value as T;
    };
    const servers = msg.servers.map((s) =>
      Object.freeze({ ...s, view: s.view === null ? null : take(s.view, `${s.name}'s view`) }),
    ) as readonly ServerState[];
    const peerDiscovery = take(msg.peerDiscovery, 'peer discovery');
    const snap: Snapshot = Object.freeze({
      generation: msg.generation,
      servers: Object.freeze(servers),
      resources: take(msg.resources, 'resources'),
      groupVersions: take(msg.groupVersions, 'group/versions'),
      peerDiscovery: msg.peerDiscovery.value !== undefined ? asBuffers(peerDiscovery) : peerDiscovery,
      documents: take(msg.documents, 'documents'),
      membership: msg.membership,
    });
    if (msg.peerDiscovery.value !== undefined) kept.set(msg.peerDiscovery.id, snap.peerDiscovery);
    // Parts no longer named are dropped: the worker holds one snapshot's worth, as the main process.
    this.parts = kept;
    return snap;
  }
}

/** Structured clone turns a Buffer into a plain Uint8Array: the /apis body is sent as a Buffer again. */
function asBuffers(r: PeerDiscoveryResult): PeerDiscoveryResult {
  if (!r.ok || Buffer.isBuffer(r.document.body)) return r;
  const body = r.document.body as Uint8Array;
  return Object.freeze({
    ok: true,
    document: Object.freeze({ ...r.document, body: Buffer.from(body.buffer, body.byteOffset, body.byteLength) }),
  });
}
