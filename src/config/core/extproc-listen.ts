// Pure: where each ext_proc endpoint of one skewgate listens (extproc.workers). Endpoint 0 is the
// main thread on extproc.listen; worker i listens on the port i above it, or on the socket path
// with ".i" appended. Envoy's ext_proc cluster lists the same addresses (envoy/clusters.ts).

/** More threads than this gain nothing on any control-plane node and cost memory each. */
export const EXTPROC_MAX_WORKERS = 32;

const HOST_PORT = /^(.*):(\d{1,5})$/;

/** The filesystem path of a "unix:" address, or null for TCP. */
export function unixSocketPath(listen: string): string | null {
  if (listen.startsWith('unix://')) return listen.slice('unix://'.length);
  if (listen.startsWith('unix:')) return listen.slice('unix:'.length);
  return null;
}

/** The address of endpoint `index` (0: listen itself). Port 0 stays 0: each endpoint picks its own. */
export function extprocListenAddress(listen: string, index: number): string {
  if (index === 0) return listen;
  const socket = unixSocketPath(listen);
  if (socket !== null) return `unix:${socket}.${index}`;
  const m = HOST_PORT.exec(listen);
  if (!m) throw new Error(`extproc.listen "${listen}" is neither host:port nor unix:/path`);
  const port = Number(m[2]);
  return `${m[1] as string}:${port === 0 ? 0 : port + index}`;
}

/** Every endpoint's address, the main thread's first. */
export function extprocListenAddresses(listen: string, workers: number): readonly string[] {
  return Array.from({ length: workers }, (_, i) => extprocListenAddress(listen, i));
}

/** Why `workers` endpoints cannot listen from `listen` on, or null. */
export function extprocListenProblem(listen: string, workers: number): string | null {
  if (workers <= 1 || unixSocketPath(listen) !== null) return null;
  const m = HOST_PORT.exec(listen);
  if (!m) return null; // extproc.listen reports its own format problem
  const port = Number(m[2]);
  if (port !== 0 && port + workers - 1 > 65535)
    return `${workers} endpoints from port ${port} need ports up to ${port + workers - 1}, above 65535: lower extproc.listen's port`;
  return null;
}
