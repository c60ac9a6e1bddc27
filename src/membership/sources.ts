// Where apiservers the config does not name are learnt: the control-plane Nodes (an InternalIP and
// the configured port) and the `default/kubernetes` EndpointSlice (each apiserver publishes its own
// advertise address there). Each source is a table of the objects last listed and watched; this
// module parses them into candidate addresses. Pure.
import { isIP } from 'node:net';
import type { MembershipSource } from '../config/core/schema.js';
import type { WatchChange } from '../kube/watch.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../constants.js';

export const NODES_PATH = '/api/v1/nodes';
export const KUBERNETES_SLICES_PATH = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';
/** The EndpointSlices of the `kubernetes` Service (the endpoint reconciler writes one, named "kubernetes"). */
export const KUBERNETES_SLICES_SELECTOR = 'kubernetes.io/service-name=kubernetes';
const HOSTNAME_LABEL = 'kubernetes.io/hostname';

/** One address at which some source says an apiserver listens. */
export interface Candidate {
  /** An IP address (never a DNS name: a source names one server, a name may be many). */
  readonly host: string;
  readonly port: number;
  /** The apiserver's hostname, from which its identity Lease is named; null when the source cannot say. */
  readonly hostname: string | null;
  readonly source: MembershipSource;
  /** The object it came from, for logs: "node/cp-1", "endpointslice/kubernetes". */
  readonly from: string;
}

/** One source's objects, by name, each parsed into its candidates. */
export interface SourceTable {
  readonly source: MembershipSource;
  /** True once a list succeeded. */
  readonly synced: boolean;
  readonly objects: ReadonlyMap<string, readonly Candidate[]>;
}

export function emptySourceTable(source: MembershipSource): SourceTable {
  return Object.freeze({ source, synced: false, objects: new Map() });
}

/** What a source needs from the config. */
export interface SourceSettings {
  /** The apiservers' port on a Node. */
  readonly nodePort: number;
}

type Parsed = { readonly name: string; readonly candidates: readonly Candidate[] } | null;

function metadataName(o: unknown): { name: string; labels: Record<string, unknown> } | null {
  if (o === null || typeof o !== 'object') return null;
  const meta = (o as { metadata?: unknown }).metadata;
  if (meta === null || typeof meta !== 'object') return null;
  const { name, labels } = meta as { name?: unknown; labels?: unknown };
  if (typeof name !== 'string' || name === '') return null;
  return { name, labels: labels !== null && typeof labels === 'object' ? (labels as Record<string, unknown>) : {} };
}

/** A Node: its first InternalIP at the configured port; its hostname label (else its name) is the apiserver's hostname. */
export function parseNode(o: unknown, settings: SourceSettings): Parsed {
  const meta = metadataName(o);
  if (meta === null) return null;
  const addresses = (o as { status?: { addresses?: unknown } }).status?.addresses;
  const list = Array.isArray(addresses) ? addresses : [];
  const internal = list.find(
    (a): a is { address: string } =>
      a !== null &&
      typeof a === 'object' &&
      (a as { type?: unknown }).type === 'InternalIP' &&
      isIP(String((a as { address?: unknown }).address)) !== 0,
  );
  const label = meta.labels[HOSTNAME_LABEL];
  const hostname = typeof label === 'string' && label !== '' ? label : meta.name;
  // A Node without an InternalIP (not registered yet) is known, with no candidate.
  const candidates = internal
    ? [Object.freeze({ host: internal.address, port: settings.nodePort, hostname, source: 'nodes' as const, from: `node/${meta.name}` })]
    : [];
  return { name: meta.name, candidates: Object.freeze(candidates) };
}

/** An EndpointSlice of the `kubernetes` Service: every IP address, at its https port (else its only port). */
export function parseKubernetesSlice(o: unknown): Parsed {
  const meta = metadataName(o);
  if (meta === null) return null;
  // The gateways' own slice (kubernetesService.publish) names gateways, not apiservers.
  if (meta.labels[MANAGED_BY_LABEL] === MANAGED_BY) return { name: meta.name, candidates: [] };
  const slice = o as { addressType?: unknown; ports?: unknown; endpoints?: unknown };
  if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') return { name: meta.name, candidates: [] };
  const ports = Array.isArray(slice.ports) ? (slice.ports as { name?: unknown; port?: unknown }[]) : [];
  const port = (ports.find((p) => p?.name === 'https') ?? (ports.length === 1 ? ports[0] : undefined))?.port;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) return { name: meta.name, candidates: [] };
  const candidates: Candidate[] = [];
  for (const ep of Array.isArray(slice.endpoints) ? (slice.endpoints as { addresses?: unknown; conditions?: { ready?: unknown } }[]) : []) {
    // The reconciler removes a stopping apiserver; a ready: false endpoint is on its way out.
    if (ep?.conditions?.ready === false) continue;
    for (const a of Array.isArray(ep?.addresses) ? ep.addresses : []) {
      if (typeof a === 'string' && isIP(a) !== 0)
        candidates.push(
          Object.freeze({ host: a, port, hostname: null, source: 'endpointSlice' as const, from: `endpointslice/${meta.name}` }),
        );
    }
  }
  return { name: meta.name, candidates: Object.freeze(candidates) };
}

function parserOf(source: MembershipSource, settings: SourceSettings): (o: unknown) => Parsed {
  return source === 'nodes' ? (o) => parseNode(o, settings) : parseKubernetesSlice;
}

/** The table after one list or watch event, and how many objects could not be read (logged by the caller). */
export function applySourceChange(
  table: SourceTable,
  change: WatchChange,
  settings: SourceSettings,
): { table: SourceTable; skipped: number } {
  const parse = parserOf(table.source, settings);
  if (change.type === 'RELIST') {
    const objects = new Map<string, readonly Candidate[]>();
    let skipped = 0;
    for (const item of change.items) {
      const p = parse(item);
      if (p === null) skipped++;
      else objects.set(p.name, p.candidates);
    }
    return { table: Object.freeze({ source: table.source, synced: true, objects }), skipped };
  }
  const p = parse(change.object);
  if (p === null) return { table, skipped: 1 };
  const objects = new Map(table.objects);
  if (change.type === 'DELETED') objects.delete(p.name);
  else objects.set(p.name, p.candidates);
  return { table: Object.freeze({ source: table.source, synced: table.synced, objects }), skipped: 0 };
}

/** Every candidate of every table, in a stable order (source, object, address). */
export function candidatesOf(tables: readonly SourceTable[]): readonly Candidate[] {
  const out: Candidate[] = [];
  for (const t of tables) for (const name of [...t.objects.keys()].sort()) out.push(...(t.objects.get(name) ?? []));
  return out;
}

/** The watch path and label selector of a source. */
export function sourceWatch(
  source: MembershipSource,
  nodeSelector: string,
): { readonly kind: string; readonly path: string; readonly labelSelector: string } {
  return source === 'nodes'
    ? { kind: 'Node', path: NODES_PATH, labelSelector: nodeSelector }
    : { kind: 'EndpointSlice', path: KUBERNETES_SLICES_PATH, labelSelector: KUBERNETES_SLICES_SELECTOR };
}

/** The tables after one list or watch event of `source` (the same map when nothing changed). */
export function withSourceChange(
  tables: ReadonlyMap<MembershipSource, SourceTable>,
  source: MembershipSource,
  change: WatchChange,
  settings: SourceSettings,
): { tables: ReadonlyMap<MembershipSource, SourceTable>; skipped: number } {
  const before = tables.get(source) ?? emptySourceTable(source);
  const { table, skipped } = applySourceChange(before, change, settings);
  if (table === before) return { tables, skipped };
  const next = new Map(tables);
  next.set(source, table);
  return { tables: next, skipped };
}
