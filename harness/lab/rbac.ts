// The lab's RBAC: the objects skewgate's token and the lab's limited user (jane) need, and the step
// that creates them on an apiserver (idempotent: one that exists already is fine). The compose
// demo renders the same objects (harness/compose/deploy-files.ts).
import { LabError } from './errors.js';
import { JANE_USER, SKEWGATE_GROUP } from './pki.js';

export const SKEWGATE_ROLE = 'skewgate:discovery';
export const SKEWGATE_LEASE_ROLE = 'skewgate:identity-leases';
export const SKEWGATE_SERVICE_ROLE = 'skewgate:kubernetes-service';

/** The namespace of kube-apiserver's identity Leases. */
export const IDENTITY_LEASE_NAMESPACE = 'kube-system';

/**
 * Discovery documents and /readyz are open to every authenticated user by default
 * (system:discovery, system:public-info-viewer); the CRD and APIService watch needs the
 * ClusterRole, the identity-Lease watch (is some running apiserver missing from the config?) a
 * Role in kube-system: read access to Leases there and nowhere else.
 */
export function skewgateRbac(): {
  clusterRole: Record<string, unknown>;
  clusterRoleBinding: Record<string, unknown>;
  leaseRole: Record<string, unknown>;
  leaseRoleBinding: Record<string, unknown>;
  serviceRole: Record<string, unknown>;
  serviceRoleBinding: Record<string, unknown>;
} {
  const subjects = [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: SKEWGATE_GROUP }];
  const leaseMeta = { name: SKEWGATE_LEASE_ROLE, namespace: IDENTITY_LEASE_NAMESPACE };
  const serviceMeta = { name: SKEWGATE_SERVICE_ROLE, namespace: 'default' };
  return {
    clusterRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: SKEWGATE_ROLE },
      rules: [
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['apiregistration.k8s.io'], resources: ['apiservices'], verbs: ['get', 'list', 'watch'] },
        // The membership sources: control-plane Nodes, and the kubernetes EndpointSlice (only
        // default/ is watched; a ClusterRole keeps the grant to one object pair per credential).
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: SKEWGATE_ROLE },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: SKEWGATE_ROLE },
      subjects,
    },
    leaseRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: leaseMeta,
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] }],
    },
    leaseRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: leaseMeta,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: SKEWGATE_LEASE_ROLE },
      subjects,
    },
    // kubernetesService.publish: the gateways' Leases, and the kubernetes Service's endpoints, in default only.
    serviceRole: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: serviceMeta,
      rules: [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] },
        { apiGroups: [''], resources: ['endpoints'], verbs: ['get', 'create', 'update'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'create', 'update'] },
      ],
    },
    serviceRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: serviceMeta,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: SKEWGATE_SERVICE_ROLE },
      subjects,
    },
  };
}

/** jane's only permission: read configmaps in this namespace. */
export const JANE_NAMESPACE = 'default';
export const JANE_ROLE = 'lab:configmap-reader';

/** A Role and RoleBinding: jane (token or certificate) may get and list configmaps in `default`, nothing else. */
export function janeRbac(): { role: Record<string, unknown>; roleBinding: Record<string, unknown> } {
  const metadata = { name: JANE_ROLE, namespace: JANE_NAMESPACE };
  return {
    role: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata,
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
    },
    roleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: JANE_ROLE },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: JANE_USER }],
    },
  };
}

/** Every RBAC object the lab creates, with the collection it is POSTed to, in creation order. */
export function labRbacObjects(): { path: string; body: Record<string, unknown> }[] {
  const { clusterRole, clusterRoleBinding, leaseRole, leaseRoleBinding, serviceRole, serviceRoleBinding } = skewgateRbac();
  const { role, roleBinding } = janeRbac();
  const ns = `/apis/rbac.authorization.k8s.io/v1/namespaces/${JANE_NAMESPACE}`;
  const leaseNs = `/apis/rbac.authorization.k8s.io/v1/namespaces/${IDENTITY_LEASE_NAMESPACE}`;
  return [
    { path: '/apis/rbac.authorization.k8s.io/v1/clusterroles', body: clusterRole },
    { path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', body: clusterRoleBinding },
    { path: `${leaseNs}/roles`, body: leaseRole },
    { path: `${leaseNs}/rolebindings`, body: leaseRoleBinding },
    { path: `${ns}/roles`, body: role },
    { path: `${ns}/rolebindings`, body: roleBinding },
    { path: '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles', body: serviceRole },
    { path: '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', body: serviceRoleBinding },
  ];
}

/** POSTs a JSON body to a URL as the cluster admin; resolves to the response. */
export type AdminPost = (url: string, body: string) => Promise<{ status: number; body: string }>;

/**
 * skewgate's token may list and watch CRDs and APIServices; jane may read configmaps in
 * `default` (stored in etcd: once per lab is enough).
 */
export async function ensureLabRbac(baseUrl: string, post: AdminPost): Promise<void> {
  // jane's Role lives in `default`: make sure it is there, whatever the apiserver's own bootstrap has done yet.
  const ns = await post(
    `${baseUrl}/api/v1/namespaces`,
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: JANE_NAMESPACE } }),
  );
  if (ns.status !== 201 && ns.status !== 409)
    throw new LabError(`creating namespace ${JANE_NAMESPACE} on ${baseUrl}: ${ns.status} ${ns.body.slice(0, 300)}`);
  for (const { path, body } of labRbacObjects()) {
    const res = await post(`${baseUrl}${path}`, JSON.stringify(body));
    if (res.status !== 201 && res.status !== 409)
      throw new LabError(`creating ${path} on ${baseUrl}: ${res.status} ${res.body.slice(0, 300)}`);
  }
}
