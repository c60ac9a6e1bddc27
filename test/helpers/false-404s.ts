// What the harness knows of each false 404, for the failure message: the request, why it was false,
// the Envoy access-log line that answered it (route, upstream host, skewgate's reason) and which
// apiserver's audit log holds it. A CI failure then says where the 404 came from without a rerun.
import { readFile } from 'node:fs/promises';
import { readAuditEvents } from '../../harness/lab/audit-events.js';
import type { False404 } from '../load/accounting.js';

interface AccessLine {
  readonly at: number;
  readonly text: string;
  readonly requestId: string | undefined;
}

/** The 404 lines of an Envoy access log (the lab's JSON format), by start time. */
async function notFoundLines(file: string): Promise<AccessLine[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const out: AccessLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"status":404')) continue;
    try {
      const o = JSON.parse(line) as { start?: string; request_id?: string };
      const at = Date.parse(o.start ?? '');
      const { start: _start, ...rest } = o;
      if (Number.isFinite(at)) out.push({ at, text: JSON.stringify(rest), requestId: o.request_id });
    } catch {
      // a torn line: skipped
    }
  }
  return out;
}

/** skewgate's decision lines (lab gateways log each one, harness/lab/gateway-config.ts) by Envoy's request id. */
async function decisionLines(file: string): Promise<Map<string, string>> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"requestId"')) continue;
    try {
      const o = JSON.parse(line) as {
        msg?: string;
        requestId?: string;
        reason?: string;
        upstream?: string;
        candidates?: string[];
        generation?: number;
        viewAgeMs?: number;
      };
      if (o.msg !== 'decision' || o.requestId === undefined) continue;
      out.set(
        o.requestId,
        `${o.reason ?? '?'}${o.upstream === undefined ? '' : ` → ${o.upstream}`} candidates [${(o.candidates ?? []).join(', ')}] generation ${o.generation ?? '?'} oldest view ${o.viewAgeMs ?? '?'} ms`,
      );
    } catch {
      // a torn line: skipped
    }
  }
  return out;
}

/** Envoy's start time is taken when the request arrives: at or a little after the client's send. */
const ACCESS_WINDOW_MS = { before: 20, after: 2_000 };

/** "P2 skewgate-fp-on get skewed x-1 at +41.2 s: capable_server_ready (capable ready 5.3 s); answered by kas-3; envoy {…}". */
export async function describeFalse404s(
  list: readonly False404[],
  o: {
    readonly origin: number;
    readonly accessLogOf: (arm: string) => string;
    /** The arm's skewgate log (absent for an arm without skewgate). */
    readonly skewgateLogOf?: (arm: string) => string | undefined;
    readonly auditLogs: readonly { readonly server: string; readonly file: string }[];
  },
): Promise<string[]> {
  if (list.length === 0) return [];
  const audit = await readAuditEvents(o.auditLogs);
  const logs = new Map<string, AccessLine[]>();
  const decisions = new Map<string, Map<string, string>>();
  const out: string[] = [];
  for (const f of list) {
    let lines = logs.get(f.arm);
    if (lines === undefined) {
      lines = await notFoundLines(o.accessLogOf(f.arm));
      logs.set(f.arm, lines);
    }
    const near = lines
      .filter((l) => l.at >= f.atMs - ACCESS_WINDOW_MS.before && l.at <= f.atMs + ACCESS_WINDOW_MS.after)
      .sort((a, b) => Math.abs(a.at - f.atMs) - Math.abs(b.at - f.atMs))[0];
    let byId = decisions.get(f.arm);
    if (byId === undefined) {
      const file = o.skewgateLogOf?.(f.arm);
      byId = file === undefined ? new Map() : await decisionLines(file);
      decisions.set(f.arm, byId);
    }
    const decided = near?.requestId === undefined ? undefined : byId.get(near.requestId);
    const servers = f.auditId === undefined ? [] : [...new Set((audit.get(f.auditId) ?? []).map((e) => e.server))];
    out.push(
      [
        `${f.phase} ${f.arm} ${f.op} ${f.kind}${f.name === undefined ? '' : ` ${f.name}`} at +${((f.atMs - o.origin) / 1000).toFixed(1)} s:`,
        `${f.why} (capable ready ${(f.capableReadyForMs / 1000).toFixed(1)} s${f.reason === undefined ? '' : `, skewgate said ${f.reason}`});`,
        `answered by ${servers.join('+') || (f.auditId === undefined ? 'no apiserver (no Audit-Id)' : `? (Audit-Id ${f.auditId} in no audit log)`)};`,
        `envoy ${near === undefined ? 'no 404 line near it' : `+${near.at - f.atMs} ms ${near.text}`}`,
        ...(o.skewgateLogOf?.(f.arm) === undefined ? [] : [`; skewgate ${decided ?? 'logged no decision for it'}`]),
      ].join(' '),
    );
  }
  return out;
}
