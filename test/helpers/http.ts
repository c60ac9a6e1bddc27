// A small HTTPS client for tests: trusts the test CA, sends the test token, returns parsed answers.
import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  /** Which fake apiserver answered; undefined when skewgate or Envoy answered itself. */
  readonly server: string | undefined;
  json(): unknown;
}

export interface Client {
  send(method: string, url: string, opts?: { body?: unknown; headers?: Record<string, string> }): Promise<Answer>;
  close(): Promise<void>;
}

export function createClient(caFile: string, token: string | null, opts: { h2?: boolean } = {}): Client {
  const dispatcher = new Agent({ connect: { ca: readFileSync(caFile, 'utf8') }, allowH2: opts.h2 ?? false });
  return {
    async send(method, url, o = {}) {
      const headers: Record<string, string> = {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...o.headers,
      };
      const res = await request(url, {
        method: method as 'GET',
        dispatcher,
        headers,
        ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
      });
      const text = await res.body.text();
      const server = res.headers['x-fake-apiserver'];
      return {
        status: res.statusCode,
        headers: res.headers,
        text,
        server: Array.isArray(server) ? server[0] : server,
        json: () => JSON.parse(text) as unknown,
      };
    },
    close: () => dispatcher.close(),
  };
}

/** Polls fn until it returns true or the deadline passes; returns the elapsed ms, or throws. */
export async function eventually(what: string, fn: () => boolean | Promise<boolean>, timeoutMs = 10_000, stepMs = 25): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await fn()) return Date.now() - start;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** Resolves or rejects as p does, or rejects after ms: a guard against a hang, never a measure. */
export async function within<T>(what: string, p: Promise<T>, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, guard]);
  } finally {
    clearTimeout(timer);
  }
}
