// What identity.ts sends and reads: SelfSubjectReviews and plain requests over HTTPS, each on a
// fresh connection (so a client certificate is never carried over), and what an answer says.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { ServerAuditEvent } from '../../../harness/lab/audit-events.js';

const SSR_PATH = '/apis/authentication.k8s.io/v1/selfsubjectreviews';
const SSR_BODY = { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' };

export interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface Credential {
  readonly token?: string;
  readonly cert?: string;
  readonly key?: string;
}

export interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** One HTTPS request on a fresh connection (a client certificate is never carried over). */
export function call(
  ca: string,
  base: string,
  method: string,
  path: string,
  o: { cred?: Credential; headers?: OutgoingHttpHeaders; body?: unknown } = {},
): Promise<Answer> {
  const url = new URL(path, base);
  const body = o.body === undefined ? undefined : JSON.stringify(o.body);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: url.hostname,
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method,
        ca,
        agent: false,
        ...(o.cred?.cert === undefined ? {} : { cert: o.cred.cert, key: o.cred.key }),
        headers: {
          accept: 'application/json',
          ...(o.cred?.token === undefined ? {} : { authorization: `Bearer ${o.cred.token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...o.headers,
        },
        timeout: 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The answer, or the connection's error (a refused TLS handshake). */
export async function settle(p: Promise<Answer>): Promise<{ ok: true; answer: Answer } | { ok: false; error: string }> {
  try {
    return { ok: true, answer: await p };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { ok: false, error: e.code ?? e.message ?? String(err) };
  }
}

export function ssr(ca: string, base: string, cred: Credential | undefined, headers: OutgoingHttpHeaders = {}): Promise<Answer> {
  return call(ca, base, 'POST', SSR_PATH, { ...(cred === undefined ? {} : { cred }), headers, body: SSR_BODY });
}

export function userInfoOf(a: Answer): UserInfo | undefined {
  if (a.status !== 201) return undefined;
  return (JSON.parse(a.body) as { status?: { userInfo?: UserInfo } }).status?.userInfo;
}

export function statusMessage(a: Answer): string {
  try {
    return (JSON.parse(a.body) as { message?: string }).message ?? a.body;
  } catch {
    return a.body;
  }
}

export function auditId(a: Answer): string | undefined {
  const v = a.headers['audit-id'];
  return typeof v === 'string' ? v : undefined;
}

/** The apiservers whose log has the request (a request that reached exactly one: one name). */
export function servers(events: readonly ServerAuditEvent[] | undefined): string[] {
  return [...new Set((events ?? []).map((e) => e.server))].sort();
}
