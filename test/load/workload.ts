// What the load asks for: the resource only some apiservers serve ("skewed"), one every apiserver
// serves ("common"), their paths and manifests, and the order of operations. Pure.
import type { Op, ResourceKind } from './types.js';

/** Every object the load creates carries these labels: its arm and a unique client-side token. */
export const ARM_LABEL = 'lab.skewgate.dev/arm';
export const TOKEN_LABEL = 'lab.skewgate.dev/token';

export interface ResourceSpec {
  readonly kind: ResourceKind;
  /** '' for the core group. */
  readonly group: string;
  readonly version: string;
  /** Lower-case plural. */
  readonly resource: string;
  readonly namespaced: boolean;
  /** The object to create; metadata (generateName, labels, namespace) is added by objectManifest. */
  readonly body: () => Record<string, unknown>;
}

export interface Workload {
  readonly skewed: ResourceSpec;
  readonly common: ResourceSpec;
  /** The namespace of an arm's namespaced objects (created before the load starts). */
  readonly namespace: (arm: string) => string;
}

export function groupVersionPath(spec: Pick<ResourceSpec, 'group' | 'version'>): string {
  return spec.group === '' ? `/api/${spec.version}` : `/apis/${spec.group}/${spec.version}`;
}

export function collectionPath(spec: ResourceSpec, namespace: string): string {
  return spec.namespaced
    ? `${groupVersionPath(spec)}/namespaces/${namespace}/${spec.resource}`
    : `${groupVersionPath(spec)}/${spec.resource}`;
}

export function objectPath(spec: ResourceSpec, namespace: string, name: string): string {
  return `${collectionPath(spec, namespace)}/${encodeURIComponent(name)}`;
}

export function armSelector(arm: string): string {
  return `${ARM_LABEL}=${arm}`;
}

/**
 * A create with generateName: if anything between client and apiserver ever sent the POST twice,
 * two objects would carry the same token (a duplicated write), which fixed names would hide
 * behind a 409.
 */
export function objectManifest(spec: ResourceSpec, o: { arm: string; token: string; namespace: string }): Record<string, unknown> {
  const body = spec.body();
  const meta = (body.metadata ?? {}) as Record<string, unknown>;
  return {
    ...body,
    metadata: {
      ...meta,
      generateName: `lab-${o.arm}-`,
      ...(spec.namespaced ? { namespace: o.namespace } : {}),
      labels: { ...((meta.labels ?? {}) as Record<string, string>), [ARM_LABEL]: o.arm, [TOKEN_LABEL]: o.token },
    },
  };
}

/** The load's cycle: each kind gets a create, a get of an acknowledged object and a list. */
const CYCLE: readonly { readonly kind: ResourceKind; readonly op: Op }[] = [
  { kind: 'skewed', op: 'create' },
  { kind: 'common', op: 'create' },
  { kind: 'skewed', op: 'get' },
  { kind: 'common', op: 'get' },
  { kind: 'skewed', op: 'list' },
  { kind: 'common', op: 'list' },
];

export function opAt(i: number): { readonly kind: ResourceKind; readonly op: Op } {
  return CYCLE[i % CYCLE.length] as (typeof CYCLE)[number];
}

/** admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: served from Kubernetes 1.36 on. Matches nothing real. */
export const mutatingAdmissionPolicies: ResourceSpec = {
  kind: 'skewed',
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  resource: 'mutatingadmissionpolicies',
  namespaced: false,
  body: () => ({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicy',
    spec: {
      matchConstraints: {
        resourceRules: [{ apiGroups: ['lab.skewgate.dev'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['widgets'] }],
      },
      failurePolicy: 'Ignore',
      reinvocationPolicy: 'Never',
      mutations: [
        { patchType: 'ApplyConfiguration', applyConfiguration: { expression: 'Object{metadata: Object.metadata{labels: {"lab": "x"}}}' } },
      ],
    },
  }),
};

export const configMaps: ResourceSpec = {
  kind: 'common',
  group: '',
  version: 'v1',
  resource: 'configmaps',
  namespaced: true,
  body: () => ({ apiVersion: 'v1', kind: 'ConfigMap', data: { payload: 'skewgate lab' } }),
};

/** batch/v1 Job (no controller runs in the lab, so it only sits in etcd). */
export const jobs: ResourceSpec = {
  kind: 'skewed',
  group: 'batch',
  version: 'v1',
  resource: 'jobs',
  namespaced: true,
  body: () => ({
    apiVersion: 'batch/v1',
    kind: 'Job',
    spec: {
      suspend: true,
      template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] } },
    },
  }),
};

export const labNamespace = (arm: string): string => `lab-${arm}`;
