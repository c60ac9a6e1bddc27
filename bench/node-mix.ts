// (i) The requests one real node sent (bench/node-traffic-mix.json, recorded by
// test/cluster/node-upgrade.test.ts from the apiservers' audit logs) as a schedule a load generator
// replays against the fake apiservers: each row (client, verb, resource) becomes a request of that
// verb on objects that exist, drawn in proportion to the row's rate. Watches are left out: they
// are long-running, so no latency is measured on them (the fast path's watch route is proven in
// test/e2e/fast-path.test.ts). Pure.
import type { FakeResource } from '../harness/fake/cluster.js';

export interface MixRow {
  readonly client: string;
  readonly identity: string;
  readonly verb: string;
  /** "core/v1/pods", "coordination.k8s.io/v1/leases", "core/v1/pods/status". */
  readonly resource: string;
  readonly perMinute: number;
}

export interface MixWindow {
  readonly name: string;
  readonly rows: readonly MixRow[];
}

export interface NodeRequest {
  /** "kubelet update coordination.k8s.io/v1/leases". */
  readonly row: string;
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH';
  readonly path: string;
  readonly contentType?: string;
  /** The body, built per request (a create needs a fresh name). */
  readonly body?: (i: number) => string;
}

/** The objects the schedule's requests name; created in the fake cluster before the load. */
export const NODE_NAME = 'bench-node';
export const POD_NAME = 'bench-pod';
export const EVENT_NAME = 'bench-event';
export const NAMESPACE = 'default';
export const LEASE_NAMESPACE = 'kube-node-lease';

/**
 * What a real kube-apiserver serves for a node that the fakes' built-ins lack: the service account
 * token subresource and SubjectAccessReviews (the kubelet's two rarer writes), so that they meet
 * the same rules as on a real cluster (listed identically by every apiserver: fast). The fake
 * answers their writes 400 or 201; either is an apiserver's answer.
 */
export function withNodeApis(builtins: readonly FakeResource[]): FakeResource[] {
  return [
    ...builtins.map((r) =>
      r.group === '' && r.resource === 'serviceaccounts'
        ? { ...r, subresources: [...(r.subresources ?? []), { name: 'token', verbs: ['create'] as const }] }
        : r,
    ),
    {
      group: 'authorization.k8s.io',
      version: 'v1',
      resource: 'subjectaccessreviews',
      kind: 'SubjectAccessReview',
      namespaced: false,
      verbs: ['create'],
    },
  ] as FakeResource[];
}

const MERGE = 'application/merge-patch+json';
const JSON_TYPE = 'application/json';

function prefix(group: string, version: string): string {
  return group === 'core' ? `/api/${version}` : `/apis/${group}/${version}`;
}

/** The request a row's verb makes on its resource, or null for what is not replayed (watches, unknown shapes). */
export function requestOf(row: MixRow): NodeRequest | null {
  const [group = '', version = '', resource = '', sub] = row.resource.split('/');
  const base = prefix(group, version);
  const label = `${row.client} ${row.verb} ${row.resource}`;
  const at = (ns: string | null, name: string): string => `${base}${ns === null ? '' : `/namespaces/${ns}`}/${resource}/${name}`;
  switch (`${row.verb} ${resource}${sub === undefined ? '' : `/${sub}`}`) {
    case 'get pods':
      return { row: label, method: 'GET', path: at(NAMESPACE, POD_NAME) };
    case 'patch pods/status':
      return {
        row: label,
        method: 'PATCH',
        path: `${at(NAMESPACE, POD_NAME)}/status`,
        contentType: MERGE,
        body: (i) => JSON.stringify({ status: { message: `round ${i}` } }),
      };
    case 'patch nodes/status':
      return {
        row: label,
        method: 'PATCH',
        path: `${at(null, NODE_NAME)}/status`,
        contentType: MERGE,
        body: (i) => JSON.stringify({ status: { phase: `Running ${i}` } }),
      };
    case 'update leases':
      return {
        row: label,
        method: 'PUT',
        path: at(LEASE_NAMESPACE, NODE_NAME),
        contentType: JSON_TYPE,
        body: (i) =>
          JSON.stringify({
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: NODE_NAME, namespace: LEASE_NAMESPACE },
            // A MicroTime: six digits of fraction, as a real apiserver decodes it.
            spec: {
              holderIdentity: NODE_NAME,
              leaseDurationSeconds: 40,
              renewTime: new Date(1_800_000_000_000 + i).toISOString().replace('Z', '000Z'),
            },
          }),
      };
    case 'patch events':
      return {
        row: label,
        method: 'PATCH',
        path: at(NAMESPACE, EVENT_NAME),
        contentType: MERGE,
        body: (i) => JSON.stringify({ count: i }),
      };
    case 'create events':
      return {
        row: label,
        method: 'POST',
        path: `${base}/namespaces/${NAMESPACE}/events`,
        contentType: JSON_TYPE,
        body: (i) => JSON.stringify({ apiVersion: 'v1', kind: 'Event', metadata: { generateName: `bench-${i}-` }, reason: 'Bench' }),
      };
    case 'create serviceaccounts/token':
      return {
        row: label,
        method: 'POST',
        path: `${at(NAMESPACE, 'default')}/token`,
        contentType: JSON_TYPE,
        body: () => '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}',
      };
    case 'create subjectaccessreviews':
      return {
        row: label,
        method: 'POST',
        path: `${base}/subjectaccessreviews`,
        contentType: JSON_TYPE,
        body: () =>
          JSON.stringify({
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            // What a kubelet asks before serving its own API; a real apiserver takes no metadata here and requires the attributes.
            spec: { user: NODE_NAME, resourceAttributes: { verb: 'get', resource: 'nodes', subresource: 'proxy', name: NODE_NAME } },
          }),
      };
    default:
      return null;
  }
}

/**
 * The window's replayed requests, each with its share of the rate; rows not replayed (watches)
 * are returned apart, with their share, for the report.
 */
export function schedule(w: MixWindow): {
  readonly requests: readonly { readonly req: NodeRequest; readonly weight: number }[];
  readonly left: readonly string[];
} {
  const replayed = w.rows.map((row) => ({ row, req: requestOf(row) }));
  const kept = replayed.filter((x): x is { row: MixRow; req: NodeRequest } => x.req !== null);
  const total = kept.reduce((n, x) => n + x.row.perMinute, 0);
  return {
    requests: kept.map((x) => ({ req: x.req, weight: x.row.perMinute / total })),
    left: replayed.filter((x) => x.req === null).map((x) => `${x.row.client} ${x.row.verb} ${x.row.resource} (${x.row.perMinute}/min)`),
  };
}

/**
 * Request i of a schedule: a fixed cycle of about 100 slots, each row taking round(weight × 100) of
 * them (at least one), visited with a stride prime to its length so that a row's requests are
 * spread over the cycle rather than sent in a burst. Deterministic: every arm gets the same sequence.
 */
export function pick(requests: readonly { readonly req: NodeRequest; readonly weight: number }[]): (i: number) => NodeRequest {
  const cycle: NodeRequest[] = [];
  for (const r of requests) for (let k = 0; k < Math.max(1, Math.round(r.weight * 100)); k++) cycle.push(r.req);
  const n = cycle.length;
  const stride = [37, 41, 43, 47].find((p) => n % p !== 0) ?? 1;
  return (i) => cycle[((i % n) * stride) % n] as NodeRequest;
}
