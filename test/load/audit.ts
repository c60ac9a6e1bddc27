// Which apiservers handled a request, from their audit logs: a request the built-in Mixed Version
// Proxy forwarded carries the same Audit-ID on two servers (the proxy copies it), so the number
// of servers that logged an ID is the number of hops.
import { readFile } from 'node:fs/promises';

/** Adds every auditID in `text` (JSON lines of audit.k8s.io/v1 Events) to its set of servers. Pure. */
export function collectAuditIds(text: string, server: string, into: Map<string, Set<string>>): void {
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let ev: { auditID?: unknown };
    try {
      ev = JSON.parse(line) as { auditID?: unknown };
    } catch {
      continue;
    }
    if (typeof ev.auditID !== 'string') continue;
    const set = into.get(ev.auditID) ?? new Set<string>();
    set.add(server);
    into.set(ev.auditID, set);
  }
}

export async function readAuditIds(
  files: readonly { readonly server: string; readonly file: string }[],
): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  for (const f of files) collectAuditIds(await readFile(f.file, 'utf8').catch(() => ''), f.server, out);
  return out;
}
