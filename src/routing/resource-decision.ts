// The ladder's last rungs: a request by its path alone (malformed, non-resource, resource), over
// the snapshot. RequestInfo × Snapshot × clock × rng → Decision, pure. The rungs are ordered so
// that skewgate only ever answers 404 when every apiserver's view is fresh and none can serve
// the request. The whole ladder, identity and merged /apis first, is decide() in ./decide.ts.
import type { RequestInfo, ResourceRequest } from '../k8s/request-info.js';
import { gvKey, gvrKey, type ResourceCapability, type Snapshot } from '../discovery/core/types.js';
import { pickAtRandom, type DecideOptions, type Decision } from './decision.js';
import { isCordoned, isFresh, isHealthy } from './freshness.js';
import { liveUnmatched } from '../membership/identity-leases.js';

const NO_CANDIDATES: readonly string[] = Object.freeze([]);

/** Verbs no discovery document lists, or that cannot be judged from it, match any listing. */
function verbMatches(verbs: ReadonlySet<string>, verb: ResourceRequest['verb']): boolean {
  return verb === '' || verb === 'proxy' || verbs.has(verb);
}

type Capability = 'capable' | 'verb_missing' | 'subresource_missing' | 'resource_missing';

function capabilityFor(cap: ResourceCapability | undefined, req: ResourceRequest): Capability {
  if (cap === undefined) return 'resource_missing';
  if (req.subresource === '') return verbMatches(cap.verbs, req.verb) ? 'capable' : 'verb_missing';
  const subVerbs = cap.subresources.get(req.subresource);
  if (subVerbs === undefined) return 'subresource_missing';
  return verbMatches(subVerbs, req.verb) ? 'capable' : 'verb_missing';
}

export function decideByPath(info: RequestInfo, snap: Snapshot, opts: DecideOptions): Decision {
  if (info.kind === 'invalid') {
    return { outcome: 'rejected', reason: 'malformed_path', problem: info.problem, candidates: NO_CANDIDATES };
  }
  if (info.kind === 'non-resource') return { outcome: 'passthrough', reason: 'non_resource', candidates: NO_CANDIDATES };
  // `/apis//v1/x` or `/api/v1//x`: the apiserver answers these itself (404); not ours to judge.
  if (info.version === '' || info.resource === '' || (info.apiPrefix === 'apis' && info.group === '')) {
    return { outcome: 'passthrough', reason: 'empty_path_segment', candidates: NO_CANDIDATES };
  }

  // Sort the apiservers by what their views can prove. Only a current view proves anything: a
  // server whose view could not be refreshed may have been restarted as another version, and
  // one that is back but not yet ready may already serve requests (kube-apiserver does).
  const servers = snap.servers;
  const byServer = snap.resources.get(gvrKey(info.group, info.version, info.resource));
  const known: string[] = []; // current view: serves this request
  const knownReady: string[] = [];
  const knownOpen: string[] = []; // … ready and not cordoned
  const unverified: string[] = []; // view missing or not current
  const unverifiedReady: string[] = [];
  const unverifiedOpen: string[] = [];
  const lastCapableReady: string[] = []; // … ready, and its last view (not current) served it
  const lastCapableOpen: string[] = [];
  let knownNot = 0; // current view: does not serve it
  let verbMissing = false;
  for (const s of servers) {
    const ready = isHealthy(s);
    const open = ready && !isCordoned(s);
    if (!isFresh(s, opts.now, opts.staleAfterMs)) {
      unverified.push(s.name);
      if (ready) unverifiedReady.push(s.name);
      if (open) unverifiedOpen.push(s.name);
      if (ready && s.view !== null && capabilityFor(byServer?.get(s.name), info) === 'capable') {
        lastCapableReady.push(s.name);
        if (open) lastCapableOpen.push(s.name);
      }
      continue;
    }
    const c = capabilityFor(byServer?.get(s.name), info);
    if (c === 'capable') {
      known.push(s.name);
      if (ready) knownReady.push(s.name);
      if (open) knownOpen.push(s.name);
    } else {
      knownNot++;
      if (c === 'verb_missing') verbMissing = true;
    }
  }
  const pick = (names: readonly string[]): string => pickAtRandom(names, opts.rng);

  if (knownReady.length > 0) {
    // Balancing over every apiserver is only right when every one of them is proven able (and
    // none is cordoned: a cordoned one gets only what no open one can serve).
    if (knownOpen.length === servers.length) return { outcome: 'default', reason: 'served_by_all', candidates: known };
    if (knownOpen.length > 0) return { outcome: 'routed', reason: 'served_by_subset', upstream: pick(knownOpen), candidates: known };
    return { outcome: 'routed', reason: 'served_by_cordoned', upstream: pick(knownReady), candidates: known };
  }
  // An apiserver skewgate cannot see (a live identity Lease that matches no member: a machine just
  // added at a new address, say) may serve it: absence is proven only when there is none.
  const unseen = liveUnmatched(snap.membership, opts.now);
  if (unverified.length === 0 && unseen.length > 0 && known.length === 0) {
    // Every member is known not to serve it (or lacks the verb): only the unseen one might.
    // Balancing would reach a member whose 404 would be false.
    return { outcome: 'unavailable', reason: 'unmatched_apiserver_identity', candidates: unseen.map((l) => l.name) };
  }
  if (unverified.length === 0) {
    // Every view is current and no ready apiserver serves it.
    if (known.length > 0) return { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: known };
    if (verbMissing) return { outcome: 'passthrough', reason: 'verb_not_listed', candidates: NO_CANDIDATES };
    if (!snap.groupVersions.has(gvKey(info.group, info.version))) {
      return { outcome: 'not_found', reason: 'group_version_not_served', candidates: NO_CANDIDATES };
    }
    if (info.subresource !== '' && byServer !== undefined && byServer.size > 0) {
      return { outcome: 'not_found', reason: 'subresource_not_served', candidates: NO_CANDIDATES };
    }
    return { outcome: 'not_found', reason: 'resource_not_served', candidates: NO_CANDIDATES };
  }
  if (knownNot === 0 && known.length === 0) {
    // Nothing is proven either way (skewgate starting, or every view out of date): balance.
    return {
      outcome: 'passthrough',
      reason: servers.some((s) => s.view === null) ? 'not_synced' : 'view_incomplete',
      candidates: NO_CANDIDATES,
    };
  }
  // Some apiservers are known NOT to serve it: never balance onto them (their 404 would be false).
  const candidates = [...known, ...unverified];
  if (unverifiedReady.length > 0) {
    // Aged evidence still ranks: one whose last view served it before one whose last view did not
    // (a view goes out of date on a busy machine too, not only when its apiserver is replaced);
    // that outranks a cordon, which keeps what nobody else is thought to serve.
    const among = [lastCapableOpen, lastCapableReady, unverifiedOpen, unverifiedReady].find((l) => l.length > 0) ?? unverifiedReady;
    return { outcome: 'routed', reason: 'unverified_candidate', upstream: pick(among), candidates };
  }
  return { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates };
}
