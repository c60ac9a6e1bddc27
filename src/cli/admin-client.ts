// Asks a running gateway's admin endpoint (src/app/admin-server.ts): `skewgate status|skew|explain|history|cordon`.
import type { ErrorCode } from '../errors/catalog.js';
import { Agent, request } from 'undici';
import { adminTarget, parseAdminAddress } from '../config/core/admin-address.js';

/** The gateway could not be asked: nothing listens, it did not answer in time, or it answered an error. */
export class AdminUnreachableError extends Error {
  readonly code = 'SKEWGATE_ERR_ADMIN_UNREACHABLE' satisfies ErrorCode;
  constructor(
    message: string,
    /** It answered, with a 5xx saying why (a cordon it could not keep): not "did not answer". */
    readonly answered = false,
  ) {
    super(message);
  }
}

/** The gateway refused the question (4xx): a request to explain that is malformed, a cordon of no member. */
export class AdminRefusedError extends Error {
  readonly code = 'SKEWGATE_ERR_ADMIN_REFUSED' satisfies ErrorCode;
}

export async function askGateway<T>(
  listen: string,
  path: string,
  opts: { readonly body?: unknown; readonly timeoutMs: number },
): Promise<T> {
  const address = parseAdminAddress(listen);
  if (typeof address === 'string') throw new AdminRefusedError(`admin endpoint ${listen}: ${address}`);
  const target = adminTarget(address);
  const agent = new Agent({
    ...(target.socketPath === undefined ? {} : { connect: { socketPath: target.socketPath } }),
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    connectTimeout: opts.timeoutMs,
  });
  try {
    const res = await request(`${target.origin}${path}`, {
      method: opts.body === undefined ? 'GET' : 'POST',
      dispatcher: agent,
      signal: AbortSignal.timeout(opts.timeoutMs),
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body), headers: { 'content-type': 'application/json' } }),
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new AdminUnreachableError(
        `${listen} answered ${res.statusCode} with something that is not JSON: is it skewgate's admin endpoint?`,
      );
    }
    if (res.statusCode === 200) return json as T;
    const message = (json as { error?: unknown }).error;
    const why = typeof message === 'string' ? message : text.slice(0, 200);
    // 4xx: the gateway answered, and said no (a malformed question, an unknown apiserver, a cordon it cannot keep).
    if (res.statusCode >= 400 && res.statusCode < 500) throw new AdminRefusedError(why);
    throw new AdminUnreachableError(`${listen} answered ${res.statusCode}: ${why}`, true);
  } catch (err) {
    if (err instanceof AdminUnreachableError || err instanceof AdminRefusedError) throw err;
    const e = err as NodeJS.ErrnoException;
    throw new AdminUnreachableError(`cannot reach ${listen}: ${e.code ?? e.name}${e.message && !e.code ? `: ${e.message}` : ''}`);
  } finally {
    await agent.close();
  }
}
