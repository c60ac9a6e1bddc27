// Discovery documents of a fake apiserver, shaped as kube-apiserver writes them: aggregated v2
// (APIGroupDiscoveryList) and the legacy APIVersions / APIGroupList / APIGroup / APIResourceList.
import { DEFAULT_VERBS, type FakeResource } from './cluster.js';

interface GroupDocs {
  readonly group: string;
  readonly versions: { readonly version: string; readonly resources: FakeResource[] }[];
}

/** Roughly kube-apiserver's group priorities; groups not listed (CRDs) follow, by name. */
const GROUP_ORDER = [
  '',
  'apiregistration.k8s.io',
  'apps',
  'events.k8s.io',
  'authentication.k8s.io',
  'authorization.k8s.io',
  'autoscaling',
  'batch',
  'certificates.k8s.io',
  'networking.k8s.io',
  'policy',
  'rbac.authorization.k8s.io',
  'storage.k8s.io',
  'admissionregistration.k8s.io',
  'apiextensions.k8s.io',
  'scheduling.k8s.io',
  'coordination.k8s.io',
  'node.k8s.io',
  'discovery.k8s.io',
  'flowcontrol.apiserver.k8s.io',
  'resource.k8s.io',
];

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function compareGroups(a: string, b: string): number {
  const ia = GROUP_ORDER.indexOf(a);
  const ib = GROUP_ORDER.indexOf(b);
  if (ia >= 0 || ib >= 0) return (ia < 0 ? Infinity : ia) - (ib < 0 ? Infinity : ib);
  return byName(a, b);
}

/** Kube version priority: GA before beta before alpha, higher numbers first; odd names last. */
function compareVersions(a: string, b: string): number {
  const rank = (v: string): number[] | null => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    return m ? [m[2] === undefined ? 2 : m[2] === 'beta' ? 1 : 0, Number(m[1]), Number(m[3] ?? 0)] : null;
  };
  const ra = rank(a);
  const rb = rank(b);
  if (!ra || !rb) return ra ? -1 : rb ? 1 : byName(a, b);
  for (let i = 0; i < 3; i++) if (ra[i] !== rb[i]) return (rb[i] ?? 0) - (ra[i] ?? 0);
  return 0;
}

/** Groups in priority order, versions in preference order, resources by name. */
export function groupDocs(resources: readonly FakeResource[]): GroupDocs[] {
  const groups = new Map<string, Map<string, FakeResource[]>>();
  for (const r of resources) {
    const versions = groups.get(r.group) ?? new Map<string, FakeResource[]>();
    groups.set(r.group, versions);
    versions.set(r.version, [...(versions.get(r.version) ?? []), r]);
  }
  return [...groups]
    .sort(([a], [b]) => compareGroups(a, b))
    .map(([group, versions]) => ({
      group,
      versions: [...versions]
        .sort(([a], [b]) => compareVersions(a, b))
        .map(([version, rs]) => ({ version, resources: rs.sort((x, y) => byName(x.resource, y.resource)) })),
    }));
}

/** Scale is the one common subresource with a kind of its own. */
const subKind = (r: FakeResource, sub: string): { group: string; version: string; kind: string } =>
  sub === 'scale' ? { group: 'autoscaling', version: 'v1', kind: 'Scale' } : { group: '', version: '', kind: r.kind };

export function aggregatedList(groups: readonly GroupDocs[]): unknown {
  return {
    kind: 'APIGroupDiscoveryList',
    apiVersion: 'apidiscovery.k8s.io/v2',
    metadata: {},
    // As in Go's JSON, the core group's empty name is omitted.
    items: groups.map((g) => ({
      metadata: g.group ? { name: g.group } : {},
      versions: g.versions.map((v) => ({
        version: v.version,
        resources: v.resources.map((r) => ({
          resource: r.resource,
          // Empty group/version means "this group/version", as kube-apiserver writes it.
          responseKind: { group: '', version: '', kind: r.kind },
          scope: r.namespaced ? 'Namespaced' : 'Cluster',
          singularResource: r.kind.toLowerCase(),
          verbs: [...(r.verbs ?? DEFAULT_VERBS)],
          ...(r.shortNames?.length ? { shortNames: [...r.shortNames] } : {}),
          ...(r.subresources?.length
            ? { subresources: r.subresources.map((s) => ({ subresource: s.name, responseKind: subKind(r, s.name), verbs: [...s.verbs] })) }
            : {}),
        })),
        freshness: 'Current',
      })),
    })),
  };
}

function apiGroup(g: GroupDocs): Record<string, unknown> {
  const versions = g.versions.map((v) => ({ groupVersion: `${g.group}/${v.version}`, version: v.version }));
  return { name: g.group, versions, ...(versions[0] ? { preferredVersion: versions[0] } : {}) };
}

/**
 * The legacy document for /api, /api/<v>, /apis, /apis/<g> or /apis/<g>/<v> (path segments), or
 * null when that group or version is not served.
 */
export function legacyDoc(segs: readonly string[], groups: readonly GroupDocs[], serverAddress: string): unknown {
  const [prefix, a, b] = segs;
  if (prefix === 'api' && a === undefined) {
    return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
  }
  if (prefix === 'apis' && a === undefined) {
    return { kind: 'APIGroupList', apiVersion: 'v1', groups: groups.filter((g) => g.group !== '').map(apiGroup) };
  }
  const group = prefix === 'api' ? '' : (a ?? '');
  const version = prefix === 'api' ? a : b;
  const g = groups.find((x) => x.group === group);
  if (!g) return null;
  if (version === undefined) return { kind: 'APIGroup', apiVersion: 'v1', ...apiGroup(g) };
  const v = g.versions.find((x) => x.version === version);
  if (!v) return null;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group ? `${group}/${version}` : version,
    resources: v.resources.flatMap((r) => [
      {
        name: r.resource,
        singularName: r.kind.toLowerCase(),
        namespaced: r.namespaced,
        kind: r.kind,
        verbs: [...(r.verbs ?? DEFAULT_VERBS)],
        ...(r.shortNames?.length ? { shortNames: [...r.shortNames] } : {}),
      },
      ...(r.subresources ?? []).map((s) => {
        const k = subKind(r, s.name);
        return {
          name: `${r.resource}/${s.name}`,
          singularName: '',
          namespaced: r.namespaced,
          ...(k.group ? { group: k.group, version: k.version } : {}),
          kind: k.kind,
          verbs: [...s.verbs],
        };
      }),
    ]),
  };
}
