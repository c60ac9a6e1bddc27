// A unix socket's file before listening: shared by the ext_proc and admin listeners.
import { connect } from 'node:net';
import { lstat, unlink } from 'node:fs/promises';

/**
 * A socket file left by a crashed run makes bind fail, so it is removed, but only when nothing
 * answers on it: a live server's socket is never taken over. Any other kind of file is refused.
 */
export async function clearStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch {
    return; // absent
  }
  if (!isSocket) throw new Error(`cannot listen on unix:${path}: it exists and is not a socket`);
  const live = await new Promise<boolean>((resolve) => {
    const probe = connect(path);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (live) throw new Error(`cannot listen on unix:${path}: another process is serving on it`);
  await unlink(path).catch(() => undefined);
}
