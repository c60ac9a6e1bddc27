// Built-in API sets of two imitated kube-apiserver versions; the difference between them is the skew.
import type { FakeResource } from './cluster.js';

const STATUS = { name: 'status', verbs: ['get', 'patch', 'update'] } as const;
const SCALE = { name: 'scale', verbs: ['get', 'patch', 'update'] } as const;
const NO_COLLECTION = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] as const;

function r(
  gv: string,
  resource: string,
  kind: string,
  namespaced: boolean,
  extra: Partial<Pick<FakeResource, 'verbs' | 'subresources' | 'shortNames'>> = {},
): FakeResource {
  const [group, version] = gv.includes('/') ? (gv.split('/') as [string, string]) : ['', gv];
  return Object.freeze({ group, version, resource, kind, namespaced, ...extra });
}

export const BUILTINS_OLD: readonly FakeResource[] = Object.freeze([
  r('v1', 'namespaces', 'Namespace', false, {
    verbs: NO_COLLECTION,
    shortNames: ['ns'],
    subresources: [STATUS, { name: 'finalize', verbs: ['update'] }],
  }),
  r('v1', 'pods', 'Pod', true, {
    shortNames: ['po'],
    subresources: [
      STATUS,
      { name: 'log', verbs: ['get'] },
      { name: 'exec', verbs: ['create', 'get'] },
      { name: 'eviction', verbs: ['create'] },
    ],
  }),
  r('v1', 'configmaps', 'ConfigMap', true, { shortNames: ['cm'] }),
  r('v1', 'secrets', 'Secret', true),
  r('v1', 'services', 'Service', true, { verbs: NO_COLLECTION, shortNames: ['svc'], subresources: [STATUS] }),
  r('v1', 'serviceaccounts', 'ServiceAccount', true, { shortNames: ['sa'] }),
  r('v1', 'events', 'Event', true, { shortNames: ['ev'] }),
  r('v1', 'nodes', 'Node', false, { shortNames: ['no'], subresources: [STATUS] }),
  r('apiregistration.k8s.io/v1', 'apiservices', 'APIService', false, { subresources: [STATUS] }),
  r('apps/v1', 'deployments', 'Deployment', true, { shortNames: ['deploy'], subresources: [STATUS, SCALE] }),
  r('apps/v1', 'replicasets', 'ReplicaSet', true, { shortNames: ['rs'], subresources: [STATUS, SCALE] }),
  r('apps/v1', 'statefulsets', 'StatefulSet', true, { shortNames: ['sts'], subresources: [STATUS, SCALE] }),
  r('batch/v1', 'jobs', 'Job', true, { subresources: [STATUS] }),
  r('admissionregistration.k8s.io/v1', 'validatingadmissionpolicies', 'ValidatingAdmissionPolicy', false, { subresources: [STATUS] }),
  r('admissionregistration.k8s.io/v1', 'validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding', false),
  r('admissionregistration.k8s.io/v1', 'validatingwebhookconfigurations', 'ValidatingWebhookConfiguration', false),
  r('apiextensions.k8s.io/v1', 'customresourcedefinitions', 'CustomResourceDefinition', false, {
    shortNames: ['crd', 'crds'],
    subresources: [STATUS],
  }),
  r('authentication.k8s.io/v1', 'selfsubjectreviews', 'SelfSubjectReview', false, { verbs: ['create'] }),
  r('coordination.k8s.io/v1', 'leases', 'Lease', true),
  r('discovery.k8s.io/v1', 'endpointslices', 'EndpointSlice', true),
  r('resource.k8s.io/v1', 'deviceclasses', 'DeviceClass', false),
  r('resource.k8s.io/v1', 'resourceclaims', 'ResourceClaim', true, { subresources: [STATUS] }),
]);

export const BUILTINS_NEW: readonly FakeResource[] = Object.freeze([
  ...BUILTINS_OLD,
  r('admissionregistration.k8s.io/v1', 'mutatingadmissionpolicies', 'MutatingAdmissionPolicy', false),
  r('admissionregistration.k8s.io/v1', 'mutatingadmissionpolicybindings', 'MutatingAdmissionPolicyBinding', false),
  r('resource.k8s.io/v1beta2', 'devicetaintrules', 'DeviceTaintRule', false, { subresources: [STATUS] }),
]);
