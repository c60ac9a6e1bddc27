// Loopback ports and sockets for the lab: is a port free, does a listener accept yet, a free port.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { connect, createServer } from 'node:net';
import { LabError } from './errors.js';

/** True once `listen` (host:port or unix:/path) accepts a connection. */
export function canConnect(listen: string): Promise<boolean> {
  return new Promise((res) => {
    const m = /^(.*):(\d+)$/.exec(listen);
    const sock = listen.startsWith('unix:') ? connect(listen.slice(5)) : connect(Number(m?.[2]), m?.[1] ?? '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      res(true);
    });
    sock.once('error', () => res(false));
  });
}

/** A clear error now rather than a process that dies on bind while a stranger answers our checks. */
export async function assertPortFree(host: string, port: number, what: string): Promise<void> {
  const free = await new Promise<boolean>((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => res(true)));
  });
  if (!free) throw new LabError(`${what}: ${host}:${port} is already in use (another lab? \`skewgate-lab lab status\`, or \`ss -ltnp\`)`);
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => res(typeof addr === 'object' && addr !== null ? addr.port : 0));
    });
  });
}

/** Removes `ip`/32 from the loopback interface (what ensureLoopbackAlias added); no-op when absent. */
export async function removeLoopbackAlias(ip: string): Promise<void> {
  await promisify(execFile)('ip', ['addr', 'del', `${ip}/32`, 'dev', 'lo']).catch(() => undefined);
}

/**
 * Adds `ip`/32 to the loopback interface unless it is there (the lab's alias placement); needs
 * root (CAP_NET_ADMIN) and iproute2, and says so when it fails.
 */
export async function ensureLoopbackAlias(ip: string): Promise<void> {
  const run = promisify(execFile);
  const shown = await run('ip', ['-4', 'addr', 'show', 'dev', 'lo']).catch((err: Error) => {
    throw new Error(`cannot list the loopback addresses (iproute2's \`ip\`): ${err.message}`);
  });
  if (shown.stdout.includes(` ${ip}/`)) return;
  await run('ip', ['addr', 'add', `${ip}/32`, 'dev', 'lo']).catch((err: Error) => {
    throw new Error(`cannot add ${ip}/32 to lo (needs root or CAP_NET_ADMIN): ${err.message}`);
  });
}

/** The first of `n` consecutive TCP ports on 127.0.0.1 that are all free right now (extproc.workers). */
export async function freeConsecutivePorts(n: number): Promise<number> {
  const isFree = (port: number): Promise<boolean> =>
    new Promise((res) => {
      const srv = createServer();
      srv.once('error', () => res(false));
      srv.listen({ host: '127.0.0.1', port, exclusive: true }, () => srv.close(() => res(true)));
    });
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = await freePort();
    if (base + n - 1 > 65535) continue;
    let all = true;
    for (let i = 1; i < n && all; i++) all = await isFree(base + i);
    if (all) return base;
  }
  throw new LabError(`no ${n} consecutive free ports on 127.0.0.1 after 50 tries`);
}
