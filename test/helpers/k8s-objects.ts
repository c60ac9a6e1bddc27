// Kubernetes objects as the control plane writes them, for the membership tests: an apiserver's
// identity Lease, a control-plane Node as its kubelet registers it, an EndpointSlice of the
// `kubernetes` Service as the endpoint reconciler writes it; and one admin call to a fake.
import type { Agent } from 'undici';
import { request } from 'undici';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';

/** kube-apiserver's identity Lease for `hostname`, renewed at `renewTime` (Go's RFC 3339 with microseconds). */
export function identityLease(hostname: string, renewTime: Date = new Date()): unknown {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: apiserverIdentity(hostname),
      labels: { 'apiserver.kubernetes.io/identity': 'kube-apiserver', 'kubernetes.io/hostname': hostname },
    },
    spec: {
      holderIdentity: `${apiserverIdentity(hostname)}_1`,
      leaseDurationSeconds: 3600,
      renewTime: renewTime.toISOString().replace('Z', '000Z'),
    },
  };
}

export function controlPlaneNode(name: string, ip: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'node-role.kubernetes.io/control-plane': '', 'kubernetes.io/hostname': name } },
    status: { addresses: [{ type: 'InternalIP', address: ip }] },
  };
}

export function kubernetesSlice(name: string, ip: string, port: number): unknown {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, labels: { 'kubernetes.io/service-name': 'kubernetes' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports: [{ name: 'https', port, protocol: 'TCP' }],
  };
}

/** One JSON request with a bearer token; resolves to the status code. */
export async function callWithToken(agent: Agent, token: string, url: string, method: string, body?: unknown): Promise<number> {
  const res = await request(url, {
    method: method as 'POST',
    dispatcher: agent,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  await res.body.text();
  return res.statusCode;
}
