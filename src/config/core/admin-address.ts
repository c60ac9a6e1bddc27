// Pure: where the admin endpoint listens. Loopback TCP (127.0.0.0/8, ::1, localhost) or a unix
// socket, never anything a network reaches: the endpoint has no authentication of its own.
import { isIP, isIPv4 } from 'node:net';

/** Beside extproc.listen's default (127.0.0.1:9002), below Envoy's admin (9901). */
export const ADMIN_LISTEN_DEFAULT = '127.0.0.1:9003';

export type AdminAddress =
  { readonly kind: 'tcp'; readonly host: string; readonly port: number } | { readonly kind: 'unix'; readonly path: string };

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/;

/** The address, or why it is not one the admin endpoint may listen on. */
export function parseAdminAddress(text: string): AdminAddress | string {
  if (text.startsWith('unix:')) {
    const path = text.startsWith('unix://') ? text.slice('unix://'.length) : text.slice('unix:'.length);
    if (path === '') return 'unix: needs a socket path (unix:/run/skewgate/admin.sock)';
    // sockaddr_un's sun_path holds 108 bytes with its terminating NUL (Linux).
    if (Buffer.byteLength(path) > 107) return `the socket path is ${Buffer.byteLength(path)} bytes; a unix socket path holds at most 107`;
    return { kind: 'unix', path };
  }
  const m = HOST_PORT.exec(text);
  if (!m) return 'must be host:port on a loopback address (127.0.0.1:9003, [::1]:9003, localhost:9003) or unix:/path';
  const bracketed = (m[1] as string).startsWith('[');
  const host = bracketed ? (m[1] as string).slice(1, -1) : (m[1] as string);
  const port = Number(m[2]);
  if (port > 65535) return `port ${port} is above 65535`;
  if (!isLoopback(host))
    return `${host} is not a loopback address: the admin endpoint answers whoever reaches it, so it listens on 127.0.0.1, ::1, localhost or a unix socket only`;
  if (bracketed && isIP(host) !== 6) return `[${host}] is not an IPv6 address`;
  if (!bracketed && isIP(host) === 6) return `an IPv6 address is written in brackets: [${host}]:${port}`;
  return { kind: 'tcp', host, port };
}

/** Why the address cannot be the admin endpoint's, or null. */
export function adminListenProblem(text: string): string | null {
  const a = parseAdminAddress(text);
  return typeof a === 'string' ? a : null;
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIPv4(host)) return host.startsWith('127.');
  // The URL parser writes every spelling of ::1 (0:0:0:0:0:0:0:1, ::0001) as [::1].
  return isIP(host) === 6 && new URL(`http://[${host}]/`).hostname === '[::1]';
}

/** How a client reaches it: an http URL, and the socket to connect through for unix. */
export function adminTarget(a: AdminAddress): { readonly origin: string; readonly socketPath?: string } {
  if (a.kind === 'unix') return { origin: 'http://localhost', socketPath: a.path };
  return { origin: `http://${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}` };
}

/** The address as written in the config, for messages. */
export function formatAdminAddress(a: AdminAddress): string {
  return a.kind === 'unix' ? `unix:${a.path}` : `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
}
