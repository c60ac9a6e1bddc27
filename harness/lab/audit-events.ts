// What an apiserver recorded about a request, from its audit log (JSON lines of audit.k8s.io/v1
// Events, lab policy level Metadata): who it authenticated, whom it impersonated, the answer.
// The identity tests find their requests by the Audit-Id response header.
import { readFile } from 'node:fs/promises';

export interface AuditUser {
  readonly username?: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

export interface AuditEvent {
  readonly auditID: string;
  readonly stage: string;
  readonly verb?: string;
  readonly requestURI?: string;
  /** Empty ({}) when authentication failed (401). */
  readonly user: AuditUser;
  readonly impersonatedUser?: AuditUser;
  readonly responseStatus?: { readonly code?: number };
  readonly userAgent?: string;
  /** When the apiserver received the request and when this stage was reached (RFC 3339, microseconds). */
  readonly requestReceivedTimestamp?: string;
  readonly stageTimestamp?: string;
  /** The client's address first (as the gateway forwarded it), then the connection's. */
  readonly sourceIPs?: readonly string[];
  /** Absent for a non-resource request (/api, /healthz, …). */
  readonly objectRef?: {
    readonly resource?: string;
    readonly subresource?: string;
    readonly apiGroup?: string;
    readonly apiVersion?: string;
  };
}

/** An event and the apiserver whose log held it. */
export interface ServerAuditEvent {
  readonly server: string;
  readonly event: AuditEvent;
}

/** Every well-formed event of `text` by auditID (a torn last line is skipped). Pure. */
export function collectAuditEvents(text: string, server: string, into: Map<string, ServerAuditEvent[]>): void {
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let ev: unknown;
    try {
      ev = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isEvent(ev)) continue;
    const list = into.get(ev.auditID) ?? [];
    list.push({ server, event: ev });
    into.set(ev.auditID, list);
  }
}

function isEvent(v: unknown): v is AuditEvent {
  if (typeof v !== 'object' || v === null) return false;
  const e = v as { auditID?: unknown; stage?: unknown; user?: unknown };
  return typeof e.auditID === 'string' && typeof e.stage === 'string' && typeof e.user === 'object' && e.user !== null;
}

export async function readAuditEvents(
  files: readonly { readonly server: string; readonly file: string }[],
): Promise<Map<string, ServerAuditEvent[]>> {
  const out = new Map<string, ServerAuditEvent[]>();
  for (const f of files) collectAuditEvents(await readFile(f.file, 'utf8').catch(() => ''), f.server, out);
  return out;
}
