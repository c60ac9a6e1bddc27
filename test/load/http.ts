// The load's HTTPS client: trusts the lab CA, sends the admin bearer token (or presents a client
// certificate instead), bounds every request and never retries (a lost answer is recorded as
// such, not hidden).
import { checkServerIdentity } from 'node:tls';
import { LAB_ALIAS_PREFIX } from '../../harness/lab/flags.js';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

export interface LoadHttpOptions {
  readonly caFile: string;
  /** Sent as a bearer token; none with clientCert (the certificate is the client's identity). */
  readonly token?: string;
  readonly clientCert?: { readonly certFile: string; readonly keyFile: string };
  /** Per-request bound for ordinary requests (watches have none). */
  readonly timeoutMs?: number;
  readonly connections?: number;
  /** Close the connection after each answer: every request a new TLS handshake (what a renewal must survive). */
  readonly freshConnections?: boolean;
}

export class LoadHttp {
  readonly agent: Agent;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly reset: boolean;

  constructor(o: LoadHttpOptions) {
    this.token = o.token;
    this.reset = o.freshConnections === true;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.agent = new Agent({
      connect: {
        ca: readFileSync(o.caFile, 'utf8'),
        ...(o.clientCert === undefined ? {} : { cert: readFileSync(o.clientCert.certFile), key: readFileSync(o.clientCert.keyFile) }),
        // The lab's alias addresses are not in its certificate: verified by the name kubernetes (harness/lab/flags.ts).
        checkServerIdentity: (host, cert) => checkServerIdentity(host.startsWith(LAB_ALIAS_PREFIX) ? 'kubernetes' : host, cert),
      },
      connections: o.connections ?? 16,
      // Watches stream for minutes; ordinary requests get an AbortSignal instead.
      bodyTimeout: 0,
      headersTimeout: 0,
    });
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return {
      ...(this.token === undefined ? {} : { authorization: `Bearer ${this.token}` }),
      accept: 'application/json',
      'user-agent': 'skewgate-lab-load/1',
      ...extra,
    };
  }

  async send(method: string, url: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<Answer> {
    const res = await request(url, {
      method: method as 'GET',
      dispatcher: this.agent,
      headers: this.headers({ ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...extraHeaders }),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      reset: this.reset,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** A short code for a failed request: the cause's code (ECONNRESET, UND_ERR_SOCKET …) or the error name. */
export function errorCode(err: unknown): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string; name?: string } };
  return e.cause?.code ?? e.code ?? e.cause?.name ?? e.name ?? 'Error';
}

export function headerValue(h: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Who gave an error answer and why, in a few words: skewgate's reason header, else the
 * Kubernetes Status reason, else the start of the body (Envoy's own texts, e.g. "upstream connect
 * error or disconnect/reset before headers").
 */
export function answerDetail(body: string, skewgateReason: string | undefined): string {
  if (skewgateReason !== undefined) return `skewgate: ${skewgateReason}`;
  try {
    const s = JSON.parse(body) as { kind?: string; reason?: string; message?: string };
    if (s.kind === 'Status') return `apiserver: ${s.reason ?? ''} ${(s.message ?? '').slice(0, 60)}`.trim();
  } catch {
    // not JSON
  }
  const text = body.replace(/\s+/g, ' ').trim();
  return text === '' ? '(empty body)' : `envoy: ${text.replace(/\. reset reason:.*$/, '').slice(0, 60)}`;
}
