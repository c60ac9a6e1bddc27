// Who used which skewed resource lately, from skewgate's own decisions: for each group/version/
// resource not every apiserver serves, the clients (user, user agent) that asked for it, how often
// and when last. What `skew --if-removed` and the gate's removal check read: an apiserver may leave
// only when nothing it alone serves is still in use. Only skewed requests are recorded (a resource
// every member serves cannot stop being served when one leaves), and memory is bounded: at most
// MAX_RESOURCES resources and MAX_CLIENTS clients each, the least recently seen dropped first.
// Pure apart from the table's own state; the clock comes in.
import { AUTHORIZATION_HEADER } from '../../constants.js';
import { gvrKey } from '../../discovery/core/types.js';
import type { RoutingResult } from '../../routing/router.js';

export const MAX_RESOURCES = 512;
export const MAX_CLIENTS = 32;
/** Longest user and user agent kept. */
const TEXT_MAX = 160;

/** One request's usage, as a decision (or a worker's tally) reports it. */
export interface UsageSample {
  /** group/version/resource (gvrKey), "" group for the core group. */
  readonly resource: string;
  readonly user: string;
  readonly userAgent: string;
}

export interface ClientUsage {
  readonly user: string;
  readonly userAgent: string;
  readonly count: number;
  /** Epoch ms. */
  readonly lastSeen: number;
}

interface Mutable {
  user: string;
  userAgent: string;
  count: number;
  lastSeen: number;
}

export class UsageTable {
  /** resource → client key → usage; Map order is least recently seen first. */
  private readonly byResource = new Map<string, Map<string, Mutable>>();
  private droppedClients = 0;

  record(now: number, s: UsageSample): void {
    let clients = this.byResource.get(s.resource);
    if (clients === undefined) {
      if (this.byResource.size >= MAX_RESOURCES) {
        const oldest = this.byResource.keys().next().value as string;
        this.droppedClients += this.byResource.get(oldest)?.size ?? 0;
        this.byResource.delete(oldest);
      }
      clients = new Map();
    } else this.byResource.delete(s.resource);
    this.byResource.set(s.resource, clients);
    const key = `${s.user}\u0000${s.userAgent}`;
    const c = clients.get(key);
    if (c !== undefined) {
      clients.delete(key);
      c.count++;
      c.lastSeen = now;
      clients.set(key, c);
      return;
    }
    if (clients.size >= MAX_CLIENTS) {
      clients.delete(clients.keys().next().value as string);
      this.droppedClients++;
    }
    clients.set(key, { user: s.user, userAgent: s.userAgent, count: 1, lastSeen: now });
  }

  /** The clients of `resource` seen since `since`, most recent first. */
  usersOf(resource: string, since: number): readonly ClientUsage[] {
    const clients = this.byResource.get(resource);
    if (clients === undefined) return [];
    return [...clients.values()]
      .filter((c) => c.lastSeen >= since)
      .reverse()
      .map((c) => ({ ...c }));
  }

  /** Clients forgotten to keep the bounds (a count of what the answers may be missing). */
  dropped(): number {
    return this.droppedClients;
  }
}

/**
 * Who a request is, as far as skewgate can tell without an apiserver: the user its client
 * certificate states; else a service account token's subject, read from the token unverified (it
 * names who, it proves nothing: labelled as such); else that it carries a token, or nothing.
 */
export function requesterOf(certificateUser: string | null, authorization: string | undefined): string {
  if (certificateUser !== null) return clip(certificateUser);
  if (authorization === undefined || authorization === '') return 'anonymous';
  const m = /^bearer\s+(\S+)$/i.exec(authorization);
  if (m === null) return 'unknown credentials';
  const sub = jwtSubject(m[1] as string);
  return sub === null ? 'a bearer token' : `${clip(sub)} (token, unverified)`;
}

function jwtSubject(token: string): string | null {
  const parts = token.split('.');
  if (parts.length !== 3 || (parts[1] as string).length > 8192) return null;
  try {
    const claims = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString('utf8')) as { sub?: unknown };
    return typeof claims.sub === 'string' && claims.sub !== '' ? claims.sub : null;
  } catch {
    return null;
  }
}

export function clip(text: string): string {
  return text.length <= TEXT_MAX ? text : `${text.slice(0, TEXT_MAX - 1)}…`;
}

/**
 * The usage a decision reports, or null: only a resource request sent to some apiservers and not
 * others (routed, or 503 because only unready ones serve it) — a resource every member serves
 * stays served when one leaves.
 */
export function usageSampleOf(result: RoutingResult, headers: ReadonlyMap<string, string>): UsageSample | null {
  const { info, decision } = result;
  if (info.kind !== 'resource' || (decision.outcome !== 'routed' && decision.outcome !== 'unavailable')) return null;
  const user = requesterOf(result.identity.kind === 'stated' ? result.identity.identity.user : null, headers.get(AUTHORIZATION_HEADER));
  return { resource: gvrKey(info.group, info.version, info.resource), user, userAgent: clip(headers.get('user-agent') ?? '') };
}
