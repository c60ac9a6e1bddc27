// The peer-aggregated /apis document of a snapshot, built where snapshots are built (once per
// change of the healthy servers' views) and carried on the snapshot: serving it is a lookup.
// Pure (no clock, no I/O).
import type { PeerDiscoveryDocument, PeerDiscoveryResult, ServerState } from './types.js';
import { encodeItemsSteps, encodeResponseSteps, mergePeerDiscoverySteps } from './merge.js';
import { runToEnd, type Sliced } from '../../util/core/sliced.js';
import { compareGoStrings } from './relative-order.js';

/** What the merged document depends on: who is healthy and the very view objects they hold. */
function samePeerInputs(a: readonly ServerState[], b: readonly ServerState[]): boolean {
  return (
    a.length === b.length &&
    a.every(
      (s, i) =>
        s.name === b[i]?.name &&
        s.ready === b[i]?.ready &&
        s.draining === b[i]?.draining &&
        s.cordon === b[i]?.cordon &&
        s.view === b[i]?.view,
    )
  );
}

/**
 * The servers whose documents make up the merged /apis: every apiserver whose /readyz answered
 * 200 at the last probe (an unready one is left out, as kube-apiserver leaves out a peer whose
 * identity lease is gone). The union is refused rather than served partial when readiness is
 * not yet known for some server, or a ready server has no view yet or only a legacy one.
 * Freshness, which moves with the clock, is checked per request (see routing).
 */
export function peerDiscoveryParticipants(
  servers: readonly ServerState[],
): { readonly ok: true; readonly servers: readonly ServerState[] } | Extract<PeerDiscoveryResult, { ok: false }> {
  const unprobed = servers.filter((s) => s.ready === null).map((s) => s.name);
  if (unprobed.length > 0) return { ok: false, reason: 'not_synced', detail: `readiness not yet known: ${unprobed.join(', ')}` };
  // A draining member takes no new request, nor one an operator drained: its document is left out,
  // as an unready one's is. A cordoned one's is in: what only it serves is still routed to it.
  const ready = servers.filter((s) => s.ready === true && s.draining !== true && s.cordon !== 'drain');
  if (ready.length === 0) return { ok: false, reason: 'view_incomplete', detail: 'no apiserver is ready' };
  const noView = ready.filter((s) => s.view === null).map((s) => s.name);
  if (noView.length > 0) return { ok: false, reason: 'not_synced', detail: `no discovery view yet: ${noView.join(', ')}` };
  const legacy = ready.filter((s) => s.view?.apisDocument === undefined).map((s) => s.name);
  if (legacy.length > 0)
    return { ok: false, reason: 'view_incomplete', detail: `only legacy discovery (no aggregated /apis to merge): ${legacy.join(', ')}` };
  return { ok: true, servers: ready };
}

/** Merges the participants' documents into the cached form. Throws on a document Go would not decode. */
export function* buildPeerDiscoveryDocumentSteps(
  servers: readonly ServerState[],
  identityOf: (name: string) => string,
): Sliced<PeerDiscoveryDocument> {
  const ids = new Map(servers.map((s) => [identityOf(s.name), s.name] as const));
  const items = yield* mergePeerDiscoverySteps(servers.map((s) => ({ serverId: identityOf(s.name), document: s.view?.apisDocument })));
  const encoded = yield* encodeItemsSteps(items);
  const { etag, body } = yield* encodeResponseSteps(encoded);
  return Object.freeze({
    servers: Object.freeze([...ids].sort(([a], [b]) => compareGoStrings(a, b)).map(([, name]) => name)),
    body,
    etag,
    quotedEtag: `"${etag}"`,
    groups: items.length,
  });
}

/**
 * The merged /apis of these server states (config order), or why it is refused. `previous` is the
 * last snapshot's servers and result: when no server's readiness or view object changed (the
 * usual poll: 304s, only timestamps moved) its result is reused, so a merge runs once per change.
 */
export function* peerDiscoveryOfSteps(
  servers: readonly ServerState[],
  identityOf: (name: string) => string,
  previous?: { readonly servers: readonly ServerState[]; readonly result: PeerDiscoveryResult },
): Sliced<PeerDiscoveryResult> {
  if (previous && samePeerInputs(servers, previous.servers)) return previous.result;
  const p = peerDiscoveryParticipants(servers);
  if (!p.ok) return p;
  try {
    return { ok: true, document: yield* buildPeerDiscoveryDocumentSteps(p.servers, identityOf) };
  } catch (err) {
    return {
      ok: false,
      reason: 'view_incomplete',
      detail: `cannot merge the documents: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
}

export function peerDiscoveryOf(
  servers: readonly ServerState[],
  identityOf: (name: string) => string,
  previous?: { readonly servers: readonly ServerState[]; readonly result: PeerDiscoveryResult },
): PeerDiscoveryResult {
  return runToEnd(peerDiscoveryOfSteps(servers, identityOf, previous));
}
