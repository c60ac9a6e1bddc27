// Verdicts over what a test recorded of the `kubernetes` Service while gateways publish it. Pure:
// records in, findings out (test/unit/lab-service-record.test.ts).
//  - the states a watch of the Endpoints or EndpointSlice went through, every one of them;
//  - when a dead gateway left them, against two orderings that no machine speed changes: not
//    while its Lease was live (the surviving gateway drops only an expired Lease), and no later
//    than the end of the survivor's first tick that began after the expiry (the survivor renews
//    its own Lease at the start of every tick, and ticks run one after the other).
import type { GatewayLease } from '../../src/kubernetes-service/core/publication.js';
import { publishedAddresses } from '../../src/kubernetes-service/core/publication.js';
import type { WatchedEvent } from './object-watch.js';

/** One state of the object: its addresses (ip:port, sorted), or why it had none. */
export type ObjectState = { readonly addresses: readonly string[] } | { readonly gone: string };

/**
 * The states a watch record shows, in order, a repeat of the previous one dropped (an update that
 * changed no address). BOOKMARKs are skipped; DELETED and ERROR are states of their own.
 */
export function stateSequence(events: readonly WatchedEvent[]): ObjectState[] {
  const out: ObjectState[] = [];
  let last = '';
  for (const e of events) {
    if (e.type === 'BOOKMARK') continue;
    const state: ObjectState =
      e.type === 'DELETED' || e.type === 'ERROR'
        ? { gone: `${e.type}${e.type === 'ERROR' ? `: ${JSON.stringify(e.object).slice(0, 120)}` : ''}` }
        : { addresses: publishedAddresses(e.object) ?? [] };
    const key = JSON.stringify(state);
    if (key !== last) out.push(state);
    last = key;
  }
  return out;
}

/** A state as text: the addresses joined, or "empty", or why it was gone. */
export function stateText(s: ObjectState): string {
  if ('gone' in s) return s.gone;
  return s.addresses.length === 0 ? 'empty' : s.addresses.join(',');
}

/** One round of the test's poll, in the order it was read: the gateway Leases, then both objects. */
export interface ServicePoll {
  /** When the Lease list's answer arrived (epoch ms, the gateways' clock: the same machine). */
  readonly leasesAt: number;
  readonly leases: readonly GatewayLease[];
  /** When the later of the two objects' answers arrived. */
  readonly objectsAt: number;
  readonly endpoints: readonly string[];
  readonly slice: readonly string[];
}

export interface DeadGatewayFindings {
  /** The dead gateway's Lease ran out then: its last renewal seen + its duration (null: never seen). */
  readonly expiresAt: number | null;
  /** Rounds whose objects were read back before the expiry: each must still list the dead gateway. */
  readonly beforeExpiry: number;
  readonly droppedEarly: readonly string[];
  /**
   * Rounds read after the survivor had renewed twice since the expiry (its tick that began after
   * the expiry had ended): none may list the dead gateway.
   */
  readonly settled: number;
  readonly listedLate: readonly string[];
}

/**
 * `dead` and `survivor` are Lease names, `address` the dead gateway's ip:port. A round counts as
 * settled once its Lease list shows a survivor renewal later than an earlier-seen survivor renewal
 * that was itself later than the expiry.
 */
export function deadGatewayFindings(polls: readonly ServicePoll[], dead: string, survivor: string, address: string): DeadGatewayFindings {
  let expiresAt: number | null = null;
  for (const p of polls)
    for (const l of p.leases)
      if (l.name === dead && l.renewTime !== null) expiresAt = Math.max(expiresAt ?? -Infinity, l.renewTime + l.durationMs);
  const droppedEarly: string[] = [];
  const listedLate: string[] = [];
  let beforeExpiry = 0;
  let settled = 0;
  let firstAfter: number | null = null;
  polls.forEach((p, i) => {
    const lists = p.endpoints.includes(address) && p.slice.includes(address);
    const where = `round ${i + 1}: endpoints ${p.endpoints.join(',') || 'empty'}, slice ${p.slice.join(',') || 'empty'}`;
    if (expiresAt !== null && p.objectsAt < expiresAt) {
      beforeExpiry++;
      if (!lists) droppedEarly.push(`${where}, ${expiresAt - p.objectsAt} ms before the expiry`);
    }
    const renewed = p.leases.find((l) => l.name === survivor)?.renewTime ?? null;
    if (expiresAt === null || renewed === null) return;
    if (firstAfter !== null && renewed > firstAfter) {
      settled++;
      if (p.endpoints.includes(address) || p.slice.includes(address)) listedLate.push(where);
    } else if (firstAfter === null && renewed > expiresAt) firstAfter = renewed;
  });
  return { expiresAt, beforeExpiry, droppedEarly, settled, listedLate };
}
