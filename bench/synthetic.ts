// A synthetic but realistically shaped control plane for the routing benchmarks: three apiservers
// with about 5,000 resources each (the core group plus ~250 API groups of ~20 resources), the
// skew of a rolling upgrade between them, and a mix of ~2,000 request paths of the kinds clients
// send. Deterministic: the same seed gives the same data, so runs compare.
import { frozenMap, frozenSet } from '../src/discovery/core/freeze.js';
import { buildSnapshot } from '../src/discovery/core/snapshot.js';
import { gvKey, gvrKey, type ResourceCapability, type ServerState, type ServerView, type Snapshot } from '../src/discovery/core/types.js';

/** mulberry32: small, fast, good enough to shuffle test data reproducibly. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface SynthResource {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly namespaced: boolean;
  readonly verbs: readonly string[];
  readonly subresources: readonly (readonly [string, readonly string[]])[];
}

const ALL_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'] as const;
const NO_COLLECTION = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] as const;
const CREATE_ONLY = ['create'] as const;
const READ_ONLY = ['get', 'list', 'watch'] as const;
const STATUS = ['status', ['get', 'patch', 'update']] as const;
const SCALE = ['scale', ['get', 'patch', 'update']] as const;

type Sub = readonly [string, readonly string[]];
const PROXY: Sub = ['proxy', ['create', 'delete', 'get', 'patch', 'update']];

function core(resource: string, namespaced: boolean, verbs: readonly string[], subresources: readonly Sub[] = []): SynthResource {
  return { group: '', version: 'v1', resource, namespaced, verbs, subresources };
}

const CORE: readonly SynthResource[] = [
  core('pods', true, ALL_VERBS, [
    STATUS,
    ['log', ['get']],
    ['exec', ['create', 'get']],
    ['eviction', ['create']],
    ['binding', ['create']],
    ['ephemeralcontainers', ['get', 'patch', 'update']],
    ['portforward', ['create', 'get']],
    PROXY,
  ]),
  core('services', true, NO_COLLECTION, [STATUS, PROXY]),
  core('namespaces', false, NO_COLLECTION, [STATUS, ['finalize', ['update']]]),
  core('nodes', false, ALL_VERBS, [STATUS, PROXY]),
  core('replicationcontrollers', true, ALL_VERBS, [STATUS, SCALE]),
  core('persistentvolumes', false, ALL_VERBS, [STATUS]),
  core('persistentvolumeclaims', true, ALL_VERBS, [STATUS]),
  core('resourcequotas', true, ALL_VERBS, [STATUS]),
  core('serviceaccounts', true, ALL_VERBS, [['token', ['create']]]),
  core('bindings', true, CREATE_ONLY),
  core('componentstatuses', false, ['get', 'list']),
  ...['configmaps', 'secrets', 'endpoints', 'events', 'limitranges', 'podtemplates'].map((r) => core(r, true, ALL_VERBS)),
];

const NOUNS = [
  'widget',
  'gadget',
  'policy',
  'binding',
  'route',
  'gateway',
  'certificate',
  'issuer',
  'backup',
  'restore',
  'snapshot',
  'volume',
  'cluster',
  'machine',
  'template',
  'secretstore',
  'listener',
  'endpoint',
  'profile',
  'rule',
  'alert',
  'monitor',
  'pipeline',
  'task',
  'run',
  'trigger',
  'bucket',
  'database',
  'user',
  'role',
];
const TLDS = ['example.com', 'k8s.io', 'x-k8s.io', 'io', 'dev', 'cloud.example.org'];

function plural(noun: string): string {
  if (noun.endsWith('y')) return `${noun.slice(0, -1)}ies`;
  if (noun.endsWith('s')) return `${noun}es`;
  return `${noun}s`;
}

/** A group's ~20 resources, some namespaced, some with status/scale subresources, a few odd verb sets. */
function groupResources(group: string, version: string, count: number, rng: () => number, tag = ''): SynthResource[] {
  const out: SynthResource[] = [];
  const start = Math.floor(rng() * NOUNS.length);
  for (let i = 0; i < count; i++) {
    const noun = NOUNS[(start + i) % NOUNS.length] as string;
    const resource = `${tag}${plural(noun)}${i >= NOUNS.length ? i : ''}`;
    const roll = rng();
    const verbs = roll < 0.04 ? CREATE_ONLY : roll < 0.08 ? READ_ONLY : roll < 0.15 ? NO_COLLECTION : ALL_VERBS;
    const subs: (readonly [string, readonly string[]])[] = [];
    if (verbs !== CREATE_ONLY) {
      const s = rng();
      if (s < 0.4) subs.push(STATUS);
      if (s < 0.1) subs.push(SCALE);
      if (s > 0.97) subs.push(['log', ['get']]);
    }
    out.push({ group, version, resource, namespaced: rng() < 0.7, verbs, subresources: subs });
  }
  return out;
}

export interface SyntheticPlane {
  /** Resources every server serves. */
  readonly common: readonly SynthResource[];
  /** Served by apiserver-a and apiserver-b only (C dropped these beta versions). */
  readonly oldOnly: readonly SynthResource[];
  /** Served by apiserver-c only (new groups, new resources in old groups). */
  readonly newOnly: readonly SynthResource[];
  readonly servers: readonly ServerState[];
  readonly snapshot: Snapshot;
  readonly resourceCounts: Readonly<Record<string, number>>;
  readonly groupCount: number;
}

function toView(
  resources: readonly SynthResource[],
  extraSubs: ReadonlyMap<string, readonly (readonly [string, readonly string[]])[]> = new Map(),
): ServerView {
  const map = new Map<string, ResourceCapability>();
  const gvs = new Set<string>();
  for (const r of resources) {
    const key = gvrKey(r.group, r.version, r.resource);
    const subs = [...r.subresources, ...(extraSubs.get(key) ?? [])];
    // Each server's parse makes its own objects, as the real discovery parser does.
    map.set(
      key,
      Object.freeze({
        verbs: frozenSet(r.verbs),
        subresources: frozenMap(subs.map(([n, v]) => [n, frozenSet(v)] as const)),
        namespaced: r.namespaced,
      }),
    );
    gvs.add(gvKey(r.group, r.version));
  }
  return Object.freeze({ source: 'aggregated' as const, resources: frozenMap(map), groupVersions: frozenSet(gvs) });
}

export const SERVER_NAMES = ['apiserver-a', 'apiserver-b', 'apiserver-c'] as const;

/** 3 servers: A and B the old version (5,000 resources), C the new one (4,950 of those + 100 of its own). */
export function syntheticPlane(seed = 42, now = Date.now()): SyntheticPlane {
  const rng = seededRandom(seed);
  const common: SynthResource[] = [...CORE];
  let groups = 1;
  for (let g = 0; common.length < 4950; g++) {
    const group = `${NOUNS[g % NOUNS.length]}${Math.floor(g / NOUNS.length) || ''}.${TLDS[g % TLDS.length]}`;
    common.push(...groupResources(group, 'v1', Math.min(20, 4950 - common.length), rng));
    groups++;
  }
  // The new version removed five beta group/versions (10 resources each) that the old still serve.
  const oldOnly: SynthResource[] = [];
  for (let g = 0; g < 5; g++) oldOnly.push(...groupResources(`legacy${g}.example.com`, 'v1beta1', 10, rng));
  // ...and added three new groups plus one new resource in each of 40 existing groups.
  const newOnly: SynthResource[] = [];
  for (let g = 0; g < 3; g++) newOnly.push(...groupResources(`new${g}.k8s.io`, 'v1', 20, rng));
  const existingGroups = [...new Set(common.filter((r) => r.group !== '').map((r) => r.group))];
  for (let g = 0; g < 40; g++) newOnly.push(...groupResources(existingGroups[g * 5] as string, 'v1', 1, rng, 'next'));
  groups += 5 + 3;

  // The new version also added a subresource to pods (only C lists pods/resize).
  const newSubs = new Map([[gvrKey('', 'v1', 'pods'), [['resize', ['get', 'patch', 'update']] as const]]]);
  const views = [toView([...common, ...oldOnly]), toView([...common, ...oldOnly]), toView([...common, ...newOnly], newSubs)];
  const servers: ServerState[] = SERVER_NAMES.map((name, i) => ({
    name,
    url: `https://127.0.0.${i + 1}:6443`,
    view: views[i] ?? null,
    lastSuccessAt: now,
    consecutiveFailures: 0,
    lastError: null,
    ready: true,
  }));
  return {
    common,
    oldOnly,
    newOnly,
    servers,
    snapshot: buildSnapshot(servers, 1),
    resourceCounts: Object.fromEntries(SERVER_NAMES.map((n, i) => [n, views[i]?.resources.size ?? 0])),
    groupCount: groups,
  };
}

/** A request as Envoy would hand it over, plus what kind of request it is (for per-kind timings). */
export interface SynthRequest {
  readonly method: string;
  readonly path: string;
  readonly kind: RequestKind;
}

export type RequestKind = 'get' | 'list' | 'watch' | 'write' | 'subresource' | 'skewed-new' | 'skewed-old' | 'unknown' | 'non-resource';

const NON_RESOURCE = [
  '/healthz',
  '/readyz',
  '/livez',
  '/version',
  '/api',
  '/apis',
  '/api/v1',
  '/openapi/v2',
  '/openapi/v3',
  '/openapi/v3/apis/apps/v1?hash=5A1B0C',
  '/metrics',
  '/readyz?verbose',
  '/.well-known/openid-configuration',
];

function pick<T>(rng: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rng() * xs.length)] as T;
}

function base(r: SynthResource): string {
  return r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
}

/** The collection URL; a null namespace lists a namespaced resource across all namespaces. */
function collection(r: SynthResource, ns: string | null): string {
  return r.namespaced && ns !== null ? `${base(r)}/namespaces/${ns}/${r.resource}` : `${base(r)}/${r.resource}`;
}

/** The weights follow what a busy cluster sees: mostly gets, lists and watches from controllers. */
const KINDS: readonly (readonly [RequestKind, number])[] = [
  ['get', 22],
  ['list', 16],
  ['watch', 14],
  ['write', 12],
  ['subresource', 10],
  ['skewed-new', 8],
  ['skewed-old', 3],
  ['unknown', 5],
  ['non-resource', 10],
];

export function requestMix(plane: SyntheticPlane, count = 2000, seed = 7): SynthRequest[] {
  const rng = seededRandom(seed);
  const total = KINDS.reduce((n, [, w]) => n + w, 0);
  const namespaces = ['default', 'kube-system', 'team-a', 'team-b', 'monitoring', 'payments-prod', 'ci'];
  const name = (): string =>
    pick(rng, ['web', 'api', 'db', 'cache', 'worker', 'system:node:node-17', 'cert-7f9c2']) + `-${Math.floor(rng() * 1000)}`;
  // Controllers and kubectl mostly touch a few hot resources: weight the core group and apps-like ones.
  const hot = plane.common.filter((r) => r.group === '' || rng() < 0.1);
  const anyCommon = (): SynthResource => (rng() < 0.6 ? pick(rng, hot) : pick(rng, plane.common));
  const out: SynthRequest[] = [];
  for (let i = 0; i < count; i++) {
    let roll = rng() * total;
    let kind: RequestKind = 'get';
    for (const [k, w] of KINDS) {
      if ((roll -= w) < 0) {
        kind = k;
        break;
      }
    }
    const ns = pick(rng, namespaces);
    const r = kind === 'skewed-new' ? pick(rng, plane.newOnly) : kind === 'skewed-old' ? pick(rng, plane.oldOnly) : anyCommon();
    const rv = 100000 + Math.floor(rng() * 900000);
    const enc = (n: string): string => n.replaceAll(':', '%3A');
    switch (kind) {
      case 'get':
        out.push({ kind, method: 'GET', path: `${collection(r, ns)}/${enc(name())}` });
        break;
      case 'list': {
        const q = pick(rng, [
          '',
          '?limit=500',
          '?labelSelector=app%3Dweb%2Ctier%20in%20%28frontend%2Cbackend%29&limit=500',
          `?fieldSelector=metadata.name%3D${name()}`,
          '?resourceVersion=0',
          `?fieldSelector=spec.nodeName%3Dnode-${Math.floor(rng() * 50)}&limit=500`,
        ]);
        out.push({ kind, method: 'GET', path: `${collection(r, rng() < 0.2 ? null : ns)}${q}` });
        break;
      }
      case 'watch': {
        const q = pick(rng, [
          `?watch=1&resourceVersion=${rv}`,
          `?allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=${300 + Math.floor(rng() * 300)}&watch=true`,
          `?fieldSelector=metadata.name%3D${name()}&resourceVersion=${rv}&watch=true`,
          `?labelSelector=app%3Dweb&watch=1&resourceVersion=${rv}`,
        ]);
        const legacy = rng() < 0.05;
        const path = legacy ? `${base(r)}/watch/${r.namespaced ? `namespaces/${ns}/` : ''}${r.resource}` : `${collection(r, ns)}${q}`;
        out.push({ kind, method: 'GET', path });
        break;
      }
      case 'write': {
        const method = pick(rng, ['POST', 'PUT', 'PATCH', 'DELETE', 'PATCH', 'PUT']);
        const path =
          method === 'POST'
            ? collection(r, ns)
            : `${collection(r, ns)}/${enc(name())}${method === 'PATCH' && rng() < 0.3 ? '?fieldManager=kubectl-client-side-apply&fieldValidation=Strict' : ''}`;
        out.push({ kind, method, path });
        break;
      }
      case 'subresource': {
        const withSubs =
          rng() < 0.5
            ? plane.common.filter((c) => c.group === '' && c.subresources.length > 0)
            : plane.common.filter((c) => c.subresources.length > 0);
        const s = pick(rng, withSubs);
        const [sub, verbs] = pick(rng, s.subresources);
        const method =
          verbs.includes('get') && rng() < 0.5 ? 'GET' : verbs.includes('patch') ? 'PATCH' : verbs.includes('update') ? 'PUT' : 'POST';
        const query = sub === 'log' ? '?container=app&follow=true&tailLines=100' : '';
        out.push({ kind, method, path: `${collection(s, ns)}/${enc(name())}/${sub}${query}` });
        break;
      }
      case 'skewed-new':
      case 'skewed-old': {
        const variant = rng();
        const path =
          variant < 0.35
            ? collection(r, ns)
            : variant < 0.7
              ? `${collection(r, ns)}/${name()}`
              : `${collection(r, ns)}?watch=1&resourceVersion=${rv}`;
        // pods/resize exists on C only: a skewed subresource
        const sub = kind === 'skewed-new' && rng() < 0.1 ? `/api/v1/namespaces/${ns}/pods/${name()}/resize` : path;
        out.push({ kind, method: rng() < 0.8 ? 'GET' : 'PATCH', path: sub });
        break;
      }
      case 'unknown': {
        const u = rng();
        const path =
          u < 0.4
            ? `${base(r)}/namespaces/${ns}/nosuchthings/${name()}`
            : u < 0.7
              ? `/apis/gone${Math.floor(rng() * 9)}.example.com/v1alpha1/namespaces/${ns}/olds`
              : `${collection(r, ns)}/${name()}/frobnicate`;
        out.push({ kind, method: 'GET', path });
        break;
      }
      case 'non-resource': {
        // Discovery of one group or group/version, or one of the fixed non-resource paths.
        const g = pick(rng, plane.common).group;
        const u = rng();
        const path = u < 0.2 ? `/apis/${g || 'apps'}` : u < 0.4 ? `/apis/${g || 'apps'}/v1` : pick(rng, NON_RESOURCE);
        out.push({ kind, method: 'GET', path });
        break;
      }
    }
  }
  return out;
}
