// The requests clients made, as the apiservers' audit logs recorded them, summed into a mix a load
// generator can replay and scale: per client (kubelet, kube-proxy, …), the identity it used, the
// verb and the resource, a count and a rate per minute, and its watches (started, and open at the
// window's end), per time window (a steady period, an upgrade). Pure.
import { writeFile } from 'node:fs/promises';
import type { AuditEvent, ServerAuditEvent } from '../../harness/lab/audit-events.js';

export type IdentityType = 'certificate' | 'service-account token' | 'token' | 'unknown';

export interface MixClient {
  readonly name: string;
  readonly matches: (e: AuditEvent) => boolean;
}

export interface MixWindow {
  readonly name: string;
  readonly fromMs: number;
  readonly toMs: number;
}

export interface MixRow {
  readonly client: string;
  readonly identity: IdentityType;
  readonly verb: string;
  /** group/version/resource[/subresource] ("core" for the legacy group), or a non-resource path. */
  readonly resource: string;
  readonly count: number;
  readonly perMinute: number;
}

export interface MixWindowResult extends MixWindow {
  readonly seconds: number;
  readonly rows: readonly MixRow[];
  readonly watchesStarted: Readonly<Record<string, number>>;
  readonly watchesOpenAtEnd: Readonly<Record<string, number>>;
}

const CREDENTIAL_ID = 'authentication.kubernetes.io/credential-id';

/** How the client authenticated: the credential-id kube-apiserver records (X509SHA256=…, JTI=…). */
export function identityType(e: AuditEvent): IdentityType {
  const id = e.user.extra?.[CREDENTIAL_ID]?.[0] ?? '';
  if (id.startsWith('X509SHA256=')) return 'certificate';
  if (id.startsWith('JTI=') || e.user.username?.startsWith('system:serviceaccount:')) return 'service-account token';
  if (e.user.username !== undefined && e.user.username !== '') return id === '' ? 'token' : 'unknown';
  return 'unknown';
}

export function resourceOf(e: AuditEvent): string {
  const o = e.objectRef;
  if (o?.resource === undefined) return (e.requestURI ?? '').split('?')[0] ?? '';
  return `${o.apiGroup === undefined || o.apiGroup === '' ? 'core' : o.apiGroup}/${o.apiVersion ?? ''}/${o.resource}${o.subresource === undefined ? '' : `/${o.subresource}`}`;
}

interface Request {
  readonly first: AuditEvent;
  readonly receivedMs: number;
  readonly completeMs: number | undefined;
}

export function trafficMix(
  events: readonly ServerAuditEvent[],
  clients: readonly MixClient[],
  windows: readonly MixWindow[],
): MixWindowResult[] {
  const requests = new Map<string, Request & { client: string }>();
  for (const { event: e } of events) {
    const client = clients.find((c) => c.matches(e))?.name;
    if (client === undefined) continue;
    const received = Date.parse(e.requestReceivedTimestamp ?? '');
    if (!Number.isFinite(received)) continue;
    const had = requests.get(e.auditID);
    const complete = e.stage === 'ResponseComplete' ? Date.parse(e.stageTimestamp ?? '') : undefined;
    requests.set(e.auditID, {
      first: had?.first ?? e,
      client,
      receivedMs: received,
      completeMs: complete ?? had?.completeMs,
    });
  }
  return windows.map((w) => {
    const seconds = Math.max(0.001, (w.toMs - w.fromMs) / 1000);
    const counts = new Map<string, { client: string; identity: IdentityType; verb: string; resource: string; count: number }>();
    const started: Record<string, number> = {};
    const open: Record<string, number> = {};
    for (const r of requests.values()) {
      const verb = r.first.verb ?? '';
      if (verb === 'watch' && r.receivedMs <= w.toMs && (r.completeMs === undefined || r.completeMs > w.toMs))
        open[r.client] = (open[r.client] ?? 0) + 1;
      if (r.receivedMs < w.fromMs || r.receivedMs >= w.toMs) continue;
      if (verb === 'watch') started[r.client] = (started[r.client] ?? 0) + 1;
      const row = { client: r.client, identity: identityType(r.first), verb, resource: resourceOf(r.first) };
      const key = JSON.stringify(row);
      const had = counts.get(key);
      counts.set(key, { ...row, count: (had?.count ?? 0) + 1 });
    }
    const rows = [...counts.values()]
      .map((c) => ({ ...c, perMinute: Math.round((c.count / seconds) * 60 * 10) / 10 }))
      .sort((a, b) => a.client.localeCompare(b.client) || b.count - a.count || a.resource.localeCompare(b.resource));
    return { ...w, seconds: Math.round(seconds * 10) / 10, rows, watchesStarted: started, watchesOpenAtEnd: open };
  });
}

export interface MixFile {
  /** The test that recorded it. */
  readonly source: string;
  readonly kubelet: string;
  readonly kubeProxy: string;
  readonly apiservers: string;
  /** Pods on the node while it was recorded. */
  readonly pods: number;
  readonly windows: readonly MixWindowResult[];
}

/** The mix as JSON, with how to read it: one node's traffic, to replay at perMinute × nodes. */
export async function writeTrafficMix(file: string, mix: MixFile): Promise<void> {
  const about =
    "One node's requests to the control plane, from the apiservers' audit logs: per client, the identity it used, verb and resource, a count and a rate per minute in each window, and its watches (started in the window, open at its end). A load generator replays a window's rows at perMinute × nodes and holds watchesOpenAtEnd × nodes watches open.";
  await writeFile(file, `${JSON.stringify({ about, ...mix }, null, 2)}\n`);
}

/** One line per window: each client's requests per minute, kinds, watches started and open. */
export function mixSummary(w: MixWindowResult, clients: readonly string[]): string {
  return clients
    .map((c) => {
      const rows = w.rows.filter((r) => r.client === c);
      const perMin = rows.reduce((s, r) => s + r.perMinute, 0);
      return `${c} ${perMin.toFixed(1)} requests/min in ${rows.length} kinds (watches started ${w.watchesStarted[c] ?? 0}, open at the end ${w.watchesOpenAtEnd[c] ?? 0})`;
    })
    .join('; ');
}
