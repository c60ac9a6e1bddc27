// Which apiservers are members: the configured list (the seed) and what the live sources say,
// merged by address and identity; and the lifecycle each member goes through (docs/design.md,
// membership): probing (learnt, not yet verified: never routed to) → joining (verified; Envoy is
// given its cluster and routes, not yet the pool) → member → draining (left every source: no new
// requests, open ones may finish) → removed. Pure.
import { isIP } from 'node:net';
import type { ApiServerConfig, Config } from '../config/core/schema.js';
import { apiserverIdentity } from './apiserver-identity.js';
import type { MembershipSource } from '../config/core/schema.js';
import { candidatesOf, type Candidate, type SourceTable } from './sources.js';
import type { CordonMode } from '../cordon/core/cordons.js';

export type MemberRole = 'probing' | 'joining' | 'member' | 'draining';

/** Not yet a member: never in a snapshot, never routed to, its identity not matched. */
export function isCandidate(role: MemberRole): boolean {
  return role === 'probing' || role === 'joining';
}

/** What one member is reached with: an apiservers[] entry, configured or synthesised from the template. */
export type MemberSpec = ApiServerConfig;

export interface DesiredMember {
  readonly spec: MemberSpec;
  /** Configured in apiservers[] (a seed is a member from the start; a learnt one is probed first). */
  readonly seed: boolean;
  /** The sources that name it now ("config" for a seed no source contradicts). */
  readonly sources: readonly string[];
}

export interface MembershipInput {
  readonly seeds: readonly ApiServerConfig[];
  readonly candidates: readonly Candidate[];
  /** Sources are configured. */
  readonly enabled: boolean;
  /** Every configured source was listed at least once. */
  readonly synced: boolean;
  readonly template: Config['membership']['template'];
}

/** host:port of a URL (IPv6 without brackets). */
export function addressOf(url: string): string {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  return `${host}:${u.port === '' ? 443 : u.port}`;
}

/** The member name (Envoy cluster name, x-skewgate-upstream value) of a learnt address: a DNS label. */
export function learntName(host: string, port: number): string {
  return `learnt-${host.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${port}`;
}

function urlOf(host: string, port: number): string {
  return isIP(host) === 6 ? `https://[${host}]:${port}` : `https://${host}:${port}`;
}

/**
 * The members the sources and the seed call for now. A seed stays while the sources are off, not
 * yet listed, or name nothing at all (a control plane always has an apiserver: an empty answer
 * means a source that cannot see them, not that they are gone); otherwise it stays only while a
 * source names its address or its identity. A candidate already covered by a seed adds nothing.
 */
export function desiredMembers(input: MembershipInput): readonly DesiredMember[] {
  const byAddress = new Map<string, { host: string; port: number; hostname: string | null; sources: Set<string> }>();
  for (const c of input.candidates) {
    const key = `${c.host}:${c.port}`;
    const e = byAddress.get(key) ?? { host: c.host, port: c.port, hostname: null, sources: new Set<string>() };
    e.hostname ??= c.hostname;
    e.sources.add(c.source);
    byAddress.set(key, e);
  }
  const trustSeeds = !input.enabled || !input.synced || byAddress.size === 0;
  const out: DesiredMember[] = [];
  const covered = new Set<string>();
  for (const seed of input.seeds) {
    const address = addressOf(seed.url);
    const identity = apiserverIdentity(seed.hostname ?? seed.name);
    const sources = new Set<string>();
    for (const [key, e] of byAddress) {
      if (key === address || (e.hostname !== null && apiserverIdentity(e.hostname) === identity)) {
        covered.add(key);
        for (const s of e.sources) sources.add(s);
      }
    }
    if (sources.size > 0 || trustSeeds) out.push({ spec: seed, seed: true, sources: sources.size > 0 ? [...sources].sort() : ['config'] });
  }
  for (const [key, e] of byAddress) {
    if (covered.has(key)) continue;
    const spec = knownMemberSpec(
      { name: learntName(e.host, e.port), url: urlOf(e.host, e.port), ...(e.hostname !== null ? { hostname: e.hostname } : {}) },
      input.template,
    );
    out.push({ spec, seed: false, sources: [...e.sources].sort() });
  }
  return Object.freeze(out);
}

/** A member known from an earlier run (name, URL, hostname), reached with the template. */
export function knownMemberSpec(
  k: { readonly name: string; readonly url: string; readonly hostname?: string },
  template: Config['membership']['template'],
): MemberSpec {
  return Object.freeze({
    name: k.name,
    url: k.url,
    ...(k.hostname !== undefined ? { hostname: k.hostname } : {}),
    ...(template.caFile !== undefined ? { caFile: template.caFile } : {}),
    ...(template.serverName !== undefined ? { serverName: template.serverName } : {}),
    ...(template.credentials !== undefined ? { credentials: template.credentials } : {}),
  } as MemberSpec);
}

/** One apiserver skewgate polls, and where it stands in the membership. */
export interface MemberEntry {
  readonly spec: MemberSpec;
  readonly role: MemberRole;
  /** Configured in apiservers[]. */
  readonly seed: boolean;
  /** The sources naming it ("config" for a seed no source contradicts). */
  readonly sources: readonly string[];
  /** An operator's cordon (src/cordon/): out of Envoy's balanced pool; drained, out of its routes too. */
  readonly cordon?: CordonMode;
}

export type MembersListener = (members: readonly MemberEntry[]) => void;

/** What desiredMembers() needs of the sources: their candidates, and whether they are on and listed. */
export function membershipInput(
  tables: ReadonlyMap<MembershipSource, SourceTable>,
  seeds: MembershipInput['seeds'],
  template: MembershipInput['template'],
): MembershipInput {
  const all = [...tables.values()];
  return { seeds, candidates: candidatesOf(all), enabled: all.length > 0, synced: all.every((t) => t.synced), template };
}
