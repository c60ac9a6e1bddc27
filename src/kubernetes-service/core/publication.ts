// What the `kubernetes` Service's endpoints should be when the gateways publish themselves
// (docs/design.md, "The kubernetes Service"): the addresses of the gateways whose Lease is live,
// or — when none is — the apiservers themselves, so that the Service never points at nothing.
// Pure: the gateway Leases and the objects to write.
import { MANAGED_BY, MANAGED_BY_LABEL } from '../../constants.js';
import { isIP } from 'node:net';

/** The namespace of the gateways' Leases and of the `kubernetes` Service. */
export const SERVICE_NAMESPACE = 'default';
export const SERVICE_NAME = 'kubernetes';
export const GATEWAY_LEASE_LABEL = 'skewgate.dev/gateway';
export const GATEWAY_LEASE_SELECTOR = `${GATEWAY_LEASE_LABEL}=true`;
export const GATEWAY_ADDRESS_ANNOTATION = 'skewgate.dev/address';
export const LEASES_PATH = `/apis/coordination.k8s.io/v1/namespaces/${SERVICE_NAMESPACE}/leases`;
export const ENDPOINTS_PATH = `/api/v1/namespaces/${SERVICE_NAMESPACE}/endpoints`;
export const SLICES_PATH = `/apis/discovery.k8s.io/v1/namespaces/${SERVICE_NAMESPACE}/endpointslices`;

export interface Address {
  readonly ip: string;
  readonly port: number;
}

export interface GatewayLease {
  readonly name: string;
  readonly address: Address;
  /** Epoch ms; null when unreadable. */
  readonly renewTime: number | null;
  readonly durationMs: number;
}

/** A gateway's default name: the host name's first label, as a DNS label. */
export function gatewayNameOf(host: string): string {
  const label = (host.split('.')[0] ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
  return label === '' ? 'gateway' : label;
}

export function gatewayLeaseName(gateway: string): string {
  return `skewgate-gateway-${gateway}`;
}

/** Go's RFC 3339 with microseconds, as MicroTime is written. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace('Z', '000Z');
}

/** The Lease a gateway renews while it serves. */
export function gatewayLeaseObject(
  gateway: string,
  address: Address,
  nowMs: number,
  durationMs: number,
  resourceVersion?: string,
): Record<string, unknown> {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: gatewayLeaseName(gateway),
      namespace: SERVICE_NAMESPACE,
      labels: { [GATEWAY_LEASE_LABEL]: 'true' },
      annotations: { [GATEWAY_ADDRESS_ANNOTATION]: formatAddress(address) },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    spec: { holderIdentity: gateway, leaseDurationSeconds: Math.ceil(durationMs / 1000), renewTime: microTime(nowMs) },
  };
}

export function formatAddress(a: Address): string {
  return isIP(a.ip) === 6 ? `[${a.ip}]:${a.port}` : `${a.ip}:${a.port}`;
}

export function parseAddress(s: string): Address | null {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(s);
  if (!m || isIP(m[1] as string) === 0) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { ip: m[1] as string, port } : null;
}

/** A gateway Lease as another gateway wrote it, or null for anything else. */
export function parseGatewayLease(o: unknown): GatewayLease | null {
  const meta = (o as { metadata?: { name?: unknown; labels?: Record<string, unknown>; annotations?: Record<string, unknown> } } | null)
    ?.metadata;
  if (typeof meta?.name !== 'string' || meta.labels?.[GATEWAY_LEASE_LABEL] !== 'true') return null;
  const raw = meta.annotations?.[GATEWAY_ADDRESS_ANNOTATION];
  const address = typeof raw === 'string' ? parseAddress(raw) : null;
  if (address === null) return null;
  const spec = (o as { spec?: { renewTime?: unknown; leaseDurationSeconds?: unknown } }).spec;
  const renew = typeof spec?.renewTime === 'string' ? Date.parse(spec.renewTime) : Number.NaN;
  const seconds = typeof spec?.leaseDurationSeconds === 'number' ? spec.leaseDurationSeconds : 0;
  return { name: meta.name, address, renewTime: Number.isFinite(renew) ? renew : null, durationMs: seconds * 1000 };
}

export type Publication =
  | { readonly source: 'gateways'; readonly addresses: readonly Address[] }
  | { readonly source: 'apiservers'; readonly addresses: readonly Address[] };

/**
 * The gateways whose Lease was renewed within its duration; when there is none, the apiservers
 * (ready members at an IP address), so that the Service never points at nothing; null when there
 * is neither (then nothing is written: the last addresses stay).
 */
export function desiredPublication(leases: readonly GatewayLease[], apiservers: readonly Address[], nowMs: number): Publication | null {
  const live = leases.filter((l) => l.renewTime !== null && nowMs - l.renewTime <= l.durationMs).map((l) => l.address);
  if (live.length > 0) return { source: 'gateways', addresses: sortAddresses(live) };
  if (apiservers.length > 0) return { source: 'apiservers', addresses: sortAddresses(apiservers) };
  return null;
}

function sortAddresses(a: readonly Address[]): Address[] {
  const seen = new Set<string>();
  return [...a]
    .filter((x) => (seen.has(formatAddress(x)) ? false : (seen.add(formatAddress(x)), true)))
    .sort((x, y) => (formatAddress(x) < formatAddress(y) ? -1 : 1));
}

/** One port per Service endpoint set: the addresses of the most common port (others are left out and logged). */
export function portGroup(p: Publication): {
  readonly port: number;
  readonly ips: readonly string[];
  readonly leftOut: readonly Address[];
} {
  const counts = new Map<number, number>();
  for (const a of p.addresses) counts.set(a.port, (counts.get(a.port) ?? 0) + 1);
  const port = [...counts].sort((x, y) => y[1] - x[1] || x[0] - y[0])[0]?.[0] ?? 443;
  return { port, ips: p.addresses.filter((a) => a.port === port).map((a) => a.ip), leftOut: p.addresses.filter((a) => a.port !== port) };
}

/** The `kubernetes` Endpoints, as the apiservers' reconciler writes them, with other addresses. */
export function endpointsObject(port: number, ips: readonly string[], resourceVersion?: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Endpoints',
    metadata: {
      name: SERVICE_NAME,
      namespace: SERVICE_NAMESPACE,
      labels: { 'endpointslice.kubernetes.io/skip-mirror': 'true' },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    subsets: [{ addresses: ips.map((ip) => ({ ip })), ports: [{ name: 'https', port, protocol: 'TCP' }] }],
  };
}

export function endpointSliceObject(port: number, ips: readonly string[], resourceVersion?: string): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: SERVICE_NAME,
      namespace: SERVICE_NAMESPACE,
      labels: { 'kubernetes.io/service-name': SERVICE_NAME, [MANAGED_BY_LABEL]: MANAGED_BY },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    addressType: ips.some((ip) => isIP(ip) === 6) ? 'IPv6' : 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
    ports: [{ name: 'https', port, protocol: 'TCP' }],
  };
}

/** The addresses (ip:port, sorted) an Endpoints or EndpointSlice object holds now; null when unreadable. */
export function publishedAddresses(o: unknown): string[] | null {
  if (o === null || typeof o !== 'object') return null;
  const out: string[] = [];
  const eps = (o as { subsets?: unknown; endpoints?: unknown; ports?: unknown }).endpoints;
  if (Array.isArray(eps)) {
    const port = ((o as { ports?: { port?: unknown }[] }).ports ?? [])[0]?.port;
    for (const e of eps as { addresses?: unknown[] }[]) for (const a of e.addresses ?? []) out.push(`${String(a)}:${String(port)}`);
    return out.sort();
  }
  const subsets = (o as { subsets?: { addresses?: { ip?: unknown }[]; ports?: { port?: unknown }[] }[] }).subsets;
  if (!Array.isArray(subsets)) return out;
  for (const s of subsets) for (const a of s.addresses ?? []) for (const p of s.ports ?? []) out.push(`${String(a.ip)}:${String(p.port)}`);
  return out.sort();
}
